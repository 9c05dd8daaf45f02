"""Constructing the handler: settings precedence, an explicit evaluator, delegation, dispatch flags."""

from __future__ import annotations

import gc
import logging
import warnings
from collections.abc import Callable, Iterator, Mapping

import pytest
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough

from ctxutil_otel import ContextualUtilization, SettingsError
from ctxutil_otel.capture import UtilizationCallbackHandler
from ctxutil_otel.worker import Evaluator
from tests.support.doubles import RecordingEmitter

from .conftest import QUESTION, FixedRetriever, Rig, assert_accounted, rag_chain

MakeRig = Callable[..., Rig]


@pytest.fixture
def handlers() -> Iterator[list[UtilizationCallbackHandler]]:
    made: list[UtilizationCallbackHandler] = []
    yield made
    for handler in made:
        handler.shutdown(5_000)


def test_dispatch_flags() -> None:
    # Inline: the async callback manager calls us on the loop, in order, without a thread hop.
    assert UtilizationCallbackHandler.run_inline is True
    assert UtilizationCallbackHandler.raise_error is False


def test_builds_its_evaluator_from_arguments_then_environment_then_defaults(
    monkeypatch: pytest.MonkeyPatch, handlers: list[UtilizationCallbackHandler]
) -> None:
    monkeypatch.setenv("CTXUTIL_SAMPLE_RATE", "0.3")
    monkeypatch.setenv("CTXUTIL_RUN_TTL_S", "42")
    from_env = UtilizationCallbackHandler()
    handlers.append(from_env)
    assert from_env.evaluator.settings.sample_rate == 0.3
    assert from_env.settings.run_ttl_s == 42.0
    assert from_env.settings.max_pending_runs == 10_000  # default

    from_args = UtilizationCallbackHandler(sample_rate=0.25, max_pending_runs=7)
    handlers.append(from_args)
    assert from_args.evaluator.settings.sample_rate == 0.25
    assert from_args.settings.max_pending_runs == 7


def test_invalid_settings_name_the_setting() -> None:
    with pytest.raises(SettingsError, match="run_ttl_s"):
        UtilizationCallbackHandler(run_ttl_s=0)
    with pytest.raises(SettingsError, match="sample_rat"):
        UtilizationCallbackHandler(sample_rat=0.5)


def test_explicit_evaluator_takes_capture_settings_only() -> None:
    evaluator = Evaluator(ContextualUtilization(), emitter=RecordingEmitter(), run_ttl_s=30)
    try:
        handler = UtilizationCallbackHandler(evaluator)
        assert handler.evaluator is evaluator
        assert handler.settings.run_ttl_s == 30.0  # read from the evaluator's settings
        assert UtilizationCallbackHandler(evaluator, run_ttl_s=5).settings.run_ttl_s == 5.0
        with pytest.raises(TypeError, match="sample_rate"):
            UtilizationCallbackHandler(evaluator, sample_rate=0.5)
    finally:
        evaluator.shutdown(5_000)


def test_force_flush_and_shutdown_delegate_to_the_evaluator(make_rig: MakeRig) -> None:
    rig = make_rig()
    rag_chain().invoke(QUESTION, config={"callbacks": [rig.handler]})
    assert rig.handler.force_flush(10_000) is True
    assert rig.handler.stats().evaluated + rig.handler.stats().not_applicable == 1
    assert rig.handler.shutdown(5_000) is True
    # After shutdown the chain still runs; the interaction is counted dropped, reason shutdown.
    rag_chain().invoke(QUESTION, config={"callbacks": [rig.handler]})
    stats = rig.handler.stats()
    assert stats.captured == 2 and dict(stats.dropped) == {"shutdown": 1}
    assert_accounted(rig)


class _DocumentWhosePageContentRaises:
    """A Document-like object in a root's output whose ``page_content`` raises with the user's text."""

    @property
    def page_content(self) -> str:
        raise RuntimeError("private zq7x chunk text")


def test_a_callback_error_is_logged_by_its_class_and_place_never_its_message(
    make_rig: MakeRig, caplog: pytest.LogCaptureFixture
) -> None:
    # A callback's error was logged (DEBUG, once per callback) with its traceback, message included: a
    # user's object raising with its text (a Document whose page_content raised) put that text in the log.
    rig = make_rig()
    chain = RunnableLambda(lambda q: {"answer": "a", "context": [_DocumentWhosePageContentRaises()]})
    with caplog.at_level(logging.DEBUG, logger="ctxutil_otel"):
        chain.invoke(QUESTION, config={"callbacks": [rig.handler]})
    assert rig.handler.callback_errors == {"documents_from_output": 1}
    (record,) = [r for r in caplog.records if "error in documents_from_output" in r.getMessage()]
    assert record.getMessage().startswith(
        "ctxutil-otel: error in documents_from_output: RuntimeError at test_handler.py:"
    )
    assert record.exc_info is None and record.exc_text is None
    assert not [r for r in caplog.records if "zq7x" in r.getMessage() or "zq7x" in (r.exc_text or "")]


class _Interrupting(Mapping[str, object]):
    """A root output whose answer capture looks up and whose look-up is interrupted (Ctrl-C)."""

    def __getitem__(self, key: str) -> object:
        raise KeyboardInterrupt

    def __iter__(self) -> Iterator[str]:
        return iter(["answer"])

    def __len__(self) -> int:
        return 1


def test_a_keyboard_interrupt_while_capturing_a_root_propagates_and_is_counted(make_rig: MakeRig) -> None:
    # A KeyboardInterrupt raised by a user's object while capture read a finished root propagated (right)
    # but left the root's ticket open: later counted internal_error with a TicketWarning. It is counted
    # dropped capture_error before it propagates.
    rig = make_rig()
    retrieve = RunnableParallel(context=FixedRetriever(), question=RunnablePassthrough())
    chain = retrieve | RunnableLambda(lambda _: _Interrupting())  # no model: the answer is the output
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a TicketWarning (a ticket collected open) fails the test
        with pytest.raises(KeyboardInterrupt):
            chain.invoke(QUESTION, config={"callbacks": [rig.handler]})
        gc.collect()
        rig.flush()
    stats = rig.evaluator.stats()
    assert (stats.captured, dict(stats.dropped), dict(stats.failed)) == (1, {"capture_error": 1}, {}), stats
