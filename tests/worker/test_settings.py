from __future__ import annotations

import enum
import typing

import pytest

from ctxutil_otel._settings import Settings, SettingsError, env_var
from ctxutil_otel.judges import LearnedJudge, LexicalJudge, SemanticJudge
from ctxutil_otel.judges._from_settings import build_judge
from ctxutil_otel.metric import EvaluationMode

from .conftest import MakeEvaluator


def test_defaults() -> None:
    s = Settings()
    assert (s.sample_rate, s.judge, s.judge_model, s.judge_base_url, s.judge_api_key) == (
        1.0,
        "semantic",
        None,
        None,
        None,
    )
    assert (s.max_queue_size, s.max_concurrency, s.evaluation_timeout_s) == (2048, 8, 60.0)
    assert (s.max_evaluations_per_second, s.judge_token_budget_per_minute) == (10.0, None)
    assert (s.threshold, s.mode, s.capture_content, s.application_name) == (
        0.5,
        EvaluationMode.GRANULAR,
        False,
        None,
    )
    assert (s.run_ttl_s, s.max_pending_runs, s.shutdown_timeout_s, s.max_content_chars) == (
        300.0,
        10_000,
        5.0,
        1000,
    )


def test_every_setting_is_documented_with_its_env_var() -> None:
    for name, field in Settings.model_fields.items():
        assert field.description and env_var(name) in field.description, name


def test_environment_beats_default_and_argument_beats_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXUTIL_SAMPLE_RATE", "0.25")
    monkeypatch.setenv("ctxutil_max_queue_size", "64")  # names are case-insensitive
    monkeypatch.setenv("CTXUTIL_JUDGE", "OpenAI")
    monkeypatch.setenv("CTXUTIL_MODE", "FAST")
    monkeypatch.setenv("CTXUTIL_APPLICATION_NAME", "shop-rag")
    s = Settings()
    assert (s.sample_rate, s.max_queue_size, s.judge, s.mode, s.application_name) == (
        0.25,
        64,
        "openai",
        EvaluationMode.FAST,
        "shop-rag",
    )
    s = Settings(sample_rate=0.75, judge="lexical")
    assert (s.sample_rate, s.judge, s.max_queue_size) == (0.75, "lexical", 64)


def test_empty_environment_value_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXUTIL_SAMPLE_RATE", "")
    assert Settings().sample_rate == 1.0


def test_invalid_environment_value_names_setting_and_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXUTIL_SAMPLE_RATE", "1.5")
    with pytest.raises(SettingsError) as info:
        Settings()
    message = str(info.value)
    assert "sample_rate" in message and "CTXUTIL_SAMPLE_RATE" in message and "1.5" in message
    assert isinstance(info.value, ValueError)
    assert [name for name, _ in info.value.errors] == ["sample_rate"]


def test_invalid_argument_is_named_as_an_argument() -> None:
    with pytest.raises(SettingsError, match=r"argument max_concurrency: .*greater than or equal to 1"):
        Settings(max_concurrency=0)


def test_every_problem_is_reported_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXUTIL_JUDGE", "gpt")
    with pytest.raises(SettingsError) as info:
        Settings(threshold=2, evaluation_timeout_s=0)
    assert sorted(name for name, _ in info.value.errors) == ["evaluation_timeout_s", "judge", "threshold"]
    assert "CTXUTIL_JUDGE" in str(info.value)


def test_unknown_setting_suggests_the_close_one() -> None:
    with pytest.raises(
        SettingsError, match=r"unknown setting 'sampel_rate' \(did you mean 'sample_rate'\?\)"
    ):
        Settings(sampel_rate=0.1)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("judge_base_url", "ftp://example"),
        ("max_queue_size", 0),
        ("max_evaluations_per_second", -1),
        ("judge_token_budget_per_minute", -1),
        ("mode", "slow"),
        ("run_ttl_s", 0),
        ("max_pending_runs", 0),
        ("judge_model", ""),
    ],
)
def test_out_of_range_values_are_refused(name: str, value: object) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings(**{name: value})


def test_capture_content_honours_the_otel_genai_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "True")
    assert Settings().capture_content is True
    monkeypatch.setenv("CTXUTIL_CAPTURE_CONTENT", "false")  # the project's own variable wins
    assert Settings().capture_content is False
    assert Settings(capture_content=True).capture_content is True
    monkeypatch.delenv("CTXUTIL_CAPTURE_CONTENT")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "no")  # shared variable: lenient
    assert Settings().capture_content is False
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_AND_EVENT")
    assert Settings().capture_content is True


def test_api_key_never_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXUTIL_JUDGE_API_KEY", "sk-from-env-123")
    s = Settings()
    assert s.judge_api_key is not None and s.judge_api_key.get_secret_value() == "sk-from-env-123"
    assert "sk-from-env-123" not in repr(s) + str(s) + str(s.model_dump())
    with pytest.raises(SettingsError) as info:
        Settings(judge_api_key=12345678)
    assert "12345678" not in str(info.value)


