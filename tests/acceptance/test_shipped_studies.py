"""The reference uncertainty studies shipped with the package (issue 34: `meshsim reproduce sac --quick` prints
Tab. 5 / Tab. 6 rows with bands and classes on a fresh machine; docs/uncertainty.md "Bands in meshsim
reproduce"): found from any working folder, a local runs/uncertainty-<name> wins, each experiment banded over
its own reference studies, missing ones named, and tests/benchmarks/reference_studies.sh ships only the
tables."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from meshsim.paper.reproduce import bands as rb

ROOT = Path(__file__).resolve().parents[2]
TAB56 = ("uncertainty-aime-sac-7", "uncertainty-hmmt-cpwbft-7", "uncertainty-aime-cpwbft-7", "uncertainty-hmmt-sac-7")
SCRIPT = ROOT / "tests" / "benchmarks" / "reference_studies.sh"


def test_the_tab5_tab6_studies_are_found_from_a_folder_outside_the_checkout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no runs/ here: only the package data can supply them
    folders, how = rb.find_studies("sac")
    assert [d.name for d in folders] == list(TAB56)
    ship = rb.shipped_studies()
    assert ship is not None and all(d.parent == ship for d in folders)
    # the older SAC studies are not shipped: named, not fatal
    assert how == ("found " + ", ".join(TAB56) + " (shipped with meshsim, meshsim/data/studies/); not found: "
                   "runs/uncertainty-ablation-b2w1-cpwbft, runs/uncertainty-sac-merg-7-math-l4")
    for d in folders:  # the tables reproduce and the study report read, no run folders
        assert sorted(p.name for p in d.iterdir()) == sorted(rb.SHIPPED_FILES)


def test_the_package_data_glob_covers_the_shipped_studies():
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["meshsim"]
    assert "data/**/*" in data and rb.SHIPPED.startswith("data/")


def test_each_experiment_is_grouped_with_its_own_reference_studies(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    groups = rb.find_study_groups("sac")
    by = {g["experiments"]: g for g in groups}
    assert [d.name for d in by[("tab5", "tab6")]["folders"]] == list(TAB56) and not by[("tab5", "tab6")]["missing"]
    rest = by[None]  # Tab. 1, 3, 7, 8, swaying: the older studies, not shipped here
    assert rest["folders"] == [] and rest["missing"] == ["runs/uncertainty-ablation-b2w1-cpwbft",
                                                          "runs/uncertainty-sac-merg-7-math-l4"]


def test_a_local_study_wins_over_the_shipped_copy(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ship = rb.shipped_studies()
    local = tmp_path / "runs" / "uncertainty-hmmt-sac-7"
    shutil.copytree(ship / "uncertainty-hmmt-sac-7", local)
    folders, how = rb.find_studies("sac")
    assert folders[3] == Path("runs/uncertainty-hmmt-sac-7") and all(d.parent == ship for d in folders[:3])
    assert how.startswith("found runs/uncertainty-hmmt-sac-7 (local); uncertainty-aime-sac-7, ")
    (local / "samples.csv").unlink()  # an unfinished local study does not hide the shipped one
    assert rb.find_studies("sac")[0][3] == ship / "uncertainty-hmmt-sac-7"


def test_without_local_or_shipped_studies_rows_keep_the_seed_sd_and_say_why(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rb, "shipped_studies", lambda: None)
    folders, why = rb.find_studies("sac")
    assert folders == [] and "runs/uncertainty-ablation-b2w1-cpwbft nor shipped with meshsim" in why
    assert "reference_studies.sh" in why


def test_the_shipped_studies_join_to_the_same_positions_every_time(tmp_path, monkeypatch):
    """Position j takes each study's j-th Latin-hypercube sample over that study's own top factors (the
    first study's value for a shared factor): the same files give the same positions, hence the same bands."""
    monkeypatch.chdir(tmp_path)
    folders, _ = rb.find_studies("sac")
    states, pos, avail = rb.joint_positions(folders, 8)
    assert rb.joint_positions(folders, 8) == (states, pos, avail)
    assert len(pos) == 8 and avail == min(rb.study_samples(d, 8)[2] for d in folders)
    tops = [st["top"] for st in states]
    own = [rb.study_samples(d, 8)[1] for d in folders]
    assert all(set(p) == set().union(*tops) for p in pos)
    for j, p in enumerate(pos):
        for k in set().union(*tops):
            first = next(i for i, t in enumerate(tops) if k in t)
            assert p[k] == own[first][j][k]


def test_an_experiment_without_its_studies_gets_no_band_and_the_reason(monkeypatch):
    """One group found (Tab. 5 / Tab. 6), one missing (the rest), one experiment too costly: bands only where
    the group was found; the others keep their seed sd, say why, and the note names the missing studies."""
    from meshsim.paper.reproduce.core import PREDICTION, Cell, Experiment, RunSpec, render_markdown

    prof = rb._spec_profile(RunSpec("scenarios/sac/aime-sac-7.yaml")).resolve()
    monkeypatch.setattr(rb, "joint_positions", lambda folders, n: (
        [{"profile": str(prof), "top": ["latent.difficulty"]}], [{"latent.difficulty": u} for u in (0.0, 1.0)], 2))
    monkeypatch.setattr(rb, "run_specs", lambda specs, out, workers: {
        s: {"v": dict(s.patch)["latent.difficulty"]} for s in specs})

    def exp(key):
        return Experiment(key, key, {"a": [RunSpec("scenarios/sac/aime-sac-7.yaml", seed=1)]},
                          lambda by: [Cell("T", "v", 0.5, values=[r["v"] for r in by["a"]])])

    exps = [exp("tab5"), exp("tab1-math"), exp("tab3-cs")]
    results = [{"key": e.key, "title": e.key, "runs": 1, "simulated_seconds": 0.0, "wall": 0.0,
                "cells": [{"table": "T", "row": "v", "kind": PREDICTION, "sd": 0.0, "n": 1, "paper": 0.5,
                           "paper_sd": None, "mean": 0.3, "values": [0.3], "fmt": "{:.3f}"}]} for e in exps]
    groups = [{"experiments": ("tab5", "tab6"), "folders": [Path("a"), Path("b")], "how": "found a, b",
               "missing": []},
              {"experiments": None, "folders": [], "how": "found ", "missing": ["runs/uncertainty-x"]}]
    info = rb.add_bands("sac", exps, results, Path("unused"), 1, [], 2, groups=groups)
    tab5, tab1, tab3 = (r["cells"][0] for r in results)
    assert "band" in tab5 and "band" not in tab1 and "band" not in tab3
    assert info["experiments"] == ["tab5"] and info["skipped"] == ["tab3-cs"]
    assert "runs/uncertainty-x" in results[1]["band_why"] and results[2]["band_why"].startswith("too costly")
    md = render_markdown("t", results, [], bands={**info, "quick": True})
    assert "tab5 at 2 of the 2 samples of found a, b" in md and "fewer samples with --quick" in md
    assert "Without a band (seed sd only): tab3-cs (too costly to repeat per sample); tab1-math (its reference " \
           "studies (runs/uncertainty-x)" in md
    assert "No assumption band: its reference studies (runs/uncertainty-x)" in md


def _script(*args, env=None, cwd=None):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=60)


