"""End to end with dimensions (issue 12): real LangChain chains answering with two models under two prompt
versions, one callback handler and evaluator, a real Prometheus scraping it and evaluating
deploy/alerts.yaml, and the dashboard's queries evaluated against it.

* ``_dimensions_app.py`` invokes four chains (model-a / model-b x prompt v1 / v2; root chain ``rag``,
  retriever ``docs``) through ``UtilizationCallbackHandler`` with ``metric_dimensions=prompt_version`` and
  the lexical judge; model-a uses its context (fully under v1, half the time partly under v2), model-b
  ignores it under both versions. A fifth chain (model-a, prompt v3) arrives once the bound of two values
  per dimension is full: its results carry prompt_version ``_OTHER`` and count as overflows.
* Every chain runs twice as many turns in two identical batches. Prometheus starts only after the first
  batch is emitted, so every series' first sample holds a whole batch; the second batch doubles each
  series, and ``rate()`` extrapolates every series of a slice by the same factor: the recorded ratios are
  exactly the ratios of the judge's verdicts, which the test computes itself with the same judge.
* The rules are loaded as shipped, except ``for:`` set to 0s (a test cannot wait 15 minutes; the
  promtool tests own ``for:``) and ``offset 1h`` removed (as in test_end_to_end.py).

Shown: every series carries the model, provider, chain, retriever and prompt version; the per-slice
recordings hold each slice's own utilization and relevancy; the dashboard's "by model" and "by prompt
version" panels, its "Retrieval or generation?" and "share of relevant context" panels, and its model
variable give the expected values; CtxutilUtilizationLow and CtxutilFailShareHigh fire for model-b's
slices (each prompt version) and for no slice of model-a; CtxutilDimensionOverflow names prompt_version.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ctxutil_otel import LexicalJudge, Settings

from ._dimensions_app import (
    ANSWERS,
    APPLICATION_NAME,
    CHAIN_NAME,
    CHUNKS,
    OVERFLOW_VALUE,
    OVERFLOW_VERSIONS,
    QUESTION,
    RETRIEVER_NAME,
    SERVICE_NAME,
    TURNS,
)
from ._promql import DASHBOARD_FILE, DEPLOY, dashboard_expressions, substitute_grafana_variables
from .conftest import LineChild, PrometheusServer, line_child, wait_until

# Detected by feature: the setting that turns user dimensions on is the entry point of issue 12 item 2.
if "metric_dimensions" not in Settings.model_fields:
    pytest.skip(
        "the emitter does not produce dimension labels yet: Settings has no metric_dimensions "
        "(issue 12 item 2, branch slices)",
        allow_module_level=True,
    )

JOB = SERVICE_NAME
WAIT_S = 30.0
# A batch is 120 chain invocations and their evaluations: a generous bound on a loaded machine.
BATCH_S = 180.0
SCRAPE_TIMEOUT_MS = 1000  # conftest's Prometheus: a scrape's samples are appended within this
DIMENSIONS = (
    "gen_ai_request_model",
    "gen_ai_provider_name",
    "ctxutil_chain_name",
    "ctxutil_retriever_name",
    "ctxutil_metadata_prompt_version",
)
Slice = tuple[str, str]  # (model, prompt version as emitted)


@dataclass(frozen=True)
class Expected:
    """What the judge says of one slice's batch: relevant, utilized and judged chunks, and the sum of the
    per-interaction contextual_relevancy and contextual_utilization scores."""

    relevant: int
    utilized: int
    judged: int
    relevancy_sum: float
    utilization_sum: float
    scored: int


def _expected() -> dict[Slice, Expected]:
    """Per slice, the verdicts of the lexical judge (the one the app's evaluator uses) over one batch."""
    judge = LexicalJudge()
    out = {}
    for (model, _, version), answers in ANSWERS.items():
        relevant = utilized = 0
        relevancy_sum = utilization_sum = 0.0
        for turn in range(TURNS):
            verdicts = asyncio.run(judge.judge(QUESTION, answers[turn % len(answers)], list(CHUNKS))).verdicts
            r = sum(v.is_relevant for v in verdicts)
            u = sum(v.is_relevant and v.is_utilized for v in verdicts)
            relevant, utilized = relevant + r, utilized + u
            relevancy_sum += r / len(CHUNKS)
            utilization_sum += u / r
        out[(model, OVERFLOW_VALUE if version in OVERFLOW_VERSIONS else version)] = Expected(
            relevant, utilized, TURNS * len(CHUNKS), relevancy_sum, utilization_sum, TURNS
        )
    return out


EXPECTED = _expected()


def _rules_for_a_short_test() -> str:
    rules = (DEPLOY / "alerts.yaml").read_text(encoding="utf-8")
    changed = re.sub(r"\s+offset\s+1h\b", "", rules)
    changed = re.sub(r"(?m)^(\s+for:) \d+[smh]$", r"\1 0s", changed)
    assert changed.count("for: 0s") == rules.count("for: ")
    return changed


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LineChild, int]]:
    log = tmp_path_factory.mktemp("dims-app") / "stderr.log"
    with line_child(Path(__file__).with_name("_dimensions_app.py"), log) as child:
        yield child, child.receive(BATCH_S)["port"]


