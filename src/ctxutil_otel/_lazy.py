"""Attributes of a package imported on first access (PEP 562 ``__getattr__``), for the names whose
modules pull in heavy dependencies (LangChain, the OpenAI SDK, the OpenTelemetry exporters)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``name`` from ``modules[name]`` (a module
    relative to ``package``) on first access and keeps it in the package's namespace.

    Raises (from the returned function):
        AttributeError: for a name not in ``modules``, as a module attribute miss does.
    """

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
