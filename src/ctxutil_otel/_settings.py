"""Settings of the live evaluation engine, resolved explicit argument > environment > default.

Every setting ``name`` is read from the environment variable ``CTXUTIL_<NAME>`` (case-insensitive;
empty values count as unset). Content capture also honours the OpenTelemetry GenAI convention
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` when ``CTXUTIL_CAPTURE_CONTENT`` is unset.

Rate and budget limits use ``0`` (or ``None``) for *unlimited*.
"""

from __future__ import annotations

import enum
import json
import logging
from collections.abc import Collection
from typing import Any, Literal, get_origin

from pydantic import SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from ._dimension_keys import check_dimension_keys
from ._redact import KEY_WHITESPACE, unusable_key
from ._selection import parse_rules
from ._settings_fields import SettingsFields
from ._settings_sources import (
    ENV_PREFIX,
    OTEL_CAPTURE_CONTENT_ENV,
    BlankMeansUnsetSource,
    EmptyMeansNoneSource,
    OTelCaptureContentSource,
    SettingsError,
    env_var,
    settings_error,
)
from ._url import check_base_url

__all__ = [
    "ENV_PREFIX",
    "OTEL_CAPTURE_CONTENT_ENV",
    "Settings",
    "SettingsError",
    "env_var",
]


def _enumerated(fields: type[SettingsFields]) -> tuple[str, ...]:
    """The settings that take one of a fixed set of words (a ``Literal`` or a string enum): each is
    read case-insensitively and normalised, so ``Process`` and ``Semantic`` behave alike."""
    return tuple(
        name
        for name, field in fields.model_fields.items()
        if get_origin(field.annotation) is Literal
        or (isinstance(field.annotation, type) and issubclass(field.annotation, enum.Enum))
    )


_ENUMERATED = _enumerated(SettingsFields)
_log = logging.getLogger("ctxutil_otel")


class Settings(SettingsFields):
    """Configuration of sampling, the evaluation worker, the judge and emission.

    Resolution per setting: explicit argument > ``CTXUTIL_<NAME>`` environment variable > default.
    Instances are immutable; ``repr()`` never shows the API key.

    Raises:
        SettingsError: (a ``ValueError``) naming each invalid or unknown setting and, for a value
            from the environment, its variable.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_ignore_empty=True,
        extra="forbid",
        frozen=True,
        validate_default=True,
        # nan compares false with every bound, so without this it failed "should be less than or
        # equal to 1; got nan"; inf is no setting's meaningful value either.
        allow_inf_nan=False,
    )

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise settings_error(exc, explicit=set(values), known=list(type(self).model_fields)) from None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # explicit argument > CTXUTIL_* > OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT > default.
        # No .env file and no secrets directory: configuration comes from code and the environment.
        return (
            init_settings,
            BlankMeansUnsetSource(settings_cls, env_settings),
            EmptyMeansNoneSource(settings_cls),
            OTelCaptureContentSource(settings_cls),
        )

    @field_validator(*_ENUMERATED, mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("selection_rules", mode="before")
    @classmethod
    def _rules(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            return ()
        if isinstance(value, (str, list, tuple)):
            return tuple(parse_rules(value))  # errors name the rule and the field
        return value

    @field_validator(
        "chunk_metadata_keys", "metric_dimensions", "retrieval_tools", "excluded_tools", mode="before"
    )
    @classmethod
    def _key_list(cls, value: object) -> object:
        if isinstance(value, str):  # the environment's form: comma-separated, or a JSON array of strings
            if value.lstrip().startswith("["):
                return _json_names(value)
            return tuple(key.strip() for key in value.split(",") if key.strip())
        return value

    @field_validator("chunk_metadata_keys")
    @classmethod
    def _keys_not_blank(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not key.strip() for key in value):
            raise ValueError("metadata keys must not be blank")
        return tuple(dict.fromkeys(key.strip() for key in value))

    @field_validator("metric_dimensions")
    @classmethod
    def _dimension_keys(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return check_dimension_keys(value)

    @field_validator("judge_api_key")
    @classmethod
    def _key_not_padded(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and unusable_key(value.get_secret_value()):
            raise ValueError(KEY_WHITESPACE)
        return value

    @field_validator("judge_base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        check_base_url(
            value, key_advice="Put the key in CTXUTIL_JUDGE_API_KEY (sent in the Authorization header)"
        )
        return value

    @property
    def rate_limit(self) -> float | None:
        """``max_evaluations_per_second`` with 0 normalised to ``None`` (unlimited)."""
        return self.max_evaluations_per_second or None

    @property
    def cpu_fraction(self) -> float | None:
        """``max_worker_cpu_fraction`` with 0 normalised to ``None`` (unlimited)."""
        return self.max_worker_cpu_fraction or None

    @property
    def token_budget(self) -> int | None:
        """``judge_token_budget_per_minute`` with 0 normalised to ``None`` (unlimited)."""
        return self.judge_token_budget_per_minute or None

    @classmethod
    def resolved_for(cls, names: Collection[str], reader: str, /, **values: Any) -> Settings:
        """``Settings(**values)`` for ``reader`` (e.g. ``"the judge"``), which reads only the settings
        ``names`` (and ``values``): an invalid ``CTXUTIL_*`` variable of another setting does not stop it.
        One WARNING names those variables, and each of their settings takes its default in the result
        (read ``names`` only).

        Raises:
            SettingsError: naming only the invalid settings among ``names`` and ``values``.
        """
        try:
            return cls(**values)
        except SettingsError as exc:
            needed = {*names, *values}
            own = [(name, message) for name, message in exc.errors if name in needed]
            if own or any(name not in cls.model_fields for name, _ in exc.errors):
                raise SettingsError(own or exc.errors) from None
            others = exc.errors
        _log.warning(
            "ctxutil-otel: %s reads none of these invalid settings, so they do not stop it (whatever "
            "reads one refuses it: an Evaluator, a handler, serve):\n%s",
            reader,
            "\n".join(f"  - {message}" for _, message in others),
        )
        defaults = {name: cls.model_fields[name].get_default(call_default_factory=True) for name, _ in others}
        return cls(**values, **defaults)

    def with_defaults(self, **defaults: Any) -> Settings:
        """A copy where each of ``defaults`` applies to a setting that was neither passed nor set in the
        environment: a command's own defaults (argument > ``CTXUTIL_*`` > the command's default > the
        library's), without reading the environment again.

        Raises:
            SettingsError: for an unknown setting or an invalid value.
        """
        return self.merged(**{name: v for name, v in defaults.items() if name not in self.model_fields_set})

    def merged(self, **overrides: Any) -> Settings:
        """Return a copy with ``overrides`` applied and validated (the environment is not re-read).

        Raises:
            SettingsError: for an unknown setting or an invalid value.
        """
        if not overrides:
            return self
        data = {name: getattr(self, name) for name in type(self).model_fields}
        data.update(overrides)
        # Every field is passed explicitly, so the environment cannot change anything here.
        return type(self)(**data)


def _json_names(text: str) -> tuple[str, ...]:
    """The names of a JSON array of strings (pydantic-settings' form for a list: split at its commas it
    gave names nothing has, ``'["search_docs"'``, and the setting silently matched nothing).

    Raises:
        ValueError: when ``text`` is not a JSON array of strings.
    """
    try:
        names = json.loads(text)
    except ValueError:
        names = None
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise ValueError("expected comma-separated names or a JSON array of strings")
    return tuple(name.strip() for name in names if name.strip())
