"""Shared CLI plumbing: reading JSONL datasets line by line, resolving the batch commands' settings, and
writing results to a stream that may close early."""

from __future__ import annotations

import argparse
import json
import os
import sys
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from .._interaction import interaction_id_text
from .._item import DatasetItem
from .._settings import Settings
from ..judges._from_settings import build_named_judge

if typing.TYPE_CHECKING:
    from ..judges import Judge

__all__ = [
    "FIELD_NAMES",
    "BadLine",
    "Line",
    "add_judge_options",
    "batch_judge",
    "enumerated",
    "judge_choices",
    "quiet_broken_pipe",
    "read_items",
    "report_bad_line",
    "settings_from_args",
]

FIELD_NAMES: Mapping[str, tuple[str, ...]] = {
    "query": ("query", "question", "user_input", "input"),
    "retrieved_content": ("retrieved_content", "contexts", "retrieved_contexts", "retrieval_context"),
    "actual_output": ("actual_output", "answer", "response"),
}
"""The names a dataset line may give each field, ours first: Ragas 0.1 (``question``, ``contexts``,
``answer``), Ragas 0.2+ (``user_input``, ``retrieved_contexts``, ``response``) and DeepEval (``input``,
``retrieval_context``, ``actual_output``). DeepEval's ``context`` is the *ideal* context, not what was
retrieved, so it is not read. A line giving one field under two names is a bad line."""


@dataclass(frozen=True)
class Line:
    """A parsed dataset line: its 1-based ``number``, the validated ``item`` and the ``row`` with the
    fields under our names (``query``, ``retrieved_content``, ``actual_output``) and every other key as
    it was."""

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
    for err in exc.errors(include_url=False, include_input=False)[:3]:
        where = ".".join(str(p) for p in err["loc"]) or "line"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def _canonical(row: dict[str, Any]) -> dict[str, Any] | str:
    """``row`` with each field under our name, or the error naming the field."""
    out = {k: v for k, v in row.items() if not any(k in names for names in FIELD_NAMES.values())}
    for field, names in FIELD_NAMES.items():
        given = [name for name in names if name in row]
        if not given:
            return f"{field}: missing (a line names it one of: {', '.join(names)})"
        if len(given) > 1:
            return f"{field}: given twice, as {' and '.join(repr(n) for n in given)}; keep one"
        out[field] = row[given[0]]
    return out


def _not_unicode(item: DatasetItem) -> str | None:
    """The field holding text that cannot be written as UTF-8 (a lone surrogate from a ``\\ud800``-style
    JSON escape), or ``None``."""
    fields: list[tuple[str, str | None]] = [("query", item.query), ("actual_output", item.actual_output)]
    fields += [(f"retrieved_content[{i}]", text) for i, text in enumerate(item.retrieved_content)]
    fields.append(("id", item.id))
    for name, text in fields:
        if text is None:
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            code = ord(text[exc.start])
            return f"{name}: not valid Unicode (lone surrogate U+{code:04X} at character {exc.start + 1})"
    return None


_JSON_TYPES = {bool: "boolean", float: "number", list: "array", dict: "object"}


def _item_id(raw_id: object) -> str | None:
    """The line's ``id`` by ``record_interaction``'s rule
    (:func:`~ctxutil_otel._interaction.interaction_id_text`): a string as it is, an integer as its decimal
    string, cut to 256 characters; ``null`` or absent: none.

    Raises:
        ValueError: ``id: must be a string, an integer or null, got number`` for any other JSON type.
    """
    try:
        return interaction_id_text(raw_id)
    except TypeError:
        got = _JSON_TYPES.get(type(raw_id), type(raw_id).__name__)
        raise ValueError(f"id: must be a string, an integer or null, got {got}") from None


def _parse(number: int, raw: bytes) -> Line | BadLine | None:
    try:
        # A UTF-8 byte order mark (what some Windows editors write) is accepted on the first line only.
        text = raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        return BadLine(number, f"not valid UTF-8 (byte {exc.start + 1} of the line)")
    if not text.strip():
        return None
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        return BadLine(number, f"invalid JSON ({exc.msg}) at column {exc.pos + 1}")
    except RecursionError:
        return BadLine(number, "invalid JSON (nested too deeply to read)")
    except ValueError:  # what else json.loads raises: an integer over Python's 4,300-digit conversion limit
        return BadLine(number, "unreadable JSON (a number of more than 4,300 digits)")
    if not isinstance(row, dict):
        return BadLine(number, f"expected a JSON object, got {type(row).__name__}")
    canonical = _canonical(row)
    if isinstance(canonical, str):
        return BadLine(number, canonical)
    try:
        item_id = _item_id(canonical.get("id"))
    except ValueError as exc:
        return BadLine(number, str(exc))
    try:
        item = DatasetItem(
            query=canonical["query"],
            actual_output=canonical["actual_output"],
            retrieved_content=canonical["retrieved_content"],
            id=item_id,
        )
    except ValidationError as exc:
        return BadLine(number, _first_error(exc))
    problem = _not_unicode(item)
    if problem is not None:
        return BadLine(number, problem)
    return Line(number, item, canonical)


