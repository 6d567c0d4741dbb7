"""``meshsim uncertainty`` (issue 17, item 3): the budget split, the designs,
a smoke-sized study (four outputs, common random numbers, the samples'
overrides), byte-identical tables, resume after SIGKILL without redoing a
finished run, --dry-run, refusals.

The study runs tests/data/uncertainty/small.yaml (persistent-math at 84
tasks, about 0.1 s a run) on a copy of fake-default with four ranges, at
the smallest budget its design allows.
"""
from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from meshsim.backends.provenance import assumption_factors, factor_overrides, load_profile_data
from meshsim.cli import main
from meshsim.uncertainty import classify
from meshsim.uncertainty.design import MIN_LHS, MIN_TRAJECTORIES, allocate, lhs_design, minimum_budget, morris_design

pytest.importorskip("SALib")

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "tests" / "data" / "uncertainty"
METRICS = ["--metric", "detection.false_isolations", "--metric", "accuracy.by_phase.degraded"]
#: 4 factors, 2 seeds, band over 2: the minimum, (1 + 2 x 5 + 4 + 10) x 2
OPTIONS = [*METRICS, "--budget", "50", "--seeds", "1-2", "--top", "2", "--paper", "accuracy.by_phase.degraded=0.9"]
OUTPUTS = ("ranking.csv", "bands.csv", "samples.csv", "tornado.png", "report.html")


def _shared(tmp_path_factory) -> Path:
    """A folder every xdist worker of this session sees."""
    root = tmp_path_factory.getbasetemp()
    return root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root


def _once(root: Path, name: str, make) -> None:
    """Run ``make`` once per session across xdist workers (the others wait for it)."""
    import fcntl

    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / f"{name}.done").is_file():
            make()
            (root / f"{name}.done").write_text("")


def _write_data(dest: Path) -> None:
    """The test profiles: the shipped fake-default and sac-default (whatever schema the checkout has), their own
    ranges dropped, with the few ranges of tests/data/uncertainty/*.ranges.yaml; the scenarios beside them."""
    dest.mkdir(parents=True, exist_ok=True)
    for name, base in (("fake-ranges", "fake-default"), ("sac-ranges", "sac-default")):
        prof = yaml.safe_load((ROOT / "backends" / f"{base}.yaml").read_text())
        prof["ranges"] = yaml.safe_load((TEMPLATES / f"{name}.ranges.yaml").read_text())["ranges"]
        (dest / f"{name}.yaml").write_text(yaml.safe_dump(prof, sort_keys=False, width=120))
    for scen in ("small.yaml", "sac-small.yaml"):
        (dest / scen).write_text((TEMPLATES / scen).read_text())


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = _shared(tmp_path_factory)
    _once(root, "uncertainty-data", lambda: _write_data(root / "uncertainty-data"))
    return root / "uncertainty-data"


@pytest.fixture(scope="module")
def small(data) -> str:
    return str(data / "small.yaml")


@pytest.fixture(scope="module")
def args(small) -> list[str]:
    return [small, *OPTIONS]


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


# ----------------------------------------------------------------------------------- design


@settings(max_examples=200, deadline=None)
@given(seeds=st.integers(1, 10), k=st.integers(1, 40), top=st.integers(1, 10), extra=st.integers(0, 5000))
def test_the_budget_split_never_exceeds_the_budget_and_keeps_its_minimums(seeds, k, top, extra):
    budget = minimum_budget(seeds, k, top) + extra
    a = allocate(budget, seeds, k, top)
    assert a.runs <= budget and a.runs > budget - seeds  # only the remainder of budget / seeds is left over
    assert a.trajectories >= MIN_TRAJECTORIES and a.lhs >= MIN_LHS and a.top == min(top, k)
    assert a.samples == 1 + a.trajectories * (k + 1) + 2 * a.top + a.lhs


def test_a_budget_below_the_minimum_is_an_input_error():
    from meshsim.core.errors import InputError

    with pytest.raises(InputError, match="--budget: too small .* needs at least 50 runs"):
        allocate(49, 2, 4, 2)


