"""``python -m ctxutil_otel.cli`` runs the ``ctxutil-otel`` command line."""

from __future__ import annotations

from . import main

raise SystemExit(main())