def test_unlimited_is_zero_or_none() -> None:
    assert Settings(max_evaluations_per_second=0).rate_limit is None
    assert Settings(max_evaluations_per_second=None).rate_limit is None
    assert Settings(max_evaluations_per_second=2.5).rate_limit == 2.5
    assert Settings(judge_token_budget_per_minute=0).token_budget is None
    assert Settings(judge_token_budget_per_minute=5000).token_budget == 5000


def test_merged_applies_overrides_without_rereading_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    base = Settings(sample_rate=0.5)
    monkeypatch.setenv("CTXUTIL_MAX_QUEUE_SIZE", "7")
    merged = base.merged(max_concurrency=2)
    assert (merged.sample_rate, merged.max_concurrency, merged.max_queue_size) == (0.5, 2, 2048)
    assert base.merged() is base
    with pytest.raises(SettingsError, match="argument sample_rate"):
        base.merged(sample_rate=-1)


def test_settings_are_immutable() -> None:
    s = Settings()
    with pytest.raises(ValueError, match="frozen"):
        s.sample_rate = 0.1


def test_build_judge_semantic_by_default_and_the_others_on_request() -> None:
    assert isinstance(build_judge(Settings()), SemanticJudge)
    assert isinstance(build_judge(Settings(judge="learned")), LearnedJudge)
    assert isinstance(build_judge(Settings(judge="lexical")), LexicalJudge)


def test_build_judge_openai_passes_the_configured_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judge = build_judge(
        Settings(
            judge="openai",
            judge_model="tiny-model",
            judge_base_url="http://127.0.0.1:9/v1",
            judge_api_key="k",
        )
    )
    assert type(judge).__name__ == "OpenAIJudge"
    assert (judge.name, judge.model) == ("openai", "tiny-model")


def test_evaluator_overrides_beat_settings_and_environment(
    make_evaluator: MakeEvaluator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXUTIL_SAMPLE_RATE", "0")
    monkeypatch.setenv("CTXUTIL_MAX_CONCURRENCY", "3")
    assert make_evaluator().settings.sample_rate == 0.0
    evaluator = make_evaluator(sample_rate=1.0)
    assert (evaluator.settings.sample_rate, evaluator.settings.max_concurrency) == (1.0, 3)
    evaluator = make_evaluator(settings=Settings(max_queue_size=9), max_queue_size=11)
    assert evaluator.settings.max_queue_size == 11
    with pytest.raises(SettingsError, match="max_queue_size"):
        make_evaluator(max_queue_size=-1)


def test_judge_base_url_credentials_are_never_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    secret_url = "ftp://user:SECRET123@127.0.0.1:9/v1?api-key=SECRET123"
    monkeypatch.setenv("CTXUTIL_JUDGE_BASE_URL", secret_url)
    with pytest.raises(SettingsError) as info:
        Settings()
    assert "judge_base_url" in str(info.value) and "SECRET123" not in str(info.value)
    monkeypatch.delenv("CTXUTIL_JUDGE_BASE_URL")
    settings = Settings(judge_base_url="https://example.test/v1", judge_api_key="SECRET123")
    assert "SECRET123" not in repr(settings)


@pytest.mark.parametrize(
    "url",
    [
        "https://user:SECRET123@example.test/v1",  # user information
        "https://example.test/v1?api-key=SECRET123",  # a key in the query (joined wrongly by the SDK too)
        "https://example.test/v1#SECRET123",
    ],
)
def test_judge_base_url_with_credentials_is_rejected_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    # The HTTP client logs each request's URL at INFO level: credentials in it would reach the app's logs.
    monkeypatch.setenv("CTXUTIL_JUDGE_BASE_URL", url)
    with pytest.raises(SettingsError) as info:
        Settings()
    message = str(info.value)
    assert "CTXUTIL_JUDGE_BASE_URL" in message and "CTXUTIL_JUDGE_API_KEY" in message
    assert "SECRET123" not in message


@pytest.mark.parametrize("name", ["sample_rate", "evaluation_timeout_s", "judge_timeout_s", "threshold"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), "nan"])
def test_non_finite_numbers_are_refused_as_such(name: str, value: object) -> None:
    # nan passes no bound check, so it used to fail "should be less than or equal to 1; got nan".
    with pytest.raises(SettingsError, match=rf"{name}: Input should be a finite number"):
        Settings(**{name: value})


# --- resolved once (issue 25) -------------------------------------------------------------------------


