"""The curated public API: every name in ``__all__`` resolves, and heavy imports stay lazy."""

from __future__ import annotations

import subprocess
import sys

import ctxutil_otel


def test_every_public_name_resolves() -> None:
    for name in ctxutil_otel.__all__:
        assert getattr(ctxutil_otel, name) is not None, name


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        ctxutil_otel.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018 - the access is the test
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_importing_the_package_does_not_import_openai() -> None:
    code = "import sys, ctxutil_otel; print('openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
