"""Breaking out of a stream: ``stream()`` and ``astream()`` agree (issue 10, "also observed").

The consumer abandoned the run before the answer was complete, so the answer is truncated: judging
it would report low utilization for a generation that never finished. Both are counted ``chain_error``
(the run did not complete), and nothing is judged; docs/capture.md says why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from .conftest import ANSWER, QUESTION, Rig, assert_accounted, rag_chain

MakeRig = Callable[..., Rig]


class _RootEnded(BaseCallbackHandler):
    """Test-only handler placed after ours: set once the root run has ended or failed (LangChain closes
    an abandoned async stream's runs in a task of its own, after ``aclose()`` returns)."""

    run_inline = True

    def __init__(self) -> None:
        self.ended = asyncio.Event()

    def on_chain_end(
        self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        if parent_run_id is None:
            self.ended.set()

    def on_chain_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        if parent_run_id is None:
            self.ended.set()


def _chain() -> object:
    return rag_chain(model=GenericFakeChatModel(messages=iter([AIMessage(content=ANSWER)])))


def test_breaking_out_of_stream_is_not_judged(make_rig: MakeRig) -> None:
    rig = make_rig()
    stream = _chain().stream(QUESTION, config={"callbacks": [rig.handler]})  # type: ignore[attr-defined]
    pieces = [next(stream), next(stream)]
    stream.close()  # what leaving a for loop early does
    assert "".join(pieces) != ANSWER
    rig.flush()
    stats = rig.handler.stats()
    assert (stats.captured, dict(stats.dropped)) == (1, {"chain_error": 1})
    assert rig.judge.calls == []
    assert_accounted(rig)


async def test_breaking_out_of_astream_is_not_judged(make_rig: MakeRig) -> None:
    rig = make_rig()
    ended = _RootEnded()
    stream = _chain().astream(QUESTION, config={"callbacks": [rig.handler, ended]})  # type: ignore[attr-defined]
    pieces = []
    async for piece in stream:
        pieces.append(piece)
        if len(pieces) == 2:
            break
    await stream.aclose()
    await asyncio.wait_for(ended.ended.wait(), 10)
    rig.flush()
    stats = rig.handler.stats()
    assert (stats.captured, dict(stats.dropped)) == (1, {"chain_error": 1})
    assert rig.judge.calls == []
    assert_accounted(rig)


def test_a_stream_read_to_the_end_is_judged_on_the_whole_answer(make_rig: MakeRig) -> None:
    rig = make_rig()
    pieces = list(_chain().stream(QUESTION, config={"callbacks": [rig.handler]}))  # type: ignore[attr-defined]
    assert "".join(pieces) == ANSWER
    rig.only()
    assert rig.judge.calls[0][1] == ANSWER
    assert_accounted(rig)
