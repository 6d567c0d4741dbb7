"""MeshHeal's warm-up (App. C.2, Tab. C5): "an evidence-collection phase in
which all agents remain in ordinary routing".

``protocol.params.warmup`` = W: during tasks 1..W of the stream detectors
collect evidence (scores, shortfalls, summaries) but no agent changes routing
state and no probe is sent; from task W+1 detection acts on what was collected.
Paper: shared/papers/meshheal-2609.29015.md (App. C.2); docs/meshheal.md#warm-up.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import meshsim
from meshsim.protocols.meshheal.detector import (AbsoluteDetector, CusumDetector, DetectorParams, PeerSummary,
                                                 RelativeDetector)
from meshsim.io.records import read_records
from meshsim.io.runfolder import comparable_files
from meshsim.core.types import RoutingState

from tests.helpers import invoke


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), stderr
    return lines[0]

N, W, I = RoutingState.NORMAL, RoutingState.WATCHED, RoutingState.ISOLATED
ROOT = Path(__file__).resolve().parents[2]
PERSISTENT = ROOT / "scenarios" / "meshheal" / "persistent-math.yaml"
WARM = 42  # smoke stream: 84 tasks; the warm-up is its first half
# A5 degraded from the first task: the warm-up sees only its degraded outputs
FROM_TASK_1 = ["events=[{at_task: 1, type: degrade, agents: [A5]}]", "seeds=1"]


def _peers():
    return {"j1": {("T", "s"): PeerSummary(mu=0.9, xbar=0.0, n=5)},
            "j2": {("T", "s"): PeerSummary(mu=0.8, xbar=0.05, n=5)},
            "j3": {("T", "s"): PeerSummary(mu=0.85, xbar=-0.05, n=5)}}


def test_app_c2_warmup_detector_collects_evidence_and_changes_no_state():
    """Pure rule: ``act=False`` updates fill the window and report z far past β,
    yet the state stays normal and no crossing is counted; the first acting
    update watches, the second isolates (two consecutive crossings, Tab. B11)."""
    d = RelativeDetector(DetectorParams())
    for _ in range(12):
        u = d.update("T", "s", 0.0, _peers(), act=False)
        assert d.state is N and not u.changed
    assert u.z is not None and u.z >= d.p.beta  # the evidence is there...
    assert d.over_beta == 0 and d.matched[("T", "s")] == 12  # ...and nothing counted toward a decision
    u = d.update("T", "s", 0.0, _peers())
    assert u.changed and d.state is W
    u = d.update("T", "s", 0.0, _peers())
    assert u.changed and d.state is I


@pytest.mark.parametrize("cls", [AbsoluteDetector, CusumDetector])
def test_app_c2_warmup_holds_the_comparison_rules_too(cls):
    d = cls(DetectorParams())
    for _ in range(10):
        assert not d.update("T", "s", 0.0, _peers(), act=False).changed
    assert d.state is N
    d.update("T", "s", 0.0, _peers())
    d.update("T", "s", 0.0, _peers())
    assert d.state is I  # the evidence gathered in the warm-up decides at once


def _run(tmp_path: Path, name: str, sets: list[str]) -> dict:
    sc = meshsim.load_scenario(PERSISTENT, FROM_TASK_1 + sets, smoke=True)
    out = tmp_path / name
    meshsim.run(sc, seed=3, out=out)
    return {"out": out, "states": read_records(out, "states.jsonl"), "reviews": read_records(out, "reviews.jsonl"),
            "tasks": read_records(out, "tasks.jsonl")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("warmup")
    return {"off": _run(tmp, "off", []), "on": _run(tmp, "on", [f"protocol.params.warmup={WARM}"])}


def test_app_c2_no_state_change_and_no_probe_during_warmup(runs):
    on, off = runs["on"], runs["off"]
    # without the warm-up, the agent degraded from task 1 is isolated inside those tasks (the test can fail)
    assert any(s["agent"] == "A5" and s["new"] == "isolated" and s["task"] <= WARM for s in off["states"])
    assert [s for s in on["states"] if s["task"] <= WARM] == []
    early = [r for r in on["reviews"] if r["task"] <= WARM]
    assert early and not any(r["probe"] for r in early)
    assert not any(":probe->" in a for t in on["tasks"] if t["index"] <= WARM for a in t["actions"])
    assert any(":probe->" in a for t in on["tasks"] for a in t["actions"])  # after it, A5 is probed
    # every agent stayed a reviewer in everyone's view: ordinary routing, nobody watched
    assert all(v == "normal" for r in early for v in r["reviewer_views"].values())
    # evidence was collected, and marked as warm-up evidence
    ev = [e for r in early for e in r.get("detector", [])]
    assert ev and all(e.get("warmup") for e in ev)
    assert any(e["z"] is not None for e in ev if r_is("A5", early, e))


def r_is(agent: str, rows: list[dict], e: dict) -> bool:
    return any(e in r.get("detector", []) and r["agent"] == agent for r in rows)


def test_app_c2_warmup_evidence_decides_right_after_it(runs):
    """A5, degraded since task 1, is isolated within a few of its own outputs
    after the warm-up ends: the window the warm-up filled is used at once."""
    on = runs["on"]
    iso = [s["task"] for s in on["states"] if s["agent"] == "A5" and s["new"] == "isolated"]
    assert iso, "A5 never isolated after the warm-up"
    c = min(iso)
    assert c > WARM
    own = [r for r in on["reviews"] if r["agent"] == "A5" and WARM < r["task"] <= c and not r["probe"]]
    assert 1 <= len(own) <= 3  # two consecutive crossings (Tab. B11), each an own reviewed output
    assert not any(e.get("warmup") for r in own for e in r.get("detector", []))


def test_app_c2_warmup_off_by_default_leaves_runs_byte_identical(tmp_path):
    """warmup: 0 is the default and is left out of the resolved scenario, so a run
    with it set explicitly is the same folder, byte for byte (the pinned digests
    of tests/acceptance/test_determinism.py stay as they are)."""
    sc = meshsim.load_scenario(PERSISTENT, smoke=True)
    assert sc.protocol.params.warmup == 0
    meshsim.run(sc, seed=1, out=tmp_path / "a")
    meshsim.run(meshsim.load_scenario(PERSISTENT, ["protocol.params.warmup=0"], smoke=True), seed=1,
                out=tmp_path / "b")
    a = comparable_files(tmp_path / "a")
    assert "warmup" not in a["scenario.resolved.yaml"].decode()
    assert a == comparable_files(tmp_path / "b")


@pytest.mark.parametrize("value, says", [("-1", "warmup"), ("x", "warmup"), ("84", "leaves no task")])
def test_app_c2_warmup_validated_one_line_exit_2(value, says):
    res = invoke("validate", PERSISTENT, "--smoke", "--set", f"protocol.params.warmup={value}")
    assert res.exit_code == 2
    line = one_error_line(res.stderr)
    assert "protocol.params.warmup" in line and says in line and PERSISTENT.name in line


def test_app_c2_no_probe_during_warmup_even_to_an_agent_that_claims_isolation(tmp_path):
    """A liar advertising 'isolated' from task 1 (docs/adversarial.md) would be
    probed at once; in the warm-up nobody is, as every agent stays in ordinary routing."""
    lie = ["events=[{at_task: 1, type: poison, agents: [A2], state: isolated}]"]
    probes = {}
    for w in (0, WARM):
        sc = meshsim.load_scenario(PERSISTENT, lie + ["seeds=1", f"protocol.params.warmup={w}"], smoke=True)
        meshsim.run(sc, seed=3, out=tmp_path / str(w))
        probes[w] = [t["index"] for t in read_records(tmp_path / str(w), "tasks.jsonl")
                     if any(":probe->A2" in a for a in t["actions"])]
    assert any(i <= WARM for i in probes[0])  # without a warm-up the lie draws probes early
    assert probes[WARM] and min(probes[WARM]) > WARM


_score = st.floats(0.0, 1.0, allow_nan=False)
_step = st.tuples(_score, st.lists(_score, min_size=0, max_size=3), st.lists(st.floats(-1.0, 1.0), max_size=4),
                  st.sampled_from(["s1", "s2"]))


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(_step, min_size=1, max_size=30), k=st.integers(0, 30),
       kind=st.sampled_from([RelativeDetector, AbsoluteDetector, CusumDetector]))
def test_app_c2_warmup_collects_the_same_evidence_and_never_moves_the_state(steps, k, kind):
    """Property: a detector in warm-up for its first k updates holds exactly the
    evidence (score windows, shortfall windows, matched counts, CUSUM sum) of one
    that acted throughout, and stays normal during those k updates."""
    warm, ref = kind(DetectorParams()), kind(DetectorParams())
    for i, (q, mus, pool, s) in enumerate(steps):
        u = warm.update_lists("T", s, q, mus, pool, act=i >= k)
        ref.update_lists("T", s, q, mus, pool)
        if i < k:
            assert warm.state is N and not u.changed
        assert {key: list(d) for key, d in warm.scores.items()} == {key: list(d) for key, d in ref.scores.items()}
        assert {key: list(d) for key, d in warm.shortfalls.items()} == \
            {key: list(d) for key, d in ref.shortfalls.items()}
        assert warm.matched == ref.matched and getattr(warm, "cusum", 0) == getattr(ref, "cusum", 0)
