"""Defences against routing liars (issue 34, item 5): end-to-end acknowledgement
with retry, forwarding rating, advert consistency. Beyond the MeshHeal paper, off
by default.

Runs are blackhole-6.yaml's smoke size (six agents, 42 tasks, A4 a black hole from
task 7), three seeds per setting: well under a second each.
"""
from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from hypothesis import given, strategies as st

import meshsim
from meshsim.cli import main
from meshsim.protocols.meshheal.routing_defences import ForwardWatch, advert_consistent, rating
from meshsim.io.runfolder import comparable_files

ADV = Path(__file__).resolve().parents[2] / "scenarios" / "adversarial"
BH6 = ADV / "blackhole-6.yaml"
SEEDS = (1, 2, 3)

E2E = ["protocol.params.e2e_ack=true"]
RATING = E2E + ["protocol.params.rating=true"]
ADVERT = ["protocol.params.advert_check=true"]


def _summaries(tmp_path: Path, sets: list[str], tag: str) -> list[dict]:
    out = []
    for seed in SEEDS:
        sc = meshsim.load_scenario(BH6, sets, smoke=True)
        out.append(meshsim.run(sc, seed=seed, out=tmp_path / f"{tag}-{seed}").summary)
    return out


def _lost(summaries: list[dict]) -> int:
    return sum(s["adversarial"]["routing"]["losses"]["unanswered"]["tasks"] for s in summaries)


# -- pure rules ---------------------------------------------------------------------------

def test_deeper_forwarders_wait_less_so_the_one_next_to_a_drop_retries_first():
    w = ForwardWatch(600.0, 2)
    waits = [w.timeout(d) for d in range(6)]
    assert waits[0] == 600.0 and all(a > b for a, b in zip(waits, waits[1:]))


@given(st.integers(0, 50), st.integers(0, 50))
def test_rating_is_a_beta_mean_that_falls_with_each_missed_ack(acked, missed):
    r = rating(acked, missed, (2.0, 1.0))
    assert 0 < r < 1
    assert rating(acked, missed + 1, (2.0, 1.0)) < r < rating(acked + 1, missed, (2.0, 1.0))


def test_route_around_puts_rated_down_neighbours_last_and_never_drops_the_only_route():
    w = ForwardWatch(600.0, 2)
    for _ in range(3):
        w.watch(1, None, "A4", {"A4"}, None)
        w.expired(1)
    assert w.low("A4") and not w.low("A2")
    assert w.route_around(["A2", "A4"], []) == ["A2", "A4"]
    assert w.route_around(["A4"], ["A4", "A6", "A2"]) == ["A6", "A2", "A4"]  # longer routes first
    assert w.route_around(["A4"], ["A4"]) == ["A4"]  # nothing else offers a route: still used
    assert w.route_around(["A1", "A2"], ["A3"]) == ["A1", "A2"]  # nobody rated down: unchanged
    # routing around: agents the task already visited go last (no back and forth)
    assert w.route_around(["A4"], ["A2", "A6"], visited=["A2"]) == ["A6", "A4", "A2"]


def test_an_ack_ends_the_wait_and_credits_the_neighbour_it_came_from():
    w = ForwardWatch(600.0, 2)
    w.watch(7, None, "A3", {"A3"}, None)
    assert w.acked(7, "A3") is not None and w.counts["A3"] == [1, 0]
    assert w.acked(7, "A3") is None  # a second ack ends nothing
    assert w.expired(7) is None


def test_only_a_distance_0_claim_to_an_undeclared_ability_is_inconsistent():
    held = frozenset({"calculation"})
    assert not advert_consistent(held, "enumeration", 0, "*")
    assert advert_consistent(held, "calculation", 0, "*")
    assert advert_consistent(held, "enumeration", 1, "*")  # a relay's distance cannot be checked locally
    assert advert_consistent(held, "*", 0, "*")
    assert advert_consistent(None, "enumeration", 0, "*")  # not heard from yet


# -- against the black hole ----------------------------------------------------------------

def test_each_defence_cuts_the_black_holes_losses(tmp_path):
    none = _summaries(tmp_path, [], "none")
    e2e = _summaries(tmp_path, E2E, "e2e")
    rated = _summaries(tmp_path, RATING, "rating")
    assert _lost(none) >= 6
    assert _lost(e2e) < _lost(none) and _lost(rated) < _lost(none)
    # the retries went where no drop happened, and the timeouts were at the liar
    for s in e2e + rated:
        d = s["routing_defences"]
        assert d["timeouts"]["at_liars"] > 0 and d["retries"]["at_liars"] == 0
    # rating routes around: fewer tasks reach the liar than with acknowledgement alone
    att = lambda ss: sum(s["adversarial"]["routing"]["attracted"] for s in ss)  # noqa: E731
    assert att(rated) < att(e2e)
    assert sum(s["routing_defences"]["rated_down"]["at_liars"] for s in rated) > 0
    # and a lost task no longer waits for the whole task timeout
    assert sum(s["sim_time"] for s in e2e) < 0.5 * sum(s["sim_time"] for s in none)