def read_items(path: Path) -> Iterator[Line | BadLine]:
    """Yield one :class:`Line` or :class:`BadLine` per non-blank line of a JSONL file.

    Reads ``query``, ``retrieved_content`` and ``actual_output`` under any of their :data:`FIELD_NAMES`
    (and ``id``: a string, or an integer as its decimal string, cut to 256 characters); other keys are
    kept in ``Line.row`` only. A UTF-8 byte order mark before the first line is skipped. A line that is not
    UTF-8, not JSON (the column is the character where reading stopped), nested too deeply, holding an
    integer of more than 4,300 digits (Python's limit on converting one), missing a field, giving one
    twice, of the wrong type (``id`` included) or holding text that is not valid Unicode is a
    :class:`BadLine`; it never stops the rest.

    Raises:
        OSError: when the file cannot be opened.
    """
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            parsed = _parse(number, raw)
            if parsed is not None:
                yield parsed


def report_bad_line(path: Path, bad: BadLine) -> None:
    """Print ``FILE:LINE: error`` on stderr (the compiler convention editors understand)."""
    print(f"{path}:{bad.number}: {bad.error}", file=sys.stderr)


def enumerated(value: str) -> str:
    """An enumerated option's value as the settings read one (docs/settings.md): in any case, surrounding
    blanks ignored (``--judge " LEXICAL"`` is ``lexical``); pass as ``type=`` beside ``choices=``."""
    return value.strip().lower()


def judge_choices() -> tuple[str, ...]:
    """The judge names :class:`Settings` accepts (its ``judge`` field's literal values)."""
    return tuple(str(v) for v in typing.get_args(Settings.model_fields["judge"].annotation))


def add_judge_options(parser: argparse.ArgumentParser) -> None:
    """The options a batch command shares with :class:`Settings`. Each defaults to ``None`` (unset), so
    that :func:`settings_from_args` resolves option > ``CTXUTIL_*`` variable > default."""
    parser.add_argument(
        "--judge",
        type=enumerated,
        choices=judge_choices(),
        default=None,
        help="judge (default: CTXUTIL_JUDGE, else semantic: learned, with one warning, without the "
        "'semantic' extra; named here or in CTXUTIL_JUDGE, semantic without the extra is an error)",
    )
    parser.add_argument("--model", default=None, help="judge model (default: CTXUTIL_JUDGE_MODEL)")
    parser.add_argument(
        "--base-url", default=None, help="OpenAI-compatible endpoint (default: CTXUTIL_JUDGE_BASE_URL)"
    )
    parser.add_argument("--threshold", type=float, default=None, help="pass threshold in [0, 1]")
    parser.add_argument(
        "--mode",
        type=enumerated,
        choices=("granular", "fast"),
        default=None,
        help="granular (reasons) or fast",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="evaluations in flight (default: CTXUTIL_MAX_CONCURRENCY)",
    )


_OPTION_SETTINGS = {
    "judge": "judge",
    "model": "judge_model",
    "base_url": "judge_base_url",
    "threshold": "threshold",
    "mode": "mode",
    "concurrency": "max_concurrency",
}


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The :class:`Settings` of a batch command: each option given on the command line wins over its
    ``CTXUTIL_*`` variable, which wins over the default (the same rule as everywhere else).

    Raises:
        SettingsError: (a ``ValueError``) naming the setting and its variable for an invalid value.
    """
    overrides = {
        field: getattr(args, option)
        for option, field in _OPTION_SETTINGS.items()
        if getattr(args, option, None) is not None
    }
    return Settings(**overrides)


def batch_judge(settings: Settings) -> Judge:
    """The judge a batch command measures or scores with: the configured one, except that a ``semantic``
    judge named by ``--judge`` or ``CTXUTIL_JUDGE`` without its extra raises (an ``ImportError`` naming
    the extra) instead of falling back to ``learned`` as the default does: ``bench --judge semantic``
    reported the learned judge's figures with exit status 0."""
    return build_named_judge(settings)


def quiet_broken_pipe(write: typing.Callable[[TextIO], None], stream: TextIO) -> bool:
    """Call ``write(stream)``; when the reader closed the pipe (``evaluate ... | head``) return ``False``
    quietly instead of raising, pointing stdout at ``/dev/null`` so the interpreter's own flush at exit
    does not print a traceback either (the recipe of Python's ``signal`` module documentation)."""
    try:
        write(stream)
        stream.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):
            pass
        finally:
            os.close(devnull)
        return False
    return True