def test_with_defaults_applies_only_where_neither_argument_nor_environment_spoke(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CTXUTIL_MAX_QUEUE_SIZE", "7")
    settings = Settings(sample_rate=0.5).with_defaults(sample_rate=0.1, max_queue_size=9, max_concurrency=3)
    assert (settings.sample_rate, settings.max_queue_size, settings.max_concurrency) == (0.5, 7, 3)


def test_an_emitter_given_settings_reads_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxutil_otel.emit import Emitter

    settings = Settings()
    monkeypatch.setenv("CTXUTIL_APPLICATION_NAME", "from-the-environment")
    emitter = Emitter(settings=settings)
    assert emitter.application_name is None and emitter.settings is settings


def test_an_evaluator_given_an_emitter_reuses_its_reading_of_the_environment(
    monkeypatch: pytest.MonkeyPatch, make_evaluator: MakeEvaluator
) -> None:
    from ctxutil_otel.emit import Emitter

    monkeypatch.setenv("CTXUTIL_SAMPLE_RATE", "0.25")
    emitter = Emitter()  # reads the environment once
    monkeypatch.setenv("CTXUTIL_SAMPLE_RATE", "0.75")  # a second reading would see this
    evaluator = make_evaluator(emitter=emitter)
    assert evaluator.settings.sample_rate == 0.25


def test_the_metric_without_a_judge_takes_the_configured_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxutil_otel.judges import SemanticJudge
    from ctxutil_otel.metric import ContextualUtilization

    assert isinstance(ContextualUtilization().judge, SemanticJudge)  # the default (the test extra has it)
    monkeypatch.setenv("CTXUTIL_JUDGE", "lexical")
    assert isinstance(ContextualUtilization().judge, LexicalJudge)


def test_serve_secrets_are_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXUTIL_SERVE_TOKEN", "s3cret-token")
    monkeypatch.setenv("CTXUTIL_SERVE_TLS_CERT", "/etc/cert.pem")
    settings = Settings()
    assert settings.serve_token is not None and settings.serve_token.get_secret_value() == "s3cret-token"
    assert str(settings.serve_tls_cert) == "/etc/cert.pem" and settings.serve_tls_key is None
    assert "s3cret-token" not in repr(settings)


def test_the_openai_judge_from_settings_is_the_one_its_constructor_builds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """build_judge hands the validated settings over (OpenAIJudge.from_settings) instead of passing them
    through the constructor's checks again: the judge it builds is configured as the constructor's is."""
    from ctxutil_otel.judges import OpenAIJudge

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings = Settings(
        judge="openai",
        judge_model="tiny-model",
        judge_base_url="http://127.0.0.1:9/v1",
        judge_api_key="k",
        judge_timeout_s=12,
        judge_response_format="json_object",
    )
    built = build_judge(settings)
    direct = OpenAIJudge(
        model="tiny-model",
        base_url="http://127.0.0.1:9/v1",
        api_key="k",
        timeout_s=12,
        response_format="json_object",
    )
    assert isinstance(built, OpenAIJudge) and repr(built) == repr(direct)
    fields = ("max_retries", "max_retry_after_s", "max_context_tokens", "max_chunks_per_call", "temperature")
    assert [getattr(built, f) for f in fields] == [getattr(direct, f) for f in fields]
    assert build_judge(Settings(judge="openai", judge_api_key="k")).model == OpenAIJudge(api_key="k").model


@pytest.mark.parametrize(
    "variable", ["CTXUTIL_RETRIEVAL_TOOLS", "CTXUTIL_EXCLUDED_TOOLS", "CTXUTIL_CHUNK_METADATA_KEYS"]
)
def test_a_name_list_variable_takes_a_json_array_too(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    # pydantic-settings' own form for a list is JSON; ours is comma-separated. A JSON array was split at its
    # commas into names no tool has ('["search_docs"', ' "kb"]'): with CTXUTIL_RETRIEVAL_TOOLS that silently
    # left every tool result of every agent turn uncounted. Both forms now give the same names.
    field = variable.removeprefix("CTXUTIL_").lower()
    monkeypatch.setenv(variable, '["search_docs", "kb_*"]')
    assert getattr(Settings(), field) == ("search_docs", "kb_*")
    monkeypatch.setenv(variable, "search_docs, kb_*")
    assert getattr(Settings(), field) == ("search_docs", "kb_*")


@pytest.mark.parametrize("value", ['["search_docs", 3]', '["search_docs"', "[]x"])
def test_a_name_list_variable_that_is_not_a_json_array_of_names_is_refused(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("CTXUTIL_RETRIEVAL_TOOLS", value)
    with pytest.raises(SettingsError, match="CTXUTIL_RETRIEVAL_TOOLS"):
        Settings()


def _choices(name: str) -> tuple[str, ...]:
    """The accepted values of an enumerated setting (a ``Literal`` of strings or a string enum)."""
    annotation = Settings.model_fields[name].annotation
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return tuple(str(member.value) for member in annotation)
    return tuple(str(arg) for arg in typing.get_args(annotation))


ENUMERATED = sorted(
    name
    for name, field in Settings.model_fields.items()
    if typing.get_origin(field.annotation) is typing.Literal
    or (isinstance(field.annotation, type) and issubclass(field.annotation, enum.Enum))
)


def test_the_enumerated_settings_are_found() -> None:
    assert {"judge", "judge_response_format", "mode", "worker"} <= set(ENUMERATED)


@pytest.mark.parametrize("name", ENUMERATED)
def test_every_enumerated_setting_takes_any_case_and_normalises_it(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    for value in _choices(name):
        monkeypatch.setenv(f"CTXUTIL_{name.upper()}", f" {value.title()} ")
        from_env = getattr(Settings(), name)
        from_argument = getattr(Settings(**{name: value.upper()}), name)
        for got in (from_env, from_argument):
            assert (got.value if isinstance(got, enum.Enum) else got) == value
