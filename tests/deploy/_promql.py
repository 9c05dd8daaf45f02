"""A small PromQL lexer for the deploy tests: metric names, grouping labels and top-level operands.

Not a parser: it knows just enough of the PromQL grammar (strings, label-matcher braces, range brackets,
grouping clauses, comparison and set operators) to read the expressions this project ships in
deploy/alerts.yaml and the Grafana dashboard, and to take them apart for the end-to-end test.
Reference: https://prometheus.io/docs/prometheus/latest/querying/basics/ and .../operators/.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "DASHBOARD_FILE",
    "DASHBOARD_VARIABLES",
    "DEPLOY",
    "ROOT",
    "Token",
    "dashboard_expressions",
    "grouping_labels",
    "metric_names",
    "rule_expressions",
    "strip_absent",
    "substitute_grafana_variables",
    "tokenize",
    "top_level_operands",
]

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DASHBOARD_FILE = DEPLOY / "grafana" / "dashboards" / "ctxutil-otel.json"

#: The dashboard's query variables, each a label filter (``label=~"$name"``; "All" is ``.*``).
DASHBOARD_VARIABLES = (
    "job",
    "service",
    "application",
    "model",
    "provider",
    "chain",
    "retriever",
    "prompt_version",
)

_KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless"}
)
_GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_COMPARISON = ("==", "!=", "<=", ">=", "<", ">")
_SET = frozenset({"and", "or", "unless"})
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_NUMBER = re.compile(
    r"(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)(?:[smhdwy]|ms)?"
)
_OPERATORS = ("==", "!=", "<=", ">=", "=~", "!~", "<", ">", "+", "-", "*", "/", "%", "^", "@")


@dataclass(frozen=True)
class Token:
    kind: str  # ident | number | string | matchers | range | ( | ) | , | op
    text: str
    start: int
    end: int


def _skip_balanced(expr: str, i: int, open_: str, close: str) -> int:
    """Index just past the bracket closing the one at ``expr[i]``; strings inside are skipped."""
    depth = 0
    while i < len(expr):
        ch = expr[i]
        if ch in "\"'`":
            i = _skip_string(expr, i)
            continue
        if ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError(f"unbalanced {open_!r} in {expr!r}")


def _skip_string(expr: str, i: int) -> int:
    quote = expr[i]
    i += 1
    while i < len(expr):
        if expr[i] == "\\" and quote != "`":
            i += 2
            continue
        if expr[i] == quote:
            return i + 1
        i += 1
    raise ValueError(f"unterminated string in {expr!r}")


def tokenize(expr: str) -> list[Token]:
    """Split a PromQL expression into tokens; ``{...}`` and ``[...]`` each become one token."""
    tokens: list[Token] = []
    i = 0
    while i < len(expr):
        ch = expr[i]
        if ch.isspace():
            i += 1
        elif ch == "#":
            newline = expr.find("\n", i)
            i = len(expr) if newline < 0 else newline
        elif ch in "\"'`":
            end = _skip_string(expr, i)
            tokens.append(Token("string", expr[i:end], i, end))
            i = end
        elif ch == "{":
            end = _skip_balanced(expr, i, "{", "}")
            tokens.append(Token("matchers", expr[i:end], i, end))
            i = end
        elif ch == "[":
            end = _skip_balanced(expr, i, "[", "]")
            tokens.append(Token("range", expr[i:end], i, end))
            i = end
        elif ch in "(),":
            tokens.append(Token(ch, ch, i, i + 1))
            i += 1
        elif (m := _NUMBER.match(expr, i)) and (ch.isdigit() or ch == "."):
            tokens.append(Token("number", m.group(), i, m.end()))
            i = m.end()
        elif m := _IDENT.match(expr, i):
            tokens.append(Token("ident", m.group(), i, m.end()))
            i = m.end()
        else:
            for op in _OPERATORS:
                if expr.startswith(op, i):
                    tokens.append(Token("op", op, i, i + len(op)))
                    i += len(op)
                    break
            else:
                raise ValueError(f"unexpected {ch!r} at {i} in {expr!r}")
    return tokens


def _grouping_spans(tokens: list[Token]) -> Iterator[tuple[str, int, int]]:
    """(keyword, index of '(' , index of ')') for every grouping clause ``by (...)``, ``on (...)`` ..."""
    for k, tok in enumerate(tokens):
        if (
            tok.kind == "ident"
            and tok.text in _GROUPING
            and k + 1 < len(tokens)
            and tokens[k + 1].kind == "("
        ):
            close = next(j for j in range(k + 2, len(tokens)) if tokens[j].kind == ")")
            yield tok.text, k + 1, close


def metric_names(expr: str) -> set[str]:
    """Metric (or recorded series) names selected by ``expr``: identifiers that are not functions,
    keywords, or labels inside grouping clauses. ``Inf``/``NaN`` literals are not names."""
    tokens = tokenize(expr)
    in_grouping: set[int] = set()
    for _, open_, close in _grouping_spans(tokens):
        in_grouping.update(range(open_, close + 1))
    names = set()
    for k, tok in enumerate(tokens):
        if tok.kind != "ident" or k in in_grouping or tok.text.lower() in _KEYWORDS:
            continue
        if tok.text.lower() in {"inf", "nan"}:
            continue
        following = tokens[k + 1] if k + 1 < len(tokens) else None
        if following is not None and (
            following.kind == "(" or (following.kind == "ident" and following.text in {"by", "without"})
        ):
            continue  # function, or aggregation (`sum (...)`, `sum by (...) (...)`)
        names.add(tok.text)
    return names


def grouping_labels(expr: str) -> tuple[str, ...] | None:
    """Labels of the first ``by (...)`` clause (the outermost aggregation's, for this project's
    expressions), or ``None`` when there is none."""
    tokens = tokenize(expr)
    for keyword, open_, close in _grouping_spans(tokens):
        if keyword == "by":
            return tuple(t.text for t in tokens[open_ + 1 : close] if t.kind == "ident")
    return None


def top_level_operands(expr: str) -> list[str]:
    """Split ``expr`` at comparison and set operators outside parentheses (with their ``bool`` /
    ``on (...)`` / ``group_left (...)`` modifiers) and return the operands that are not plain numbers.

    ``a < 0.5 and b * 1800 >= 20`` -> ``["a", "b * 1800"]``. Arithmetic stays inside an operand; a
    parenthesized condition between operators (``(a < b and c) or (d < e)``) is split the same way.
    """
    tokens = tokenize(expr)
    operands: list[str] = []
    depth = 0
    k = 0
    cut_points: list[tuple[int, int]] = []  # (char start of operator, char end of its modifiers)
    while k < len(tokens):
        tok = tokens[k]
        if tok.kind == "(":
            depth += 1
        elif tok.kind == ")":
            depth -= 1
        elif depth == 0 and (
            (tok.kind == "op" and tok.text in _COMPARISON) or (tok.kind == "ident" and tok.text in _SET)
        ):
            op_start = tok.start
            k += 1
            # modifiers: bool, on/ignoring (...), group_left/group_right [(...)]
            while k < len(tokens) and tokens[k].kind == "ident" and tokens[k].text in _GROUPING | {"bool"}:
                k += 1
                if k < len(tokens) and tokens[k].kind == "(":
                    while tokens[k].kind != ")":
                        k += 1
                    k += 1
            end = tokens[k].start if k < len(tokens) else len(expr)
            cut_points.append((op_start, end))
            continue
        k += 1
    position = 0
    for op_start, op_end in [*cut_points, (len(expr), len(expr))]:
        piece = expr[position:op_start].strip()
        position = op_end
        if piece and _parenthesized(piece) and cut_points:
            operands.extend(top_level_operands(piece[1:-1]))  # a parenthesized condition: its operands
        elif piece and not _NUMBER.fullmatch(piece):
            operands.append(piece)
    return operands


def _parenthesized(piece: str) -> bool:
    """``piece`` is one parenthesized group: ``(...)`` whose opening bracket closes at its end."""
    return piece.startswith("(") and _skip_balanced(piece, 0, "(", ")") == len(piece)


def strip_absent(expr: str) -> str:
    """``absent(x)`` / ``absent_over_time(x[15m])`` -> the selector inside (``x`` / ``x[15m]`` without the
    range): what must have data for the absence alert to stay silent."""
    m = re.fullmatch(r"\s*absent(?:_over_time)?\s*\((.*)\)\s*", expr, flags=re.S)
    if not m:
        return expr
    return re.sub(r"\[[^\]]*\]\s*$", "", m.group(1).strip())


def substitute_grafana_variables(
    expr: str, rate_interval: str = "1m", values: Mapping[str, str] | None = None
) -> str:
    """Replace the dashboard's template variables by what Grafana sends: ``values[name]`` for a variable
    set to one value (plain words only, so the value is its own exact regex), "All" (``.*``) for the
    others."""
    out = expr.replace("$__rate_interval", rate_interval).replace("$__interval", rate_interval)
    chosen = values or {}
    unknown = set(chosen) - set(DASHBOARD_VARIABLES)
    if unknown:
        raise ValueError(f"no dashboard variable {sorted(unknown)}")
    if any(not re.fullmatch(r"[\w-]+", value) for value in chosen.values()):
        raise ValueError(f"values must be letters, digits, _ or - (no regex escaping here): {chosen}")
    out = re.sub(
        r"\$\{?(" + "|".join(DASHBOARD_VARIABLES) + r")\}?",
        lambda m: chosen.get(m.group(1), ".*"),
        out,
    )
    if "$" in out:
        raise ValueError(f"unsubstituted Grafana variable in {out!r}")
    return out


def rule_expressions(path: Path = DEPLOY / "alerts.yaml") -> list[dict[str, Any]]:
    """Every rule of the rules file: dicts with ``group``, ``record`` or ``alert``, ``expr``."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [{"group": group["name"], **rule} for group in data["groups"] for rule in group["rules"]]


def dashboard_expressions(path: Path) -> list[dict[str, Any]]:
    """Every PromQL expression of a dashboard JSON: panel targets (with the panel's title, unit and the
    target's legendFormat), template-variable queries and annotation queries (``kind`` tells which)."""
    dashboard = json.loads(path.read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = []

    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(dashboard.get("panels", [])):
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
        for target in panel.get("targets", []):
            if "expr" in target:
                found.append(
                    {
                        "kind": "panel",
                        "title": panel["title"],
                        "unit": unit,
                        "legend": target.get("legendFormat", ""),
                        "expr": target["expr"],
                    }
                )
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        if variable.get("type") == "query":
            text = query["query"] if isinstance(query, dict) else query
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", text.strip())
            found.append(
                {
                    "kind": "variable",
                    "title": variable["name"],
                    "expr": m.group(1) if m else text,
                    "label": m.group(2) if m else None,
                }
            )
    for annotation in dashboard.get("annotations", {}).get("list", []):
        if "expr" in annotation:
            found.append({"kind": "annotation", "title": annotation["name"], "expr": annotation["expr"]})
    return found
