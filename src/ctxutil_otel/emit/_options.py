"""The :class:`~ctxutil_otel.emit.Emitter` arguments that are settings: resolved (``None`` takes the setting
of the same name, from the ``Settings`` given, else read once) and validated in one place, so the emitter
and ``build_emitter`` cannot drift apart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._settings import Settings

__all__ = ["SETTINGS_ARGS", "EmitterOptions"]

SETTINGS_ARGS = (
    "capture_content",
    "application_name",
    "max_content_chars",
    "chunk_metadata_keys",
    "dimension_max_values",
    "dimension_max_chars",
)
"""The emitter arguments that are settings of the same name (``None`` takes the setting)."""


@dataclass(frozen=True, slots=True)
class EmitterOptions:
    """The resolved, validated settings-backed emitter arguments (see ``Emitter``)."""

    capture_content: bool
    application_name: str | None
    max_content_chars: int
    chunk_metadata_keys: tuple[str, ...]
    dimension_max_values: int
    dimension_max_chars: int
    #: The settings the ``None`` arguments came from (``None`` when every argument was given).
    settings: Settings | None = None

    @classmethod
    def resolve(cls, settings: Settings | None = None, **given: Any) -> EmitterOptions:
        """``given`` (the :data:`SETTINGS_ARGS`) with every ``None`` replaced by the setting of the same name
        in ``settings``, validated. Without ``settings``, ``Settings()`` (the environment) is read once,
        and only when an argument is ``None``.

        Raises:
            ValueError: naming the argument, for ``max_content_chars``, ``dimension_max_values`` or
                ``dimension_max_chars`` below 1, a non-string ``application_name``, or
                ``chunk_metadata_keys`` that are not a sequence of non-empty strings.
        """
        if any(given.get(name) is None for name in SETTINGS_ARGS):
            if settings is None:
                from .._settings import Settings  # pydantic-settings: only when a setting is needed

                settings = Settings()
            given = {
                name: getattr(settings, name) if given.get(name) is None else given[name]
                for name in SETTINGS_ARGS
            }
        check_int("max_content_chars", given["max_content_chars"], 1)
        check_int("dimension_max_values", given["dimension_max_values"], 1)
        check_int("dimension_max_chars", given["dimension_max_chars"], 1)
        name = given["application_name"]
        if name is not None and not isinstance(name, str):
            raise ValueError(f"application_name must be a str or None, got {type(name).__name__}")
        keys = given["chunk_metadata_keys"]
        if (
            isinstance(keys, str)
            or not isinstance(keys, Sequence)
            or not all(isinstance(key, str) and key for key in keys)
        ):
            raise ValueError(f"chunk_metadata_keys must be a sequence of non-empty str, got {keys!r}")
        return cls(
            capture_content=bool(given["capture_content"]),
            application_name=name or None,
            max_content_chars=given["max_content_chars"],
            chunk_metadata_keys=tuple(keys),
            dimension_max_values=given["dimension_max_values"],
            dimension_max_chars=given["dimension_max_chars"],
            settings=settings,
        )


def check_int(name: str, value: object, minimum: int) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``value`` is an ``int`` (not ``bool``) >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
