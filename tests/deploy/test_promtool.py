"""deploy/prometheus.yml and deploy/alerts.yaml checked and unit-tested by the real ``promtool``.

The unit tests themselves live in deploy/alerts_test.yaml (synthetic series; each alert asserted firing
or silent: a drop from 0.9 to 0.4, a steady 0.9, a flat-lined evaluator, an evaluator gone, failure and
drop bursts, a saturated rate cap, two evaluated applications, two answering models of which one drops,
two prompt versions of which one drops, not_selected interactions beside drops).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import yaml

from ._promql import DEPLOY, ROOT, metric_names, rule_expressions, tokenize


def _run(promtool: str, *args: str, cwd: Path = DEPLOY) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # `promtool test rules` builds a throw-away TSDB per test in TMPDIR; on a tmpfs it runs about twice as
    # fast (no fsync to disk). Same results either way.
    if os.access("/dev/shm", os.W_OK):
        env["TMPDIR"] = "/dev/shm"
    return subprocess.run(
        [promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False, env=env
    )


def test_prometheus_config_is_valid(promtool: str) -> None:
    result = _run(promtool, "check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_rule_file_is_valid(promtool: str) -> None:
    result = _run(promtool, "check", "rules", "alerts.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rule_expressions())} rules found" in result.stdout


def test_alert_unit_tests_pass(promtool: str) -> None:
    result = _run(promtool, "test", "rules", "alerts_test.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_unit_tests_cover_every_alert_firing_and_silent() -> None:
    """Every alert of alerts.yaml is asserted at least once firing and once silent."""
    alerts = {rule["alert"] for rule in rule_expressions() if "alert" in rule}
    tests = yaml.safe_load((DEPLOY / "alerts_test.yaml").read_text(encoding="utf-8"))["tests"]
    firing, silent = set(), set()
    for test in tests:
        for case in test.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else silent).add(case["alertname"])
    assert alerts - firing == set(), "alerts never asserted firing"
    assert alerts - silent == set(), "alerts never asserted silent"
    assert (firing | silent) - alerts == set(), "tests name alerts that do not exist"


def test_unit_tests_fail_when_a_threshold_is_broken(promtool: str, tmp_path: Path) -> None:
    """The promtool tests can fail: with the utilization threshold moved from 0.5 to 0.95 the steady-0.9
    case must report the alert firing (only that case is run, to keep this fast)."""
    unit_tests = yaml.safe_load((DEPLOY / "alerts_test.yaml").read_text(encoding="utf-8"))
    unit_tests["tests"] = [t for t in unit_tests["tests"] if t["name"].startswith("steady utilization 0.9")]
    assert len(unit_tests["tests"]) == 1
    (tmp_path / "alerts_test.yaml").write_text(yaml.safe_dump(unit_tests), encoding="utf-8")
    rules = (DEPLOY / "alerts.yaml").read_text(encoding="utf-8")
    broken = rules.replace(
        "ctxutil:utilization:ratio_rate30m < 0.5", "ctxutil:utilization:ratio_rate30m < 0.95"
    )
    assert broken != rules
    (tmp_path / "alerts.yaml").write_text(broken, encoding="utf-8")
    result = _run(promtool, "test", "rules", "alerts_test.yaml", cwd=tmp_path)
    assert result.returncode != 0
    assert "alertname: CtxutilUtilizationLow" in result.stdout + result.stderr


def test_every_alert_has_for_severity_summary_and_runbook() -> None:
    for rule in rule_expressions():
        if "alert" not in rule:
            continue
        name = rule["alert"]
        assert rule.get("for"), f"{name}: no `for:`"
        assert rule.get("labels", {}).get("severity") in {"critical", "warning", "info"}, name
        annotations = rule.get("annotations", {})
        for key in ("summary", "description", "runbook"):
            assert annotations.get(key, "").strip(), f"{name}: no {key} annotation"


# ------------------------------------------------------------------------------------------------------------
# Dimensions (issue 12): the utilization rules group by the slice, and the documented recipe adds one.
# ------------------------------------------------------------------------------------------------------------
SENDER_LABELS = (
    "job",
    "ctxutil_evaluated_service_namespace",
    "ctxutil_evaluated_service_name",
    "ctxutil_evaluated_deployment_environment_name",
    "ctxutil_application_name",
)
DIMENSION_LABELS = (
    "gen_ai_request_model",
    "gen_ai_provider_name",
    "ctxutil_chain_name",
    "ctxutil_retriever_name",
    "ctxutil_metadata_prompt_version",
)
SLICE = (*SENDER_LABELS, "gen_ai_evaluation_name", *DIMENSION_LABELS)


def _by_clauses(expr: str) -> list[tuple[str, ...]]:
    tokens = tokenize(expr)
    clauses = []
    for k, tok in enumerate(tokens):
        if tok.kind == "ident" and tok.text == "by" and tokens[k + 1].kind == "(":
            close = next(j for j in range(k + 2, len(tokens)) if tokens[j].kind == ")")
            clauses.append(tuple(t.text for t in tokens[k + 2 : close] if t.kind == "ident"))
    return clauses


def _slice_rules(path: Path = DEPLOY / "alerts.yaml") -> list[dict[str, str]]:
    """Rules over the utilization and relevancy series: the utilization group, and the alerts reading it."""
    rules = rule_expressions(path)
    recorded = {rule["record"] for rule in rules if rule["group"] == "ctxutil-otel.utilization"}
    return [
        rule
        for rule in rules
        if rule["group"] == "ctxutil-otel.utilization" or metric_names(rule["expr"]) & recorded
    ]


def test_utilization_rules_group_by_every_dimension_in_one_order() -> None:
    """Every ``by (...)`` over utilization series is the whole slice (sender, evaluation name, dimensions),
    in one order ending with ctxutil_metadata_prompt_version (the documented recipe appends after it), so
    no rule pools two models or prompt versions that an alert should tell apart; the only exception is the
    service level (sender and evaluation name) that CtxutilUtilizationDropped falls back to, in recordings
    named ``ctxutil:service_*`` and in that alert."""
    service = (*SENDER_LABELS, "gen_ai_evaluation_name")
    slices = service_level = 0
    for rule in _slice_rules():
        name = rule.get("record") or rule["alert"]
        for clause in _by_clauses(rule["expr"]):
            label = "gen_ai_evaluation_score_label"
            extra = (label,) if clause[0] == label else ()
            if clause == service:
                service_level += 1
                assert name.startswith("ctxutil:service_") or name == "CtxutilUtilizationDropped", name
            else:
                slices += 1
                assert clause == (*extra, *SLICE), name
    assert slices >= 15 and service_level >= 4


def test_documented_recipe_adds_a_dimension(promtool: str, tmp_path: Path) -> None:
    """The `sed` line in alerts.yaml's header (also in docs/deploy.md) appends a user dimension to every
    slice; the result is a valid rule file whose utilization recordings and alerts group by it."""
    rules = (DEPLOY / "alerts.yaml").read_text(encoding="utf-8")
    match = re.search(r"sed -i 's/([^/]+)/([^/]+)/g' deploy/alerts\.yaml", rules)
    assert match is not None
    assert match.group(0) in (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "alerts.yaml").write_text(rules, encoding="utf-8")
    # The documented command as written (GNU sed, as on the Debian/Ubuntu hosts the stack runs on).
    subprocess.run(["sh", "-c", match.group(0)], cwd=tmp_path, check=True, timeout=30)
    extended = (tmp_path / "deploy" / "alerts.yaml").read_text(encoding="utf-8")
    assert extended != rules
    (tmp_path / "alerts.yaml").write_text(extended, encoding="utf-8")
    result = _run(promtool, "check", "rules", "alerts.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    clauses = [c for rule in _slice_rules(tmp_path / "alerts.yaml") for c in _by_clauses(rule["expr"])]
    sliced = [c for c in clauses if "ctxutil_metadata_prompt_version" in c]
    assert len(sliced) >= 15 and all(c[-1] == "ctxutil_metadata_tenant" for c in sliced)
