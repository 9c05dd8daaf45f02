"""The one hand-off: ``Evaluator.admit`` answers with a ticket closed exactly once, or a refusal already
counted. A second close and a ticket collected open are bugs the ticket makes visible (TicketWarning)
without breaking the accounting."""

from __future__ import annotations

import gc
import random

import pytest

from ctxutil_otel.worker import Admission, Ticket, TicketWarning

from ..support.accounting import assert_accounted
from .conftest import MakeEvaluator, interaction, run_in_forked_child


def test_admit_answers_a_ticket_that_carries_what_the_engine_needs(make_evaluator: MakeEvaluator) -> None:
    evaluator = make_evaluator(judge_token_budget_per_minute=1_000_000)
    item = interaction()
    ticket = evaluator.admit(item.trace_id)
    assert isinstance(ticket, Ticket) and ticket and ticket.refused is None and not ticket.closed
    assert (ticket.trace_id, ticket.seq, ticket.interaction) == (item.trace_id, 0, None)
    assert ticket.submit(item) and ticket.closed
    assert ticket.seq >= 1 and ticket.interaction is item and ticket.reserved is not None
    assert evaluator.force_flush(5000)
    assert evaluator.stats().evaluated == 1
    assert_accounted(evaluator.stats())


def test_a_refusal_is_counted_once_and_its_closers_do_nothing(make_evaluator: MakeEvaluator) -> None:
    evaluator = make_evaluator(sample_rate=0.0)
    answer = evaluator.admit(random.getrandbits(128))
    assert isinstance(answer, Admission) and not answer and answer.closed
    assert answer.submit(interaction()) is False
    answer.drop("chain_error")
    stats = evaluator.stats()
    assert (stats.captured, stats.sampled_out, dict(stats.dropped)) == (1, 1, {})


def test_lost_is_counted_without_admission(make_evaluator: MakeEvaluator) -> None:
    evaluator = make_evaluator(max_evaluations_per_second=0.001)  # one token
    assert not evaluator.admit(1, lost="ttl_expired")
    assert evaluator.admit(1).drop("not_evaluable") is None  # the only token was still there
    assert dict(evaluator.stats().dropped) == {"ttl_expired": 1, "not_evaluable": 1}


@pytest.mark.parametrize("first", ["submit", "drop"])
def test_a_second_close_warns_and_counts_nothing(make_evaluator: MakeEvaluator, first: str) -> None:
    evaluator = make_evaluator()
    item = interaction()
    ticket = evaluator.admit(item.trace_id)
    if first == "submit":
        assert ticket.submit(item)
    else:
        ticket.drop("chain_error")
    with pytest.warns(TicketWarning, match="closed twice"):
        ticket.drop("ttl_expired")
    with pytest.warns(TicketWarning, match="closed twice"):
        assert ticket.submit(item) is False
    assert evaluator.force_flush(5000)
    stats = evaluator.stats()
    assert stats.captured == 1 and "ttl_expired" not in stats.dropped
    assert_accounted(stats)


def test_the_suite_turns_a_second_close_into_an_error(make_evaluator: MakeEvaluator) -> None:
    """pyproject.toml's filterwarnings: any test that closes a ticket twice fails."""
    ticket = make_evaluator().admit(1)
    ticket.drop("chain_error")
    with pytest.raises(TicketWarning):
        ticket.drop("chain_error")


def test_a_ticket_collected_open_is_counted_internal_error_and_warned(make_evaluator: MakeEvaluator) -> None:
    evaluator = make_evaluator()
    ticket = evaluator.admit(random.getrandbits(128))
    assert ticket
    with pytest.warns(TicketWarning, match="garbage-collected"):
        del ticket
        gc.collect()
    stats = evaluator.stats()
    assert (stats.captured, dict(stats.dropped)) == (1, {"internal_error": 1})
    assert_accounted(stats)


def test_after_shutdown_a_ticket_collected_open_is_counted_shutdown_quietly(
    make_evaluator: MakeEvaluator, recwarn: pytest.WarningsRecorder
) -> None:
    evaluator = make_evaluator()
    ticket = evaluator.admit(random.getrandbits(128))
    assert evaluator.shutdown(1000)
    del ticket
    gc.collect()
    assert not [w for w in recwarn if issubclass(w.category, TicketWarning)]
    assert dict(evaluator.stats().dropped) == {"shutdown": 1}


def test_a_parent_s_ticket_counts_nothing_in_a_forked_child(make_evaluator: MakeEvaluator) -> None:
    """After os.fork() the child's counters start at zero and the parent's admitted interactions are the
    parent's: closing or collecting one of its tickets in the child counts nothing there."""
    evaluator = make_evaluator(worker="thread")
    submitted, dropped, collected = (evaluator.admit(t) for t in (1, 2, 3))

    def child() -> dict[str, object]:
        queued = submitted.submit(interaction())
        dropped.drop("chain_error")
        nonlocal collected
        del collected
        gc.collect()
        stats = evaluator.stats()
        return {"queued": queued, "captured": stats.captured, "dropped": dict(stats.dropped)}

    report = run_in_forked_child(child)
    assert report == {"queued": False, "captured": 0, "dropped": {}}
    for ticket in (submitted, dropped, collected):  # the parent's own accounting still closes
        ticket.drop("chain_error")
    assert dict(evaluator.stats().dropped) == {"chain_error": 3}
