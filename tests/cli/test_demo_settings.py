"""The settings ``demo`` builds: its defaults while the variables are unset, the user's values otherwise.

tests/conftest.py sets ``CTXUTIL_MAX_WORKER_CPU_FRACTION=0`` for the whole suite, so the default case
deletes it first.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctxutil_otel import Settings
from ctxutil_otel.cli import build_parser
from ctxutil_otel.cli._demo import _settings
from ctxutil_otel.worker import Evaluator

from ..support.env import WORKER_CPU_ENV, environ_without_settings


def _demo_settings(*argv: str) -> Settings:
    return _settings(build_parser().parse_args(["demo", *argv]))


def test_worker_cpu_budget_is_off_by_default_in_the_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKER_CPU_ENV)
    assert Settings().max_worker_cpu_fraction == 0.03  # the library default the demo overrides
    settings = _demo_settings()
    assert settings.max_worker_cpu_fraction == 0
    evaluator = Evaluator(settings=settings)
    try:
        assert evaluator.settings.max_worker_cpu_fraction == 0
    finally:
        evaluator.shutdown(1000)


@pytest.mark.parametrize("value", ["0.2", "0.05"])
def test_users_worker_cpu_budget_is_respected(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(WORKER_CPU_ENV, value)
    assert _demo_settings().max_worker_cpu_fraction == float(value)


def test_other_demo_defaults_yield_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CTXUTIL_MAX_EVALUATIONS_PER_SECOND", "CTXUTIL_APPLICATION_NAME"):
        monkeypatch.delenv(name, raising=False)
    settings = _demo_settings("--sample-rate", "0.5")
    assert (settings.max_evaluations_per_second, settings.application_name) == (0, "ctxutil-demo")
    assert settings.sample_rate == 0.5
    monkeypatch.setenv("CTXUTIL_MAX_EVALUATIONS_PER_SECOND", "3")
    monkeypatch.setenv("CTXUTIL_APPLICATION_NAME", "bot")
    settings = _demo_settings()
    assert (settings.max_evaluations_per_second, settings.application_name) == (3, "bot")


@pytest.mark.parametrize("command", ["demo", "evaluate", "bench"])
def test_the_judge_option_help_names_the_default_judge(command: str) -> None:
    # demo --help said "default: CTXUTIL_JUDGE or learned" while the default judge is semantic (learned
    # only without the extra).
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")  # argparse keeps them private
    (judge,) = [a for a in subparsers.choices[command]._actions if a.dest == "judge"]  # type: ignore[attr-defined]
    default = Settings.model_fields["judge"].default
    assert default == "semantic"
    text = judge.help or ""
    assert f"else {default}" in text and "CTXUTIL_JUDGE" in text, text
    assert "or learned" not in text


@pytest.mark.parametrize(("argv", "env"), [(["--judge", "openai"], {}), ([], {"CTXUTIL_JUDGE": "openai"})])
def test_the_openai_judge_without_a_key_is_a_one_line_error(argv: list[str], env: dict[str, str]) -> None:
    # demo printed a raw traceback ending "ValueError: api_key: none given ..." where evaluate, bench and
    # serve print "error: api_key: ..." and exit 2.
    base = environ_without_settings("OPENAI_")
    proc = subprocess.run(
        [sys.executable, "-m", "ctxutil_otel", "demo", "--limit", "1", *argv],
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: api_key: none given and OPENAI_API_KEY is not set"), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
