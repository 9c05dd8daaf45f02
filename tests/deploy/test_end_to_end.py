"""End to end: a real Prometheus scrapes a real evaluator process and evaluates every PromQL expression
the dashboard and the rules use.

* The evaluator process (``_emitting_app.py``) runs the project's ``Evaluator`` and ``Emitter`` over the
  bundled RAGBench sample and serves its metrics through ``opentelemetry-exporter-prometheus`` on 127.0.0.1.
* Prometheus (the distribution's binary) scrapes it and evaluates deploy/alerts.yaml, both every second.
* The sample is submitted in two batches; after each the test waits until Prometheus shows exactly the
  evaluator's own outcome counts (so counters increase between scrapes and ``rate()`` has data).
* Then every expression is taken from the files (rules: each recording rule, and the operands of each alert
  condition; dashboard: every target, variable and annotation query, with the template variables set to
  "All") and evaluated through ``/api/v1/query``; each must return data with the expected labels and
  plausible values (ratios within [0, 1], rates and quantiles finite and >= 0).

What this does not cover, and where it is covered instead:
* ``offset 1h`` (the trailing baseline) cannot have data in a test that lasts seconds: the rule file loaded
  here has the offset removed (same expression otherwise). The offset semantics, the thresholds and every
  ``for:`` are exercised by ``promtool test rules`` (test_promtool.py, deploy/alerts_test.yaml).
* Alerts firing: the live data here is healthy, so alert conditions are checked operand by operand (each
  operand must have data), not for firing; firing and silence are the promtool tests' job.
* The Collector's ``prometheus`` exporter is not run (no Collector binary here); it applies the same
  OpenTelemetry-to-Prometheus naming rules as the Python exporter used here, plus ``job``/``instance`` from
  the resource.
* Grafana itself is not run: the dashboard's queries are evaluated, not rendered.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ctxutil_otel.emit import names as telemetry_names

from ._emitting_app import APPLICATION_NAME
from ._promql import (
    DASHBOARD_FILE,
    DEPLOY,
    dashboard_expressions,
    grouping_labels,
    metric_names,
    rule_expressions,
    strip_absent,
    substitute_grafana_variables,
    top_level_operands,
)
from .conftest import LineChild, PrometheusServer, line_child, wait_until

JOB = "ctxutil-e2e"
# Labels that exist only on some series of an aggregation (`reason` on dropped, `error_type` on failed), or
# only on results of the span-processor path (the evaluated service; this evaluator submits interactions
# directly, as the callback handler does: test_serve_senders.py covers them), or only on results whose
# capture saw a model, chain, retriever or metadata key.
OPTIONAL_LABELS = frozenset(
    {
        "reason",
        "error_type",
        "ctxutil_evaluated_service_name",
        "ctxutil_evaluated_service_namespace",
        "ctxutil_evaluated_deployment_environment_name",
        # The dimensions (issue 12): this evaluator's interactions have none; test_dimensions_end_to_end.py
        # drives LangChain chains that do.
        "gen_ai_request_model",
        "gen_ai_provider_name",
        "ctxutil_chain_name",
        "ctxutil_retriever_name",
        "ctxutil_metadata_prompt_version",
    }
)
# Series this evaluator never produces, and the test that covers them: the overflow counter moves only when
# a dimension passes its bound, and these interactions carry no dimension.
COVERED_ELSEWHERE = {"ctxutil_dimension_overflow_total": "test_dimensions_end_to_end.py"}
# Generous bounds for polling facts that arrive within a few 1 s scrape/rule intervals.
WAIT_S = 30.0


@dataclass
class EmittingApp:
    """The evaluator process and the port of its metrics endpoint."""

    child: LineChild
    port: int

    def send(self, command: str) -> dict[str, Any]:
        return self.child.send(command)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmittingApp]:
    log = tmp_path_factory.mktemp("app") / "stderr.log"
    with line_child(Path(__file__).with_name("_emitting_app.py"), log) as child:
        yield EmittingApp(child, child.receive()["port"])


def _outcomes_of(stats: dict[str, Any]) -> dict[tuple[str, str], int]:
    """The evaluator's stats as ``{(outcome, reason-or-error_type): count}``, zero counts left out."""
    counts = {
        ("sampled_out", ""): stats["sampled_out"],
        ("evaluated", ""): stats["evaluated"],
        ("not_applicable", ""): stats["not_applicable"],
    }
    counts.update({("dropped", reason): n for reason, n in stats["dropped"].items()})
    counts.update({("failed", error_type): n for error_type, n in stats["failed"].items()})
    return {key: n for key, n in counts.items() if n}


