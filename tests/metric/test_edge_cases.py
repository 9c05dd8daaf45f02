"""Every edge case DESIGN.md decides, and bad inputs, each with its decided result or a clear error."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pytest
from langchain_core.documents import Document
from pydantic import ValidationError

from ctxutil_otel import (
    ContextualUtilization,
    DatasetItem,
    EvaluationMode,
    LexicalJudge,
    MetricRunner,
    SettingsError,
)
from ctxutil_otel.judges import ChunkVerdict, JudgeError, JudgeResult

from .conftest import ScriptedJudge


def item(chunks: Sequence[object], answer: str = "an answer", query: str = "q?") -> DatasetItem:
    return DatasetItem(query=query, actual_output=answer, retrieved_content=list(chunks))


async def test_no_chunks_is_not_applicable_and_judge_not_called() -> None:
    judge = ScriptedJudge()
    result = await ContextualUtilization(judge=judge).execute(item([]))
    assert (result.score, result.passed, result.label) == (None, None, "not_applicable")
    assert result.signals.utilization_rate == "n/a"
    assert judge.calls == []


async def test_no_relevant_chunk_is_not_applicable_never_a_fake_score() -> None:
    result = await ContextualUtilization(judge=ScriptedJudge({"a": "", "b": "U"})).execute(item(["a", "b"]))
    assert (result.score, result.label) == (None, "not_applicable")
    assert result.signals.total_relevant_chunks == 0
    assert result.signals.chunk_breakdown == []
    assert len(result.signals.verdicts) == 2


async def test_empty_answer_with_relevant_chunks_scores_zero() -> None:
    result = await ContextualUtilization(judge=ScriptedJudge({"a": "RU", "b": "RU"})).execute(
        item(["a", "b"], answer="   ")
    )
    assert result.score == 0.0
    assert result.label == "fail"
    assert all(not c.is_utilized for c in result.signals.chunk_breakdown)
    assert result.signals.chunk_breakdown[0].reason == "the answer is empty"


async def test_identical_chunks_are_judged_once_and_counted_once() -> None:
    judge = ScriptedJudge({"Tea is green.": "RU", "Tea is  old.": "R"})
    result = await ContextualUtilization(judge=judge).execute(
        item(["Tea is green.", "  Tea is\ngreen. ", "Tea is  old.", "Tea is old."])
    )
    assert judge.calls[0][2] == ["Tea is green.", "Tea is  old."]
    assert (result.signals.utilized_chunks, result.signals.total_relevant_chunks) == (1, 2)
    assert result.signals.total_chunks == 4
    dups = [(v.index, v.duplicate_of) for v in result.signals.verdicts if v.duplicate_of is not None]
    assert dups == [(1, 0), (3, 2)]
    assert [b.index for b in result.signals.chunk_breakdown] == [0, 2]


async def test_utilized_on_an_irrelevant_chunk_is_ignored() -> None:
    result = await ContextualUtilization(judge=ScriptedJudge({"a": "RU", "b": "U"})).execute(item(["a", "b"]))
    assert result.score == 1.0
    assert result.signals.verdicts[1].is_utilized is False


@pytest.mark.parametrize(
    ("indices", "word"),
    [([0], "missing=[1]"), ([0, 1, 1], "duplicate=[1]"), ([0, 1, 2], "out_of_range=[2]")],
)
async def test_verdicts_that_do_not_match_one_to_one_are_an_error_never_zipped(
    indices: list[int], word: str
) -> None:
    verdicts = [ChunkVerdict(index=i, is_relevant=True, is_utilized=True) for i in indices]
    result = await ContextualUtilization(judge=ScriptedJudge(verdicts=verdicts)).execute(item(["a", "b"]))
    assert (result.score, result.passed, result.label) == (None, None, "error")
    assert result.error_type == "verdict_mismatch"
    assert result.error_message is not None and word in result.error_message


async def test_verdicts_out_of_order_are_paired_by_index() -> None:
    verdicts = [
        ChunkVerdict(index=1, is_relevant=True, is_utilized=False),
        ChunkVerdict(index=0, is_relevant=True, is_utilized=True),
    ]
    result = await ContextualUtilization(judge=ScriptedJudge(verdicts=verdicts)).execute(item(["a", "b"]))
    assert [(b.index, b.is_utilized) for b in result.signals.chunk_breakdown] == [(0, True), (1, False)]


class _Raising:
    name = "raising"
    model = "m"

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        raise self.exc


class _CustomJudgeError(JudgeError):
    error_type = "custom"


@pytest.mark.parametrize(
    ("exc", "error_type"), [(_CustomJudgeError("boom"), "custom"), (RuntimeError("oops"), "_OTHER")]
)
async def test_judge_failure_is_an_error_outcome_never_a_score(exc: Exception, error_type: str) -> None:
    # An exception that is no JudgeError is error.type _OTHER (the vocabulary stays closed); its class
    # name stays in the local error_message.
    result = await ContextualUtilization(judge=_Raising(exc)).execute(item(["a"]))
    assert (result.score, result.label, result.error_type) == (None, "error", error_type)
    assert type(exc).__name__ in (result.error_message or "") or error_type == "custom"
    assert result.judge_name == "raising" and result.judge_model == "m"


async def test_cancellation_propagates() -> None:
    with pytest.raises(asyncio.CancelledError):
        await ContextualUtilization(judge=_Raising(asyncio.CancelledError())).execute(item(["a"]))


@pytest.mark.parametrize(
    ("threshold", "label"), [(0.0, "pass"), (0.5, "fail"), (0.25, "pass"), (1.0, "fail")]
)
async def test_threshold_including_zero_is_honoured(threshold: float, label: str) -> None:
    judge = ScriptedJudge({"a": "RU", "b": "R", "c": "R", "d": "R"})
    result = await ContextualUtilization(judge=judge, threshold=threshold).execute(item(["a", "b", "c", "d"]))
    assert result.score == 0.25
    assert result.label == label and result.threshold == threshold


async def test_zero_score_passes_at_threshold_zero() -> None:
    result = await ContextualUtilization(judge=ScriptedJudge({"a": "R"}), threshold=0.0).execute(item(["a"]))
    assert (result.score, result.passed, result.label) == (0.0, True, "pass")


@pytest.mark.parametrize("threshold", [-0.1, 1.5, float("nan"), True, "0.5"])
def test_bad_threshold_is_a_clear_error(threshold: object) -> None:
    with pytest.raises(ValueError, match="threshold"):
        ContextualUtilization(threshold=threshold)  # type: ignore[arg-type]


async def test_fast_mode_asks_for_no_reasons_and_keeps_the_score() -> None:
    script = {"a": "RU", "b": "R"}
    granular_judge, fast_judge = ScriptedJudge(script), ScriptedJudge(script)
    granular = await ContextualUtilization(judge=granular_judge).execute(item(["a", "b"]))
    fast = await ContextualUtilization(judge=fast_judge, mode=EvaluationMode.FAST).execute(item(["a", "b"]))
    assert granular_judge.calls[0][3] is True and fast_judge.calls[0][3] is False
    assert granular.score == fast.score == 0.5
    assert all(c.reason for c in granular.signals.chunk_breakdown)
    assert all(c.reason == "" for c in fast.signals.chunk_breakdown)


# --- inputs -------------------------------------------------------------------------------------------------


def test_chunk_types_accepted() -> None:
    it = item(
        ["plain", Document(page_content="doc"), {"page_content": "pc"}, {"content": "c"}, {"text": "t"}]
    )
    assert it.retrieved_content == ["plain", "doc", "pc", "c", "t"]


@pytest.mark.parametrize(
    ("chunk", "needle"),
    [
        (None, "retrieved_content[1]"),
        (42, "got int"),
        ({"body": "x"}, "retrieved_content[1]"),
        (b"x", "bytes"),
    ],
)
def test_bad_chunk_names_the_field_and_index(chunk: object, needle: str) -> None:
    with pytest.raises(ValidationError) as info:
        item(["ok", chunk])
    assert "retrieved_content" in str(info.value)
    assert needle in str(info.value)


@pytest.mark.parametrize("query", ["", "   \n"])
def test_blank_query_is_a_validation_error_naming_query(query: str) -> None:
    with pytest.raises(ValidationError, match="query"):
        item(["a"], query=query)


def test_missing_query_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="query"):
        DatasetItem.model_validate({"actual_output": "a", "retrieved_content": []})


def test_retrieved_content_must_be_a_list_not_a_string() -> None:
    with pytest.raises(ValidationError, match="retrieved_content"):
        DatasetItem(query="q", actual_output="a", retrieved_content="one chunk")  # type: ignore[arg-type]


async def test_ten_thousand_chunks_with_the_lexical_judge() -> None:
    chunks = [f"chunk number {i} about topic {i % 7}" for i in range(10_000)]
    result = await ContextualUtilization().execute(
        item(chunks, query="topic 3", answer="chunk number 10 about topic 3")
    )
    assert result.signals.total_chunks == 10_000
    assert len(result.signals.verdicts) == 10_000
    assert result.label in {"pass", "fail", "not_applicable"}


async def test_one_megabyte_chunk_with_the_lexical_judge() -> None:
    big = "antioxidants in green tea " * 40_000
    result = await ContextualUtilization().execute(
        item([big, "unrelated"], query="green tea antioxidants", answer="green tea has antioxidants")
    )
    assert len(result.signals.verdicts) == 2
    assert result.signals.verdicts[0].is_relevant


@pytest.mark.parametrize(
    "text",
    ["绿茶含有抗氧化剂。", "الشاي الأخضر يحتوي على مضادات الأكسدة", "green tea 🍵 has antioxidants 💪"],
)
async def test_emoji_cjk_rtl_text_is_evaluated(text: str) -> None:
    result = await ContextualUtilization().execute(item([text, "other"], query=text, answer=text))
    assert result.label != "error"
    assert result.signals.chunk_breakdown[0].chunk_text == text


async def test_model_dump_is_json_serialisable() -> None:
    import json

    result = await ContextualUtilization(judge=ScriptedJudge({"a": "RU"})).execute(item(["a"]))
    assert json.loads(json.dumps(result.model_dump()))["signals"]["utilized_chunks"] == 1


async def test_runner_keeps_order_and_isolates_failures() -> None:
    data: list[object] = [
        {"query": "green tea", "actual_output": "green tea", "retrieved_content": ["green tea"], "id": "a"},
        {"query": "", "actual_output": "x", "retrieved_content": []},
        DatasetItem(query="tea", actual_output="", retrieved_content=["tea"], id="c"),
    ]
    results = await MetricRunner([ContextualUtilization(judge=LexicalJudge())], max_concurrency=2).run(data)  # type: ignore[arg-type]
    assert [r.item_id for r in results] == ["a", None, "c"]
    assert results[1].label == "error" and results[1].error_type == "invalid_input"
    assert results[0].label == "pass" and results[2].score == 0.0


def test_runner_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="metrics"):
        MetricRunner([])
    with pytest.raises(ValueError, match="max_concurrency"):
        MetricRunner([ContextualUtilization()], max_concurrency=0)


@pytest.mark.parametrize("name", ["semantic", "learned", "lexical", "openai"])
async def test_a_judge_name_builds_the_judge_the_judge_setting_builds(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ContextualUtilization(judge="lexical") was taken and then every result was label=error ("Judge
    # str failed (_OTHER)"). A name is resolved as the judge setting resolves it, the other judge_*
    # settings read from CTXUTIL_* as everywhere.
    monkeypatch.setenv("CTXUTIL_JUDGE_MODEL", "judge-model")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    metric = ContextualUtilization(judge=name)  # type: ignore[arg-type]
    assert metric.judge.name == name
    if name == "openai":
        assert metric.judge.model == "judge-model"
        return
    result = await metric.execute(
        item(
            ["Green tea contains antioxidants."], query="What does green tea contain?", answer="Antioxidants."
        )
    )
    assert result.label != "error", result.explanation


@pytest.mark.parametrize(
    ("judge", "error", "named"),
    [
        ("gpt-4o", SettingsError, "judge"),  # a model name is not a judge name
        (5, TypeError, "got int"),
        (LexicalJudge, TypeError, "got the class LexicalJudge"),  # the class, not an instance
    ],
)
def test_anything_else_is_refused_at_construction_naming_judge(
    judge: object, error: type[Exception], named: str
) -> None:
    with pytest.raises(error) as caught:
        ContextualUtilization(judge=judge)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "judge" in message and named in message
    if error is TypeError:
        assert "'semantic', 'learned', 'lexical', 'openai'" in message


@pytest.mark.parametrize("judge", ["learned", None])
def test_an_invalid_setting_the_metric_does_not_read_does_not_stop_it(
    judge: str | None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # ContextualUtilization(judge="learned") raised SettingsError for CTXUTIL_SAMPLE_RATE=abc: it resolved
    # every setting, though it reads only the judge's. Another setting's invalid variable is warned about,
    # naming it, and the metric is built.
    monkeypatch.setenv("CTXUTIL_SAMPLE_RATE", "abc")
    monkeypatch.setenv("CTXUTIL_MAX_QUEUE_SIZE", "-5")
    monkeypatch.setenv("CTXUTIL_JUDGE", "learned")  # what judge=None builds
    with caplog.at_level(logging.WARNING, logger="ctxutil_otel"):
        metric = ContextualUtilization(judge=judge)  # type: ignore[arg-type]
    assert metric.judge.name == "learned"
    (record,) = [r for r in caplog.records if "CTXUTIL_SAMPLE_RATE" in r.getMessage()]
    assert record.levelno == logging.WARNING and "CTXUTIL_MAX_QUEUE_SIZE" in record.getMessage()


@pytest.mark.parametrize(
    ("judge", "variable", "value"),
    [
        ("openai", "CTXUTIL_JUDGE_TIMEOUT_S", "abc"),
        ("learned", "CTXUTIL_JUDGE_RESPONSE_FORMAT", "xml"),
        (None, "CTXUTIL_JUDGE", "gpt-4o"),
    ],
)
def test_an_invalid_judge_setting_still_raises_naming_it(
    judge: str | None, variable: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXUTIL_SAMPLE_RATE", "abc")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as caught:
        ContextualUtilization(judge=judge)  # type: ignore[arg-type]
    assert variable in str(caught.value)
    assert "CTXUTIL_SAMPLE_RATE" not in str(caught.value)  # not the metric's: not its error either
