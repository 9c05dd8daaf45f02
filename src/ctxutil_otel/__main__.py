"""``python -m ctxutil_otel`` runs the ``ctxutil-otel`` command line."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
