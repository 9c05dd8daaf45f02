"""The accounting vocabulary is one closed set: the alert rules, the dashboard and the docs name only the
outcomes and drop reasons the code has (``ctxutil_otel.worker.Outcome`` / ``DropReason``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import get_args

import pytest

import ctxutil_otel.judges._retry  # the OpenAI judge's errors, so that JudgeError knows its subclasses
from ctxutil_otel._accounting import ERROR_TYPE_OTHER, WORKER_ERROR_TYPES
from ctxutil_otel.judges import JudgeError
from ctxutil_otel.worker import Admission, DropReason, EvaluatorStats, Outcome

ROOT = Path(__file__).resolve().parents[1]
OUTCOMES = set(get_args(Outcome))
REASONS = set(get_args(DropReason))

# PromQL label matchers on the two labels, plain or JSON-escaped (the dashboard): outcome="x", reason!~"a|b"
_MATCHER = re.compile(r'\b(outcome|reason)(?:=|!=|=~|!~)\\?"([^"\\]*)\\?"')
# Prose: `dropped`/`reason`
_PROSE = re.compile(r"`dropped`/`([a-z_]+)`")
# An alert runbook explains each reason as "reason: what to do".
_RUNBOOK_ENTRY = re.compile(r"(?:^|[;>]\s*|\s)([a-z]+(?:_[a-z]+)+): ")


def _documents() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "benchmarks" / "README.md"]
    found += sorted((ROOT / "docs").glob("*.md"))
    found += sorted((ROOT / "deploy").rglob("*.yaml")) + sorted((ROOT / "deploy").rglob("*.json"))
    return [path for path in found if path.is_file()]


def _unknown_names(text: str) -> list[str]:
    unknown = []
    for label, values in _MATCHER.findall(text):
        known = OUTCOMES if label == "outcome" else REASONS
        unknown += [f"{label}={v}" for v in values.split("|") if v and v not in known]
    unknown += [f"reason={r}" for r in _PROSE.findall(text) if r not in REASONS]
    return unknown


def test_the_vocabulary_is_the_one_on_the_wire() -> None:
    assert {"sampled_out", "not_selected", "dropped", "evaluated", "not_applicable", "failed"} == OUTCOMES
    assert {"internal_error", "capture_error", "sdk_disabled", "pending_full", "ttl_expired"} <= REASONS
    assert bool(Admission()) and not Admission("queue_full")


#: Where the worker's source gives a failure its ``error.type``: the call and the position of the argument.
_ERROR_TYPE_ARGUMENT = {"failure": 0, "failure_of": 1, "error_result": 2}


def _error_type_given(node: ast.AST) -> ast.expr | None:
    """The ``error.type`` expression ``node`` gives a failure, if it gives one: ``info.failure(t, ...)``,
    ``info.failure_of(interaction, t, ...)``, ``error_result(metric, interaction, t, ...)``,
    ``Rejection("failed", t, ...)`` or an outcome key ``("failed", t)``."""
    if isinstance(node, ast.Tuple) and len(node.elts) == 2:
        first, second = node.elts
        return second if isinstance(first, ast.Constant) and first.value == "failed" else None
    if not isinstance(node, ast.Call):
        return None
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
    position = _ERROR_TYPE_ARGUMENT.get(name or "")
    if name == "Rejection" and node.args and isinstance(node.args[0], ast.Constant):
        position = 1 if node.args[0].value == "failed" else None
    return node.args[position] if position is not None and len(node.args) > position else None


def _worker_error_types_in_source() -> set[str]:
    """Every ``error.type`` the worker's source writes as a literal (the others are variables passed on,
    ``ERROR_TYPE_OTHER`` or judges' types, checked by :func:`_error_types_of_the_code`)."""
    found: set[str] = set()
    for path in sorted((ROOT / "src" / "ctxutil_otel" / "worker").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            given = _error_type_given(node)
            if isinstance(given, ast.Constant) and isinstance(given.value, str):
                found.add(given.value)
    return found


def test_the_worker_s_own_error_types_are_documented() -> None:
    # It compared WORKER_ERROR_TYPES with a copy of the same four strings, which no change of the worker
    # could fail; now the error types the worker's source gives failures are the documented ones.
    assert _worker_error_types_in_source() == set(WORKER_ERROR_TYPES)
    stats_doc = EvaluatorStats.__doc__ or ""
    worker_doc = (ROOT / "docs" / "worker.md").read_text(encoding="utf-8")
    for error_type in WORKER_ERROR_TYPES:
        assert f"``{error_type}``" in stats_doc
        assert f"`{error_type}`" in worker_doc


def _error_types_of_the_code() -> set[str]:
    """Every ``error.type`` a failed interaction can be counted with: the evaluator's own, the shipped
    judges' (each ``JudgeError`` subclass of the package) and ``_OTHER``."""
    found = {JudgeError.error_type, ERROR_TYPE_OTHER, *WORKER_ERROR_TYPES}
    pending: list[type[JudgeError]] = [JudgeError]
    while pending:
        for subclass in pending.pop().__subclasses__():
            if subclass.__module__.startswith("ctxutil_otel."):  # not a test's own error
                found.add(subclass.error_type)
                pending.append(subclass)
    return found


def _documented_error_types() -> set[str]:
    """The first column of telemetry.md's table of ``error.type`` values."""
    text = (ROOT / "docs" / "telemetry.md").read_text(encoding="utf-8")
    table = text.split("| `error.type` | from | when |", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", table, flags=re.MULTILINE))


def test_telemetry_md_lists_every_error_type_the_code_counts() -> None:
    # internal_error (an unexpected error of the evaluator while evaluating, counted failed) was not
    # among the error.type values docs/telemetry.md listed, nor were most judge error types.
    assert _documented_error_types() == _error_types_of_the_code()
    assert ctxutil_otel.judges._retry.JudgeServerError.error_type == "http_5xx"


def test_the_checker_finds_an_unknown_name() -> None:
    assert _unknown_names('rate(x{outcome="droped", reason=~"queue_full|ttl_expird"}[5m])') == [
        "outcome=droped",
        "reason=ttl_expird",
    ]
    assert _unknown_names("counted `dropped`/`pending_ful`") == ["reason=pending_ful"]


@pytest.mark.parametrize("path", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_documents_name_only_known_outcomes_and_reasons(path: Path) -> None:
    assert _unknown_names(path.read_text(encoding="utf-8")) == []


def test_alert_runbooks_explain_only_known_reasons() -> None:
    text = (ROOT / "deploy" / "alerts.yaml").read_text(encoding="utf-8")
    # the runbooks of the alerts on dropped interactions (the others explain error types)
    alerts = [block for block in text.split("- alert:") if 'outcome="dropped"' in block]
    runbooks = [m for block in alerts for m in re.findall(r"runbook: >-\n((?:\s{12,}.*\n)+)", block)]
    assert runbooks, "no runbook of a drop alert found in deploy/alerts.yaml"
    named = {name for runbook in runbooks for name in _RUNBOOK_ENTRY.findall(runbook)}
    settings_like = {n for n in named if n.startswith("ctxutil_")}
    assert named - settings_like <= REASONS, sorted(named - settings_like - REASONS)
