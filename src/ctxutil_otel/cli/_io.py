"""Shared CLI plumbing: reading JSONL datasets line by line, and building the judge a command asked for."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .._item import DatasetItem
from .._settings import Settings
from .._settings import build_judge as _build_judge
from ..judges._base import Judge

__all__ = ["BadLine", "Line", "build_judge", "read_items", "report_bad_line"]


@dataclass(frozen=True)
class Line:
    """A parsed dataset line: its 1-based ``number``, the validated ``item`` and the raw ``row``."""

    number: int
    item: DatasetItem
    row: dict[str, Any]


@dataclass(frozen=True)
class BadLine:
    """A line that could not be read: its 1-based ``number`` and a one-line ``error`` naming the field."""

    number: int
    error: str


def _first_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err["loc"]) or "line"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def read_items(path: Path) -> Iterator[Line | BadLine]:
    """Yield one :class:`Line` or :class:`BadLine` per non-blank line of a JSONL file.

    Reads the fields ``query``, ``retrieved_content``, ``actual_output`` (and ``id`` when it is a
    string); other fields are kept in ``Line.row`` only. A broken line never stops the rest.

    Raises:
        OSError: when the file cannot be opened.
    """
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield BadLine(number, f"not valid UTF-8 (byte {exc.start + 1} of the line)")
                continue
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                yield BadLine(number, f"invalid JSON ({exc.msg}) at column {exc.colno}")
                continue
            if not isinstance(row, dict):
                yield BadLine(number, f"expected a JSON object, got {type(row).__name__}")
                continue
            raw_id = row.get("id")
            try:
                item = DatasetItem(
                    query=row.get("query"),  # type: ignore[arg-type]  # validated by DatasetItem
                    actual_output=row.get("actual_output"),  # type: ignore[arg-type]
                    retrieved_content=row.get("retrieved_content"),  # type: ignore[arg-type]
                    id=raw_id if isinstance(raw_id, str) else None,
                )
            except ValidationError as exc:
                yield BadLine(number, _first_error(exc))
                continue
            yield Line(number, item, row)


def report_bad_line(path: Path, bad: BadLine) -> None:
    """Print ``FILE:LINE: error`` on stderr (the compiler convention editors understand)."""
    print(f"{path}:{bad.number}: {bad.error}", file=sys.stderr)


def build_judge(name: str, model: str | None = None, base_url: str | None = None) -> Judge:
    """Return the judge a command named (``learned``, ``lexical`` or ``openai``), through the same
    :func:`ctxutil_otel._settings.build_judge` the live evaluator uses (so ``CTXUTIL_JUDGE_*`` and
    ``OPENAI_API_KEY`` apply to the options left unset).

    Raises:
        ValueError: for an unknown judge name or an invalid value (a ``SettingsError`` naming it), or
            ``--judge openai`` without an API key.
    """
    overrides: dict[str, Any] = {"judge": name}
    if model:
        overrides["judge_model"] = model
    if base_url:
        overrides["judge_base_url"] = base_url
    return _build_judge(Settings(**overrides))