def _outcomes_in_prometheus(prometheus: PrometheusServer) -> dict[tuple[str, str], int]:
    result = prometheus.query(
        f'sum by (outcome, reason, error_type) (ctxutil_evaluations_total{{job="{JOB}"}})'
    )
    counts = {}
    for series in result:
        labels = series["metric"]
        key = (labels["outcome"], labels.get("reason") or labels.get("error_type") or "")
        counts[key] = int(float(series["value"][1]))
    return {key: n for key, n in counts.items() if n}


def _without_offset(text: str) -> str:
    """Drop ``offset 1h`` (the trailing baseline cannot have data in a test lasting seconds)."""
    return re.sub(r"\s+offset\s+1h\b", "", text)


CHUNK_COUNTERS = ("ctxutil_chunks_relevant_total", "ctxutil_chunks_utilized_total")


def _chunk_totals(prometheus: PrometheusServer) -> dict[str, float]:
    totals = {}
    for name in CHUNK_COUNTERS:
        result = prometheus.query(f'sum({name}{{job="{JOB}"}})')
        assert len(result) == 1, (name, result)
        totals[name] = float(result[0]["value"][1])
    return totals


@dataclass
class Scraped:
    """The running Prometheus, and the chunk counters as it saw them after each batch."""

    server: PrometheusServer
    chunk_totals: list[dict[str, float]]


@pytest.fixture(scope="module")
def scraped(
    start_prometheus: Callable[[str, list[Path]], PrometheusServer],
    app: EmittingApp,
    tmp_path_factory: pytest.TempPathFactory,
) -> Scraped:
    """A Prometheus that has scraped two batches of evaluations and evaluates the shipped rules."""
    rules = (DEPLOY / "alerts.yaml").read_text(encoding="utf-8")
    without_offset = _without_offset(rules)
    assert without_offset != rules
    rule_file = tmp_path_factory.mktemp("rules") / "alerts.yaml"
    rule_file.write_text(without_offset, encoding="utf-8")
    server = start_prometheus(
        f"  - job_name: {JOB}\n    static_configs:\n      - targets: ['127.0.0.1:{app.port}']\n", [rule_file]
    )
    totals: list[dict[str, float]] = []
    for batch, scrapes in (("run 0 100", 2), ("run 100 250", 1)):
        answer = app.send(batch)  # answers after force_flush: every result of the batch is emitted
        answered_ms = time.time() * 1000
        assert answer["flushed"] is True
        # Wait for scrapes that started after the answer, so they see the batch's final values. Two after
        # the first batch: the rate windows then start on a settled sample, and at least one scrape
        # interval (1 s) has passed, so the rate cap's token bucket has refilled for the second batch.
        wait_until(
            lambda since=answered_ms, n=scrapes: _scrapes_since(server, since) >= n,
            WAIT_S,
            f"{scrapes} scrape(s) after `{batch}`",
        )
        assert _outcomes_in_prometheus(server) == _outcomes_of(answer["stats"])
        totals.append(_chunk_totals(server))
    return Scraped(server, totals)


def _scrapes_since(server: PrometheusServer, since_ms: float) -> int:
    """Scrapes of the evaluator that started after ``since_ms`` (sample timestamps are scrape starts)."""
    times = {t for series in _samples(server, "ctxutil_evaluations_total").values() for t in series}
    return sum(1 for t in times if t > since_ms)


@pytest.fixture(scope="module")
def prometheus(scraped: Scraped) -> PrometheusServer:
    return scraped.server


def _records() -> dict[str, str]:
    return {rule["record"]: rule["expr"] for rule in rule_expressions() if "record" in rule}


