"""Network-level detection metrics, seeds as lists / ranges, and profile
overrides of the MeshHeal fake (what the sweeps of issue 11 stand on)."""
from __future__ import annotations

import json
import statistics

import pytest
from click.testing import CliRunner

import meshsim
from meshsim.cli import main
from meshsim.core.errors import ScenarioError
from meshsim.scenario.fields import parse_seeds
from meshsim.observe.aggregate import quantile
from meshsim.observe.detection import detection_summary, self_healing

STAGGERED = "scenarios/meshheal/staggered-math.yaml"


def _st(agent, task, old, new):
    return {"agent": agent, "task": task, "old": old, "new": new}


def test_quantile_interpolates_like_numpy():
    assert quantile([], 0.9) is None
    assert quantile([7], 0.9) == 7
    assert quantile([1, 2, 3, 4], 0.5) == 2.5
    assert quantile([10, 0, 5], 0.9) == pytest.approx(9.0)  # (n-1)*0.9 = 1.8 between 5 and 10


def test_detection_summary_counts_episodes_and_healthy_agents():
    states = [
        # degraded A1 at 10: watched at 12, isolated at 15, back to normal after recovery at 40
        _st("A1", 12, "normal", "watched"), _st("A1", 15, "watched", "isolated"),
        _st("A1", 44, "isolated", "watched"), _st("A1", 50, "watched", "normal"),
        # degraded A2 at 10, never isolated (missed)
        _st("A2", 20, "normal", "watched"),
        # healthy A3: one watched-only episode, then a false isolation
        _st("A3", 5, "normal", "watched"), _st("A3", 7, "watched", "normal"),
        _st("A3", 30, "normal", "watched"), _st("A3", 31, "watched", "isolated"),
        _st("A3", 33, "isolated", "watched"), _st("A3", 35, "watched", "normal"),
        # healthy A4: still watched at the end (counts as watched, not isolated)
        _st("A4", 60, "normal", "watched"),
    ]
    eps = [self_healing(states, 10, 40, 100, "A1"), self_healing(states, 10, 101, 100, "A2")]
    d = detection_summary(eps, states, ["A1", "A2", "A3", "A4", "A5"], ["A1", "A2"])
    assert (d["episodes"], d["detected"], d["missed"], d["missed_rate"]) == (2, 1, 1, 0.5)
    assert (d["delay_mean"], d["delay_median"], d["delay_p90"], d["delay_max"]) == (5, 5, 5, 5)
    assert d["closure_rate"] == 1.0
    assert (d["recovered"], d["reintegrated"], d["reintegration_delay_mean"]) == (1, 1, 10)
    assert (d["healthy_agents"], d["false_isolations"], d["false_isolation_events"]) == (3, 1, 1)
    assert d["false_isolation_rate"] == pytest.approx(1 / 3)
    assert (d["never_degraded_isolated"], d["degraded_isolated_while_healthy"]) == (1, 0)
    assert d["falsely_isolated"] == ["A3"]
    assert (d["watched_not_isolated"], d["watched_not_isolated_agents"]) == (2, 2)


def test_every_meshheal_summary_has_the_network_level_metrics(tmp_path):
    sc = meshsim.load_scenario(STAGGERED, smoke=True)
    s = meshsim.run(sc, seed=3, out=tmp_path / "r").summary
    d = s["detection"]
    per = [a for a in s["agents"].values()]
    delays = [a["detection_delay"] for a in per if a["detection_delay"] is not None]
    assert d["degraded_agents"] == len(per) == 2 and d["healthy_agents"] == 4
    assert d["detected"] == len(delays) and d["missed"] == s["missed"]
    if delays:
        assert d["delay_mean"] == pytest.approx(statistics.fmean(delays))
        assert d["delay_median"] == pytest.approx(statistics.median(delays))
    healthy_iso = [a for a in d["falsely_isolated"] if a not in s["agents"]]
    assert d["never_degraded_isolated"] == len(healthy_iso)
    assert d["never_degraded_isolated_rate"] == pytest.approx(len(healthy_iso) / 4)
    assert d["false_isolations"] == len(d["falsely_isolated"])
    assert d["false_isolation_rate"] == pytest.approx(len(d["falsely_isolated"]) / d["ever_healthy_agents"])
    assert s["audit"]["initial_score_gap"] == pytest.approx(
        s["audit"]["initial_score_healthy"] - s["audit"]["initial_score_degraded"])


@pytest.mark.parametrize("text,want", [(3, 3), ("3", [3]), ("count:3", 3), ("9301-9304", [9301, 9302, 9303, 9304]),
                                       ("1,5,9", [1, 5, 9]), ("1-3,7", [1, 2, 3, 7]), ([4, 2], [4, 2])])
def test_seeds_accept_counts_lists_and_ranges(text, want):
    assert parse_seeds(text) == want


@pytest.mark.parametrize("text", ["9-3", "1,1", [], "x", "1:3", True, [-1]])
def test_bad_seeds_are_refused(text):
    with pytest.raises(ValueError):
        parse_seeds(text)


def test_scenario_seeds_as_a_range_run_exactly_those(tmp_path):
    sc = meshsim.load_scenario(STAGGERED, ["seeds=7-8"], smoke=True)
    assert sc.seed_list() == [7, 8]
    res = meshsim.run(sc, out=tmp_path / "r")
    assert [r.seed for r in res.runs] == [7, 8]
    assert sorted(p.name for p in (tmp_path / "r").iterdir() if p.is_dir()) == ["seed-7", "seed-8"]
    with pytest.raises(ScenarioError, match="seeds"):
        meshsim.load_scenario(STAGGERED, ["seeds=8-7"])


def test_run_takes_seeds_on_the_command_line(tmp_path):
    res = CliRunner().invoke(main, ["run", STAGGERED, "--smoke", "-q", "--seeds", "4,9", "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "r" / "seed-4" / "summary.json").is_file() and (tmp_path / "r" / "seed-9").is_dir()
    assert json.loads((tmp_path / "r" / "aggregate.json").read_text())["seeds"] == [4, 9]
    bad = CliRunner().invoke(main, ["run", STAGGERED, "--smoke", "--seeds", "9-1", "--out", str(tmp_path / "b")])
    assert bad.exit_code == 2 and "seeds" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_meshheal_fake_takes_profile_overrides(tmp_path):
    base = meshsim.run(meshsim.load_scenario(STAGGERED, smoke=True), seed=1).summary
    sets = ["backend.overrides.review.scores.strong.garbage.garbage=0.3"]
    over = meshsim.run(meshsim.load_scenario(STAGGERED, sets, smoke=True), seed=1).summary
    assert over["backend"]["overrides"] == {"review.scores.strong.garbage.garbage": 0.3}
    assert "overrides" not in base["backend"]
    # a reviewer that misses unusable text scores degraded outputs higher: the gap shrinks
    assert over["audit"]["initial_score_gap"] < base["audit"]["initial_score_gap"] - 0.1
    bad = CliRunner().invoke(main, ["validate", STAGGERED, "--set", "backend.overrides.models.strong.nope=1"])
    assert bad.exit_code == 2 and "backend.overrides.models.strong.nope" in bad.stderr
