"""An attack counts what it caused (issue 34, item 4; meshsim/observe/attribution.py, docs/adversarial.md).

A framer or shielder acts only through the reviews it gives its target, so one
that is never linked to it, or shares none of its abilities, can never touch
it: ``meshsim validate`` warns before the run, and the run counts it 0. What a
liar that can reach its target did is measured against the paired run of the
same seed without the liars, whose random streams are the same (a run whose
lies reach nobody is identical to its pair, record for record).
"""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import meshsim
from meshsim.observe.attribution import BYZANTINE_EVENTS, attribute, reach_warnings, review_reach, without_liars
from meshsim.cli import main
from meshsim.simulate.runner import run_one, validate
from meshsim.scenario.model import build_graph, parse_scenario, read_scenario_data

ROOT = Path(__file__).resolve().parents[2]
ADV = ROOT / "scenarios" / "adversarial"
#: a held-out graph: six agents, ten links drawn with topology seed 7 (A1 is linked to A2, A4, A5;
#: A3 holds two of A1's abilities but is never linked to it)
HELD_OUT = {"kind": "gnm", "n": 6, "m": 10, "seed": 7}


def _frame(liars: list[str], count: int = 60, topology: dict = HELD_OUT):
    data = copy.deepcopy(read_scenario_data(ADV / "frame-6.yaml"))
    data["network"]["topology"] = dict(topology)
    data["tasks"]["count"] = count
    data["output"] = {"trace": "none"}
    data["events"] = [{"at_task": 1, "type": "frame", "agents": liars, "targets": ["A1"]}]
    return parse_scenario(data, str(ADV / "held-out.yaml"), ADV)


def test_the_byzantine_event_list_is_every_lying_event():
    from meshsim.scenario.events import EVENT_TYPES, _ByzEvent

    assert BYZANTINE_EVENTS == {k for k, cls in EVENT_TYPES.items() if issubclass(cls, _ByzEvent)}


def test_review_reach_needs_a_link_and_an_ability_in_common():
    sc = _frame(["A3"])
    G = build_graph(sc)
    can = review_reach(sc, G)
    assert not G.has_edge("A3", "A1") and not can("A3", "A1")  # shares abilities, never linked
    assert G.has_edge("A4", "A1") and can("A4", "A1")
    assert G.has_edge("A2", "A1") and not can("A2", "A1")  # linked, no ability in common (MATH profile)
    # an add_link event makes a later review possible
    data = copy.deepcopy(read_scenario_data(ADV / "frame-6.yaml"))
    data["network"]["topology"] = dict(HELD_OUT)
    data["events"] = [{"at_task": 5, "type": "add_link", "link": ["A3", "A1"]},
                      {"at_task": 1, "type": "frame", "agents": ["A3"], "targets": ["A1"]}]
    sc2 = parse_scenario(data, "x.yaml", ADV)
    assert review_reach(sc2, build_graph(sc2))("A3", "A1") and reach_warnings(sc2, build_graph(sc2)) == []


def test_a_liar_that_cannot_reach_its_target_on_a_held_out_graph_counts_0_and_is_warned_of():
    """Acceptance: seed 9972 isolates A1 (healthy) at task 49 with or without the liar; the liar
    A3 can never review A1, so the run is its pair record for record and framed_isolated is 0."""
    sc = _frame(["A3"])
    warnings = validate(sc, 9972, preflight=False)["warnings"]
    assert len(warnings) == 1 and "A3 can never review A1" in warnings[0] and "counts 0" in warnings[0]
    run = run_one(sc, 9972)
    pair = run_one(without_liars(sc), 9972)
    assert run.tables["states.jsonl"] == pair.tables["states.jsonl"]
    assert run.tables["tasks.jsonl"] == pair.tables["tasks.jsonl"]
    fr = run.summary["adversarial"]["framing"]
    assert fr["framed_isolated_observed"] == 1 and fr["agents"]["A1"]["isolated_at"] == 49
    assert fr["framed_isolated"] == 0 and fr["any_isolated"] == 0.0 and fr["unreachable"] == ["A1"]
    assert fr["agents"]["A1"]["reachable"] is False and fr["agents"]["A1"]["background_isolated_at"] == 49


def test_a_framer_that_reaches_its_target_is_credited_with_an_isolation_the_pair_lacks():
    """A4 reviews A1 on the held-out graph: on seed 9971 the pair never isolates A1, the attack does."""
    sc = _frame(["A4"], count=120)
    assert validate(sc, 9971, preflight=False)["warnings"] == []
    fr = run_one(sc, 9971).summary["adversarial"]["framing"]
    a1 = fr["agents"]["A1"]
    assert a1["reachable"] and a1["isolated_at"] is not None and a1["background_isolated_at"] is None
    assert fr["framed_isolated"] == fr["framed_isolated_observed"] == 1 and a1["caused"]


