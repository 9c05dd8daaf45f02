"""How every metric appears in Prometheus: exported through opentelemetry-exporter-prometheus's
PrometheusMetricReader and read back from prometheus_client's exposition text. This is the mapping the
Prometheus rules and the Grafana dashboard are written against (``emit/_names.py`` docstring)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from ctxutil_otel.capture import Interaction
from ctxutil_otel.emit import Emitter
from ctxutil_otel.emit import names as n
from ctxutil_otel.judges import TokenUsage

from .conftest import GREEN_TEA, GREEN_TEA_MARKS, evaluate, evaluate_failing

SCOPE_LABELS = {"otel_scope_name", "otel_scope_version", "otel_scope_schema_url"}


@pytest.fixture
def exposition() -> Iterator[tuple[str, list[Sample], dict[str, str]]]:
    """Emit a pass, a fail, a not-applicable and an error result plus observables; return the exposition
    text, all samples and ``{family name: type}``."""
    registry = CollectorRegistry()
    reader = PrometheusMetricReader(registry=registry)
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    emitter = Emitter(meter_provider=provider, application_name="faq-bot", dimension_max_values=1)
    interaction = Interaction(
        query="q", answer="a", documents=["c"], trace_id=3, dimensions={n.ATTR_REQUEST_MODEL: "m1"}
    )
    second_model = Interaction(  # past the bound of 1 model: _OTHER, counted in ctxutil.dimension.overflow
        query="q", answer="a", documents=["c"], trace_id=3, dimensions={n.ATTR_REQUEST_MODEL: "m2"}
    )
    usage = TokenUsage(input_tokens=50, output_tokens=5)
    emitter.emit(interaction, evaluate(GREEN_TEA, GREEN_TEA_MARKS, usage=usage), 0.3)  # pass 0.667
    emitter.emit(interaction, evaluate(GREEN_TEA, ["RU", "R", "R", ""]), 0.2)  # fail 0.333
    emitter.emit(second_model, evaluate(GREEN_TEA, ["", "", "", ""]), 0.1)  # not applicable
    emitter.emit(interaction, evaluate_failing(GREEN_TEA), 5.0)  # error
    emitter.observe(
        lambda: {("evaluated", None): 2, ("failed", "timeout"): 1, ("dropped", "queue_full"): 4},
        lambda: 3,
        lambda: 12.5,
    )
    text = generate_latest(registry).decode()
    families = list(text_string_to_metric_families(text))
    yield text, [s for f in families for s in f.samples], {f.name: f.type for f in families}
    provider.shutdown()


def test_every_instrument_maps_to_the_documented_prometheus_names(
    exposition: tuple[str, list[Sample], dict[str, str]],
) -> None:
    _text, samples, _types = exposition
    produced = {s.name for s in samples} - {"target_info"}
    documented = {name for names in n.PROMETHEUS_NAMES.values() for name in names}
    assert produced == documented
    # ... and every instrument the emitter creates is in the table.
    assert set(n.PROMETHEUS_NAMES) == {
        n.METRIC_EVALUATION_SCORE,
        n.METRIC_CHUNKS_RELEVANT,
        n.METRIC_CHUNKS_UTILIZED,
        n.METRIC_CHUNKS_JUDGED,
        n.METRIC_EVALUATION_DURATION,
        n.METRIC_JUDGE_TOKENS,
        n.METRIC_DIMENSION_OVERFLOW,
        n.METRIC_EVALUATIONS,
        n.METRIC_QUEUE_SIZE,
        n.METRIC_WORKER_CPU_THROTTLED,
    }


def test_prometheus_types(exposition: tuple[str, list[Sample], dict[str, str]]) -> None:
    text, _samples, _types = exposition
    type_lines = {line.split()[2]: line.split()[3] for line in text.splitlines() if line.startswith("# TYPE")}
    assert type_lines["gen_ai_evaluation_score"] == "histogram"
    assert type_lines["ctxutil_evaluation_duration_seconds"] == "histogram"
    assert type_lines["ctxutil_chunks_relevant_total"] == "counter"
    assert type_lines["ctxutil_chunks_utilized_total"] == "counter"
    assert type_lines["ctxutil_judge_tokens_total"] == "counter"
    assert type_lines["ctxutil_evaluations_total"] == "counter"
    assert type_lines["ctxutil_queue_size"] == "gauge"
    assert type_lines["ctxutil_worker_cpu_throttled_seconds_total"] == "counter"


def _labels(samples: list[Sample], name: str) -> set[frozenset[str]]:
    return {frozenset(s.labels) - SCOPE_LABELS for s in samples if s.name == name}


def test_label_names(exposition: tuple[str, list[Sample], dict[str, str]]) -> None:
    _text, samples, _types = exposition
    per_result = frozenset(
        {
            "gen_ai_evaluation_name",
            "gen_ai_evaluation_score_label",
            "ctxutil_application_name",
            "gen_ai_request_model",
        }
    )
    assert _labels(samples, "gen_ai_evaluation_score_bucket") == {per_result | {"le"}}
    assert _labels(samples, "gen_ai_evaluation_score_count") == {per_result}
    assert _labels(samples, "ctxutil_chunks_relevant_total") == {per_result}
    assert _labels(samples, "ctxutil_chunks_judged_total") == {per_result}
    assert _labels(samples, "ctxutil_evaluation_duration_seconds_sum") == {per_result}
    assert _labels(samples, "ctxutil_judge_tokens_total") == {
        frozenset(
            {
                "gen_ai_evaluation_name",
                "gen_ai_token_type",
                "ctxutil_application_name",
                "gen_ai_request_model",
            }
        )
    }
    assert _labels(samples, "ctxutil_dimension_overflow_total") == {frozenset({"ctxutil_dimension_name"})}
    # One family has one label set: absent attributes are exported as empty labels, which Prometheus
    # treats as no label at all.
    assert _labels(samples, "ctxutil_evaluations_total") == {
        frozenset({"outcome", "error_type", "reason", "ctxutil_application_name"})
    }
    by_outcome = {
        s.labels["outcome"]: (s.labels["error_type"], s.labels["reason"])
        for s in samples
        if s.name == "ctxutil_evaluations_total"
    }
    assert by_outcome == {"evaluated": ("", ""), "failed": ("timeout", ""), "dropped": ("", "queue_full")}
    assert _labels(samples, "ctxutil_queue_size") == {frozenset({"ctxutil_application_name"})}
    assert _labels(samples, "ctxutil_worker_cpu_throttled_seconds_total") == {
        frozenset({"ctxutil_application_name"})
    }
    scopes = {s.labels.get("otel_scope_name") for s in samples if s.name != "target_info"}
    assert scopes == {n.INSTRUMENTATION_SCOPE}


def test_values_and_bucket_bounds(exposition: tuple[str, list[Sample], dict[str, str]]) -> None:
    _text, samples, _types = exposition

    def value(name: str, **labels: str) -> float:
        (match,) = [s for s in samples if s.name == name and labels.items() <= s.labels.items()]
        return float(match.value)

    les = [s.labels["le"] for s in samples if s.name == "gen_ai_evaluation_score_bucket"]
    assert les[:12] == ["0.0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "1.0", "+Inf"]
    assert value("gen_ai_evaluation_score_bucket", gen_ai_evaluation_score_label="pass", le="0.6") == 0
    assert value("gen_ai_evaluation_score_bucket", gen_ai_evaluation_score_label="pass", le="0.7") == 1
    assert value("ctxutil_chunks_relevant_total", gen_ai_evaluation_score_label="pass") == 3
    assert value("ctxutil_chunks_utilized_total", gen_ai_evaluation_score_label="fail") == 1
    assert value("ctxutil_chunks_relevant_total", gen_ai_evaluation_score_label="not_applicable") == 0
    assert value("ctxutil_evaluation_duration_seconds_sum", gen_ai_evaluation_score_label="error") == 5.0
    assert value("ctxutil_judge_tokens_total", gen_ai_token_type="input") == 50
    assert value("ctxutil_evaluations_total", outcome="failed", error_type="timeout") == 1
    assert value("ctxutil_evaluations_total", outcome="dropped", reason="queue_full") == 4
    assert value("ctxutil_queue_size") == 3
    assert value("ctxutil_worker_cpu_throttled_seconds_total") == 12.5
    assert value("ctxutil_chunks_judged_total", gen_ai_evaluation_score_label="not_applicable") == 4
    assert value("ctxutil_chunks_relevant_total", gen_ai_request_model="_OTHER") == 0
    assert value("ctxutil_dimension_overflow_total", ctxutil_dimension_name="gen_ai.request.model") == 1
    # The retrieval half shares the histogram under its own name (pass 0.75, fail 0.75, n/a 0.0).
    relevancy = [
        s.value
        for s in samples
        if s.name == "gen_ai_evaluation_score_count"
        and s.labels["gen_ai_evaluation_name"] == "contextual_relevancy"
    ]
    assert sum(relevancy) == 3
    # Score labels seen on the histogram: only scored results.
    labels = {
        s.labels["gen_ai_evaluation_score_label"]
        for s in samples
        if s.name == "gen_ai_evaluation_score_count"
        and s.labels["gen_ai_evaluation_name"] == "contextual_utilization"
    }
    assert labels == {"pass", "fail"}
