"""Names carry no meaning (issue 34, item 3).

Relabelling the agents — the same graph, every agent's abilities, role and
degradation moved to another name — must not change the distribution of a
method's results. Every random stream of a run is keyed by a name (an agent's,
a link's), so a relabelled run on the same seed is a different draw: the check
is statistical. For each method, ``SEEDS`` runs with the scenario's own labels
and ``SEEDS`` runs each relabelled by a random permutation (drawn from the
seed) are compared with a two-sided Mann-Whitney test on name-sensitive
statistics: the share of committed work done by the degraded agents and the
accuracy (the chain methods, on the six-agent complete graph with A3 and A5
degraded), the strong agents' and the weak agents' final accuracy and the
round accuracy (SAC and CP-WBFT, on K7 with two weak agents and one
adversarial one). A method whose ties go to the first name (Symphony before
issue 34: no step ever landed on a degraded A3 or A5) fails here.
The runs are deterministic, so the test is too; 0.005 per statistic.
"""
from __future__ import annotations

import copy
import functools
import random
from pathlib import Path
from typing import Optional

import pytest
from scipy.stats import mannwhitneyu

from meshsim.protocols.baselines import METHODS
from meshsim.simulate.runner import RunResult, run_one
from meshsim.scenario.model import agent_abilities, build_graph, parse_scenario, read_scenario_data

ROOT = Path(__file__).resolve().parents[2]
CHAIN = ROOT / "scenarios" / "compare" / "persistent-math.yaml"
CONSENSUS = ROOT / "scenarios" / "sac" / "sac-complete-7.yaml"
SEEDS = range(9101, 9113)  # 12 seeds per labelling
ALPHA = 0.005


def _names(n: int) -> list[str]:
    return [f"A{i}" for i in range(1, n + 1)]


def _perm(seed: int, n: int) -> dict[str, str]:
    """A random relabelling of A1..An, drawn from the seed (not the identity)."""
    rnd = random.Random(seed)
    names = _names(n)
    while True:
        new = names[:]
        rnd.shuffle(new)
        if new != names:
            return dict(zip(names, new))


@functools.lru_cache(maxsize=None)
def _base(path: Path) -> tuple[dict, dict[str, list[str]]]:
    data = read_scenario_data(path)
    sc = parse_scenario(copy.deepcopy(data), str(path), path.parent)
    ab, _targets = agent_abilities(sc, build_graph(sc))
    return data, ab


def _run(path: Path, data: dict, seed: int) -> RunResult:
    """One run in memory (no folder): the tables come back in the result."""
    return run_one(parse_scenario(data, str(path), path.parent), seed)


def _chain_data(method: str, perm: dict[str, str], tasks: int, params: Optional[dict]) -> tuple[dict, list[str]]:
    """The six-agent scenario relabelled by ``perm``: abilities and degradation move with the names."""
    base, ab = _base(CHAIN)
    data = copy.deepcopy(base)
    deg = [perm["A3"], perm["A5"]]
    data["protocol"] = {"name": method, "params": dict(params or {})}
    data["tasks"]["count"] = tasks
    data["phases"] = [{"name": "degraded", "tasks": tasks}]
    data["events"] = [{"at_task": 1, "type": "degrade", "agents": deg}]
    data["output"] = {"trace": "none"}
    data["agents"]["abilities"] = {perm[a]: ks for a, ks in ab.items()}
    return data, deg


def chain_stats(method: str, seed: int, perm: dict[str, str], tasks: int = 8,
                params: Optional[dict] = None) -> tuple[float, float]:
    """(share of committed producing steps by degraded agents, accuracy): six agents, complete
    graph, MATH profile, A3 and A5 (relabelled) degraded from the first task."""
    data, deg = _chain_data(method, perm, tasks, params)
    res = _run(CHAIN, data, seed)
    prods = [p for r in res.tables["tasks.jsonl"] for p in (r.get("producers") or [])]
    share = sum(p in deg for p in prods) / max(1, len(prods))
    return share, float(res.summary["accuracy"]["overall"])


