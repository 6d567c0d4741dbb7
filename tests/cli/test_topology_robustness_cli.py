"""``meshsim topology`` reports r-robustness (SAC Def. 3.3) at any size, within
``--time-limit`` seconds, and says "undecided within N s" with its bounds
instead of omitting it (issue 18: it used to be left out above 60 nodes)."""
from __future__ import annotations

import json
import time

import networkx as nx
from click.testing import CliRunner

from meshsim.cli import main


def _topology(path, *args: str):
    t0 = time.monotonic()
    res = CliRunner().invoke(main, ["topology", str(path), *args])
    assert res.exit_code == 0, res.output
    return res, time.monotonic() - t0


def _rows(output: str) -> dict[str, str]:
    return {k: v.strip() for k, _, v in (ln.partition("  ") for ln in output.splitlines())}


def test_a_100_node_4_regular_ring_lattice_is_decided_at_once(tmp_path):
    # node i linked to i±1, i±2: 4-regular, exactly 2-robust; the verified heuristic pair and one MILP settle it
    path = tmp_path / "ring.edgelist"
    nx.write_edgelist(nx.circulant_graph(100, [1, 2]), path, data=False)
    res, wall = _topology(path, "--json")
    info = json.loads(res.output)
    assert (info["nodes"], info["degree_min"], info["degree_max"]) == (100, 4, 4)
    assert info["r_robustness"] == 2 and info["r_bounds"] == [2, 2] and info["r_method"] == "milp"
    assert wall < 8, wall  # under a second on an idle machine; the default limit is 10 s
    res, _ = _topology(path)
    assert _rows(res.output)["r_robustness"] == "2"


def test_a_graph_not_settled_in_time_reads_undecided_with_its_bounds(tmp_path):
    # a random 4-regular graph on 100 nodes: the MILP needs far more than 0.5 s to prove 2-robustness
    path = tmp_path / "rr.edgelist"
    nx.write_edgelist(nx.random_regular_graph(4, 100, seed=1), path, data=False)
    res, wall = _topology(path, "--time-limit", "0.5")
    row = _rows(res.output)["r_robustness"]
    assert row == "undecided within 0.5 s (1 <= r <= 2)", res.output
    assert wall < 10, wall
    res, _ = _topology(path, "--time-limit", "0.5", "--json")
    info = json.loads(res.output)
    assert info["r_robustness"] == "undecided within 0.5 s" and info["r_bounds"] == [1, 2]


def test_small_graphs_are_exact_and_a_bad_time_limit_is_one_line(tmp_path):
    path = tmp_path / "k6.edgelist"
    nx.write_edgelist(nx.complete_graph(6), path, data=False)
    res, _ = _topology(path, "--json")
    assert json.loads(res.output)["r_robustness"] == 3  # K_n is ceil(n/2)-robust
    bad = CliRunner().invoke(main, ["topology", str(path), "--time-limit", "0"])
    assert bad.exit_code == 2 and "--time-limit" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
