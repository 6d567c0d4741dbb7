"""Every scenario shipped in scenarios/ validates and runs at its smoke size."""
from __future__ import annotations

from pathlib import Path

import pytest

import meshsim
from meshsim.scenario.model import build_graph, check_semantics

ROOT = Path(__file__).resolve().parents[2] / "scenarios"
FILES = sorted(p for p in ROOT.rglob("*.yaml") if "data" not in p.parts)


def test_there_are_scenarios():
    assert FILES


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_scenario_runs_small(path, tmp_path):
    full = meshsim.load_scenario(path)
    check_semantics(full, build_graph(full))
    sc = meshsim.load_scenario(path, smoke=True)
    res = meshsim.run(sc, seed=sc.seed, out=tmp_path / "run")
    assert (tmp_path / "run" / "summary.json").exists()
    s = res.summary
    assert s["messages"]["total"]["sent"] > 0
    if "routing" in s:
        assert s["routing"]["tables_correct_at_end"], s["routing"]["windows"]
