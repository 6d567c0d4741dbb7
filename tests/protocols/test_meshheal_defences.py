"""Issue 20 defences of MeshHeal's detector (meshsim/protocols/meshheal/defences.py).

Each defence, on a hand-made adversarial input, changes the decision the
published rule makes, and is a no-op at its default. The attacks themselves
(framing, shielding, summary poisoning) are scenario events on another branch;
here the inputs are crafted directly.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import meshsim
from meshsim.protocols.meshheal.agent import MeshHealAgent
from meshsim.protocols.meshheal.defences import (committee_agreement, credibility, evidence_score, k_witnessed,
                                                 msr_trim, weighted_mean)
from meshsim.protocols.meshheal.detector import DetectorParams, RelativeDetector
from meshsim.protocols.meshheal.review import Assessment
from meshsim.protocols.execution import Output
from meshsim.core.types import RoutingState

N, W, I = RoutingState.NORMAL, RoutingState.WATCHED, RoutingState.ISOLATED
T = "algebra"
ROOT = Path(__file__).resolve().parents[2]


# -- 1. W-MSR trimming ------------------------------------------------------------------

def test_trim_f0_is_the_identity():
    entries = [("b", 0.3), ("a", 0.9), ("b", 0.1), ("c", -4.0)]
    assert msr_trim(entries, 0) == ([0.3, 0.9, 0.1, -4.0], True)


def test_trim_drops_the_f_lowest_and_f_highest_neighbours():
    entries = [("a", 0.5), ("b", 0.1), ("c", 0.9), ("d", 0.4), ("e", 0.6)]
    assert msr_trim(entries, 1) == ([0.5, 0.4, 0.6], True)
    assert msr_trim(entries, 2) == ([0.5], True)


def test_trim_unit_is_the_neighbour_so_a_liar_cannot_flood_keys():
    # one liar advertises x̄ = -5 for ten abilities; four honest neighbours two each
    honest = [("h1", 0.0), ("h1", 0.02), ("h2", -0.02), ("h2", 0.01), ("h3", 0.03), ("h3", 0.0),
              ("h4", 0.05), ("h4", -0.01)]
    liar = [("x", -5.0)] * 10
    kept, full = msr_trim(honest + liar, 1)
    assert full and -5.0 not in kept
    assert len(kept) == 6  # the liar and one honest neighbour (h4, highest) are dropped


def test_fewer_than_2f_plus_1_neighbours_shrink_or_skip():
    two = [("a", 0.2), ("b", 0.9)]
    assert msr_trim(two, 1) == ([0.2, 0.9], False)  # shrink: nothing can be dropped from two
    assert msr_trim(two, 1, "skip") == ([], False)
    four = [("a", 0.2), ("b", 0.9), ("c", 0.5), ("d", 0.6)]
    assert msr_trim(four, 2) == ([0.5, 0.6], False)  # shrink: (4-1)//2 = 1 from each end


@settings(max_examples=150, deadline=None)
@given(f=st.integers(1, 3),
       honest=st.lists(st.lists(st.floats(-1, 1), min_size=1, max_size=3), min_size=1, max_size=8),
       liars=st.lists(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=12), max_size=3))
def test_trim_keeps_only_values_inside_the_honest_range(f, honest, liars):
    """SAC Property 4.3 / W-MSR: with at most F liars and >= 2F+1 neighbours,
    every kept value lies within the honest neighbours' values, and one is kept."""
    liars = liars[:f]
    entries = [(f"h{i}", v) for i, vs in enumerate(honest) for v in vs]
    entries += [(f"x{i}", v) for i, vs in enumerate(liars) for v in vs]
    kept, full = msr_trim(entries, f)
    assert full == (len(honest) + len(liars) >= 2 * f + 1)
    if full:
        hv = [v for vs in honest for v in vs]
        assert kept and all(min(hv) <= v <= max(hv) for v in kept)


