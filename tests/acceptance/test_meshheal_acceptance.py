"""Paper-scale MeshHeal checks (slow; .ci/run runs them with `pytest -m slow`).

Each runs an experiment of the MeshHeal paper (arXiv 2609.29015) with the
fake backend calibrated to App. C.5 (issue 10) and pins the predictions that
came out of it — mechanism-level properties robust over seeds, not the
paper's numbers (docs/validation.md sets those side by side). Where the
prediction differs from the paper's claim (healthy agents get isolated too),
the check pins the predicted direction, not the paper's.
"""
from __future__ import annotations

import statistics
from pathlib import Path

import pytest

import meshsim

pytestmark = pytest.mark.slow
SC = Path(__file__).resolve().parents[2] / "scenarios" / "meshheal"


def _run(name: str, sets: list[str] | None = None, out=None):
    return meshsim.run(meshsim.load_scenario(SC / name, sets or []), out=out)


def test_sec62_staggered_detection_closure_reintegration(tmp_path):
    res = _run("staggered-math.yaml", out=tmp_path)
    runs = [r.summary for r in res.runs]
    assert len(runs) == 5
    for agent in ("A3", "A5"):
        dets = [s["agents"][agent]["detection_delay"] for s in runs]
        assert all(d is not None for d in dets), (agent, dets)  # isolated in every seed
        assert statistics.fmean(dets) <= 40, (agent, dets)
        # issue 17 (reviews of correct finals calibrated to App. C.5's Takeover entry): in one seed
        # of five (3) A3 is falsely isolated before it degrades (detection delay 0), so no closure
        assert sum(bool(s["agents"][agent]["closure"]) for s in runs) >= 4, agent
        reins = [s["agents"][agent]["reintegration_delay"] for s in runs]
        assert sum(r is not None for r in reins) >= 4, (agent, reins)  # back to normal routing after recovery
    # predicted (issue 10): with review error rates as App. C.5 measured them,
    # healthy agents are isolated too (the paper reports none); never all six
    assert all(s["detection"]["false_isolations"] <= 6 for s in runs)


@pytest.mark.parametrize("name", ["persistent-math.yaml", "persistent-bbh.yaml", "persistent-mmlu-pro.yaml"])
def test_sec61_persistent_degradation_accuracy_holds(name, tmp_path):
    res = _run(name, out=tmp_path / "heal")
    agg = res.aggregate["metrics"]
    degraded = agg["accuracy.by_phase.degraded"]["mean"]
    assert 8 <= agg["calls_per_task"]["mean"] <= 16
    # every degraded agent isolated in at least four seeds of five; issue 17: MMLU-Pro seed 5
    # collapses (five healthy agents isolated, degraded A5 never): a prediction, not a target
    assert agg["missed"]["mean"] <= 0.2
    control = _run(name, ["protocol.params={review: false, detector: none}"], out=tmp_path / "control")
    cagg = control.aggregate["metrics"]
    drop = cagg["accuracy.by_phase.healthy"]["mean"] - cagg["accuracy.by_phase.degraded"]["mean"]
    assert drop >= 0.10, drop  # without healing, degradation costs accuracy
    # healing recovers most of it (more than half). Relative since issue 21: Finalize repair lifts the
    # unhealed control too (seeds 1-5: gain / drop MATH 0.33 / 0.33, BBH 0.27 / 0.23, MMLU-Pro 0.15 / 0.26,
    # where seeds 4 and 5 collapse)
    gain = degraded - cagg["accuracy.by_phase.degraded"]["mean"]
    assert gain > 0.5 * drop, (gain, drop)


def test_sec63_576_sparse_isolates_every_degraded_agent_and_matches_complete():
    sparse = _run("scale-576-sparse.yaml").summary
    assert sparse["network"]["links"] == 1454
    assert sparse["missed"] == 0 and len(sparse["agents"]) == 192
    complete = _run("scale-576-complete.yaml").summary
    assert complete["missed"] == 0
    assert abs(sparse["accuracy"]["overall"] - complete["accuracy"]["overall"]) <= 0.02