def consensus_stats(method: str, seed: int, perm: dict[str, str]) -> tuple[float, float, float]:
    """(strong agents' final accuracy, weak agents', round accuracy): SAC's K7 with A5, A6 weak
    and A7 adversarial (relabelled), three queries, two rounds."""
    base, _ab = _base(CONSENSUS)
    data = copy.deepcopy(base)
    data["agents"]["roles"] = {perm[a]: r for a, r in base["agents"]["roles"].items()}
    data["protocol"]["name"] = method
    data["protocol"]["params"]["rounds"] = 2
    data["tasks"]["count"] = 3
    s = _run(CONSENSUS, data, seed).summary
    return float(s["strong"]["faa"]), float(s["weak"]["faa"]), float(s["ra"])


def _worst_p(orig: list[tuple], perm: list[tuple]) -> tuple[float, int]:
    """The smallest two-sided Mann-Whitney p-value over the statistics, and which one."""
    worst, which = 1.0, -1
    for k in range(len(orig[0])):
        a, b = [x[k] for x in orig], [x[k] for x in perm]
        if a == b or (len(set(a)) == 1 and set(a) == set(b)):
            continue  # identical samples: nothing to test
        p = float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
        if p < worst:
            worst, which = p, k
    return worst, which


def invariance(stats, method: str, n: int, **kw) -> tuple[float, int, list, list]:
    ident = {a: a for a in _names(n)}
    orig = [stats(method, s, ident, **kw) for s in SEEDS]
    perm = [stats(method, s, _perm(s, n), **kw) for s in SEEDS]
    p, k = _worst_p(orig, perm)
    return p, k, orig, perm


def test_a_relabelled_scenario_is_the_same_network_under_other_names():
    """What the tests below compare: every agent's abilities, the degraded agents and the SAC roles
    move with the permutation; the complete graphs are unchanged by any relabelling."""
    _data0, ab = _base(CHAIN)
    for seed in SEEDS:
        perm = _perm(seed, 6)
        assert sorted(perm.values()) == _names(6) and perm != {a: a for a in _names(6)}
        data, deg = _chain_data("meshheal", perm, 8, None)
        sc = parse_scenario(data, str(CHAIN), CHAIN.parent)
        G = build_graph(sc)
        got, _targets = agent_abilities(sc, G)
        assert {a: got[perm[a]] for a in ab} == ab
        assert sc.events[0].agents == [perm["A3"], perm["A5"]] == deg
        assert G.number_of_edges() == 15
    base, _ab = _base(CONSENSUS)
    perm = _perm(SEEDS[0], 7)
    data = copy.deepcopy(base)
    data["agents"]["roles"] = {perm[a]: r for a, r in base["agents"]["roles"].items()}
    sc = parse_scenario(data, str(CONSENSUS), CONSENSUS.parent)
    assert {perm[a]: r for a, r in base["agents"]["roles"].items()} == dict(sc.agents.roles)


@pytest.mark.parametrize("method", METHODS)
def test_relabelling_the_agents_leaves_every_chain_method_s_results_unchanged(method):
    """MeshHeal and every MeshHeal-paper baseline: the degraded agents' share of the committed
    work and the accuracy have the same distribution whatever the agents are called."""
    p, k, orig, perm = invariance(chain_stats, method, 6)
    assert p >= ALPHA, (f"{method}: statistic {('degraded share', 'accuracy')[k]} depends on the names "
                        f"(Mann-Whitney p = {p:.4f}); scenario labels {[x[k] for x in orig]}, "
                        f"relabelled {[x[k] for x in perm]}")


@pytest.mark.parametrize("method", ["sac", "cpwbft"])
def test_relabelling_the_agents_leaves_sac_and_cpwbft_results_unchanged(method):
    """SAC and CP-WBFT: the strong and the weak agents' final accuracy and the round accuracy
    have the same distribution whatever the agents (and so the roles) are called."""
    p, k, orig, perm = invariance(consensus_stats, method, 7)
    assert p >= ALPHA, (f"{method}: statistic {('strong faa', 'weak faa', 'ra')[k]} depends on the names "
                        f"(Mann-Whitney p = {p:.4f}); scenario labels {[x[k] for x in orig]}, "
                        f"relabelled {[x[k] for x in perm]}")


def test_the_check_catches_a_method_whose_ties_go_to_the_first_name():
    """The test above can fail: Symphony with its registry in name order (the reading before
    issue 34, kept as ``registry: name``) never gives a step to a degraded A3 or A5, and does
    once the degraded agents carry other names."""
    p, k, orig, perm = invariance(chain_stats, "symphony", 6, params={"registry": "name"})
    assert all(x[0] == 0.0 for x in orig)
    assert p < ALPHA