def _scrape_times(server: PrometheusServer) -> list[float]:
    data = server.api("query", query=f'ctxutil_evaluations_total{{job="{JOB}"}}[5m]')
    return sorted({float(t) * 1000 for series in data["result"] for t, _ in series["values"]})


def _evaluated_in_prometheus(server: PrometheusServer) -> int:
    result = server.query(f'sum(ctxutil_evaluations_total{{job="{JOB}", outcome="evaluated"}})')
    return int(float(result[0]["value"][1])) if result else -1


@pytest.fixture(scope="module")
def prometheus(
    app: tuple[LineChild, int],
    start_prometheus: Callable[[str, list[Path]], PrometheusServer],
    tmp_path_factory: pytest.TempPathFactory,
) -> PrometheusServer:
    child, port = app
    first = child.send("run", BATCH_S)  # answers after force_flush: the whole batch is emitted
    assert first["flushed"] and first["stats"]["evaluated"] == len(ANSWERS) * TURNS, first
    rule_file = tmp_path_factory.mktemp("dims-rules") / "alerts.yaml"
    rule_file.write_text(_rules_for_a_short_test(), encoding="utf-8")
    server = start_prometheus(
        f"  - job_name: {JOB}\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n", [rule_file]
    )
    wait_until(lambda: _evaluated_in_prometheus(server) == first["stats"]["evaluated"], WAIT_S, "batch 1")
    second = child.send("run", BATCH_S)
    answered_ms = time.time() * 1000
    assert second["flushed"] and second["stats"]["evaluated"] == 2 * len(ANSWERS) * TURNS, second
    assert second["stats"]["captured"] == second["stats"]["evaluated"], second  # nothing dropped or failed
    # A scrape that started after the answer holds the final values; recordings evaluated once that
    # scrape's samples are in (its start + the scrape timeout) are computed from them.
    scrape_ms = wait_until(
        lambda: next((t for t in _scrape_times(server) if t > answered_ms), None),
        WAIT_S,
        "a scrape after batch 2",
    )
    assert _evaluated_in_prometheus(server) == second["stats"]["evaluated"]

    def recorded_after_scrape() -> bool:
        data = server.api("query", query=f'ctxutil:chunks_relevant:rate5m{{job="{JOB}"}}[1m]')
        times = [float(t) * 1000 for series in data["result"] for t, _ in series["values"]]
        return bool(times) and max(times) > scrape_ms + SCRAPE_TIMEOUT_MS

    wait_until(recorded_after_scrape, WAIT_S, "a rule evaluation after the final scrape")
    return server


def _by_slice(server: PrometheusServer, expr: str) -> dict[Slice, float]:
    found: dict[Slice, float] = {}
    for series in server.query(expr):
        labels = series["metric"]
        key = (labels["gen_ai_request_model"], labels["ctxutil_metadata_prompt_version"])
        assert key not in found, f"{expr}: two series for {key}"
        found[key] = float(series["value"][1])
    return found


def _panel_expr(title: str) -> str:
    (entry,) = [
        e for e in dashboard_expressions(DASHBOARD_FILE) if e["kind"] == "panel" and e["title"] == title
    ]
    expr: str = entry["expr"]
    return expr