def _expected_labels(expr: str) -> set[str] | None:
    """Labels the result of ``expr`` carries: its first ``by (...)`` clause (``le`` consumed by
    ``histogram_quantile``), else those of the recorded series it reads; ``None`` for a raw selector."""
    labels = grouping_labels(expr)
    if labels is not None:
        result = set(labels)
        if "histogram_quantile" in expr:
            result.discard("le")
        return result
    records = _records()
    for name in sorted(metric_names(expr)):
        if name in records:
            return _expected_labels(records[name])
    return None


def _is_ratio(expr: str) -> bool:
    return bool(re.fullmatch(r"ctxutil:\w+:ratio_\w+(\{[^}]*\})?", expr.strip()))


def _cases() -> list[tuple[str, str, str | None, bool]]:
    """(id, expression, legendFormat, is a ratio) for every expression to evaluate."""
    cases: list[tuple[str, str, str | None, bool]] = []
    for rule in rule_expressions():
        expr = _without_offset(rule["expr"])
        if metric_names(expr) & set(COVERED_ELSEWHERE):
            continue
        if "record" in rule:
            cases.append((f"record {rule['record']}", expr, None, ":ratio_" in rule["record"]))
            continue
        for i, operand in enumerate(top_level_operands(expr)):
            operand = strip_absent(operand)
            cases.append((f"alert {rule['alert']} operand {i}", operand, None, _is_ratio(operand)))
    seen: dict[str, int] = {}
    for entry in dashboard_expressions(DASHBOARD_FILE):
        if entry["kind"] == "annotation":
            continue  # ALERTS: may be empty; its syntax is checked in test_annotation_query_is_valid
        expr = substitute_grafana_variables(entry["expr"])
        if metric_names(expr) & set(COVERED_ELSEWHERE):
            continue
        name = f"{entry['kind']} {entry['title']}"
        seen[name] = seen.get(name, 0) + 1
        # A variable's label_values(selector, label): the selector must return series carrying the label.
        legend = entry.get("legend") if entry["kind"] == "panel" else "{{" + entry["label"] + "}}"
        ratio = entry.get("unit") == "percentunit"
        cases.append((f"{name} #{seen[name]}", expr, legend, ratio))
    return cases


CASES = _cases()


def test_scraped_metric_names_are_the_documented_prometheus_forms(prometheus: PrometheusServer) -> None:
    scraped = set(prometheus.api("label/__name__/values", **{"match[]": f'{{job="{JOB}"}}'}))
    for instrument, forms in telemetry_names.PROMETHEUS_NAMES.items():
        missing = set(forms) - scraped - set(COVERED_ELSEWHERE)
        assert not missing, f"{instrument}: {sorted(missing)} not scraped"
    project = {name for name in scraped if name.startswith(("ctxutil_", "gen_ai_"))}
    documented = {form for forms in telemetry_names.PROMETHEUS_NAMES.values() for form in forms}
    documented -= set(COVERED_ELSEWHERE)
    assert project == documented


def test_every_rule_is_loaded_and_evaluates_without_error(prometheus: PrometheusServer) -> None:
    expected = {rule.get("record") or rule["alert"] for rule in rule_expressions()}

    def evaluated_rules() -> dict[str, dict[str, Any]] | None:
        groups = prometheus.api("rules")["groups"]
        rules = {rule["name"]: rule for group in groups for rule in group["rules"]}
        done = all(rule.get("health") != "unknown" for rule in rules.values())
        return rules if done and set(rules) == expected else None

    rules = wait_until(evaluated_rules, WAIT_S, "every rule to be evaluated once")
    for name, rule in rules.items():
        assert rule["health"] == "ok", f"{name}: {rule.get('lastError')}"


@pytest.mark.parametrize(("case_id", "expr", "legend", "ratio"), CASES, ids=[c[0] for c in CASES])
def test_expression_returns_plausible_data(
    prometheus: PrometheusServer, case_id: str, expr: str, legend: str | None, ratio: bool
) -> None:
    expected = _expected_labels(expr)
    # Recorded series appear at the next rule evaluation: poll until the expression has data.
    result = wait_until(lambda: prometheus.query(expr), WAIT_S, f"data for {case_id}")
    for series in result:
        labels = set(series["metric"]) - {"__name__"}
        value = float(series["value"][1])
        assert math.isfinite(value) and value >= 0, f"{case_id}: {series}"
        if ratio:
            assert value <= 1, f"{case_id}: ratio {value} > 1"
        assert series["metric"].get("job", JOB) == JOB, series
        if expected is None:  # a raw selector: the series as scraped
            assert {"job", "instance", "ctxutil_application_name"} <= labels, series
        else:
            assert labels <= expected, f"{case_id}: unexpected labels {labels - expected}"
            assert expected - OPTIONAL_LABELS <= labels, f"{case_id}: missing {expected - labels}"
        if "ctxutil_application_name" in labels:
            assert series["metric"]["ctxutil_application_name"] == APPLICATION_NAME
        for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", legend or ""):
            assert label in labels or label in OPTIONAL_LABELS, f"{case_id}: legend label {label} absent"


