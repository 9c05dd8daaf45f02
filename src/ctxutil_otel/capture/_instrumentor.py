"""``CtxutilInstrumentor``: the OpenTelemetry instrumentor that attaches the callback handler to every
LangChain run, with no ``callbacks=`` on any call.

Programmatic::

    CtxutilInstrumentor().instrument(
        tracer_provider=tp, meter_provider=mp, logger_provider=lp, sample_rate=0.2
    )
    ...
    CtxutilInstrumentor().uninstrument()

Zero-code: the package registers this class under the ``opentelemetry_instrumentor`` entry point (name
``ctxutil_otel``), so ``opentelemetry-instrument python app.py`` turns it on with the providers the
launcher's configurator set globally, and the settings from the ``CTXUTIL_*`` environment variables.

How it attaches: LangChain's configure hook (``langchain_core.tracers.context.register_configure_hook``),
the mechanism LangChain's own tracers use. A ``ContextVar`` whose *default* is the handler is registered
(inheritable), so ``CallbackManager.configure`` adds the handler to the callback manager of every run in
every thread and task, once per manager (LangChain compares by identity). ``uninstrument()`` removes the
hook from LangChain's hook list (LangChain has no public unregister; when its private list is not where it
is expected, a warning says so and the handler stays attached but shut down: it then only counts runs as
dropped ``shutdown``) and shuts the handler's evaluator down.

Like every ``BaseInstrumentor``, the class is a singleton: ``CtxutilInstrumentor()`` always returns the
same object, and a second ``instrument()`` without ``uninstrument()`` in between is ignored with a warning
(by ``BaseInstrumentor``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

if TYPE_CHECKING:
    from ._langchain import UtilizationCallbackHandler

__all__ = ["INSTRUMENTED_PACKAGES", "CtxutilInstrumentor"]

_log = logging.getLogger("ctxutil_otel.capture")

#: What ``instrumentation_dependencies()`` declares (checked by ``opentelemetry-instrument``).
INSTRUMENTED_PACKAGES: Final = ("langchain-core >= 0.3",)


class CtxutilInstrumentor(BaseInstrumentor):  # type: ignore[misc]  # BaseInstrumentor is untyped
    """Attach a :class:`~ctxutil_otel.capture.UtilizationCallbackHandler` to every LangChain run.

    ``instrument(**kwargs)`` keyword arguments:
        tracer_provider / meter_provider / logger_provider: Where results go (default: the global
            providers, resolved when first used).
        skip_dep_check: ``BaseInstrumentor``'s switch (skip the ``langchain-core`` version check).
        **settings: Any :class:`~ctxutil_otel.Settings` by name (``sample_rate=0.1``, ``judge="openai"``,
            ...); argument > ``CTXUTIL_*`` environment > default.

    ``instrument()`` raises :class:`~ctxutil_otel.SettingsError` (a ``ValueError``) for an unknown
    setting or an invalid value, like the handler does; the hook is then not registered.

    Attributes:
        handler: The attached handler while instrumented (its ``stats()`` is the accounting), else ``None``.
    """

    handler: UtilizationCallbackHandler | None = None
    _hook: ContextVar[Any] | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return INSTRUMENTED_PACKAGES

    def _instrument(self, **kwargs: Any) -> None:
        from langchain_core.tracers.context import register_configure_hook

        handler = _build_handler(kwargs)
        hook: ContextVar[Any] = ContextVar("ctxutil_otel_handler", default=handler)
        register_configure_hook(hook, inheritable=True)
        self.handler = handler
        self._hook = hook

    def _uninstrument(self, **kwargs: Any) -> None:
        handler, hook = self.handler, self._hook
        self.handler = None
        self._hook = None
        if hook is not None and not _unregister(hook):
            _log.warning(
                "ctxutil-otel: could not remove the LangChain configure hook (langchain_core changed?); "
                "the shut-down handler stays attached and counts new runs as dropped 'shutdown'"
            )
        if handler is not None:
            timeout_ms = int(handler.settings.shutdown_timeout_s * 1000)
            handler.shutdown(timeout_ms)


def _build_handler(kwargs: dict[str, Any]) -> UtilizationCallbackHandler:
    """The handler for ``instrument(**kwargs)``: an Evaluator on the given providers (global when absent)
    with the settings in ``kwargs`` (``BaseInstrumentor``'s own ``skip_dep_check`` is not a setting)."""
    from ._langchain import UtilizationCallbackHandler

    # The handler's own path (capture/_evaluator_args.py): one way to build an evaluator from settings.
    return UtilizationCallbackHandler(**{k: v for k, v in kwargs.items() if k != "skip_dep_check"})


def _unregister(hook: ContextVar[Any]) -> bool:
    """Remove ``hook`` from LangChain's configure-hook list (private: there is no public API for it)."""
    try:
        from langchain_core.tracers import context as tracer_context

        hooks = tracer_context._configure_hooks
        kept = [entry for entry in hooks if entry[0] is not hook]
        if len(kept) == len(hooks):
            return False
        hooks[:] = kept
        return True
    except Exception:  # a changed private structure: reported by the caller
        return False