def test_every_series_carries_the_dimensions(prometheus: PrometheusServer) -> None:
    result = prometheus.query(
        f'group by ({", ".join(DIMENSIONS)}) (ctxutil_chunks_relevant_total{{job="{JOB}"}})'
    )
    found = {tuple(series["metric"].get(label) for label in DIMENSIONS) for series in result}
    assert found == {
        (
            model,
            provider,
            CHAIN_NAME,
            RETRIEVER_NAME,
            OVERFLOW_VALUE if version in OVERFLOW_VERSIONS else version,
        )
        for model, provider, version in ANSWERS
    }
    names = prometheus.query(
        f'count by (gen_ai_evaluation_name) (gen_ai_evaluation_score_count{{job="{JOB}"}})'
    )
    assert {s["metric"]["gen_ai_evaluation_name"]: float(s["value"][1]) for s in names} == {
        "contextual_utilization": len(ANSWERS),
        "contextual_relevancy": len(ANSWERS),
    }
    application = prometheus.query(
        f'count(ctxutil_chunks_judged_total{{ctxutil_application_name="{APPLICATION_NAME}"}})'
    )
    assert float(application[0]["value"][1]) == len(ANSWERS)


@pytest.mark.parametrize("window", ["5m", "30m", "1h"])
def test_recorded_utilization_is_each_slices_own(prometheus: PrometheusServer, window: str) -> None:
    recorded = _by_slice(prometheus, f'ctxutil:utilization:ratio_rate{window}{{job="{JOB}"}}')
    assert recorded == {key: pytest.approx(e.utilized / e.relevant, rel=1e-9) for key, e in EXPECTED.items()}
    assert recorded[("model-b", "v1")] == recorded[("model-b", "v2")] == 0.0
    assert recorded[("model-a", "v1")] > recorded[("model-a", "v2")] >= 0.5


def test_recorded_relevancy_is_relevant_over_judged_chunks(prometheus: PrometheusServer) -> None:
    recorded = _by_slice(prometheus, f'ctxutil:relevancy:ratio_rate5m{{job="{JOB}"}}')
    assert recorded == {key: pytest.approx(e.relevant / e.judged, rel=1e-9) for key, e in EXPECTED.items()}


def _pooled(position: int, value: str) -> float:
    """Pooled utilization of the slices whose model (position 0) or prompt version (1) is ``value``."""
    chosen = [e for key, e in EXPECTED.items() if key[position] == value]
    return sum(e.utilized for e in chosen) / sum(e.relevant for e in chosen)


def test_utilization_by_model_and_by_prompt_version_panels(prometheus: PrometheusServer) -> None:
    by_model = {
        s["metric"]["gen_ai_request_model"]: float(s["value"][1])
        for s in prometheus.query(substitute_grafana_variables(_panel_expr("Utilization by model")))
    }
    models = {key[0] for key in EXPECTED}
    assert by_model == {model: pytest.approx(_pooled(0, model), rel=1e-9) for model in models}
    by_version = {
        s["metric"]["ctxutil_metadata_prompt_version"]: float(s["value"][1])
        for s in prometheus.query(substitute_grafana_variables(_panel_expr("Utilization by prompt version")))
    }
    versions = {key[1] for key in EXPECTED}
    assert by_version == {version: pytest.approx(_pooled(1, version), rel=1e-9) for version in versions}
    assert by_model["model-a"] > by_model["model-b"]
    assert by_version["v1"] > by_version["v2"]


def test_model_variable_narrows_the_pooled_utilization(prometheus: PrometheusServer) -> None:
    (expr,) = [
        e["expr"]
        for e in dashboard_expressions(DASHBOARD_FILE)
        if e["kind"] == "panel" and e["title"] == "Pooled utilization (5m)"
    ]
    for model in ("model-a", "model-b"):
        (series,) = prometheus.query(substitute_grafana_variables(expr, values={"model": model}))
        assert float(series["value"][1]) == pytest.approx(_pooled(0, model), rel=1e-9)
    assert prometheus.query(substitute_grafana_variables(expr, values={"model": "model-c"})) == []


def test_retrieval_or_generation_panel(prometheus: PrometheusServer) -> None:
    result = prometheus.query(substitute_grafana_variables(_panel_expr("Retrieval or generation?")))
    means = {
        (s["metric"]["gen_ai_evaluation_name"], s["metric"]["gen_ai_request_model"]): float(s["value"][1])
        for s in result
    }
    assert {s["metric"]["ctxutil_retriever_name"] for s in result} == {RETRIEVER_NAME}
    expected = {}
    for model in ("model-a", "model-b"):
        chosen = [e for key, e in EXPECTED.items() if key[0] == model]
        scored = sum(e.scored for e in chosen)
        expected[("contextual_relevancy", model)] = sum(e.relevancy_sum for e in chosen) / scored
        expected[("contextual_utilization", model)] = sum(e.utilization_sum for e in chosen) / scored
    assert means == {key: pytest.approx(value, rel=1e-9) for key, value in expected.items()}
    # The reading: model-b's retrieval found relevant context, its answers used none of it.
    assert means[("contextual_relevancy", "model-b")] > 0
    assert means[("contextual_utilization", "model-b")] == 0.0


