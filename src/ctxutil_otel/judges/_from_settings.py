"""The judge the settings configure (``judge``, ``judge_model``, ``judge_base_url``, ``judge_api_key``,
``judge_timeout_s``, ``judge_deadline_s``, ``judge_response_format``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._settings import Settings
    from ._base import Judge

__all__ = ["build_judge"]


def build_judge(settings: Settings) -> Judge:
    """Build the configured judge: :class:`~ctxutil_otel.judges.LearnedJudge` for ``"learned"``,
    :class:`~ctxutil_otel.judges.LexicalJudge` for ``"lexical"``, or
    ``OpenAIJudge.from_settings(settings)`` for ``"openai"`` (the configured values, which the settings
    validated; the judge's own defaults and ``OPENAI_API_KEY`` apply otherwise).

    Raises:
        ImportError: when the openai judge cannot be imported (the ``openai`` package is missing).
    """
    if settings.judge == "learned":
        from ._learned import LearnedJudge

        return LearnedJudge()
    if settings.judge == "lexical":
        from ._lexical import LexicalJudge

        return LexicalJudge()
    try:
        from ._openai import OpenAIJudge
    except ImportError as exc:  # pragma: no cover - openai is a core dependency
        raise ImportError(
            "judge='openai' needs the 'openai' package (pip install ctxutil-otel installs it)"
        ) from exc
    return OpenAIJudge.from_settings(settings)  # the settings' values are validated: not checked again