def _run_detector(det, rounds, mus, pool, q):
    states = []
    for _ in range(rounds):
        states.append(det.update_lists(T, "s", q, mus, pool).state)
    return states


def test_forged_extremes_frame_a_healthy_agent_unless_trimmed():
    """A healthy agent (q 0.80 vs honest μ 0.85) among four honest neighbours;
    one liar advertises μ = 1.0 and x̄ = -0.5 for ten abilities. Untrimmed, the
    reference rises and the pooled median falls: isolated. Trimmed (F = 1): normal."""
    honest_mu = [("h1", 0.85), ("h2", 0.84), ("h3", 0.86), ("h4", 0.85)]
    honest_pool = [("h1", 0.0), ("h1", 0.02), ("h2", -0.02), ("h2", 0.01), ("h3", 0.03), ("h3", 0.0),
                   ("h4", 0.05), ("h4", -0.01)]
    mu_e = honest_mu + [("x", 1.0)]
    pool_e = honest_pool + [("x", -0.5)] * 10
    raw = _run_detector(RelativeDetector(DetectorParams()), 6, [v for _j, v in mu_e], [v for _j, v in pool_e], 0.80)
    assert raw[-1] is I
    trimmed = _run_detector(RelativeDetector(DetectorParams()), 6, msr_trim(mu_e, 1)[0], msr_trim(pool_e, 1)[0], 0.80)
    assert set(trimmed) == {N}


# -- 2. k distinct reviewers ------------------------------------------------------------

def test_k_witnessed_one_reviewer_is_not_enough_for_k2():
    xs = [0.6] * 4
    assert k_witnessed(xs, [{"R1"}] * 4, 1, 0.0, 0.1, 2.0)
    assert not k_witnessed(xs, [{"R1"}] * 4, 2, 0.0, 0.1, 2.0)
    assert k_witnessed(xs, [{"R1"}, {"R2"}] * 2, 2, 0.0, 0.1, 2.0)
    # a framer's low scores beside an honest reviewer's normal ones: dropping the framer clears it
    assert not k_witnessed([0.9, 0.0, 0.9, 0.0], [{"R1"}, {"R2"}] * 2, 2, 0.0, 0.1, 2.0)
    # a committee score counts for both members: dropping either removes it
    assert not k_witnessed([0.9, 0.9], [{"R1", "R2"}, {"R1", "R2"}], 2, 0.0, 0.1, 2.0)
    assert not k_witnessed([0.9, 0.9], [{"R1"}, {"R2"}], 3, 0.0, 0.1, 2.0)
    assert weighted_mean([1.0, 3.0], [1.0, 1.0]) == 2.0 and weighted_mean([1.0, 3.0], [3.0, 1.0]) == 1.5


def _feed(det, seq):
    out = []
    for q, who in seq:
        det.note_evidence(frozenset(who))
        out.append(det.update_lists(T, "s", q, [0.85], [0.0, 0.02, -0.02, 0.01]))
    return out


def test_low_scores_from_one_reviewer_do_not_isolate_with_min_reviewers_2():
    framed = [(0.85, {"R2"})] * 2 + [(0.05, {"R1"})] * 6
    base = _feed(RelativeDetector(DetectorParams()), framed)
    assert base[-1].state is I
    guarded = _feed(RelativeDetector(DetectorParams(min_reviewers=2)), framed)
    assert ISOLATED_NEVER(guarded) and any(u.blocked for u in guarded)
    # a degraded agent scored low by two reviewers is still isolated
    degraded = [(0.05, {"R1"}), (0.05, {"R2"})] * 4
    assert _feed(RelativeDetector(DetectorParams(min_reviewers=2)), degraded)[-1].state is I


def ISOLATED_NEVER(updates):
    return all(u.state is not I for u in updates)