def test_designs_are_seeded_and_in_the_unit_cube():
    a, b = morris_design(4, 3, seed=7), morris_design(4, 3, seed=7)
    assert a == b and a != morris_design(4, 3, seed=8) and len(a) == 3 * 5
    # a trajectory moves one factor at a time, by the Morris step 2/3
    for t in range(3):
        rows = a[t * 5:(t + 1) * 5]
        for r0, r1 in zip(rows, rows[1:]):
            moved = [abs(x - y) for x, y in zip(r0, r1) if abs(x - y) > 1e-12]
            assert len(moved) == 1 and moved[0] == pytest.approx(2 / 3)
    h = lhs_design(2, 10, seed=3)
    assert h == lhs_design(2, 10, seed=3) and all(0 <= u <= 1 for row in h for u in row)
    for d in range(2):  # one sample in each tenth of every dimension: a Latin hypercube
        assert sorted(int(row[d] * 10) for row in h) == list(range(10))


@pytest.mark.parametrize("paper,p5,p95,sd,expected", [
    (None, 0.1, 0.2, 0.05, ""),
    (0.3, 0.1, 0.2, 0.05, "robust disagreement"),
    (0.05, 0.1, 0.2, 0.05, "robust disagreement"),
    (0.15, 0.1, 0.2, 0.05, "robust agreement"),  # width 0.1 = 2 seed sd
    (0.15, 0.1, 0.2, 0.04, "assumption-bound"),
    (0.15, 0.1, 0.2, None, "assumption-bound"),
])
def test_classification_against_the_paper(paper, p5, p95, sd, expected):
    assert classify(paper, p5, p95, sd) == expected


# ----------------------------------------------------------------------------------- a study


@pytest.fixture(scope="module")
def study(tmp_path_factory, args):
    """One study for every test here, made once even when xdist spreads the tests over workers."""
    root = _shared(tmp_path_factory)
    out, printed = root / "uncertainty-study", root / "uncertainty-study.txt"

    def make() -> None:
        res = CliRunner().invoke(main, ["uncertainty", *args, "--workers", "1", "--out", str(out), "-q"])
        assert res.exit_code == 0, res.output + res.stderr
        printed.write_text(res.output)

    _once(root, "uncertainty-study", make)
    return out, printed.read_text()


