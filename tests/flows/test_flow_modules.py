"""The flows' modules import one way (issue 21): the round's flow module is an entry point
only the roof imports, and no two modules of flows/ import each other, type-only imports
included (they tie a newcomer's reading the same way)."""

from __future__ import annotations

import ast
from pathlib import Path

FLOWS = Path(__file__).resolve().parents[2] / "flows"


def imports() -> dict[str, set[str]]:
    """flows module -> the flows modules it imports (anywhere in the file)."""
    found: dict[str, set[str]] = {}
    for path in sorted(FLOWS.glob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module == "flows":
                names |= {f"flows.{a.name}" for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
        found[f"flows.{path.stem}"] = {n for n in names if n.startswith("flows.")}
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import path that comes back to where it started (depth-first)."""
    found: list[list[str]] = []

    def walk(path: list[str]) -> None:
        for nxt in sorted(graph.get(path[-1], ())):
            if nxt == path[0]:
                found.append([*path, nxt])
            elif nxt not in path and nxt > path[0]:  # each cycle once, from its least module
                walk([*path, nxt])

    for start in sorted(graph):
        walk([start])
    return found


def test_only_the_roof_imports_the_round_flow_module() -> None:
    """Judging, triage and the audit do not import `flows.canary_round`."""
    graph = imports()
    assert sorted(m for m, names in graph.items() if "flows.canary_round" in names) == []


def test_the_flows_modules_import_each_other_one_way() -> None:
    """No import cycle among the modules of flows/."""
    assert cycles(imports()) == []
    assert cycles({"flows.a": {"flows.b"}, "flows.b": {"flows.a"}}) == [
        ["flows.a", "flows.b", "flows.a"]
    ]
