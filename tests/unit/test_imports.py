"""No import circles in meshsim/: a static check of the import graph, and every
module imported on its own.

The static check reads every ``import`` of every module (top level, inside
functions and under ``TYPE_CHECKING``: a deferred import is still a
dependency) and fails on any strongly connected group of modules. An import
of a module's own parent package is left out: Python always runs the parent's
``__init__`` before the module, so such an import adds no order of its own.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

PKG = Path(__file__).resolve().parents[2] / "meshsim"

KNOWN: set[frozenset] = set()  # no circle is tolerated


def _modules() -> dict[str, tuple[Path, bool]]:
    mods = {}
    for f in sorted(PKG.rglob("*.py")):
        parts = list(f.relative_to(PKG.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        mods[".".join(parts)] = (f, is_pkg)
    return mods


def import_graph() -> nx.DiGraph:
    mods = _modules()
    G = nx.DiGraph()
    for name, (path, is_pkg) in mods.items():
        G.add_node(name)
        here = name.split(".") if is_pkg else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
                # ``from pkg import sub`` imports the submodule when there is one
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                while t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]
                # the target and every package above it (their __init__ runs first)
                while t in mods:
                    if t != name and not name.startswith(t + "."):
                        G.add_edge(name, t, line=node.lineno)
                    if "." not in t:
                        break
                    t = t.rsplit(".", 1)[0]
    return G


def _circles(G: nx.DiGraph) -> list[set[str]]:
    return [c for c in nx.strongly_connected_components(G) if len(c) > 1]


def _describe(G: nx.DiGraph, circle: set[str]) -> str:
    return "; ".join(f"{u} -> {v} (line {G[u][v]['line']})" for u in sorted(circle)
                     for v in sorted(G.successors(u)) if v in circle)


def test_graph_reader_sees_imports():
    G = import_graph()
    assert G.has_edge("meshsim.simulate.runner", "meshsim.scenario.model")
    assert G.has_edge("meshsim.graphs.plain", "meshsim.graphs.registry")
    assert G.has_edge("meshsim.scenario.loading", "meshsim.scenario.events")  # a top-level import
    assert G.has_edge("meshsim.cli.figures", "meshsim.plots.report")
    # a package's __init__ runs before its module: importing meshsim.scenario.model depends on meshsim.scenario.model
    assert G.has_edge("meshsim.simulate.runner", "meshsim.scenario.model")
    assert not G.has_edge("meshsim.simulate.runner", "meshsim.simulate")  # its own package runs first anyway


def test_package_init_loop_is_a_circle(tmp_path, monkeypatch):
    """A package whose __init__ imports a module that imports a sibling package whose module imports
    the first package back is a circle, though no two modules import each other."""
    pkg = tmp_path / "meshsim"
    for rel, text in {"__init__.py": "", "a/__init__.py": "from .x import X\n", "a/x.py": "from ..b.y import Y\nX = 1\n",
                      "b/__init__.py": "", "b/y.py": "from ..a import x\nY = 2\n"}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "PKG", pkg)
    circles = _circles(import_graph())
    assert {"meshsim.a", "meshsim.a.x", "meshsim.b.y"} in circles


def test_top_of_the_package_holds_the_api_and_the_cli_only():
    """Issue 31: the loose modules live in packages that show the flow; the top of meshsim/ holds at
    most five modules besides __init__, cli and __main__."""
    top = sorted(f.stem for f in PKG.glob("*.py") if f.stem not in {"__init__", "cli", "__main__"})
    assert len(top) <= 5, top


def test_protocols_never_import_the_observer():
    """Issue 31: the protocols record, the observer reads; no protocol module imports meshsim.observe
    (not even from inside a function), so metrics sit above the rules they measure."""
    G = import_graph()
    assert G.has_edge("meshsim.observe.summary", "meshsim.protocols.execution")  # the reader sees the edge down
    up = sorted(f"{u} -> {v}" for u, v in G.edges if u.startswith("meshsim.protocols") and v.startswith("meshsim.observe"))
    assert not up, up


def test_no_import_circles():
    G = import_graph()
    bad = [c for c in _circles(G) if frozenset(c) not in KNOWN]
    assert not bad, "import circles: " + " | ".join(_describe(G, c) for c in bad)


# 2-6 s end to end: with the slow checks (README's 2-minute budget), which .ci/run runs
@pytest.mark.slow
def test_every_module_imports_on_its_own():
    """Each module, imported first into a fresh meshsim (no other module of it
    loaded), imports without error: no module relies on another having been
    imported before it."""
    names = sorted(_modules())
    code = (
        "import importlib, sys\n"
        f"names = {names!r}\n"
        "bad = []\n"
        "for n in names:\n"
        "    for k in [k for k in sys.modules if k == 'meshsim' or k.startswith('meshsim.')]:\n"
        "        del sys.modules[k]\n"
        "    try:\n"
        "        importlib.import_module(n)\n"
        "    except Exception as exc:\n"
        "        bad.append(f'{n}: {type(exc).__name__}: {exc}')\n"
        "print('\\n'.join(bad))\n"
        "sys.exit(1 if bad else 0)\n"
    )
    # bytecode cached (as Python does by default): each module is imported ~100 times here, and without
    # the cache (PYTHONDONTWRITEBYTECODE) every import compiles it again
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)  # ~5 s idle; generous under load
    assert proc.returncode == 0, proc.stdout + proc.stderr
