"""The judge the settings configure (``judge``, ``judge_model``, ``judge_base_url``, ``judge_api_key``,
``judge_timeout_s``, ``judge_deadline_s``, ``judge_response_format``)."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._settings import Settings
    from ._base import Judge

__all__ = ["JUDGE_SETTINGS", "build_judge", "build_named_judge", "default_judge", "judge_settings"]

#: The settings :func:`build_judge` reads (the module docstring's).
JUDGE_SETTINGS = (
    "judge",
    "judge_model",
    "judge_base_url",
    "judge_api_key",
    "judge_timeout_s",
    "judge_deadline_s",
    "judge_response_format",
)

_log = logging.getLogger("ctxutil_otel.judges")
_warned = threading.Event()


def judge_settings(**values: object) -> Settings:
    """The settings with ``values`` (argument > ``CTXUTIL_*`` > default) for building a judge alone: an
    invalid ``CTXUTIL_*`` variable of a setting no judge reads (``CTXUTIL_SAMPLE_RATE=abc``) is a WARNING
    naming it, not an error (``Settings.resolved_for``).

    Raises:
        SettingsError: naming an invalid :data:`JUDGE_SETTINGS` value and its variable.
    """
    from .._settings import Settings  # pydantic-settings: only when the settings are needed

    return Settings.resolved_for(JUDGE_SETTINGS, "building the judge alone", **values)


def default_judge() -> Judge:
    """The default judge: :class:`~ctxutil_otel.judges.SemanticJudge` when the ``semantic`` extra is
    installed, else :class:`~ctxutil_otel.judges.LearnedJudge`, with one warning per process naming the extra
    (the judge's ``name``, reported as ``ctxutil.judge.name``, says which one judged)."""
    from ._semantic_embed import SemanticExtraMissingError

    try:
        from ._semantic import SemanticJudge

        return SemanticJudge()
    except SemanticExtraMissingError as exc:
        if not _warned.is_set():
            _warned.set()
            _log.warning(
                "ctxutil-otel: the default judge 'semantic' is not installed (%s); judging with 'learned', "
                "which misses relevant chunks the answer ignored (docs/judges.md)",
                exc,
            )
        from ._learned import LearnedJudge

        return LearnedJudge()


def build_judge(settings: Settings) -> Judge:
    """Build the configured judge: :class:`~ctxutil_otel.judges.LearnedJudge` for ``"learned"``,
    :class:`~ctxutil_otel.judges.SemanticJudge` for ``"semantic"`` (:func:`default_judge`: without the
    ``semantic`` extra, the learned judge and one warning),
    :class:`~ctxutil_otel.judges.LexicalJudge` for ``"lexical"``, or
    ``OpenAIJudge.from_settings(settings)`` for ``"openai"`` (the configured values, which the settings
    validated; the judge's own defaults and ``OPENAI_API_KEY`` apply otherwise).

    Raises:
        ImportError: when the openai judge cannot be imported (the ``openai`` package is missing).
    """
    if settings.judge == "learned":
        from ._learned import LearnedJudge

        return LearnedJudge()
    if settings.judge == "semantic":
        return default_judge()
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


def build_named_judge(settings: Settings) -> Judge:
    """:func:`build_judge`, except that a ``semantic`` judge NAMED (``judge`` set explicitly: an argument,
    ``--judge`` or ``CTXUTIL_JUDGE``) without its extra raises instead of falling back to ``learned`` as
    the default does: whoever names a judge gets that judge or an error.

    Raises:
        SemanticExtraMissingError: (an ``ImportError`` naming the ``semantic`` extra) as above.
        ImportError: as :func:`build_judge`.
    """
    if settings.judge == "semantic" and "judge" in settings.model_fields_set:
        from ._semantic import SemanticJudge

        return SemanticJudge()
    return build_judge(settings)
