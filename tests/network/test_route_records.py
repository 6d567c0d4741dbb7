"""Route records of lost tasks and the black/grey-hole metrics read from them (issue 34, item 5).

A hand-built six-agent path A1-A2-A3-A4-A5-A6 with A4 a black hole: A1-A3 hold
only enumeration, so most tasks entering there cross honest agents before A4,
and the record must show the whole way, ending at A4. Runs are 42 tasks.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import meshsim
from meshsim.observe.routing import route_losses

ADV = Path(__file__).resolve().parents[2] / "scenarios" / "adversarial"

ALL = "[calculation, enumeration, figure_reasoning, multistep_deduction, symbolic_constraints, " \
      "symbolic_transformation, theorem_knowledge]"
RING = """
name: path-blackhole
seed: 1
network:
  topology: {kind: path, n: 6}
  links: {latency: 20ms}
agents:
  profile: math
  abilities: {A1: [enumeration], A2: [enumeration], A3: [enumeration], A4: [calculation], A5: %s, A6: %s}""" % (ALL, ALL) + """
protocol: {name: meshheal}
backend: {kind: fake, profile: fake-default}
tasks: {dataset: math, count: 42}
events:
  - {at_task: 3, type: route_lie, agents: [A4], hole: %s}
"""


def _run(tmp_path: Path, hole: str = "black", seed: int = 1):
    p = tmp_path / f"path-{hole}.yaml"
    p.write_text(RING % hole)
    out = tmp_path / f"out-{hole}-{seed}"
    res = meshsim.run(meshsim.load_scenario(p), seed=seed, out=out)
    with gzip.open(out / "tasks.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    return res.summary, rows


def _path_edge(a: str, b: str) -> bool:
    return abs(int(a[1:]) - int(b[1:])) == 1


def test_a_dropped_task_records_its_route_up_to_the_black_hole(tmp_path):
    s, rows = _run(tmp_path)
    lost = [r for r in rows if r["unanswered"] == "timeout"]
    assert lost, "the black hole dropped nothing"
    for r in lost:
        reached = r["reached"]
        assert reached[0] == r["entry"] and r["last_holder"] == reached[-1] == "A4"
        assert all(_path_edge(a, b) for a, b in zip(reached, reached[1:])), reached  # links only
    # some were carried by honest agents before A4 dropped them
    assert any(len(r["reached"]) > 2 for r in lost)
    # answered tasks carry no observer fields: their rows are as before
    assert all("reached" not in r and "last_holder" not in r for r in rows if r["unanswered"] is None)
    losses = s["adversarial"]["routing"]["losses"]["unanswered"]
    assert losses["by_last_holder"] == [["A4", len(lost)]]
    assert losses["tasks"] == len(lost) == losses["at_liars"]
    assert losses["at_liars_share"] == 1.0


def test_a_grey_holes_wrong_answers_are_counted_at_the_liar(tmp_path):
    s, rows = _run(tmp_path, "grey")
    w = s["adversarial"]["routing"]["losses"]["wrong"]
    wrong_at_a4 = sum(1 for r in rows if r["index"] >= 3 and r["unanswered"] is None and not r["correct"]
                      and r["route"][-1] == "A4")
    assert w["at_liars"] == wrong_at_a4 > 0
    assert w["tasks"] == sum(1 for r in rows if r["index"] >= 3 and r["unanswered"] is None and not r["correct"])
    assert 0 < w["at_liars_share"] < 1  # honest agents' wrong answers are not the liar's


def test_route_losses_counts_by_last_holder_from_the_first_lie():
    rows = [(1, "A4", "unanswered"), (5, "A4", "unanswered"), (6, "A2", "unanswered"), (7, None, "unanswered"),
            (8, "A4", "wrong"), (9, "A1", "wrong"), (10, "A1", "wrong")]
    out = route_losses(rows, 5, ["A4"])
    assert out["unanswered"] == {"tasks": 3, "at_liars": 1, "at_liars_share": pytest.approx(1 / 3),
                                 "by_last_holder": [["?", 1], ["A2", 1], ["A4", 1]]}
    assert out["wrong"]["at_liars"] == 1 and out["wrong"]["tasks"] == 3
    assert out["wrong"]["by_last_holder"] == [["A1", 2], ["A4", 1]]  # most first
    assert route_losses([], 1, ["A4"])["unanswered"]["at_liars_share"] is None


def test_runs_without_liars_write_no_route_fields_and_no_adversarial_block(tmp_path):
    p = tmp_path / "ring.yaml"
    p.write_text((RING % "black").split("events:")[0])
    res = meshsim.run(meshsim.load_scenario(p), seed=1, out=tmp_path / "o")
    assert "adversarial" not in res.summary
    with gzip.open(tmp_path / "o" / "tasks.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    assert all("reached" not in r for r in rows if r["unanswered"] is None)
