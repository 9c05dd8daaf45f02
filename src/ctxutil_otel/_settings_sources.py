"""Where settings come from and how their errors read: the ``CTXUTIL_*`` variable names, the extra
environment sources of :class:`~ctxutil_otel._settings.Settings` and :class:`SettingsError`."""

from __future__ import annotations

import difflib
import os
import reprlib
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

__all__ = [
    "ENV_PREFIX",
    "MAX_MESSAGE_CHARS",
    "MAX_QUOTED_CHARS",
    "OTEL_CAPTURE_CONTENT_ENV",
    "EmptyMeansNoneSource",
    "OTelCaptureContentSource",
    "SettingsError",
    "env_var",
    "quoted",
    "settings_error",
]

ENV_PREFIX = "CTXUTIL_"
OTEL_CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# Values of the OpenTelemetry variable that turn content capture on: "true" (the GenAI instrumentations'
# convention) and the experimental content-capturing modes of the newer GenAI semantic conventions.
_OTEL_CAPTURE_ON = frozenset({"true", "span_only", "event_only", "span_and_event"})
# Fields whose values are never echoed in errors: the key, and the base URL (credentials in it are
# rejected, but a rejected value may hold them: user:password@host, Azure's ?api-key=).
_SECRET_FIELDS = frozenset({"judge_api_key", "judge_base_url"})


class SettingsError(ValueError):
    """A setting has an invalid value. The message names the setting, where the value came from
    (argument or ``CTXUTIL_*`` environment variable) and what is expected; secrets are never echoed.

    Attributes:
        errors: One ``(setting, message)`` pair per problem.
    """

    def __init__(self, errors: list[tuple[str, str]], *, hint: str | None = None) -> None:
        self.errors = errors
        lines = "\n".join(f"  - {m}" for _, m in errors)
        super().__init__(f"invalid ctxutil-otel settings:\n{lines}" + (f"\n{hint}" if hint else ""))


class OTelCaptureContentSource(PydanticBaseSettingsSource):
    """``capture_content`` from ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (lower priority
    than ``CTXUTIL_CAPTURE_CONTENT``). Unknown values mean off: the variable is shared with other
    instrumentations, so it never raises."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ answers directly

    def __call__(self) -> dict[str, Any]:
        raw = os.environ.get(OTEL_CAPTURE_CONTENT_ENV, "").strip().lower()
        if not raw:
            return {}
        return {"capture_content": raw in _OTEL_CAPTURE_ON}


class BlankMeansUnsetSource(PydanticBaseSettingsSource):
    """The environment source without blank values: a variable set to whitespace only counts as unset,
    as an empty one does (``env_ignore_empty`` skips only the empty string)."""

    def __init__(self, settings_cls: type[BaseSettings], env: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self._env = env

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ answers directly

    def __call__(self) -> dict[str, Any]:
        return {k: v for k, v in self._env().items() if not (isinstance(v, str) and not v.strip())}


class EmptyMeansNoneSource(PydanticBaseSettingsSource):
    """``CTXUTIL_CHUNK_METADATA_KEYS`` set to an empty value means "no keys" (the environment source skips
    empty values, which would otherwise mean the default)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ answers directly

    def __call__(self) -> dict[str, Any]:
        name = env_var("chunk_metadata_keys")
        for key, value in os.environ.items():
            if key.upper() == name and not value.strip():
                return {"chunk_metadata_keys": ()}
        return {}


#: Longest quotation of an offending value in a :class:`SettingsError` (its ``repr``), in characters.
MAX_QUOTED_CHARS = 80
#: Longest explanation of one problem (a validator's message may quote its input), in characters.
MAX_MESSAGE_CHARS = 500


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def quoted(value: object) -> str:
    """``repr(value)``, at most :data:`MAX_QUOTED_CHARS` characters of it followed by its full length (a
    20 MB rule string gives a short message, not a 20 MB one)."""
    if isinstance(value, str) and len(value) > MAX_QUOTED_CHARS:
        value = value[: MAX_QUOTED_CHARS + 1]  # repr of a prefix only: never of the whole value
        return f"{value[:MAX_QUOTED_CHARS]!r}... (a string of more than {MAX_QUOTED_CHARS} characters)"
    return _cut(reprlib.repr(value), MAX_QUOTED_CHARS)  # a container's repr, already shortened


def env_var(name: str) -> str:
    """The environment variable of setting ``name`` (e.g. ``CTXUTIL_SAMPLE_RATE``)."""
    return f"{ENV_PREFIX}{name.upper()}"


def settings_error(exc: ValidationError, *, explicit: set[str], known: Sequence[str]) -> SettingsError:
    """The :class:`SettingsError` for pydantic's ``exc``: each problem names the setting and where its
    value came from (``explicit`` argument, ``CTXUTIL_*`` variable or default); an unknown setting gets
    the closest of ``known`` as a hint. The key and base URL are never echoed."""
    known = list(known)
    problems: list[tuple[str, str]] = []
    unknown = False
    for error in exc.errors(include_url=False):
        name = str(error["loc"][0]) if error["loc"] else "?"
        if error["type"] == "extra_forbidden":
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append((name, f"unknown setting {name!r}{hint}"))
            unknown = True
            continue
        if name in explicit:
            origin = f"argument {name}"
        elif any(key.upper() == env_var(name) and value for key, value in os.environ.items()):
            origin = f"setting {name} (environment variable {env_var(name)})"
        else:
            origin = f"setting {name} (default)"
        shown = "" if name in _SECRET_FIELDS else f"; got {quoted(error.get('input'))}"
        problems.append((name, f"{origin}: {_cut(error['msg'], MAX_MESSAGE_CHARS)}{shown}"))
    return SettingsError(problems, hint=f"known settings: {', '.join(known)}" if unknown else None)