def test_advert_check_cuts_losses_to_a_liar_claiming_abilities_it_lacks(tmp_path):
    # A2 holds multistep_deduction, figure_reasoning, enumeration: its distance-0 claims
    # to the other four are inconsistent with its own hello and are ignored
    ev = "events=[{at_task: 7, type: route_lie, agents: [A2], hole: black}]"
    none = _summaries(tmp_path, [ev], "a-none")
    checked = _summaries(tmp_path, [ev] + ADVERT, "a-chk")
    assert _lost(checked) < _lost(none)
    rej = [s["routing_defences"]["adverts_rejected"] for s in checked]
    assert sum(r["at_liars"] for r in rej) > 0 and sum(r["at_honest"] for r in rej) == 0


# -- off by default, locality, bad input --------------------------------------------------------

def test_defences_off_by_default_leave_every_output_identical(tmp_path):
    sc = meshsim.load_scenario(BH6, smoke=True)
    meshsim.run(sc, seed=2, out=tmp_path / "a")
    off = ["protocol.params.e2e_ack=false", "protocol.params.rating=false", "protocol.params.advert_check=false",
           "protocol.params.e2e_timeout=600"]
    meshsim.run(meshsim.load_scenario(BH6, off, smoke=True), seed=2, out=tmp_path / "b")
    assert comparable_files(tmp_path / "a") == comparable_files(tmp_path / "b")
    text = (tmp_path / "a" / "scenario.resolved.yaml").read_text()
    assert "e2e_ack" not in text and "advert_check" not in text
    assert "routing_defences" not in (tmp_path / "a" / "summary.json").read_text()


def test_defences_use_only_the_agents_own_state_and_messages(monkeypatch, tmp_path):
    """With every routing defence on, controllers still read nothing global (the
    tripwire of test_meshheal_run), and what they keep names only neighbours."""
    from tests.protocols.test_meshheal_run import run_with_tripwire

    from meshsim.net.network import Network
    from meshsim.protocols.meshheal import MeshHeal
    from meshsim.protocols.meshheal.agent import MeshHealAgent

    sc = meshsim.load_scenario(BH6, RATING + ADVERT, smoke=True)
    proto = run_with_tripwire(monkeypatch, sc, tmp_path)
    forbidden = (Network, MeshHeal, MeshHealAgent)
    rated = 0
    for ag in proto.agents.values():
        w = ag.watch
        assert set(w.counts) <= set(ag.node.links)  # rated only neighbours it forwarded to
        assert {u for ups in ag._upstream.values() for u in ups} <= set(ag.node.links)
        for p in w.pending.values():
            assert p.dst in ag.node.links and not isinstance(p.state, forbidden)
        for val in vars(w).values():
            assert not isinstance(val, forbidden)
        rated += len(w.counts)
        cells = [c.cell_contents for c in (ag.dv.check.__closure__ or ())] if ag.dv.check else []
        assert all(not isinstance(c, (Network, MeshHeal)) for c in cells)
    assert rated > 0


def test_rating_without_acknowledgement_is_refused_in_one_line(tmp_path):
    r = CliRunner().invoke(main, ["validate", str(BH6), "--set", "protocol.params.rating=true"])
    assert r.exit_code == 2 and "needs e2e_ack" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "protocol.params.rating" in r.stderr


def test_an_ack_carries_only_the_task_index(tmp_path, monkeypatch):
    """Nothing but the whitelisted fields crosses a link (test_payloads' walk), acks included."""
    from meshsim.net.network import Network
    from meshsim.net.node import Node
    from tests.network.test_payloads import check

    seen: list = []
    orig, orig_batch = Node.receive, Network.deliver_batch
    monkeypatch.setattr(Node, "receive", lambda self, msg: (seen.append((msg.kind, msg.payload)), orig(self, msg))[1])
    monkeypatch.setattr(Network, "deliver_batch", lambda self, ev: (
        seen.extend((m.kind, m.payload) for _l, _d, m, _e in ev._value), orig_batch(self, ev))[1])
    meshsim.run(meshsim.load_scenario(BH6, RATING + ADVERT, smoke=True), seed=1, out=tmp_path)
    assert "task_ack" in check(seen, fake=True)
    assert all(set(p) == {"task"} and isinstance(p["task"], int) for k, p in seen if k == "task_ack")
