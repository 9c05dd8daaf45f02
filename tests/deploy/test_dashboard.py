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
    dashboard_expressions,
    metric_names,
    rule_expressions,
    substitute_grafana_variables,
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
    for name in ("job", "service", "application"):
        assert variables[name]["datasource"]["uid"] == "${datasource}"


def test_dashboard_has_the_panels_the_readme_describes() -> None:
    panels = _panels()
    exprs = {p["title"]: " ".join(t["expr"] for t in p["targets"]) for p in panels}
    assert "ctxutil:utilization:ratio_rate5m" in exprs["Pooled contextual utilization"]
    heatmaps = [p for p in panels if p["type"] == "heatmap"]
    assert len(heatmaps) == 1
    assert "gen_ai_evaluation_score_bucket" in heatmaps[0]["targets"][0]["expr"]
    assert heatmaps[0]["targets"][0]["format"] == "heatmap"
    assert "ctxutil:evaluation_pass:ratio_rate5m" in exprs["Pass rate"]
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
