"""The judge contract: what a judge is given and what it must answer.

A judge decides, for every retrieved chunk, whether it is relevant to the query and whether the
answer used it. The metric (:mod:`ctxutil_otel.metric`) turns those verdicts into a score; judges
never compute the score themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "MAX_REPORTED_TOKENS",
    "ChunkVerdict",
    "Judge",
    "JudgeError",
    "JudgeResult",
    "JudgeTimeoutError",
    "TokenUsage",
    "VerdictMismatchError",
]


class ChunkVerdict(BaseModel):
    """A judge's verdict on one retrieved chunk.

    Attributes:
        index: Position of the chunk in the ``chunks`` sequence the judge was given (0-based).
        is_relevant: The chunk holds information relevant to the query (step 1 of the metric).
        is_utilized: The answer used the chunk's information (step 2). Ignored by the metric when
            ``is_relevant`` is false.
        reason: A short explanation; empty in :attr:`EvaluationMode.FAST` mode.
    """

    model_config = ConfigDict(frozen=True)

    index: int = Field(ge=0)
    is_relevant: bool
    is_utilized: bool
    reason: str = ""


MAX_REPORTED_TOKENS = 10**9
"""Most tokens one judge reply may report per field (``prompt_tokens``, ``completion_tokens``): a
thousand times the largest context windows of 2025. A reply reporting more, or a negative count, is
refused as ``malformed_response`` (``judges/_completion.py``), so that a buggy server's ``2**64 - 1``
never reaches the ``ctxutil.judge.tokens`` counter (whose exporter encodes 64-bit integers) or the
token budget."""


class TokenUsage(BaseModel):
    """Tokens a judge spent, named after the OpenTelemetry GenAI ``gen_ai.usage.*`` attributes."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )


class JudgeResult(BaseModel):
    """Everything a judge answers for one interaction.

    Attributes:
        verdicts: One :class:`ChunkVerdict` per chunk, in any order; the metric pairs them with
            chunks by ``index`` and rejects a list that does not cover every chunk exactly once.
        usage: Tokens spent, or ``None`` for judges that spend none (the lexical judge).
        output_format: The structured-output format the judge's calls used (model judges that
            negotiate one, e.g. ``json_schema``), else ``None``.
        format_fallbacks: Times this judgement stepped the output format down because the server
            refused it (each step is counted once, by the judgement that took it).
    """

    verdicts: list[ChunkVerdict]
    usage: TokenUsage | None = None
    output_format: str | None = None
    format_fallbacks: int = Field(default=0, ge=0)


class JudgeError(Exception):
    """A judge could not produce verdicts. ``error_type`` is the low-cardinality value emitted as the
    OpenTelemetry ``error.type`` attribute.

    Judges that spend tokens set ``usage`` (tokens spent before failing, ``None`` if unknown) and
    ``format_fallbacks`` (as on :class:`JudgeResult`) on the exception they raise.
    """

    error_type: ClassVar[str] = "judge_error"
    usage: TokenUsage | None = None
    format_fallbacks: int = 0


class VerdictMismatchError(JudgeError):
    """The verdicts do not match the chunks one to one (missing, extra or duplicate ``index``)."""

    error_type: ClassVar[str] = "verdict_mismatch"


class JudgeTimeoutError(JudgeError):
    """The judge did not answer within its deadline."""

    error_type: ClassVar[str] = "timeout"


@runtime_checkable
class Judge(Protocol):
    """Decides relevance and utilization for every chunk of one interaction.

    Implementations must be safe to call concurrently from one asyncio loop. ``name`` is emitted as
    ``ctxutil.judge.name`` and ``model`` (``None`` for model-free judges) as ``ctxutil.judge.model``.

    ``reasons=False`` is passed in :attr:`EvaluationMode.FAST` mode: the judge may then skip writing
    reasons (fewer output tokens). Judges that do not accept the keyword work in GRANULAR mode only.
    """

    @property
    def name(self) -> str:
        """Low-cardinality judge name (``ctxutil.judge.name``), e.g. ``"lexical"``."""
        ...

    @property
    def model(self) -> str | None:
        """The judge's model (``ctxutil.judge.model``), or ``None`` for model-free judges."""
        ...

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        """Return verdicts for ``chunks`` (a sequence of chunk texts, index = position).

        Raises:
            JudgeError: (or a subclass) when no valid verdicts could be produced.
        """
        ...
