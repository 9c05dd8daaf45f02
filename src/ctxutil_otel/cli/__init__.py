"""The ``ctxutil-otel`` command line: one module per command, named in ``_COMMANDS`` (``ctxutil-otel --help``
lists them; tests/test_catalogues.py checks every prose list of them against the parser).

Each command module exposes ``register(subparsers)``, which adds its sub-parser and sets
``func(args) -> int`` (the exit status).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ._logging import install_cli_logging

__all__ = ["main"]

_COMMANDS = ("_demo", "_evaluate", "_bench", "_serve")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctxutil-otel",
        description="Contextual Utilization monitoring for RAG applications, on OpenTelemetry.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMANDS:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            continue  # command not built yet
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ctxutil-otel`` console script; returns the exit status."""
    install_cli_logging()  # before anything logs: every record printed is redacted (_logging.py)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
