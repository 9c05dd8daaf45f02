"""Fixtures for the metric tests: a scripted judge that returns verdicts decided by the test."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ctxutil_otel.judges import ChunkVerdict, JudgeResult


class ScriptedJudge:
    """A real Judge implementation whose verdicts the test dictates (R = relevant, U = utilized).

    ``script`` maps chunk text to a string containing "R" and/or "U"; unknown chunks are irrelevant.
    Records every call so tests can see what the metric asked.
    """

    name = "scripted"
    model: str | None = None

    def __init__(
        self, script: dict[str, str] | None = None, verdicts: list[ChunkVerdict] | None = None
    ) -> None:
        self.script = script or {}
        self.fixed = verdicts
        self.calls: list[tuple[str, str, list[str], bool]] = []

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        self.calls.append((query, answer, list(chunks), reasons))
        if self.fixed is not None:
            return JudgeResult(verdicts=self.fixed)
        out = []
        for i, chunk in enumerate(chunks):
            marks = self.script.get(chunk, "")
            out.append(
                ChunkVerdict(
                    index=i, is_relevant="R" in marks, is_utilized="U" in marks, reason=f"scripted {marks}"
                )
            )
        return JudgeResult(verdicts=out)


@pytest.fixture
def scripted() -> type[ScriptedJudge]:
    return ScriptedJudge