@settings(max_examples=60, deadline=None)
@given(seq=st.lists(st.tuples(st.floats(0, 1), st.sampled_from(["R1", "R2", "R3"])), min_size=1, max_size=40))
def test_min_reviewers_1_is_the_published_detector(seq):
    plain = RelativeDetector(DetectorParams())
    noted = RelativeDetector(DetectorParams(min_reviewers=1))
    for q, who in seq:
        a = plain.update_lists(T, "s", q, [0.8], [0.0, 0.05, 0.1])
        noted.note_evidence(frozenset({who}))
        b = noted.update_lists(T, "s", q, [0.8], [0.0, 0.05, 0.1])
        assert a == b


# -- 3. reviewer credibility ------------------------------------------------------------

def test_committee_agreement_and_credibility():
    # initial reviewer F said fail (0.05); committee G, H cleared it (q = 0.85): F disagreed
    obs = committee_agreement("F", 0.05, ["G", "H"], [0.9, 0.8], 0.85, 0.40)
    assert obs == [("F", False), ("G", True), ("H", True)]
    assert committee_agreement("F", 0.05, [], [], 0.05, 0.40) == []  # no committee: no observation
    # F alone in two contexts confirms nobody, itself least; G beside F's lone committee is observed
    assert committee_agreement("F", 0.05, ["F", "F"], [0.02, 0.02], 0.02, 0.40) == []
    assert committee_agreement("G", 0.9, ["F", "F"], [0.02, 0.02], 0.02, 0.40) == [("G", False)]
    assert credibility(0, 0) == 0.8 and credibility(0, 5) == pytest.approx(4 / 10)
    cred = {"F": 0.3, "G": 0.9}
    assert evidence_score([("F", 0.0), ("G", 0.8)], cred, "exclude", 0.5) == (0.8, 1.0, frozenset({"G"}))
    q, w, wit = evidence_score([("F", 0.0), ("G", 0.8)], cred, "weight", 0.5)
    assert q == pytest.approx(0.8 / 1.3) and w == pytest.approx(0.65) and wit == {"F", "G"}
    assert evidence_score([("F", 0.0)], cred, "exclude", 0.5) is None


def _agent(**params):
    p = meshsim.protocols.meshheal.MeshHealParams(**params)
    sink = []
    return SimpleNamespace(params=p, agreement={}, sink=lambda *a, **k: sink.append((a, k)), name="P"), sink


def _assess(q0, initial, members=(), r1=(), r2=()):
    y = Output(agent="P", action="finalize", abilities=("s",), text="")
    q = (r2[0] + r2[1]) / 2.0 if r2 else q0
    return Assessment(q=q, output=y, q0=q0, initial=[q0] * 3, committee=bool(members), round1=list(r1),
                      round2=list(r2), reviewers=[initial, *members])


def test_a_framer_loses_credibility_and_its_lone_scores_stop_counting():
    """F frames as initial reviewer; honest committees (G, H) clear the output five
    times. Then a committee cannot finish and F's q0 = 0.05 would stand as evidence:
    with credibility ``exclude`` it does not, with ``off`` it does."""
    cleared = _assess(0.05, "F", ["G", "H"], [0.9, 0.85], [0.9, 0.9])
    lone = _assess(0.05, "F")
    for mode, want in (("off", (0.05, 1.0, frozenset({"F"}))), ("exclude", None)):
        ag, sink = _agent(credibility=mode)
        for _ in range(5):
            assert MeshHealAgent._evidence(ag, cleared.q, cleared, 1) is not None
        assert MeshHealAgent._evidence(ag, lone.q, lone, 2) == want
    assert ag.agreement == {"F": [0, 5], "G": [5, 0], "H": [5, 0]}
    assert any(k.get("dropped") for _a, k in sink)


def test_credibility_off_passes_the_score_through():
    ag, sink = _agent()
    a = _assess(0.3, "F", ["G", "G"], [0.5, 0.1], [0.2, 0.3])
    assert MeshHealAgent._evidence(ag, a.q, a, 1) == (a.q, 1.0, frozenset({"G"}))
    assert ag.agreement == {} and sink == []