def test_the_script_ships_only_the_tables_of_finished_studies(tmp_path):
    import os

    out = tmp_path / "out"
    src = out / "uncertainty-hmmt-sac-7"
    shutil.copytree(rb.shipped_studies() / "uncertainty-hmmt-sac-7", src)
    (src / "runs").mkdir()
    (src / "runs" / "x.json").write_text("{}")
    (src / "summary.csv").write_text("big\n")
    env = {**os.environ, "REFERENCE_STUDIES_SHIP_TO": str(tmp_path / "ship")}
    res = _script("ship", str(out), "hmmt-sac-7", env=env)
    assert res.returncode == 0, res.stderr
    got = tmp_path / "ship" / "uncertainty-hmmt-sac-7"
    assert sorted(p.name for p in got.iterdir()) == sorted(rb.SHIPPED_FILES)
    assert (got / "samples.csv").read_bytes() == (src / "samples.csv").read_bytes()
    (src / "samples.csv").unlink()  # unfinished: refused, the shipped copy left as it was
    res = _script("ship", str(out), "hmmt-sac-7", env=env)
    assert res.returncode == 2 and "not a finished uncertainty study (no samples.csv)" in res.stderr
    assert (got / "samples.csv").is_file()
    res = _script("ship", str(out), "no-such-study", env=env)
    assert res.returncode == 2 and "unknown study 'no-such-study'" in res.stderr
    res = _script("run", str(out), "--workers", "0", env=env)
    assert res.returncode == 2 and "--workers" in res.stderr


@pytest.mark.slow  # ~10 s on 2 shared cores: Tab. 6 at 1 seed and 2 band samples, twice
def test_reproduce_tab6_from_an_empty_folder_prints_bands_and_classes_the_same_twice(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from meshsim.cli import main

    monkeypatch.chdir(tmp_path)
    outs = []
    for name in ("a", "b"):
        res = CliRunner().invoke(main, ["reproduce", "sac", "--quick", "--only", "tab6", "--seeds", "1",
                                        "--band-samples", "2", "--no-sensitivity", "--workers", "1", "-o", name])
        assert res.exit_code == 0, res.output
        outs.append([ln for ln in res.output.splitlines() if ln.startswith("| Tab. 6 |")])
    assert outs[0] == outs[1] and len(outs[0]) > 10
    assert "(shipped with meshsim, meshsim/data/studies/)" in res.output
    rows = [ln for ln in outs[0] if "| prediction |" in ln]
    assert rows and all(ln.split("|")[-2].strip() for ln in rows)  # every prediction row has a class
