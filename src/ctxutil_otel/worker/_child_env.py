"""The judge's key and the process worker's child: the key goes down the pipe, never through the child's
environment.

A ``spawn``ed (or ``forkserver``) child inherits the application's environment, ``CTXUTIL_JUDGE_API_KEY``
and ``OPENAI_API_KEY`` included. So the parent resolves the key the child's judge would read from
``OPENAI_API_KEY`` into the settings it sends (:func:`settings_for_child`), and the child, first thing,
removes both variables from its environment (:func:`scrub_environment`): from ``os.environ`` (what its
code, its judge and any process it starts see) and, on Linux with glibc, from the bytes of its initial
environment block (what ``/proc/<pid>/environ`` shows), overwritten with zeros.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys

from .._redact import register_secret
from .._settings import Settings, SettingsError

__all__ = ["SCRUBBED_VARIABLES", "scrub_environment", "settings_for_child"]

#: Removed from the child's environment before it imports anything of the judge.
SCRUBBED_VARIABLES = ("CTXUTIL_JUDGE_API_KEY", "OPENAI_API_KEY")


def settings_for_child(settings: Settings) -> Settings:
    """``settings`` with ``judge_api_key`` set from ``OPENAI_API_KEY`` when the openai judge would read it
    there (no key configured); the key is registered for redaction in this process (the results the child
    sends back are emitted here).

    Raises:
        SettingsError: naming ``OPENAI_API_KEY`` (never its value) when it holds whitespace.
    """
    key = settings.judge_api_key.get_secret_value() if settings.judge_api_key is not None else None
    if key is None and settings.judge == "openai":
        key = os.environ.get("OPENAI_API_KEY") or None
        if key is not None:
            try:
                settings = settings.merged(judge_api_key=key)
            except SettingsError as exc:
                problems = [
                    ("judge_api_key", f"OPENAI_API_KEY (read for judge_api_key): {m}") for _, m in exc.errors
                ]
                raise SettingsError(problems) from None
    register_secret(key)
    return settings


def _zero_in_initial_block(names: tuple[str, ...]) -> None:
    """Overwrite the values of ``names`` in the C ``environ`` strings with zeros (Linux, glibc)."""
    libc = ctypes.CDLL(None)
    environ = ctypes.POINTER(ctypes.c_void_p).in_dll(libc, "environ")
    prefixes = [f"{name}=".encode() for name in names]
    i = 0
    while environ[i] is not None:
        address = environ[i]
        entry = ctypes.string_at(address)
        for prefix in prefixes:
            if entry.startswith(prefix):
                ctypes.memset(address + len(prefix), 0, len(entry) - len(prefix))
        i += 1


def scrub_environment(names: tuple[str, ...] = SCRUBBED_VARIABLES) -> None:
    """Remove ``names`` from this process's environment (module docstring); run first in the child."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):  # best effort: os.environ below is what the code sees
            _zero_in_initial_block(names)
    for name in names:
        os.environ.pop(name, None)