def test_mixed_6_framers_never_review_a1_and_no_longer_count_it():
    """Acceptance: mixed-6.yaml's framers A2 and A6 hold none of A1's abilities. On seed 2 A1 is
    isolated while healthy (task 159) — and at task 167 without any liar: not the framers' doing."""
    sc = meshsim.load_scenario(ADV / "mixed-6.yaml", ["output.trace=none"])
    warnings = validate(sc, 2, preflight=False)["warnings"]
    assert any("A2, A6 can never review A1" in w for w in warnings)
    fr = run_one(sc, 2).summary["adversarial"]["framing"]
    assert fr["framed_isolated_observed"] == 1 and fr["agents"]["A1"]["isolated_at"] == 159
    assert fr["framed_isolated"] == 0 and fr["unreachable"] == ["A1"]


def test_validate_prints_the_warning_and_still_exits_0(tmp_path):
    data = copy.deepcopy(read_scenario_data(ADV / "frame-6.yaml"))
    data["network"]["topology"] = dict(HELD_OUT)
    data["events"] = [{"at_task": 1, "type": "frame", "agents": ["A3"], "targets": ["A1"]}]
    path = tmp_path / "held-out.yaml"
    path.write_text(yaml.safe_dump(data))
    res = CliRunner().invoke(main, ["validate", str(path)])
    assert res.exit_code == 0, res.output
    assert "warning: events[0] (frame): A3 can never review A1" in res.output
    # a drawn coalition: the agents it may draw that cannot reach the target are named
    res = CliRunner().invoke(main, ["validate", str(ADV / "frame-6.yaml")])
    assert res.exit_code == 0 and "A2, A6, among the agents it draws from, can never review A1" in res.output
    assert list(tmp_path.iterdir()) == [path]  # a check never writes


def _adv(framing=None, shielding=None, collateral_at=None):
    adv = {"first_attack_task": 1, "collateral_isolated": len(collateral_at or {}),
           "collateral_agents": list(collateral_at or {}), "collateral_at": dict(collateral_at or {})}
    if framing is not None:
        adv["framing"] = {"from_task": 1, "targets": len(framing), "framed_isolated":
                          sum(1 for r in framing.values() if r["isolated_at"] is not None), "agents": framing}
    if shielding is not None:
        adv["shielding"] = {"from_task": 1, "targets": len(shielding), "degraded_targets": len(shielding),
                            "shielded_not_isolated": sum(1 for r in shielding.values() if r["isolated_at"] is None),
                            "agents": shielding}
    return adv


def _iso(agent: str, task: int, degraded: bool) -> dict:
    return {"agent": agent, "task": task, "old": "normal", "new": "isolated", "degraded": degraded}


@pytest.mark.parametrize("bg_task, counted", [(None, 1), (50, 1), (41, 1), (40, 0), (20, 0)])
def test_a_framed_isolation_counts_only_when_the_pair_had_none_by_then(bg_task, counted):
    """The attack isolates A1 at task 40. An isolation of A1 in the pair at or before 40 was the
    background; one later (or none) means the attack caused it (or brought it forward)."""
    adv = _adv(framing={"A1": {"isolated_at": 40, "delay": 39, "by": ["A4"]}})
    paired = [] if bg_task is None else [_iso("A1", bg_task, False)]
    fr = attribute(adv, paired, lambda j, t: True)["framing"]
    assert fr["framed_isolated"] == counted and fr["framed_isolated_observed"] == 1
    assert fr["delay_mean"] == (39 if counted else None)
    assert attribute(adv, paired, lambda j, t: False)["framing"]["framed_isolated"] == 0  # cannot reach A1


def test_a_shielded_target_counts_only_when_the_pair_isolated_it():
    rows = {"A3": {"degraded_from": 10, "isolated_at": None, "delay": None, "by": ["A1"]},
            "A5": {"degraded_from": 10, "isolated_at": None, "delay": None, "by": ["A1"]}}
    paired = [_iso("A3", 18, True)]  # the pair isolates A3, never A5
    sh = attribute(_adv(shielding=rows), paired, lambda j, t: True)["shielding"]
    assert sh["shielded_not_isolated_observed"] == 2 and sh["shielded_not_isolated"] == 1
    assert sh["agents"]["A3"]["caused"] and not sh["agents"]["A5"]["caused"]
    assert sh["any_shielded"] == 1.0 and sh["all_shielded"] == 0.0
    sh = attribute(_adv(shielding=rows), paired, lambda j, t: False)["shielding"]  # nobody can review them
    assert sh["shielded_not_isolated"] == 0 and sh["unreachable"] == ["A3", "A5"]


def test_collateral_counts_only_isolations_the_pair_did_not_have_by_then():
    adv = _adv(collateral_at={"A2": 30, "A6": 30})
    out = attribute(adv, [_iso("A2", 25, False), _iso("A6", 31, False)], lambda j, t: True)
    assert out["collateral_isolated_observed"] == 2
    assert out["collateral_isolated"] == 1 and out["collateral_agents"] == ["A6"]


def test_a_run_without_liar_events_is_not_paired_sac_roles_included():
    """SAC's `adversarial` section is about roles, not liar events: no paired run (on a recording
    backend a paired run wrote its own answers into the cassette, and the replay then differed)."""
    import meshsim

    sc = meshsim.load_scenario(Path(__file__).resolve().parents[2] / "scenarios" / "sac" / "sac-complete-7.yaml",
                               smoke=True)
    adv = meshsim.run(sc, seed=1).summary.get("adversarial")
    assert isinstance(adv, dict) and "paired" not in adv
