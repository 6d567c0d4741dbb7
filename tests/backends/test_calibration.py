"""`meshsim backends calibrate` and `meshsim reproduce` (issue 10): mechanism-level
targets measured in the running protocol; paper tables beside predictions."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from meshsim.paper import calibration as cal
from meshsim.cli import main
from tests.helpers import cli_runner as _runner

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def measured():
    return cal.measure(ROOT / "backends" / "fake-default.yaml", ROOT / cal.AUDIT_SCENARIO, [1])


def test_every_target_is_measured_and_is_a_rate_or_a_score(measured):
    assert set(measured["targets"]) == {t.key for t in cal.TARGETS}
    for t in cal.TARGETS:
        v = measured["targets"][t.key]["value"]
        top = 10.0 if t.key.endswith("_ratio") else 1.0  # the Takeover entry ratio (correct : wrong) is a ratio
        assert v is not None and 0.0 <= v <= top, t.key
    tc = measured["takeover_counts"]
    assert tc["wrong_fixed"] <= tc["wrong_entering"] and tc["right_broken"] <= tc["right_entering"]


def test_the_audit_tells_degraded_from_healthy_outputs(measured):
    t = measured["targets"]
    assert t["initial_score_healthy"]["value"] > 0.7 > 0.3 > t["initial_score_degraded"]["value"]
    assert t["initial_recall"]["value"] > t["initial_false_alarm"]["value"]


def test_rows_compare_with_the_paper_and_mark_the_band(measured):
    rows = cal.rows(measured)
    assert len(rows) == len(cal.TARGETS)
    r = next(r for r in rows if r["key"] == "initial_false_alarm")
    assert r["paper"] == 0.053 and r["spread"] == 0.007
    assert r["within"] == (abs(r["value"] - 0.053) <= 0.05)
    # a profile whose reviewers flag everything is far off: the check can fail
    harsh = yaml.safe_load((ROOT / "backends" / "fake-default.yaml").read_text())
    harsh["review"]["scores"]["strong"]["unverifiable"] = {"error": 1.0}
    harsh["difficulty_rho"] = 0.0
    harsh["models"]["strong"]["skill"]["default"] = 0.5
    m = cal.measure(harsh, ROOT / cal.AUDIT_SCENARIO, [1])
    assert m["targets"]["initial_false_alarm"]["value"] > 0.2
    assert not next(r for r in cal.rows(m) if r["key"] == "initial_false_alarm")["within"]


def test_fit_never_makes_the_loss_worse_and_moves_only_named_numbers():
    prof = yaml.safe_load((ROOT / "backends" / "fake-default.yaml").read_text())
    prof["takeover"]["keep"]["finalize"] = 1.0  # moved away from the calibrated value
    start = cal.loss(cal.measure(prof, ROOT / cal.AUDIT_SCENARIO, [1]))
    best, m = cal.fit(prof, ROOT / cal.AUDIT_SCENARIO, [1], params=(("takeover.keep.finalize", 0.0, 1.0),),
                      sweeps=1, workers=1)
    assert cal.loss(m) <= start
    moved = {k for k in ("takeover", "models", "committee", "review") if best[k] != prof[k]}
    assert moved <= {"takeover"}
    assert best["models"] == prof["models"]


def test_calibrate_command_prints_targets_and_rejects_other_profiles(tmp_path):
    res = _runner().invoke(main, ["backends", "calibrate", "fake-default", "--seeds", "1"])
    assert res.exit_code == 0, res.output
    assert "committee clears flagged healthy-agent outputs" in res.output and "0.330 ± 0.070" in res.output
    assert "Takeover of Finalize outputs (pooled)" in res.output
    res = _runner().invoke(main, ["backends", "calibrate", "sac-default"])
    assert res.exit_code == 2 and "kind: fake" in res.stderr
    res = _runner().invoke(main, ["backends", "calibrate", "fake-default", "--fit", str(tmp_path / "no" / "p.yaml")])
    assert res.exit_code == 2 and "does not exist" in res.stderr


@pytest.mark.slow  # ~10 s; README's test command stays under 2 minutes
def test_reproduce_reports_cells_with_kinds_caches_runs_and_fills_docs(tmp_path):
    out = tmp_path / "rep"
    args = ["reproduce", "meshheal", "--seeds", "1", "--only", "staggered,audit", "--no-sensitivity",
            "--workers", "1", "--out", str(out), "--no-bands"]  # not about bands (shipped studies would add runs)
    res = _runner().invoke(main, args)
    assert res.exit_code == 0, res.output + res.stderr
    rep = json.loads((out / "report.json").read_text())
    cells = [c for e in rep["experiments"] for c in e["cells"]]
    kinds = {c["kind"] for c in cells}
    assert kinds == {"prediction", "calibration target"}
    det = next(c for c in cells if c["row"] == "A5 detection delay (tasks)")
    assert det["paper"] == 8.0 and det["paper_sd"] == 5.2 and det["kind"] == "prediction" and det["n"] <= 1
    assert all(c["kind"] == "calibration target" for c in cells if c["table"] == "App. C.5")
    runs = sorted((out / "runs").glob("*.json"))
    assert runs
    # a second call reuses every run (the summaries are not touched)
    stamps = [p.stat().st_mtime_ns for p in runs]
    doc = tmp_path / "validation.md"
    doc.write_text("intro\n<!-- reproduce:meshheal -->\nold\n<!-- /reproduce -->\nend\n")
    res = _runner().invoke(main, args + ["--docs", str(doc)])
    assert res.exit_code == 0, res.stderr
    assert [p.stat().st_mtime_ns for p in runs] == stamps
    text = doc.read_text()
    assert "old" not in text and "Tab. 3b" in text and text.endswith("<!-- /reproduce -->\nend\n")
    # another meshsim version's folder is refused, not reused
    (out / "meta.json").write_text(json.dumps({"meshsim": "0.0.0"}))
    res = _runner().invoke(main, args)
    assert res.exit_code == 2 and "0.0.0" in res.stderr
