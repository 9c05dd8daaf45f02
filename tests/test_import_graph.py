"""The import graph of ``src/ctxutil_otel`` follows the layout (docs/architecture.md, import rules).

Every ``import`` / ``from ... import`` statement counts, wherever it is written: at module level, under
``if TYPE_CHECKING:`` and inside functions (deferred imports). A cycle among them is a cycle, whether or
not Python would hit it at run time, and a room may import only the rooms below it.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = "ctxutil_otel"
SRC = Path(__file__).resolve().parents[1] / "src" / PACKAGE

#: Rooms from the bottom up: a module may import modules of its own room or of a LOWER rank only.
#: "" is the neutral room: the package's top-level private modules (``_interaction``, ``_item``,
#: ``_accounting``, ``_settings``, ...), which import nothing of the flow.
RANKS: dict[str, int] = {
    "": 0,
    "judges": 1,
    "metric": 2,
    "sampling": 2,
    "emit": 3,
    "worker": 4,
    "capture": 5,
    "data": 5,
    "demo": 5,
    "serve": 6,
    "cli": 7,
}
#: Modules above every room: the package's public facade and entry point.
FACADE = frozenset({PACKAGE, f"{PACKAGE}.__main__"})


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in SRC.rglob("*.py")}


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _imports(module: str, path: Path, known: set[str]) -> Iterator[str]:
    """Every project module ``module`` imports, anywhere in its body."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node)
            # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                # ``import ctxutil_otel.x.y`` names a module; keep the longest known prefix.
                while target not in known and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in known and target != module:
                    yield target


@functools.cache
def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: set(_imports(name, path, known)) for name, path in modules.items()}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and not parts[1].startswith("_")) else ""


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_walker_sees_typing_only_and_deferred_imports() -> None:
    graph = _graph()
    # typing-only (under TYPE_CHECKING) and deferred (inside a function) imports of the capture paths
    assert f"{PACKAGE}.worker._evaluator" in graph[f"{PACKAGE}.capture._langchain"]
    assert f"{PACKAGE}.capture._langchain" in graph[f"{PACKAGE}.capture"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_in_src() -> None:
    cycles = _cycles(_graph())
    assert cycles == [], "import cycles (typing-only and deferred imports included):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_no_cycle_between_rooms() -> None:
    rooms: dict[str, set[str]] = {}
    for module, targets in _graph().items():
        if module in FACADE:
            continue
        rooms.setdefault(_room(module), set()).update(
            _room(t) for t in targets if t not in FACADE and _room(t) != _room(module)
        )
    assert _cycles(rooms) == []


def test_importing_the_span_processor_loads_no_exporter() -> None:
    # The processor needs three telemetry names, not the SDK exporters that configure_telemetry uses.
    code = (
        "import sys; import ctxutil_otel.capture.spans; "
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk') and 'export' in m))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_module_belongs_to_a_ranked_room() -> None:
    unranked = sorted(m for m in _graph() if m not in FACADE and _room(m) not in RANKS)
    assert unranked == [], f"add these rooms to RANKS (and docs/architecture.md): {unranked}"


@pytest.mark.parametrize("room", sorted(RANKS))
def test_a_room_imports_only_rooms_below_it(room: str) -> None:
    graph = _graph()
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module not in FACADE and _room(module) == room
        for target in targets
        if target in FACADE
        or RANKS.get(_room(target), 99) > RANKS[room]
        or (_room(target) != room and RANKS.get(_room(target)) == RANKS[room])
    )
    assert upward == [], f"room {room or '(neutral)'!r} imports rooms at or above its rank:\n" + "\n".join(
        upward
    )


# --- the docs draw these ranks ------------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[1]


def _layout_line() -> str:
    """The README's layout line, from :data:`RANKS`: rooms from the top rank down, same-rank rooms joined
    by ``·`` (alphabetically), the neutral room last."""
    ranks = sorted(set(RANKS.values()), reverse=True)
    groups = [
        " · ".join(sorted(room or "neutral" for room, r in RANKS.items() if r == rank)) for rank in ranks
    ]
    return " ──> ".join(groups)


def test_the_readme_layout_line_is_drawn_from_the_ranks() -> None:
    readme = (DOCS / "README.md").read_text(encoding="utf-8")
    assert f"    {_layout_line()}\n" in readme, f"README.md's layout line should read:\n    {_layout_line()}"


def test_the_architecture_table_gives_each_room_its_rank() -> None:
    text = (DOCS / "docs" / "architecture.md").read_text(encoding="utf-8")
    documented: dict[str, int] = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].isdigit():
            continue
        rank = int(cells[0])
        if cells[1].startswith("neutral"):
            documented[""] = rank
            continue
        for span in cells[1].split("`")[1::2]:
            room = span.strip("/")
            if "/" not in room:  # capture/spans/ belongs to capture
                documented[room] = rank
    assert documented == RANKS
