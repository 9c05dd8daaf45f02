"""Every public ``__all__`` pinned: a change to the public surface shows up as a diff of this file.

The package and each public subpackage (no ``_`` in its dotted name) must declare ``__all__``; its names,
in any order, must be exactly the list below, and each must resolve. A new public subpackage fails
:func:`test_every_public_package_is_pinned` until it is added here, on purpose.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import pkgutil

import pytest

import ctxutil_otel

EXPECTED_ALL: dict[str, list[str]] = {
    "ctxutil_otel": [
        "ChunkBreakdown",
        "ChunkVerdict",
        "ContextualUtilization",
        "ContextualUtilizationResult",
        "CtxutilInstrumentor",
        "DatasetItem",
        "Emitter",
        "EvaluationMode",
        "Evaluator",
        "EvaluatorStats",
        "Judge",
        "JudgeError",
        "JudgeResult",
        "LearnedJudge",
        "LexicalJudge",
        "MetricEvaluationResult",
        "MetricRunner",
        "OpenAIJudge",
        "SemanticJudge",
        "Settings",
        "SettingsError",
        "TokenUsage",
        "UtilizationCallbackHandler",
        "UtilizationSpanProcessor",
        "__version__",
        "configure_telemetry",
    ],
    "ctxutil_otel.capture": ["CtxutilInstrumentor", "Interaction", "UtilizationCallbackHandler"],
    "ctxutil_otel.capture.spans": [
        "DEFAULT_MAX_BUFFERED_BYTES",
        "SpanLike",
        "UtilizationSpanProcessor",
    ],
    "ctxutil_otel.cli": ["main"],
    "ctxutil_otel.data": [
        "DATASETS",
        "DESIGN_EXAMPLES_FILE",
        "SAMPLE_FILE",
        "SEED_STYLE_FILE",
        "dataset_path",
        "load_dataset",
        "load_sample",
        "sample_path",
    ],
    "ctxutil_otel.demo": [
        "HashingEmbeddings",
        "RecordedRetriever",
        "ReplayChatModel",
        "build_rag_chain",
        "replay_parts",
    ],
    "ctxutil_otel.emit": [
        "DEFAULT_SERVICE_NAME",
        "Emitter",
        "OutcomeCounts",
        "TelemetryHandle",
        "configure_telemetry",
        "exporter_destinations",
        "names",
    ],
    "ctxutil_otel.judges": [
        "ChunkVerdict",
        "Judge",
        "JudgeError",
        "JudgeResult",
        "JudgeTimeoutError",
        "LearnedJudge",
        "LexicalJudge",
        "ModelFileError",
        "OpenAIJudge",
        "SemanticExtraMissingError",
        "SemanticJudge",
        "TokenUsage",
        "VerdictMismatchError",
        "load_model",
    ],
    "ctxutil_otel.metric": [
        "ChunkBreakdown",
        "ChunkResult",
        "ContextualUtilization",
        "ContextualUtilizationResult",
        "EvaluationMode",
        "Label",
        "MetricEvaluationResult",
        "MetricRunner",
        "validate_verdicts",
    ],
    "ctxutil_otel.sampling": ["CpuBudget", "TokenBucket", "TokenBudget", "TraceIdRatioSampler"],
    "ctxutil_otel.serve": [
        "HEALTH_PATH",
        "HEALTH_RESERVED_CONNECTIONS",
        "ReceiverStats",
        "TLSFiles",
        "TRACES_PATH",
        "TraceReceiver",
        "serve_until_signal",
    ],
    "ctxutil_otel.worker": [
        "Admission",
        "DropReason",
        "EvaluationEmitter",
        "Evaluator",
        "EvaluatorStats",
        "Outcome",
        "Ticket",
        "TicketWarning",
    ],
}
"""``{package: its __all__}``, each list sorted (upper case first, as ``sorted`` puts it)."""


def _public_packages() -> list[str]:
    found = ["ctxutil_otel"]
    for info in pkgutil.walk_packages(ctxutil_otel.__path__, "ctxutil_otel."):
        if info.ispkg and not any(part.startswith("_") for part in info.name.split(".")):
            found.append(info.name)
    return sorted(found)


def test_every_public_package_is_pinned() -> None:
    assert _public_packages() == sorted(EXPECTED_ALL)


@pytest.mark.parametrize("package", sorted(EXPECTED_ALL))
def test_all_is_the_pinned_list(package: str) -> None:
    module = importlib.import_module(package)
    declared = getattr(module, "__all__", None)
    assert declared is not None, f"{package} declares no __all__"
    assert len(declared) == len(set(declared)), f"{package}.__all__ repeats a name"
    assert sorted(declared) == EXPECTED_ALL[package]


@pytest.mark.parametrize("package", sorted(EXPECTED_ALL))
def test_every_pinned_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    missing = [name for name in EXPECTED_ALL[package] if getattr(module, name, None) is None]
    assert missing == [], f"{package}: {missing}"


def test_no_public_constructor_takes_more_than_one_positional_parameter() -> None:
    """Keyword-only constructors (docs/architecture.md, "Public surface conventions"): at most the one
    object a component wraps comes first, as in the OpenTelemetry SDK. Enums and exceptions are called
    as Python defines them."""
    offenders = []
    for package in EXPECTED_ALL:
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if not inspect.isclass(value) or issubclass(value, (BaseException, enum.Enum)):
                continue
            try:
                parameters = inspect.signature(value).parameters.values()
            except (TypeError, ValueError):  # no signature to read (a Protocol)
                continue
            positional = [
                p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
            if len(positional) > 1:
                offenders.append(f"{package}.{name}{positional}")
    assert offenders == []