# -- 4. wiring: params, summary, locality --------------------------------------------------

def test_defences_run_and_report_in_the_summary(tmp_path):
    sc = meshsim.load_scenario(ROOT / "scenarios" / "meshheal" / "persistent-math.yaml",
                               ["protocol.params.trim_f=1", "protocol.params.min_reviewers=2",
                                "protocol.params.credibility=weight"], smoke=True)
    meshsim.run(sc, seed=1, out=tmp_path)
    d = json.loads((tmp_path / "summary.json").read_text())["defences"]
    assert d["trim"]["updates"] > 0
    # complete K6 is 3-robust: (2F+1)-robust for F = 1; two holders per ability: every μ list is short
    assert d["trim"]["graph"]["meets"] is True and d["trim"]["graph"]["r_robustness"] == 3
    assert d["trim"]["short_mu"] == d["trim"]["updates"] and d["trim"]["short_pool"] < d["trim"]["updates"]
    assert d["blocked_crossings"] >= 0 and d["credibility"] == "weight"
    resolved = (tmp_path / "scenario.resolved.yaml").read_text()
    assert "trim_f: 1" in resolved and "credibility_min" not in resolved  # defaults stay out


@pytest.mark.parametrize("bad, field", [("trim_f=-1", "trim_f"), ("min_reviewers=5", "min_reviewers"),
                                        ("credibility=maybe", "credibility"),
                                        ("credibility_prior=[0,0]", "credibility_prior"),
                                        ("credibility_min=1.5", "credibility_min")])
def test_bad_defence_params_are_one_line_errors(bad, field, tmp_path):
    with pytest.raises(meshsim.InputError, match=f"protocol.params.{field}") as err:
        sc = meshsim.load_scenario(ROOT / "scenarios" / "meshheal" / "persistent-math.yaml",
                                   [f"protocol.params.{bad}"], smoke=True)
        meshsim.run(sc, seed=1, out=tmp_path / "run")  # checks before the first write
    assert "\n" not in str(err.value)
    assert not (tmp_path / "run" / "summary.json").exists()


def test_defence_on_another_detector_is_an_error(tmp_path):
    sc = meshsim.load_scenario(ROOT / "scenarios" / "meshheal" / "persistent-math.yaml",
                               ["protocol.params.trim_f=1", "protocol.params.detector=cusum"], smoke=True)
    with pytest.raises(meshsim.InputError, match="protocol.params.trim_f"):
        meshsim.run(sc, seed=1, out=tmp_path)
    assert not (tmp_path / "summary.json").exists()


def test_pure_rules_import_no_simpy_and_no_messages():
    import ast

    for mod in ("defences", "detector"):
        tree = ast.parse((ROOT / "meshsim" / "protocols" / "meshheal" / f"{mod}.py").read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [x for x in names if "simpy" in x or "net" in x.split(".") or "messages" in x], (mod, names)


def test_credibility_weight_enters_the_detector_window_and_the_advertised_xbar():
    det = RelativeDetector(DetectorParams(window=4))
    for q, w in ((0.8, 1.0), (0.8, 1.0), (0.0, 0.25), (0.8, 1.0)):
        det.note_evidence(frozenset({"R"}), w)
        u = det.update_lists(T, "s", q, [0.8], [0.0, 0.1])
    # shortfalls 0, 0, 0.8, 0 with weights 1, 1, 0.25, 1: x̄ = 0.2 / 3.25 (unweighted: 0.2)
    assert u.xbar == pytest.approx(0.2 / 3.25)
    assert det.xbar((T, "s")) == pytest.approx(0.2 / 3.25)
    plain = RelativeDetector(DetectorParams(window=4))
    for q in (0.8, 0.8, 0.0, 0.8):
        v = plain.update_lists(T, "s", q, [0.8], [0.0, 0.1])
    assert v.xbar == pytest.approx(0.2)
