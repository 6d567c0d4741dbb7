"""The partition metrics behind docs/scaling.md (tests/benchmarks/partition.py)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "partition.py"
_spec = importlib.util.spec_from_file_location("meshsim_bench_partition", _PATH)
P = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = P
_spec.loader.exec_module(P)


def test_cut_metrics_counts_cut_edges_weights_and_channels():
    # a path 0-1-2-3 plus 0-3; parts {0,1} {2} {3}
    edges = [(0, 1), (1, 2), (2, 3), (0, 3)]
    parts = [0, 0, 1, 2]
    m = P.cut_metrics(edges, parts, [5, 1, 2, 10])
    assert m["cut"] == 3
    assert m["cut_weight"] == 13
    assert m["total_weight"] == 18
    assert m["cut_share"] == pytest.approx(13 / 18)
    assert m["channels"] == 6  # (0,1) (1,2) (0,2), both directions
    assert P.cut_metrics(edges, [0, 0, 0, 0])["cut"] == 0
    with pytest.raises(ValueError):
        P.cut_metrics(edges, parts, [1])


def test_imbalance():
    assert P.imbalance([0, 0, 1, 1], [1, 1, 1, 1], 2) == 1.0
    assert P.imbalance([0, 0, 0, 1], [1, 1, 1, 1], 2) == 1.5


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=60), st.floats(0.001, 3))
def test_windows_are_conservative_and_greedy(ts, L):
    t = np.sort(np.asarray(ts))
    w = P.windows(t, L)
    assert w[0] == 0 and np.all(np.diff(w) >= 0) and np.all(np.diff(w) <= 1)
    for i in range(int(w[-1]) + 1):
        sel = t[w == i]
        assert sel[-1] - sel[0] < L  # nothing sent inside a window can land inside it
        if i + 1 <= w[-1]:
            assert t[w == i + 1][0] >= sel[0] + L  # the next window opens at the next pending event


def test_kernighan_lin_fallback_splits_two_cliques_at_their_bridge(monkeypatch):
    monkeypatch.setitem(sys.modules, "pymetis", None)  # force the networkx path
    edges = [(u, v) for u in range(4) for v in range(u + 1, 4)]
    edges += [(u, v) for u in range(4, 8) for v in range(u + 1, 8)] + [(3, 4)]
    parts, method = P.partition(8, edges, 2)
    assert "Kernighan-Lin" in method
    assert P.cut_metrics(edges, parts)["cut"] == 1
    assert sorted(np.bincount(parts)) == [4, 4]
