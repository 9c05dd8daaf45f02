"""The ``serve`` package's shape (issue 14): a curated public surface, and no import circle among its
modules, typing-only imports included (walked from the source, so ``if TYPE_CHECKING`` counts)."""

from __future__ import annotations

import ast
from pathlib import Path

import ctxutil_otel.serve as serve

PACKAGE = Path(serve.__file__).parent


def test_public_surface_is_what_users_need() -> None:
    assert set(serve.__all__) == {
        "HEALTH_PATH",
        "HEALTH_RESERVED_CONNECTIONS",
        "TLSFiles",
        "TRACES_PATH",
        "ReceiverStats",
        "TraceReceiver",
        "serve_until_signal",
    }
    assert not hasattr(serve, "convert_span")  # internals stay in their private modules


def _imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.glob("*.py"):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    found.add(node.module.split(".")[0])
                else:
                    found.update(alias.name for alias in node.names)
        graph[path.stem] = found - {"__init__"}
    return graph


def test_no_import_circle_in_serve() -> None:
    graph = _imports()
    assert graph["_server"] >= {"_grpc", "_http"}  # the walk sees the relative imports

    def visit(module: str, path: tuple[str, ...]) -> None:
        for target in sorted(graph.get(module, ())):
            assert target not in path, f"import circle: {' -> '.join((*path, target))}"
            visit(target, (*path, target))

    for module in graph:
        if module != "__init__":
            visit(module, (module,))
