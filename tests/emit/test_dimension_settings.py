"""``metric_dimensions`` validation (issue 12, tester's findings): keys that become the same Prometheus
label are refused, and so are keys known to carry user content (dimension values are emitted whatever
``capture_content`` says); each error names the setting and the keys."""

from __future__ import annotations

import pytest

from ctxutil_otel import Settings, SettingsError


@pytest.mark.parametrize(
    ("keys", "named"),
    [
        (("tenant.id", "tenant_id"), ("tenant.id", "tenant_id")),
        (("prompt_version", "tenant-id", "tenant.id"), ("tenant-id", "tenant.id")),
    ],
)
def test_keys_that_become_the_same_prometheus_label_are_refused(
    keys: tuple[str, ...], named: tuple[str, ...]
) -> None:
    with pytest.raises(SettingsError) as error:
        Settings(metric_dimensions=keys)
    message = str(error.value)
    assert "metric_dimensions" in message
    for key in named:
        assert repr(key) in message
    assert "ctxutil_metadata_tenant_id" in message


def test_keys_that_become_the_same_label_are_refused_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CTXUTIL_METRIC_DIMENSIONS", "tenant.id,tenant_id")
    with pytest.raises(SettingsError, match="CTXUTIL_METRIC_DIMENSIONS"):
        Settings()


@pytest.mark.parametrize(
    "key",
    [
        "input.value",
        "output.value",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system.messages",
        "gen_ai.prompt",
        "gen_ai.prompt.0.content",
        "gen_ai.completion.0.content",
        "gen_ai.retrieval.query.text",
        "gen_ai.retrieval.documents",
        "retrieval.documents",
        "retrieval.documents.0.document.content",
        "llm.input_messages",
        "llm.output_messages.0.message.content",
        "traceloop.entity.input",
        "traceloop.entity.output",
        "ctxutil.query",
        "ctxutil.answer",
        "metadata.input.value",
    ],
)
def test_content_carrying_keys_are_refused(key: str) -> None:
    with pytest.raises(SettingsError) as error:
        Settings(metric_dimensions=("prompt_version", key))
    message = str(error.value)
    assert "metric_dimensions" in message
    assert repr(key) in message
    assert "content" in message


def test_ordinary_keys_are_kept() -> None:
    keys = ("prompt_version", "tenant", "gen_ai.request.model", "input_format", "app.version", "tenant_id")
    assert Settings(metric_dimensions=keys).metric_dimensions == keys
    assert Settings(metric_dimensions=("tenant", "tenant")).metric_dimensions == ("tenant",)
