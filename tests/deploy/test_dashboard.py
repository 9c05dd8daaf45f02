"""The Grafana dashboard and the rules reference only metrics the project emits, and recorded series that
deploy/alerts.yaml defines; the dashboard is provisioned with its datasource chosen by a uid variable and
links to the Jaeger search of ``contextual_utilization`` spans."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from ctxutil_otel.emit import names as telemetry_names

from ._promql import (
    DASHBOARD_FILE,
    DASHBOARD_VARIABLES,
    dashboard_expressions,
    grouping_labels,
    metric_names,
    rule_expressions,
    substitute_grafana_variables,
    tokenize,
)

DASHBOARD = DASHBOARD_FILE
PROMETHEUS_BUILTINS = frozenset({"ALERTS", "ALERTS_FOR_STATE", "up"})
# What may follow the translated instrument name: a unit (only seconds among ours), then a type suffix.
_SUFFIXES = re.compile(r"(_seconds)?(_total|_bucket|_sum|_count)?")


def _project_series() -> set[str]:
    """Prometheus sample names of every instrument in ``ctxutil_otel.emit.names``."""
    return {series for forms in telemetry_names.PROMETHEUS_NAMES.values() for series in forms}


def _recorded() -> set[str]:
    return {rule["record"] for rule in rule_expressions() if "record" in rule}


def _dashboard() -> dict[str, Any]:
    data = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _panels() -> list[dict[str, Any]]:
    return [p for p in _dashboard()["panels"] if p["type"] != "row"]


def test_prometheus_names_follow_the_translation_of_the_instrument_names() -> None:
    """The names the tests check against are the instruments' names in Prometheus form: dots to
    underscores, a unit suffix, ``_total`` for counters, ``_bucket``/``_sum``/``_count`` for histograms."""
    instruments = {value for key, value in vars(telemetry_names).items() if key.startswith("METRIC_")}
    assert instruments == set(telemetry_names.PROMETHEUS_NAMES)
    for instrument, forms in telemetry_names.PROMETHEUS_NAMES.items():
        base = instrument.replace(".", "_")
        for form in forms:
            assert form.startswith(base), (instrument, form)
            assert _SUFFIXES.fullmatch(form[len(base) :]), (instrument, form)


@pytest.mark.parametrize("kind", ["rules", "dashboard"])
def test_expressions_reference_only_emitted_metrics_and_defined_recordings(kind: str) -> None:
    allowed = _project_series() | _recorded() | PROMETHEUS_BUILTINS
    if kind == "rules":
        expressions = [(rule.get("record") or rule["alert"], rule["expr"]) for rule in rule_expressions()]
    else:
        expressions = [
            (entry["title"], substitute_grafana_variables(entry["expr"]))
            for entry in dashboard_expressions(DASHBOARD)
        ]
    assert expressions
    for where, expr in expressions:
        names = metric_names(expr)
        assert names, f"{where}: no metric in {expr!r}"
        unknown = names - allowed
        assert not unknown, f"{where}: {sorted(unknown)} is neither emitted by ctxutil-otel nor recorded"


def test_every_recording_rule_is_used_by_the_dashboard_or_an_alert() -> None:
    used: set[str] = set()
    for entry in dashboard_expressions(DASHBOARD):
        used |= metric_names(substitute_grafana_variables(entry["expr"]))
    for rule in rule_expressions():
        used |= metric_names(rule["expr"])
    assert _recorded() - used == set()


def test_every_emitted_metric_is_shown_or_alerted_on() -> None:
    used: set[str] = set()
    for entry in dashboard_expressions(DASHBOARD):
        used |= metric_names(substitute_grafana_variables(entry["expr"]))
    for rule in rule_expressions():
        used |= metric_names(rule["expr"])
    for instrument, forms in telemetry_names.PROMETHEUS_NAMES.items():
        assert used & set(forms), f"{instrument} ({forms}) appears in no panel and no rule"


def test_datasource_is_chosen_by_a_uid_variable() -> None:
    dashboard = _dashboard()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in _panels():
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
    for name in DASHBOARD_VARIABLES:
        assert variables[name]["datasource"]["uid"] == "${datasource}"


def test_dashboard_has_the_panels_the_readme_describes() -> None:
    panels = _panels()
    exprs = {p["title"]: " ".join(t["expr"] for t in p["targets"]) for p in panels}
    for window in ("rate5m", "rate1h", "rate6h_offset1h"):
        assert f"ctxutil:chunks_utilized:{window}" in exprs["Pooled contextual utilization"]
        assert f"ctxutil:chunks_relevant:{window}" in exprs["Pooled contextual utilization"]
    heatmaps = [p for p in panels if p["type"] == "heatmap"]
    assert len(heatmaps) == 1
    assert "gen_ai_evaluation_score_bucket" in heatmaps[0]["targets"][0]["expr"]
    assert heatmaps[0]["targets"][0]["format"] == "heatmap"
    assert "ctxutil:evaluation_scores:rate5m" in exprs["Pass rate"]
    assert "ctxutil:chunks_relevant:rate5m" in exprs["Relevant vs utilized chunks"]
    assert "ctxutil:chunks_utilized:rate5m" in exprs["Relevant vs utilized chunks"]
    assert "ctxutil:evaluations:rate5m" in exprs["Evaluation outcomes"]
    assert "ctxutil:evaluation_duration_seconds:p95_rate5m" in exprs["Judge latency"]
    assert "ctxutil:judge_tokens:rate5m" in exprs["Judge tokens"]
    assert "ctxutil_queue_size" in exprs["Queue size"]
    for panel in panels:
        assert panel.get("description", "").strip(), f"{panel['title']}: no description"


def test_utilization_panel_links_to_the_jaeger_search_of_evaluation_spans() -> None:
    panel = next(p for p in _panels() if p["title"] == "Pooled contextual utilization")
    links = panel["fieldConfig"]["defaults"]["links"]
    urls = [link["url"] for link in links]
    assert any(
        url.startswith("${jaeger_url}/search?") and "operation=contextual_utilization" in url for url in urls
    )
    assert all("service=${__field.labels.job}" in url for url in urls)
    variables = {v["name"]: v for v in _dashboard()["templating"]["list"]}
    assert variables["jaeger_url"]["query"] == "http://localhost:16686"


def test_panel_ids_are_unique_and_panels_do_not_overlap() -> None:
    panels = _dashboard()["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    cells: dict[tuple[int, int], str] = {}
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


def test_worker_throttling_panel_shows_the_share_of_time_throttled_per_instance() -> None:
    """The rate of a seconds counter is seconds per second: the share of wall time the worker waited on its
    CPU budget, per instance (each worker has its own budget), plotted as a percentage capped at 100 %."""
    panel = next(p for p in _panels() if p["title"] == "Worker CPU throttling")
    (target,) = panel["targets"]
    throttled = telemetry_names.PROMETHEUS_NAMES[telemetry_names.METRIC_WORKER_CPU_THROTTLED][0]
    pattern = rf"clamp_max\(rate\({throttled}\{{[^}}]*\}}\[\$__rate_interval\]\), 1\)"
    assert re.fullmatch(pattern, target["expr"]), target["expr"]
    assert "sum" not in target["expr"]  # not pooled: a share of one worker's time
    assert "{{instance}}" in target["legendFormat"]
    defaults = panel["fieldConfig"]["defaults"]
    assert (defaults["unit"], defaults["min"], defaults["max"]) == ("percentunit", 0, 1)


# ------------------------------------------------------------------------------------------------------------
# Dimensions (issue 12): variables, per-slice panels, and the two evaluation names of one histogram.
# ------------------------------------------------------------------------------------------------------------
#: Dashboard variable -> the Prometheus label of the dimension it filters (docs/slices.md).
DIMENSION_VARIABLES = {
    "model": "gen_ai_request_model",
    "provider": "gen_ai_provider_name",
    "chain": "ctxutil_chain_name",
    "retriever": "ctxutil_retriever_name",
    "prompt_version": "ctxutil_metadata_prompt_version",
}
UTILIZATION = "contextual_utilization"
RELEVANCY = "contextual_relevancy"
#: Series that carry gen_ai_evaluation_name and hold results of more than one evaluation.
EVALUATION_SERIES = frozenset(
    {
        *telemetry_names.PROMETHEUS_NAMES[telemetry_names.METRIC_EVALUATION_SCORE],
        *telemetry_names.PROMETHEUS_NAMES[telemetry_names.METRIC_CHUNKS_RELEVANT],
        *telemetry_names.PROMETHEUS_NAMES[telemetry_names.METRIC_CHUNKS_UTILIZED],
        *telemetry_names.PROMETHEUS_NAMES[telemetry_names.METRIC_CHUNKS_JUDGED],
    }
)
_NAME_MATCHER = re.compile(r'gen_ai_evaluation_name\s*(=~|!~|!=|=)\s*"([^"]*)"')


def _unnamed_evaluation_selectors(expr: str) -> list[str]:
    """Selectors of ``EVALUATION_SERIES`` in ``expr`` that could mix evaluation names: each must match
    exactly one name (``="contextual_utilization"`` or ``="contextual_relevancy"``), or, where an
    expression deliberately shows both, match several while its ``by (...)`` keeps them apart."""
    tokens = tokenize(expr)
    groups_by_name = "gen_ai_evaluation_name" in (grouping_labels(expr) or ())
    bad = []
    for k, tok in enumerate(tokens):
        if tok.kind != "ident" or tok.text not in EVALUATION_SERIES:
            continue
        matchers = tokens[k + 1].text if k + 1 < len(tokens) and tokens[k + 1].kind == "matchers" else ""
        found = _NAME_MATCHER.findall(matchers)
        exact = [value for op, value in found if op == "=" and value in {UTILIZATION, RELEVANCY}]
        several = [
            value for op, value in found if op == "=~" and set(value.split("|")) <= {UTILIZATION, RELEVANCY}
        ]
        if not (exact or (several and groups_by_name)):
            bad.append(f"{tok.text}{matchers}")
    return bad


def _all_expressions() -> list[tuple[str, str]]:
    found = [(rule.get("record") or rule["alert"], rule["expr"]) for rule in rule_expressions()]
    # Variable queries list label values (label_values(selector, label)): they mix no results.
    found += [
        (entry["title"], entry["expr"])
        for entry in dashboard_expressions(DASHBOARD)
        if entry["kind"] != "variable"
    ]
    return found


def test_every_utilization_selector_names_its_evaluation() -> None:
    """gen_ai_evaluation_score (and the chunk counters) hold contextual_utilization and contextual_relevancy
    results: a rule or panel selecting them without naming the evaluation would mix relevancy points into
    utilization ratios, pass rates and alerts."""
    for where, expr in _all_expressions():
        assert _unnamed_evaluation_selectors(expr) == [], where


def test_the_evaluation_name_check_catches_a_selector_without_it() -> None:
    assert _unnamed_evaluation_selectors("sum by (job) (rate(gen_ai_evaluation_score_count[5m]))")
    assert _unnamed_evaluation_selectors('rate(ctxutil_chunks_relevant_total{job="a"}[5m])')
    both = (
        "sum by (job) (rate(gen_ai_evaluation_score_sum"
        '{gen_ai_evaluation_name=~"contextual_relevancy|contextual_utilization"}[5m]))'
    )
    assert _unnamed_evaluation_selectors(both)  # both names, pooled together
    assert not _unnamed_evaluation_selectors(both.replace("by (job)", "by (job, gen_ai_evaluation_name)"))


def test_every_dimension_has_a_variable() -> None:
    variables = {v["name"]: v for v in _dashboard()["templating"]["list"]}
    for name, label in DIMENSION_VARIABLES.items():
        variable = variables[name]
        query = variable["query"]["query"]
        assert re.fullmatch(rf"label_values\(\w+\{{job=~\"\$job\"\}}, {label}\)", query), query
        assert variable["definition"] == query
        assert (variable["multi"], variable["includeAll"], variable["allValue"]) == (True, True, ".*"), name
        assert variable["description"].strip(), name
    assert "CTXUTIL_METRIC_DIMENSIONS" in variables["prompt_version"]["description"]
    assert set(DIMENSION_VARIABLES) <= set(DASHBOARD_VARIABLES)


def _selectors(expr: str) -> list[tuple[str, str]]:
    """(metric name, its matcher text) for every selector in ``expr``."""
    tokens = tokenize(expr)
    names = metric_names(expr)
    return [
        (tok.text, tokens[k + 1].text if k + 1 < len(tokens) and tokens[k + 1].kind == "matchers" else "")
        for k, tok in enumerate(tokens)
        if tok.kind == "ident" and tok.text in names
    ]


def _sliced_series() -> set[str]:
    """Series that carry the dimension labels: the raw evaluation series, every recording that keeps all of
    them in its ``by (...)``, and every recording computed from such recordings without aggregating."""
    dimensions = set(DIMENSION_VARIABLES.values())
    records = {rule["record"]: rule["expr"] for rule in rule_expressions() if "record" in rule}
    sliced = set(EVALUATION_SERIES)
    while True:
        more = {
            name
            for name, expr in records.items()
            if name not in sliced
            and (
                dimensions <= set(grouping_labels(expr) or ())
                or (grouping_labels(expr) is None and metric_names(expr) <= sliced)
            )
        }
        if not more:
            return sliced
        sliced |= more


def test_panels_of_sliced_series_follow_every_dimension_variable() -> None:
    """Choosing a model (prompt version, ...) narrows every panel whose series carry the dimensions; panels
    of per-evaluator series (outcomes, queue, latency, tokens) carry no dimension matcher, since a selected
    value would match none of their series and empty them."""
    sliced = _sliced_series()
    checked = 0
    for entry in dashboard_expressions(DASHBOARD):
        if entry["kind"] != "panel":
            continue
        for name, matchers in _selectors(entry["expr"]):
            dimension_matchers = {
                variable
                for variable, label in DIMENSION_VARIABLES.items()
                if f'{label}=~"${variable}"' in matchers
            }
            if name in sliced:
                checked += 1
                assert dimension_matchers == set(DIMENSION_VARIABLES), f"{entry['title']}: {name}{matchers}"
                for base in ("job", "service", "application"):
                    assert f'=~"${base}"' in matchers, f"{entry['title']}: {name} ignores ${base}"
            else:
                assert not dimension_matchers, f"{entry['title']}: {name} has no dimension labels"
    assert checked > 10


def _panel(title: str) -> dict[str, Any]:
    return next(p for p in _panels() if p["title"] == title)


def test_utilization_by_model_and_by_prompt_version_panels() -> None:
    for title, label in (
        ("Utilization by model", "gen_ai_request_model"),
        ("Utilization by prompt version", "ctxutil_metadata_prompt_version"),
    ):
        panel = _panel(title)
        (target,) = panel["targets"]
        assert label in (grouping_labels(target["expr"]) or ()), title
        assert metric_names(target["expr"]) == {
            "ctxutil:chunks_utilized:rate5m",
            "ctxutil:chunks_relevant:rate5m",
        }
        assert "{{" + label + "}}" in target["legendFormat"]
        assert panel["fieldConfig"]["defaults"]["unit"] == "percentunit"


def test_retrieval_or_generation_panel_sets_relevancy_against_utilization() -> None:
    panel = _panel("Retrieval or generation?")
    (target,) = panel["targets"]
    expr = target["expr"]
    assert {"gen_ai_evaluation_name", "gen_ai_request_model", "ctxutil_retriever_name"} <= set(
        grouping_labels(expr) or ()
    )
    assert _NAME_MATCHER.search(expr) and RELEVANCY in expr and UTILIZATION in expr
    assert metric_names(expr) == {"gen_ai_evaluation_score_sum", "gen_ai_evaluation_score_count"}
    assert "retrieval problem" in panel["description"] and "generation problem" in panel["description"]


def test_share_of_relevant_context_comes_from_the_judged_chunks() -> None:
    (target,) = _panel("Share of retrieved context that was relevant")["targets"]
    assert metric_names(target["expr"]) == {"ctxutil:chunks_relevant:rate5m", "ctxutil:chunks_judged:rate5m"}
    assert target["expr"].index("ctxutil:chunks_relevant") < target["expr"].index("ctxutil:chunks_judged")


def test_outcomes_panel_shows_not_selected() -> None:
    panel = _panel("Evaluation outcomes")
    (target,) = panel["targets"]
    assert "outcome" in (grouping_labels(target["expr"]) or ())
    assert "outcome=" not in target["expr"]  # every outcome, not_selected included
    assert "not_selected" in panel["description"]
    assert any("not_selected" in o["matcher"]["options"] for o in panel["fieldConfig"]["overrides"])
