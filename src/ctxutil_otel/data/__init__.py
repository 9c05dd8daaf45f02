"""Data shipped with the package (README.md beside it): a RAGBench sample (CC-BY-4.0, attribution there),
DESIGN.md's five reference examples and a seed-style set of short interactions (both Apache-2.0, written for
this project). Every file has the same row format, which ``ctxutil-otel bench`` reads."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = [
    "DATASETS",
    "DESIGN_EXAMPLES_FILE",
    "SAMPLE_FILE",
    "SEED_STYLE_FILE",
    "dataset_path",
    "load_dataset",
    "load_sample",
    "sample_path",
]

SAMPLE_FILE = "ragbench_sample.jsonl"
SEED_STYLE_FILE = "seed_style.jsonl"
DESIGN_EXAMPLES_FILE = "design_examples.jsonl"

DATASETS: dict[str, str] = {
    "sample": SAMPLE_FILE,
    "seed": SEED_STYLE_FILE,
    "design": DESIGN_EXAMPLES_FILE,
}
"""Bundled labelled sets by the name ``ctxutil-otel bench --data NAME`` takes: ``sample`` (250 RAGBench
rows), ``seed`` (80 short seed-style interactions in 10 domains), ``design`` (DESIGN.md's five reference
examples)."""


def dataset_path(name: str) -> str:
    """Filesystem path of the bundled set ``name`` (a key of :data:`DATASETS`).

    Raises:
        ValueError: ``name`` is not a key of :data:`DATASETS` (the message lists the names).
    """
    if name not in DATASETS:
        raise ValueError(f"no bundled data set {name[:40]!r}; one of: {', '.join(DATASETS)}")
    return str(resources.files(__name__).joinpath(DATASETS[name]))


def load_dataset(name: str, limit: int | None = None) -> list[dict[str, Any]]:
    """Return the rows of the bundled set ``name`` as dicts (fields in README.md), at most ``limit`` of them.

    Raises:
        ValueError: ``name`` is not a key of :data:`DATASETS`.
    """
    rows: list[dict[str, Any]] = []
    with open(dataset_path(name), encoding="utf-8") as handle:
        for line in handle:
            if limit is not None and len(rows) >= limit:
                break
            if line.strip():
                rows.append(json.loads(line))
    return rows


def sample_path() -> str:
    """Filesystem path of the bundled ``ragbench_sample.jsonl`` (250 rows)."""
    return dataset_path("sample")


def load_sample(limit: int | None = None) -> list[dict[str, Any]]:
    """Return the bundled RAGBench rows as dicts (fields in README.md), at most ``limit`` of them."""
    return load_dataset("sample", limit)
