"""The reference pages say what the code has, both ways.

* docs/settings.md: one row per ``Settings`` field, with its variable and its default, and no other row.
* docs/telemetry.md: every span, event, attribute and metric name is a constant of
  ``ctxutil_otel.emit.names`` and every such constant is on the page; every instrument the ``Emitter``
  creates has a row with its kind, unit and Prometheus series, and no row names an instrument it lacks; the
  accounting outcomes and drop reasons are the code's.

The instruments are read from what the ``Emitter`` asks the OpenTelemetry Metrics API for, through a
recording ``MeterProvider`` (a test double on the API's no-op meter): the SDK creates an instrument's
stream only once it has data, and this check must see every instrument without feeding it. That the same
names come out of the real SDK and Prometheus exporter is checked by tests/emit/test_prometheus_names.py.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from opentelemetry.metrics import Meter, NoOpMeter, NoOpMeterProvider

from ctxutil_otel import Settings
from ctxutil_otel.emit import Emitter
from ctxutil_otel.emit import names as n
from ctxutil_otel.worker import DropReason, Outcome

DOCS = Path(__file__).resolve().parents[1] / "docs"

# --- reading markdown tables ------------------------------------------------------------------------


def table(page: Path, header: list[str]) -> list[dict[str, str]]:
    """The rows of the table in ``page`` whose header cells are ``header`` (cells stripped)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    for at, line in enumerate(lines):
        if _cells(line) == header:
            rows = []
            for row in lines[at + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append(dict(zip(header, _cells(row), strict=True)))
            return rows
    raise AssertionError(f"{page.name}: no table with header {header}")


def _cells(line: str) -> list[str]:
    if not line.startswith("|"):
        return []
    # split on pipes that are not escaped (``\\|`` inside a cell)
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def code_spans(cell: str) -> list[str]:
    """The backticked tokens of a cell, in order."""
    return re.findall(r"`([^`]+)`", cell)


# --- settings ---------------------------------------------------------------------------------------

SETTINGS_PAGE = DOCS / "settings.md"
SETTINGS_HEADER = ["setting", "variable", "default", "meaning"]


def documented_settings(page: Path = SETTINGS_PAGE) -> dict[str, dict[str, str]]:
    rows = table(page, SETTINGS_HEADER)
    found: dict[str, dict[str, str]] = {}
    for row in rows:
        (name,) = code_spans(row["setting"])
        assert name not in found, f"{page.name}: {name} has two rows"
        found[name] = row
    return found


def _default_as_documented(value: Any) -> str:
    """How docs/settings.md writes a default: ``unset`` for None, ``false``/``true``, the enum's value,
    numbers without a trailing ``.0`` unless the field is a ratio written with one."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, (tuple, list)):  # a list setting: its items comma-separated, as in the variable
        return ",".join(map(str, value))
    return str(value)


def _same_default(documented: str, value: Any) -> bool:
    text = documented.strip().strip("`")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(text) == float(value)
        except ValueError:
            return False
    return text == _default_as_documented(value)


def settings_problems(page: Path = SETTINGS_PAGE) -> list[str]:
    documented = documented_settings(page)
    fields = Settings.model_fields
    prefix = str(Settings.model_config.get("env_prefix", ""))
    problems = [f"{name}: a Settings field with no row" for name in fields if name not in documented]
    problems += [f"{name}: a row for no Settings field" for name in documented if name not in fields]
    for name, row in documented.items():
        if name not in fields:
            continue
        variable = code_spans(row["variable"])
        if variable != [f"{prefix}{name.upper()}"]:
            problems.append(f"{name}: variable {row['variable']} (the code reads {prefix}{name.upper()})")
        default = fields[name].default
        if not _same_default(row["default"], default):
            problems.append(f"{name}: default {row['default']!r} (the code has {default!r})")
    return problems


def test_the_settings_table_is_the_settings_model() -> None:
    assert settings_problems() == []


def test_the_settings_check_fails_when_a_row_is_removed(tmp_path: Path) -> None:
    text = SETTINGS_PAGE.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `max_queue_size`"))
    page = tmp_path / "settings.md"
    page.write_text(text.replace(row + "\n", ""), encoding="utf-8")
    assert settings_problems(page) == ["max_queue_size: a Settings field with no row"]


def test_the_settings_check_fails_on_a_wrong_default_or_variable(tmp_path: Path) -> None:
    text = SETTINGS_PAGE.read_text(encoding="utf-8")
    page = tmp_path / "settings.md"
    page.write_text(
        text.replace("| `CTXUTIL_MAX_QUEUE_SIZE` | 2048 |", "| `CTXUTIL_QUEUE_SIZE` | 1024 |"),
        encoding="utf-8",
    )
    assert settings_problems(page) == [
        "max_queue_size: variable `CTXUTIL_QUEUE_SIZE` (the code reads CTXUTIL_MAX_QUEUE_SIZE)",
        "max_queue_size: default '1024' (the code has 2048)",
    ]


# --- telemetry --------------------------------------------------------------------------------------

TELEMETRY_PAGE = DOCS / "telemetry.md"
NAME_TABLE = ["name", "what"]
ATTRIBUTE_TABLE = ["attribute", "type", "when"]
METRIC_TABLE = ["instrument", "kind", "unit", "Prometheus series", "attributes"]
CHUNK_FIELDS = sorted(
    value for name, value in vars(n).items() if name.startswith("CHUNK_") and isinstance(value, str)
)
"""The per-chunk fields (``ctxutil.chunks.{i}.<field>``): every ``CHUNK_*`` constant."""


def code_names() -> set[str]:
    """Every telemetry name the code defines: span, event, attribute and metric constants, and the
    per-chunk attributes written ``ctxutil.chunks.{i}.<field>``."""
    names = {
        value
        for constant, value in vars(n).items()
        if constant.startswith(("SPAN_", "EVENT_", "ATTR_", "METRIC_")) and isinstance(value, str)
    }
    names.discard(n.ATTR_CHUNK_PREFIX)  # a prefix, documented through the per-chunk names
    names |= {n.chunk_attribute("{i}", field) for field in CHUNK_FIELDS}  # type: ignore[arg-type]
    return names


def documented_names(page: Path = TELEMETRY_PAGE) -> tuple[set[str], set[str]]:
    """(names in the first column of the name, attribute and metric tables; dotted or bare attribute
    names used in the metric table's attributes column)."""
    first = set()
    for header in (NAME_TABLE, ATTRIBUTE_TABLE, METRIC_TABLE):
        for row in table(page, header):
            (name,) = code_spans(row[header[0]])
            first.add(name)
    labels = set()
    for row in table(page, METRIC_TABLE):
        cell = re.sub(r"\([^)]*\)", "", row["attributes"])  # values in parentheses are not names
        labels |= {
            token for token in code_spans(cell) if "." in token or token in {n.ATTR_OUTCOME, n.ATTR_REASON}
        }
    return first, labels


def telemetry_name_problems(page: Path = TELEMETRY_PAGE) -> list[str]:
    code = code_names()
    first, labels = documented_names(page)
    documented = first | labels
    problems = [f"{name}: in the code, not on the page" for name in sorted(code - documented)]
    problems += [f"{name}: on the page, not in the code" for name in sorted(documented - code)]
    return problems


class _RecordingMeter(NoOpMeter):
    """The API's no-op meter, recording ``(name, kind, unit)`` of each instrument asked for."""

    def __init__(self, name: str, created: list[tuple[str, str, str]]) -> None:
        super().__init__(name)
        self.created = created

    def _record(self, kind: str, name: str, unit: str) -> None:
        self.created.append((name, kind, unit))

    def create_counter(self, name: str, unit: str = "", description: str = "") -> Any:
        self._record("counter", name, unit)
        return super().create_counter(name, unit, description)

    def create_up_down_counter(self, name: str, unit: str = "", description: str = "") -> Any:
        self._record("up-down counter", name, unit)
        return super().create_up_down_counter(name, unit, description)

    def create_histogram(self, name: str, unit: str = "", description: str = "", **kwargs: Any) -> Any:
        self._record("histogram", name, unit)
        return super().create_histogram(name, unit, description, **kwargs)

    def create_gauge(self, name: str, unit: str = "", description: str = "") -> Any:
        self._record("gauge", name, unit)
        return super().create_gauge(name, unit, description)

    def create_observable_counter(
        self, name: str, callbacks: Any = None, unit: str = "", description: str = ""
    ) -> Any:
        self._record("observable counter", name, unit)
        return super().create_observable_counter(name, callbacks, unit, description)

    def create_observable_gauge(
        self, name: str, callbacks: Any = None, unit: str = "", description: str = ""
    ) -> Any:
        self._record("observable gauge", name, unit)
        return super().create_observable_gauge(name, callbacks, unit, description)

    def create_observable_up_down_counter(
        self, name: str, callbacks: Any = None, unit: str = "", description: str = ""
    ) -> Any:
        self._record("observable up-down counter", name, unit)
        return super().create_observable_up_down_counter(name, callbacks, unit, description)


class _RecordingMeterProvider(NoOpMeterProvider):
    def __init__(self) -> None:
        self.created: list[tuple[str, str, str]] = []

    def get_meter(self, name: str, *args: Any, **kwargs: Any) -> Meter:
        return _RecordingMeter(name, self.created)


@pytest.fixture(scope="module")
def instruments() -> Iterator[dict[str, tuple[str, str]]]:
    """``{name: (kind, unit)}`` of every instrument an Emitter creates, observables included."""
    provider = _RecordingMeterProvider()
    emitter = Emitter(meter_provider=provider)
    emitter.observe(lambda: {}, lambda: 0, lambda: 0.0)
    found = {name: (kind, unit) for name, kind, unit in provider.created}
    assert len(found) == len(provider.created), f"an instrument created twice: {provider.created}"
    yield found


def metric_rows(page: Path = TELEMETRY_PAGE) -> dict[str, dict[str, str]]:
    return {code_spans(row["instrument"])[0]: row for row in table(page, METRIC_TABLE)}


def metric_problems(instruments: dict[str, tuple[str, str]], page: Path = TELEMETRY_PAGE) -> list[str]:
    rows = metric_rows(page)
    problems = [f"{name}: created by the Emitter, no row" for name in sorted(set(instruments) - set(rows))]
    problems += [
        f"{name}: a row, not created by the Emitter" for name in sorted(set(rows) - set(instruments))
    ]
    for name in sorted(set(rows) & set(instruments)):
        kind, unit = instruments[name]
        row = rows[name]
        if row["kind"] != kind:
            problems.append(f"{name}: kind {row['kind']!r} (the Emitter creates a {kind})")
        if code_spans(row["unit"]) != [unit]:
            problems.append(f"{name}: unit {row['unit']!r} (the Emitter's is {unit!r})")
        series = code_spans(row["Prometheus series"])
        if series != list(n.PROMETHEUS_NAMES.get(name, ())):
            problems.append(
                f"{name}: Prometheus series {series} (PROMETHEUS_NAMES: {n.PROMETHEUS_NAMES.get(name)})"
            )
    return problems


def test_every_telemetry_name_is_documented_and_every_documented_name_exists() -> None:
    assert telemetry_name_problems() == []


def test_the_metric_table_is_the_emitters_instruments(instruments: dict[str, tuple[str, str]]) -> None:
    assert metric_problems(instruments) == []


def test_every_metric_constant_is_an_instrument_of_the_emitter(
    instruments: dict[str, tuple[str, str]],
) -> None:
    constants = {value for name, value in vars(n).items() if name.startswith("METRIC_")}
    assert constants == set(instruments)
    assert set(n.PROMETHEUS_NAMES) == set(instruments)


def test_the_telemetry_checks_fail_when_a_row_is_removed(
    tmp_path: Path, instruments: dict[str, tuple[str, str]]
) -> None:
    lines = TELEMETRY_PAGE.read_text(encoding="utf-8").splitlines(keepends=True)
    page = tmp_path / "telemetry.md"
    page.write_text("".join(line for line in lines if not line.startswith("| `ctxutil.queue.size`")))
    assert metric_problems(instruments, page) == ["ctxutil.queue.size: created by the Emitter, no row"]
    assert telemetry_name_problems(page) == ["ctxutil.queue.size: in the code, not on the page"]
    page.write_text("".join(line for line in lines if not line.startswith("| `ctxutil.threshold`")))
    assert telemetry_name_problems(page) == ["ctxutil.threshold: in the code, not on the page"]


def test_the_instrumentation_scope_is_documented() -> None:
    assert f"`{n.INSTRUMENTATION_SCOPE}`" in TELEMETRY_PAGE.read_text(encoding="utf-8")


REASON_TABLE = ["reason", "when"]


def documented_outcomes(page: Path = TELEMETRY_PAGE) -> set[str]:
    """The outcomes listed by the sentence "Every captured interaction ends in exactly one outcome, ...",
    parenthesised remarks left out."""
    text = page.read_text(encoding="utf-8")
    start = text.index("Every captured interaction ends in exactly one outcome")
    sentence = text[start : text.index(".\n", start)]
    return set(code_spans(re.sub(r"\([^)]*\)", "", sentence)))


def test_the_documented_outcomes_and_drop_reasons_are_the_codes() -> None:
    """The accounting section names every ``Outcome`` and ``DropReason`` (a row each), nothing else."""
    assert documented_outcomes() == set(get_args(Outcome))
    reasons = [code_spans(row["reason"])[0] for row in table(TELEMETRY_PAGE, REASON_TABLE)]
    assert sorted(reasons) == sorted(get_args(DropReason))


def test_llm_judge_page_names_the_judge_token_attributes_the_emitter_sets() -> None:
    """docs/llm-judge.md once said a failed evaluation's judge tokens were on ``gen_ai.usage.*`` (the
    application's own model calls); they are the emitter's ``ctxutil.judge.usage.*`` (issue 23 item 7)."""
    text = (DOCS / "llm-judge.md").read_text(encoding="utf-8")
    paragraph = text[text.index("Tokens spent on a failed evaluation") :].split("\n\n")[0]
    named = set(re.findall(r"`(ctxutil\.judge\.usage\.[a-z_]+)`", paragraph))
    assert named == {n.ATTR_JUDGE_INPUT_TOKENS, n.ATTR_JUDGE_OUTPUT_TOKENS}, paragraph