@pytest.mark.slow  # shares a 50-run study (~10 s); README's test command stays under 2 minutes
def test_a_study_writes_its_four_outputs_and_prints_ranking_and_bands(study):
    out, text = study
    for name in OUTPUTS:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert (out / "tornado.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Morris ranking: detection.false_isolations" in (out / "report.html").read_text()
    lines = text.splitlines()
    assert lines[-1].startswith("wrote ") and all(str(out / n) in lines[-1] for n in OUTPUTS)
    assert any(ln.startswith("detection.false_isolations: base ") and "band 5-95 %" in ln for ln in lines)
    assert any(ln.startswith("accuracy.by_phase.degraded: ") and "mu*=" in ln for ln in lines)


@pytest.mark.slow  # shares a 50-run study (~10 s); README's test command stays under 2 minutes
def test_ranking_lists_every_factor_per_metric_by_mu_star(study, data):
    out, _ = study
    names = [f.name for f in assumption_factors(load_profile_data(data / "fake-ranges.yaml"))]
    rows = _rows(out / "ranking.csv")
    for m in ("detection.false_isolations", "accuracy.by_phase.degraded"):
        rk = [r for r in rows if r["metric"] == m]
        assert [int(r["rank"]) for r in rk] == [1, 2, 3, 4] and sorted(r["factor"] for r in rk) == sorted(names)
        mu = [float(r["mu_star"]) for r in rk]
        assert mu == sorted(mu, reverse=True) and all(x >= 0 for x in mu)
        assert all(int(r["trajectories"]) == 2 for r in rk)
    # tokens scales every token count at once and moves no outcome the detector sees: never above a factor that does
    tok = [r for r in rows if r["factor"] == "tokens"]
    assert all(float(r["mu_star"]) == 0.0 for r in tok)
    state = json.loads((out / "uncertainty.json").read_text())
    assert len(state["top"]) == 2 and "tokens" not in state["top"]
    assert {r["factor"] for r in rows if r["in_band"] == "True"} == set(state["top"])


@pytest.mark.slow  # shares a 50-run study (~10 s); README's test command stays under 2 minutes
def test_bands_separate_seed_noise_from_the_assumption_spread(study):
    out, _ = study
    samples = _rows(out / "samples.csv")
    lhs = [s for s in samples if s["stage"] == "lhs"]
    assert len(lhs) == 10 and len([s for s in samples if s["stage"] == "end"]) == 4
    assert all(s["detection.false_isolations.n"] == "2" for s in samples)  # every sample at both seeds
    for b in _rows(out / "bands.csv"):
        m = b["metric"]
        means = sorted(float(s[m]) for s in lhs)
        assert float(b["band_min"]) == means[0] and float(b["band_max"]) == means[-1]
        assert means[0] <= float(b["band_p5"]) <= float(b["band_p50"]) <= float(b["band_p95"]) <= means[-1]
        base = [s for s in samples if s["stage"] == "base"][0]
        runs = [json.loads((out / "runs" / base["point"] / f"seed-{s}" / "summary.json").read_text())
                for s in (1, 2)]
        from meshsim.core.dotted import get_path

        vals = [float(get_path(r, m)) for r in runs]
        assert float(b["base_mean"]) == pytest.approx(sum(vals) / 2)
        # 2 seeds: no seed noise reported (issue 29: a sd of 2 runs is one difference)
        assert b["seed_sd"] == "" and b["seed_se"] == ""
        assert b["n_seeds"] == "2" and b["n_samples"] == "10"
    acc = next(b for b in _rows(out / "bands.csv") if b["metric"] == "accuracy.by_phase.degraded")
    outside = classify(0.9, float(acc["band_p5"]), float(acc["band_p95"]), None) == "robust disagreement"
    assert acc["paper"] == "0.9" and acc["class"] == ("robust disagreement" if outside else
                                                      "unclassified: fewer than 3 seeds")


@pytest.mark.slow  # shares a 50-run study (~10 s); README's test command stays under 2 minutes
def test_each_sample_runs_with_its_factor_overrides_at_the_same_seeds(study, data):
    out, _ = study
    factors = assumption_factors(load_profile_data(data / "fake-ranges.yaml"))
    samples = _rows(out / "samples.csv")
    for s in [samples[0], samples[1], samples[-1]]:
        pos = {f.name: float(s[f.name]) for f in factors if s[f.name] != ""}
        for seed in (1, 2):
            resolved = yaml.safe_load((out / "runs" / s["point"] / f"seed-{seed}" / "scenario.resolved.yaml")
                                      .read_text())
            assert (resolved["backend"].get("overrides") or {}) == factor_overrides(factors, pos)
            assert resolved["seed"] == seed


@pytest.mark.slow  # shares a 50-run study (~10 s); README's test command stays under 2 minutes
def test_the_same_study_twice_gives_byte_identical_tables_and_a_rerun_redoes_nothing(study, args, tmp_path):
    import shutil

    # on a copy: the shared study is read by tests on other xdist workers meanwhile
    out = tmp_path / "again"
    shutil.copytree(study[0], out)
    before = {n: (out / n).read_bytes() for n in ("ranking.csv", "bands.csv", "samples.csv")}
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/seed-*/summary.json")}
    res = CliRunner().invoke(main, ["uncertainty", *args, "--workers", "1", "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output + res.stderr
    assert "50 runs: 50 finished (50 resumed), 0 failed" in res.output
    assert {n: (out / n).read_bytes() for n in before} == before
    assert {p: p.stat().st_mtime_ns for p in out.glob("runs/*/seed-*/summary.json")} == stamps


@pytest.mark.slow  # README's test command stays under 2 minutes; .ci/run runs the slow ones
def test_sigkill_then_rerun_redoes_no_finished_run_and_gives_the_same_tables(study, args, tmp_path):
    out, _ = study
    dest = tmp_path / "killed"
    cmd = [sys.executable, "-m", "meshsim.cli", "uncertainty", *args, "--workers", "1", "--out", str(dest), "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(list(dest.glob("runs/*/seed-*/summary.json"))) < 6:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in dest.glob("runs/*/seed-*/summary.json")}
    assert 6 <= len(done) < 50, f"the kill did not land mid-way ({len(done)} of 50 runs done)"
    assert not (dest / "ranking.csv").exists()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert f"({len(done)} resumed)" in res.stdout
    for p, stamp in done.items():  # a finished run is never redone (a redo rewrites its summary.json)
        assert (p.stat().st_ino, p.stat().st_mtime_ns) == stamp
    for name in ("ranking.csv", "bands.csv", "samples.csv"):
        assert (dest / name).read_bytes() == (out / name).read_bytes(), name
    assert not list(dest.rglob("*.tmp"))


@pytest.mark.slow  # shares a 50-run study (~10 s); README's test command stays under 2 minutes
def test_meshsim_report_rewrites_the_uncertainty_report(study, tmp_path):
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(study[0], out, ignore=shutil.ignore_patterns(".*.lock"))
    (out / "report.html").unlink()
    res = CliRunner().invoke(main, ["report", str(out)])
    assert res.exit_code == 0, res.output
    assert "Prediction bands" in (out / "report.html").read_text()


# ----------------------------------------------------------------------------------- checks and refusals


def test_dry_run_lists_the_design_and_writes_nothing(args, data, tmp_path):
    res = CliRunner().invoke(main, ["uncertainty", *args, "--out", str(tmp_path / "d"), "--dry-run"])
    assert res.exit_code == 0, res.output + res.stderr
    assert not (tmp_path / "d").exists()
    assert ("budget 50 runs: 25 samples x 2 seeds (seeds 1,2) = 50 runs: 1 base, 2 Morris trajectories (10 samples), "
            "4 ends and 10 Latin-hypercube samples over the top 2") in res.output
    tokens = next(f for f in assumption_factors(load_profile_data(data / "fake-ranges.yaml")) if f.name == "tokens")
    assert f"  tokens  x[0.7, 1.4]  ({len(tokens.leaves)} numbers)" in res.output
    assert "  review.noise  [0.02, 0.15]  (1 number)" in res.output


def _one_line(args: list[str], tmp_path: Path) -> str:
    res = CliRunner().invoke(main, ["uncertainty", *args, "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and not res.stdout, res.output
    (line,) = res.stderr.strip().splitlines()
    assert not (tmp_path / "x").exists()
    return line


def test_a_metric_the_summary_lacks_is_one_line_exit_2(small, tmp_path):
    line = _one_line([small, "--metric", "detection.false_isolatons", "--budget", "50", "--seeds", "1-2", "--top", "2"],
                     tmp_path)
    assert line.startswith("error: --metric: not a number of this scenario's summary.json; did you mean "
                           "detection.false_isolations")
    line = _one_line([small, "--metric", "accuracy.by_phase", "--budget", "50", "--seeds", "1-2", "--top", "2"],
                     tmp_path)
    assert "names a group, not a number" in line


def test_a_profile_without_ranges_is_refused(tmp_path):
    prof = yaml.safe_load((ROOT / "backends" / "fake-default.yaml").read_text())
    prof.pop("ranges", None)
    (tmp_path / "noranges.yaml").write_text(yaml.safe_dump(prof))
    scen = yaml.safe_load((ROOT / "scenarios" / "meshheal" / "persistent-math.yaml").read_text())
    scen["backend"]["profile"] = "noranges.yaml"
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scen))
    line = _one_line([str(tmp_path / "s.yaml")], tmp_path)
    assert line.startswith("error: ") and "noranges.yaml: ranges: the profile declares no assumption ranges" in line


def test_a_backend_without_a_profile_to_vary_is_refused(small, tmp_path):
    line = _one_line([small, "--set", "backend={kind: 'null'}"], tmp_path)
    assert "backend.kind" in line and "not 'fake' or 'fake_consensus'" in line


def test_a_range_that_makes_an_invalid_profile_is_refused(small, data, tmp_path):
    prof = yaml.safe_load((data / "fake-ranges.yaml").read_text())
    prof["ranges"] = {"review.noise": {"low": -0.5, "high": 0.1, "why": "test: below zero"}}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(prof))
    scen = yaml.safe_load(Path(small).read_text())
    scen["backend"]["profile"] = "bad.yaml"
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scen))
    line = _one_line([str(tmp_path / "s.yaml"), "--budget", "50", "--seeds", "1-2", "--top", "1",
                      "--metric", "accuracy.overall"], tmp_path)
    assert "bad.yaml: ranges: the ranges make an invalid profile at sample" in line and "review.noise=" in line


def test_a_budget_too_small_is_one_line_exit_2(small, tmp_path):
    line = _one_line([small, *METRICS, "--budget", "49", "--seeds", "1-2", "--top", "2"], tmp_path)
    assert line.startswith("error: --budget: too small for 4 factors, 2 seeds") and "at least 50 runs" in line


# ----------------------------------------------------------------------------------- bands in meshsim reproduce


@pytest.mark.slow  # shares a 50-run study (~10 s); README's test command stays under 2 minutes
def test_reproduce_rows_get_the_band_of_the_stored_study(study, small, tmp_path, monkeypatch):
    """A prediction row recomputed at the study's Latin-hypercube samples (its runs patched with the same
    factor overrides) has the study's own band: same runs, same numbers."""
    from meshsim.paper.reproduce import bands as rb
    from meshsim.paper.reproduce.core import (Cell, Experiment, _seeds, _vals, render_classes, render_markdown,
                                       run_experiments)

    out, _ = study
    scen = small  # absolute: RunSpec takes it as is

    def cells(by):
        return [Cell("T", "degraded-phase accuracy", 0.9, values=_vals(by["a"], "accuracy.by_phase.degraded")),
                Cell("T", "false isolations", None, values=_vals(by["a"], "detection.false_isolations"))]

    exp = Experiment("x", "test experiment", {"a": _seeds(scen, 2)}, cells)
    results = run_experiments([exp], tmp_path / "rep")
    info = rb.add_bands("t", [exp], results, tmp_path / "rep", 1, out, 3)
    assert info["experiments"] == ["x"] and info["samples"] == 3 and info["available"] == 10
    from meshsim.observe.aggregate import quantile

    lhs = [s for s in _rows(out / "samples.csv") if s["stage"] == "lhs"][:3]
    acc, fi = results[0]["cells"]
    for cell, m in ((acc, "accuracy.by_phase.degraded"), (fi, "detection.false_isolations")):
        means = [float(s[m]) for s in lhs]  # the study's seed means at the same samples
        assert cell["band"] == [quantile(means, 0.05), quantile(means, 0.95)] and cell["band_n"] == 3
    assert acc["class"] == classify(0.9, *acc["band"], acc["sd"]) and fi["class"] == "no paper value"
    md = render_markdown("t", results, [], bands={**info, "how": "--bands", "quick": True})
    assert "| table | quantity | paper | simulated | kind | assumption band | class |" in md
    assert "3 of the 10 Latin-hypercube samples" in md and "fewer samples with --quick" in md
    classes = render_classes(results, {**info, "how": "--bands"})
    assert f"**{acc['class']}** (1 rows)" in classes and "**no paper value** (1 rows)" in classes


@pytest.mark.slow  # shares a 50-run study (~10 s); README's test command stays under 2 minutes
def test_two_studies_join_their_samples_and_keep_each_ones_top_factors(study, tmp_path):
    """Position j moves each study's top factors to that study's j-th sample; a factor both rank takes
    the first study's value; a study of another profile is refused."""
    import shutil

    from meshsim.paper.reproduce import bands as rb
    from meshsim.uncertainty import read_state

    def write_state(folder, st):
        (folder / "uncertainty.json").write_text(json.dumps(st))

    out, _ = study
    other = tmp_path / "other"
    shutil.copytree(out, other, ignore=shutil.ignore_patterns("runs"))
    state = read_state(other)
    names = [f["name"] for f in state["factors"]]
    extra = [n for n in names if n not in state["top"]][0]
    state["top"] = [extra] + state["top"][:1]
    write_state(other, state)
    # the other study's Latin hypercube moved `extra` (give its samples values for it)
    with open(other / "samples.csv", newline="") as fh:
        rd = csv.DictReader(fh)
        fields, rows = rd.fieldnames, list(rd)
    for j, r in enumerate(x for x in rows if x["stage"] == "lhs"):
        r[extra] = repr(0.05 + 0.01 * j)
    with open(other / "samples.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    states, pos, avail = rb.joint_positions([out, other], 4)
    first, _, _ = rb.study_samples(out, 4)
    mine = rb.study_samples(out, 4)[1]
    theirs = rb.study_samples(other, 4)[1]
    assert len(pos) == 4 and avail == 10
    for j, p in enumerate(pos):
        assert set(p) == set(first["top"]) | set(state["top"])
        assert all(p[k] == mine[j][k] for k in first["top"])  # the shared factor: the first study's value
        assert p[extra] == theirs[j][extra] == 0.05 + 0.01 * j
    state["profile"] = "backends/fake-pair-b.yaml"
    write_state(other, state)
    with pytest.raises(Exception, match="is not"):
        rb.joint_positions([out, other], 4)


@pytest.mark.parametrize("paper, band, cls", [
    ("0.803-0.818", (0.70, 0.78), "robust disagreement"), ("0.803-0.818", (0.805, 0.815), "robust agreement"),
    ("0.803-0.818", (0.79, 0.81), "assumption-bound"), ("|d| <= 0.010", (-0.004, 0.006), "robust agreement"),
    ("|d| <= 0.010", (0.02, 0.05), "robust disagreement"), (None, (0.1, 0.2), "no paper value"),
    ("n/r", (0.1, 0.2), "no paper value"), (0.5, (0.1, 0.2), "robust disagreement")])
def test_rows_with_a_paper_range_or_bound_are_classified(paper, band, cls):
    from meshsim.paper.reproduce.bands import classify_row

    assert classify_row(paper, *band, 0.01) == cls


def test_reproduce_without_a_stored_study_says_so(tmp_path, monkeypatch):
    from meshsim.paper.reproduce import bands as rb
    from meshsim.paper.reproduce.bands import find_study

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rb, "shipped_studies", lambda: None)  # nor shipped with the package
    folder, why = find_study("meshheal")
    assert folder is None and "runs/uncertainty-meshheal-persistent-math" in why and "meshsim uncertainty" in why


@pytest.mark.slow  # README's test command stays under 2 minutes; .ci/run runs the slow ones
def test_a_sac_study_varies_a_consensus_profile_with_integer_factors(data, tmp_path):
    out = tmp_path / "sac"
    res = CliRunner().invoke(main, ["uncertainty", str(data / "sac-small.yaml"), "--budget", "25", "--seeds", "1",
                                    "--top", "2", "--workers", "1", "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output + res.stderr
    assert "metrics bfti, faa" in res.output  # the defaults a SAC summary holds
    assert {r["metric"] for r in _rows(out / "ranking.csv")} == {"bfti", "faa"}
    seen = set()
    for f in out.glob("runs/*/seed-1/scenario.resolved.yaml"):
        over = yaml.safe_load(f.read_text())["backend"].get("overrides") or {}
        if "wrong.distractors" in over:
            assert isinstance(over["wrong.distractors"], int) and 3 <= over["wrong.distractors"] <= 12
            seen.add(over["wrong.distractors"])
    assert len(seen) > 3


def test_ranges_that_break_a_joint_constraint_name_the_sample(data, tmp_path):
    prof = yaml.safe_load((data / "sac-ranges.yaml").read_text())
    prof["ranges"]["latent.difficulty"] = {"low": 0.2, "high": 0.8, "why": "test: beyond 1 - persist.strong"}
    (tmp_path / "sac-ranges.yaml").write_text(yaml.safe_dump(prof))
    (tmp_path / "s.yaml").write_text((data / "sac-small.yaml").read_text())
    line = _one_line([str(tmp_path / "s.yaml"), "--budget", "25", "--seeds", "1", "--top", "2"], tmp_path)
    assert "the ranges make an invalid profile at sample" in line and "latent.difficulty=1" in line
    assert "latent.difficulty + latent.persist.strong must be at most 1" in line


@pytest.mark.slow  # ~5 s; README's test command stays under 2 minutes
def test_a_sac_study_screens_only_the_factors_of_models_its_dataset_calls():
    from meshsim.backends.fake_consensus import models_used
    from meshsim.backends.provenance import assumption_factors, load_profile_data

    sc = ROOT / "scenarios" / "sac" / "ablation-b2w1-cpwbft.yaml"
    from meshsim.uncertainty import plan_uncertainty

    study = plan_uncertainty(sc, metrics=["bfti"], budget=3000, smoke=True)
    data = load_profile_data(ROOT / "backends" / "sac-default.yaml")
    every = assumption_factors(data)
    assert 0 < study.k < len(every)
    used = models_used(data, ["math_l4_30"])
    for f in study.factors:  # no factor left whose numbers all belong to an unused model
        assert any(p.split(".")[1] in used or p.split(".")[0] not in ("score", "refine", "confidence", "aggregate")
                   for p, *_ in f.leaves), f.name


def test_band_factors_follow_each_runs_profile_by_name():
    """Positions are by factor name: a run on model pair A's profile moves the same assumptions over pair A's
    own ranges; a run whose profile lacks a top factor (SAC's profile for a MeshHeal factor) gets no band."""
    from meshsim.paper.reproduce import bands as rb
    from meshsim.paper.reproduce.core import Experiment, RunSpec

    top = ["review.noise", "models.strong.garbage"]
    mh = RunSpec("scenarios/meshheal/persistent-math.yaml")
    pair = RunSpec("scenarios/meshheal/persistent-math.yaml", profile="fake-pair-a")
    both = rb._factors_for(Experiment("p", "t", {"a": [mh], "b": [pair]}, lambda by: []), top)
    assert both is not None and len(both) == 2
    ranges = {p.name: next(f for f in fs if f.name == "review.noise") for p, fs in both.items()}
    assert set(ranges) == {"fake-default.yaml", "fake-pair-a.yaml"}
    sac = RunSpec("scenarios/sac/sac-merg-7.yaml")
    assert rb._factors_for(Experiment("s", "t", {"a": [mh], "b": [sac]}, lambda by: []), top) is None
    assert rb._factors_for(Experiment("s", "t", {"a": [sac]}, lambda by: []), ["refine.*.sway"]) is not None


def test_two_rows_with_the_same_label_keep_their_own_bands(monkeypatch):
    """Two settings may print the same row label (the swaying adversary's F = 0 and F = 3): each row's band
    comes from its own runs, not from the two pooled."""
    from meshsim.paper.reproduce import bands as rb
    from meshsim.paper.reproduce.core import PREDICTION, Cell, Experiment, RunSpec

    prof = rb._spec_profile(RunSpec("scenarios/meshheal/persistent-math.yaml")).resolve()
    monkeypatch.setattr(rb, "joint_positions", lambda folders, n: (
        [{"profile": str(prof), "top": ["review.noise"]}], [{"review.noise": u} for u in (0.0, 0.5, 1.0)], 3))
    # a run's "value" is the review.noise its profile patch set, offset by its label
    monkeypatch.setattr(rb, "run_specs", lambda specs, out, workers: {
        s: {"v": dict(s.patch)["review.noise"] + (100.0 if s.sets else 0.0)} for s in specs})
    a = [RunSpec("scenarios/meshheal/persistent-math.yaml", seed=1)]
    b = [RunSpec("scenarios/meshheal/persistent-math.yaml", ("x=1",), seed=1)]

    def cells(by):
        return [Cell("T", "same label", 1.0, values=[r["v"] for r in by["a"]]),
                Cell("T", "same label", 1.0, values=[r["v"] for r in by["b"]])]

    exp = Experiment("e", "t", {"a": a, "b": b}, cells)
    results = [{"key": "e", "cells": [dict(c, kind=PREDICTION, sd=0.0, n=1, paper=1.0) for c in
                                      ({"table": "T", "row": "same label"}, {"table": "T", "row": "same label"})]}]
    rb.add_bands("t", [exp], results, Path("unused"), 1, [Path("unused")], 3)
    lo, hi = results[0]["cells"][0]["band"], results[0]["cells"][1]["band"]
    assert max(lo) < 100.0 <= min(hi)


def test_a_bad_bands_folder_is_one_line_before_any_run(tmp_path):
    res = CliRunner().invoke(main, ["reproduce", "sac", "--quick", "--bands", str(tmp_path), "-o",
                                    str(tmp_path / "rep")])
    assert res.exit_code == 2 and "--bands: not a finished uncertainty folder" in res.output + res.stderr
    assert not (tmp_path / "rep").exists()  # refused before the clock starts: nothing written


# ----------------------------------------------------------------------------------- honest noise (issue 29, item 6)


def _band_study(tmp_path: Path, seeds: list[int], base_vals: list[float], lhs_vals: list[float], paper: float):
    """A folder holding only what band_rows reads: the base sample's and ten LHS samples' summaries."""
    from types import SimpleNamespace

    from meshsim.uncertainty.core import Sample

    samples = [Sample(0, "base", [None], key="p-base")]
    for i, v in enumerate(base_vals):
        f = tmp_path / "runs" / "p-base" / f"seed-{seeds[i]}"
        f.mkdir(parents=True)
        (f / "summary.json").write_text(json.dumps({"m": v}))
    for j, v in enumerate(lhs_vals):
        samples.append(Sample(j + 1, "lhs", [0.5], key=f"p-{j}"))
        for s in seeds:
            f = tmp_path / "runs" / f"p-{j}" / f"seed-{s}"
            f.mkdir(parents=True)
            (f / "summary.json").write_text(json.dumps({"m": v}))
    return SimpleNamespace(metrics=["m"], seeds=seeds, papers={"m": paper}), samples


@pytest.mark.parametrize("seeds, base, paper, sd, cls", [
    ([1, 2], [3.0, 3.0], 3.0, None, "unclassified: fewer than 3 seeds"),  # sd 0 of 2 seeds is not noise
    ([1, 2], [3.0, 3.0], 9.0, None, "robust disagreement"),  # outside the band: no noise needed
    ([1, 2, 3], [2.0, 3.0, 4.0], 3.0, 1.0, "robust agreement"),  # band 2.9-3.1, width <= 2 sd
    ([1], [3.0], 3.0, None, "unclassified: fewer than 3 seeds")])
def test_seed_noise_needs_three_seeds_and_nothing_is_classified_against_less(tmp_path, seeds, base, paper, sd, cls):
    from meshsim.uncertainty.core import band_rows

    study, samples = _band_study(tmp_path, seeds, base, [2.9 + 0.02 * j for j in range(11)][:10], paper)
    (row,) = band_rows(study, tmp_path, samples)
    assert row["seed_sd"] == (pytest.approx(sd) if sd is not None else None) and row["class"] == cls
    assert (row["seed_se"] is None) == (sd is None) and row["n_seeds"] == len(seeds)


def test_fewer_than_three_seeds_warn_loudly_before_the_study(small, tmp_path):
    from meshsim.uncertainty.core import noise_warning

    assert noise_warning(3) is None and noise_warning(1).startswith("warning: --seeds: 1 seed: ")
    res = CliRunner().invoke(main, ["uncertainty", small, *METRICS, "--budget", "50", "--seeds", "1-2", "--top", "2",
                                    "--out", str(tmp_path / "d"), "--dry-run"])
    assert res.exit_code == 0
    assert "warning: --seeds: 2 seeds: the band is compared with seed noise only from 3 seeds on" in res.stderr


def test_tornado_rows_are_ordered_and_labelled_by_how_far_each_factor_moves_the_metric():
    """The reported case: a factor whose bars move the metric from 4 to 2.5 was labelled by its screening
    mu* (0) and ranked below one that barely moves it. Rows go by the span of their bars and say it."""
    pytest.importorskip("matplotlib")
    from meshsim.uncertainty.report import span, tornado

    d = {"state": {"factors": [{"name": "a"}, {"name": "b"}, {"name": "c"}]},
         "bands": [{"metric": "m", "base_mean": 4.0, "band_p5": 2.5, "band_p50": 3.5, "band_p95": 4.2,
                    "seed_se": None, "seed_sd": None, "n_seeds": 2, "n_samples": 10, "paper": None, "class": ""}],
         "ranking": [{"metric": "m", "factor": f, "rank": i + 1, "in_band": True, "mu_star": mu, "low": 0, "high": 1,
                      "scale": False} for i, (f, mu) in enumerate((("a", 0.9), ("b", 0.0), ("c", 0.3)))],
         "samples": [{"stage": "end", "a": 0, "m": 4.0}, {"stage": "end", "a": 1, "m": 4.1},
                     {"stage": "end", "b": 0, "m": 4.0}, {"stage": "end", "b": 1, "m": 2.5},
                     {"stage": "end", "c": 0, "m": 3.6}, {"stage": "end", "c": 1, "m": 4.3}]}
    assert span((4.0, 2.5), 4.0) == pytest.approx(1.5) and span((None, None), 4.0) is None
    ax = tornado(d, "m")
    labels = [t.get_text() for t in ax.get_yticklabels()]
    # ticks as set: the factor rows top to bottom, then the band and the noise rows
    assert [lab.split()[0] for lab in labels[:3]] == ["b", "c", "a"]
    assert "moves 1.5 · screening μ* 0" in labels[0] and "moves 0.7" in labels[1]
    assert "seed noise: not measured" in labels[-1]