def test_share_of_relevant_context_panel(prometheus: PrometheusServer) -> None:
    (series,) = prometheus.query(
        substitute_grafana_variables(_panel_expr("Share of retrieved context that was relevant"))
    )
    assert (series["metric"]["ctxutil_chain_name"], series["metric"]["ctxutil_retriever_name"]) == (
        CHAIN_NAME,
        RETRIEVER_NAME,
    )
    relevant = sum(e.relevant for e in EXPECTED.values())
    judged = sum(e.judged for e in EXPECTED.values())
    assert float(series["value"][1]) == pytest.approx(relevant / judged, rel=1e-9)


def _firing(server: PrometheusServer, alertname: str) -> set[Slice]:
    result = server.query(f'ALERTS{{alertname="{alertname}", alertstate="firing", job="{JOB}"}}')
    return {
        (s["metric"]["gen_ai_request_model"], s["metric"]["ctxutil_metadata_prompt_version"]) for s in result
    }


@pytest.mark.parametrize("alertname", ["CtxutilUtilizationLow", "CtxutilFailShareHigh"])
def test_alert_fires_for_the_failing_model_only(prometheus: PrometheusServer, alertname: str) -> None:
    failing = {("model-b", "v1"), ("model-b", "v2")}
    wait_until(lambda: _firing(prometheus, alertname) == failing, WAIT_S, f"{alertname} firing for model-b")
    # Silent for model-a: no alert instance of any state, and its condition selects no model-a slice.
    assert prometheus.query(f'ALERTS{{alertname="{alertname}", gen_ai_request_model="model-a"}}') == []
    (rule,) = [
        r
        for group in prometheus.api("rules")["groups"]
        for r in group["rules"]
        if r["type"] == "alerting" and r["name"] == alertname
    ]
    condition = {
        (s["metric"]["gen_ai_request_model"], s["metric"]["ctxutil_metadata_prompt_version"])
        for s in prometheus.query(rule["query"])
    }
    assert condition == failing
    for alert in rule["alerts"]:
        labels = alert["labels"]
        assert (labels["gen_ai_provider_name"], labels["ctxutil_chain_name"]) == ("provider-b", CHAIN_NAME)
        assert labels["ctxutil_retriever_name"] == RETRIEVER_NAME
        assert (
            f"[model=model-b] [provider=provider-b] [chain={CHAIN_NAME}]" in alert["annotations"]["summary"]
        )
        assert (
            f"[prompt_version={labels['ctxutil_metadata_prompt_version']}]" in alert["annotations"]["summary"]
        )


def test_values_past_the_bound_are_other_and_counted(prometheus: PrometheusServer) -> None:
    """v3 came third with a bound of two values: its results are the ``_OTHER`` slice (checked above), the
    overflow counter counts each of them, the dashboard's overflow panel shows it and the info alert names
    the dimension; no other dimension overflowed."""
    overflows = {
        s["metric"]["ctxutil_dimension_name"]: float(s["value"][1])
        for s in prometheus.query(f'ctxutil_dimension_overflow_total{{job="{JOB}"}}')
    }
    # Every dimension seen has its series from the start (at 0 until it overflows).
    seen = {"gen_ai.request.model", "gen_ai.provider.name", "ctxutil.chain.name", "ctxutil.retriever.name"}
    assert overflows == {
        **dict.fromkeys(seen, 0.0),
        "ctxutil.metadata.prompt_version": EXPECTED[("model-a", OVERFLOW_VALUE)].scored * 2,
    }
    panel = {
        s["metric"]["ctxutil_dimension_name"]: float(s["value"][1])
        for s in prometheus.query(
            substitute_grafana_variables(_panel_expr("Dimension values over the bound"))
        )
    }
    assert {name for name, rate in panel.items() if rate > 0} == {"ctxutil.metadata.prompt_version"}

    def firing() -> set[str]:
        result = prometheus.query(
            f'ALERTS{{alertname="CtxutilDimensionOverflow", alertstate="firing", job="{JOB}"}}'
        )
        return {s["metric"]["ctxutil_dimension_name"] for s in result}

    wait_until(lambda: firing() == {"ctxutil.metadata.prompt_version"}, WAIT_S, "CtxutilDimensionOverflow")
