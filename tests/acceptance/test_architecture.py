"""docs/index.md's architecture cannot drift (issue 31 item 8): its packages are the tree's, named in the
order imports flow, and no package imports one named after it or beside it in the same step."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.unit.test_imports import import_graph

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "meshsim"

#: the packages bottom up, as docs/index.md draws them; a step's packages never import each other
LAYERS = [["core"], ["graphs", "workload", "net"], ["protocols", "backends"], ["scenario"], ["io", "observe"],
          ["simulate", "analysis"], ["sweep"], ["plots"], ["uncertainty"], ["paper"], ["verdict"], ["cli"]]
RANK = {p: i for i, step in enumerate(LAYERS) for p in step}


def _package_edges() -> set[tuple[str, str]]:
    """(a, b): a module of package a imports one of package b (the top package and __main__ left out)."""
    out = set()
    for u, v in import_graph().edges:
        a, b = u.split("."), v.split(".")
        if len(a) > 1 and len(b) > 1 and a[1] != b[1] and a[1] != "__main__":
            out.add((a[1], b[1]))
    return out


def _architecture() -> str:
    text = (ROOT / "docs" / "index.md").read_text()
    return text[text.index("## Architecture\n"):text.index("\n## ", text.index("## Architecture\n") + 1)]


def test_the_layers_are_the_packages_of_the_tree():
    tree = sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").is_file())
    assert sorted(RANK) == tree
    assert sum(len(step) for step in LAYERS) == len(RANK)


def test_imports_flow_down_the_layers():
    edges = _package_edges()
    assert ("simulate", "scenario") in edges and ("cli", "verdict") in edges  # the reader sees package edges
    up = sorted(f"{a} -> {b}" for a, b in edges if RANK[b] >= RANK[a])
    assert not up, "imports upward or within a step of docs/index.md's architecture: " + ", ".join(up)


def test_the_docs_name_every_package_in_the_order_imports_flow():
    named = []  # first mentions, packages only (meshsim/data/ holds files)
    for m in re.finditer(r"`meshsim/(\w+)/`", _architecture()):
        if m.group(1) in RANK and m.group(1) not in named:
            named.append(m.group(1))
    assert named == [p for step in LAYERS for p in step]


def test_the_top_package_loads_its_api_on_first_use():
    """``import meshsim`` (for its ``__version__``, which lives in ``meshsim.core.version``, or its API)
    must not pull the simulator in: the API loads on first use."""
    code = ("import sys, meshsim\n"
            "loaded = sorted({m.split('.')[1] for m in sys.modules if m.startswith('meshsim.')})\n"
            "assert loaded == ['core'], loaded\n"
            "meshsim.run\n"
            "assert 'meshsim.simulate.runner' in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