def test_annotation_query_is_valid(prometheus: PrometheusServer) -> None:
    """The dashboard has annotation queries, and Prometheus evaluates each to a vector (``api`` asserts
    Prometheus's ``success`` status, so a PromQL error fails here with Prometheus's message)."""
    queries = [
        substitute_grafana_variables(entry["expr"])
        for entry in dashboard_expressions(DASHBOARD_FILE)
        if entry["kind"] == "annotation"
    ]
    assert queries, "the dashboard has no annotation query"
    for expr in queries:
        data = prometheus.api("query", query=expr)
        assert data["resultType"] == "vector", (expr, data)


def _samples(server: PrometheusServer, name: str) -> dict[tuple[tuple[str, str], ...], dict[int, float]]:
    """Raw samples of the last 2 minutes per series: ``{labels: {timestamp_ms: value}}``."""
    data = server.api("query", query=f'{name}{{job="{JOB}"}}[2m]')
    assert data["resultType"] == "matrix"
    return {
        tuple(sorted(series["metric"].items())): {
            round(float(t) * 1000): float(v) for t, v in series["values"]
        }
        for series in data["result"]
    }


def test_pooled_utilization_rule_is_the_ratio_of_the_chunk_counter_increases(scraped: Scraped) -> None:
    """The shipped pooled-utilization expression, evaluated over a window that starts at the last scrape
    before the second batch and ends at the latest scrape, equals (utilized increase) / (relevant increase)
    computed from the raw samples. With the window's edges on samples, rate() does not extrapolate
    (Prometheus 2.x closed range selectors), so the comparison is exact up to float rounding."""
    server = scraped.server
    before = scraped.chunk_totals[0]
    samples = {name: _samples(server, name) for name in CHUNK_COUNTERS}
    relevant = samples["ctxutil_chunks_relevant_total"]
    timestamps = sorted({t for series in relevant.values() for t in series})
    t_b = timestamps[-1]
    t_a = max(
        t
        for t in timestamps
        if sum(series.get(t, 0.0) for series in relevant.values()) == before["ctxutil_chunks_relevant_total"]
    )
    assert t_a < t_b

    # Every series that moves inside the window must have a sample at its start, or rate() would
    # extrapolate it differently (the first batch creates all pass/fail series; errors record no chunks).
    for name in CHUNK_COUNTERS:
        for labels, series in samples[name].items():
            inside = [v for t, v in series.items() if t_a <= t <= t_b]
            assert t_a in series or len(set(inside)) <= 1, f"{name}{dict(labels)} first appears mid-window"

    def increase(name: str) -> float:
        # Prometheus semantics without extrapolation: series present at both edges count their difference.
        return sum(s[t_b] - s[t_a] for s in samples[name].values() if t_a in s and t_b in s)

    utilized, relevant_increase = (
        increase("ctxutil_chunks_utilized_total"),
        increase("ctxutil_chunks_relevant_total"),
    )
    assert relevant_increase > 0 and 0 <= utilized <= relevant_increase
    records = _records()
    expr = records["ctxutil:utilization:ratio_rate5m"]
    for name in ("ctxutil:chunks_utilized:rate5m", "ctxutil:chunks_relevant:rate5m"):
        expr = expr.replace(name, f"({records[name]})")
    expr = expr.replace("[5m]", f"[{t_b - t_a}ms]")
    assert "ctxutil:" not in expr and "[5m]" not in expr
    result = server.query(expr, time_s=t_b / 1000)
    assert len(result) == 1, result
    assert float(result[0]["value"][1]) == pytest.approx(utilized / relevant_increase, rel=1e-9)
