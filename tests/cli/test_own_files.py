"""A run, sweep, search or study writes and removes only what it created
(issue 30): an ``--out`` that is, contains or is reached through a link into a
folder holding the scenario's inputs is refused in one line (exit 2) before
anything is written, and a folder a run writes keeps the list of its own
files (``.meshsim-files.json``): a file it did not write is never replaced or
deleted, ``--force`` or not.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshsim.cli import main
from meshsim.io.runfolder import OWN_FILES

ROOT = Path(__file__).resolve().parents[2]
STAGGERED = ROOT / "scenarios" / "meshheal" / "staggered-math.yaml"
SCENARIO = """\
name: own
seed: 1
network:
  topology: {kind: complete, n: 6}
agents: {profile: bbh}
protocol: {name: meshheal}
backend: {kind: fake, profile: fake-default}
tasks: {dataset: bbh, file: tasks.jsonl, count: 14, block: 7}
"""
GRID = ["--grid", "protocol.params.beta=2", "--seeds", "1-2", "--workers", "1", "-q"]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def one_line(res) -> str:
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


def inputs(d: Path) -> Path:
    """A scenario with its task file beside it (the reported case)."""
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "scenarios" / "data" / "bbh-sample.jsonl", d / "tasks.jsonl")
    (d / "scenario.yaml").write_text(SCENARIO)
    return d / "scenario.yaml"


def tree(d: Path) -> dict[str, str]:
    """Every entry under ``d`` (links by target, files by digest): what 'nothing written' compares."""
    out = {}
    for p in sorted(d.rglob("*")):
        rel = str(p.relative_to(d))
        if p.is_symlink():
            out[rel] = "-> " + os.readlink(p)
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[rel] = "dir"
    return out


class TestARunNeverWritesAmongItsInputs:
    def test_out_as_the_scenarios_own_folder_is_refused_and_the_task_file_kept(self, tmp_path):
        scen = inputs(tmp_path / "in")
        before = tree(tmp_path)
        res = invoke("run", scen, "--out", tmp_path / "in")
        assert res.exit_code == 2
        line = one_line(res)
        assert "holds an input of the scenario" in line and str(tmp_path / "in") in line, line
        assert tree(tmp_path) == before  # nothing written, nothing removed: tasks.jsonl is still there

    def test_out_through_a_link_to_the_inputs_folder_is_refused_with_force_too(self, tmp_path):
        scen = inputs(tmp_path / "in")
        (tmp_path / "runs").mkdir()
        (tmp_path / "runs" / "latest").symlink_to(tmp_path / "in")
        before = tree(tmp_path)
        for extra in ([], ["--force"]):
            res = invoke("run", scen, "--out", tmp_path / "runs" / "latest", *extra)
            assert res.exit_code == 2, res.stderr
            line = one_line(res)
            assert "holds an input of the scenario" in line and f"it leads to {tmp_path / 'in'}" in line, line
        assert tree(tmp_path) == before

    def test_out_containing_the_inputs_folder_is_refused(self, tmp_path):
        scen = inputs(tmp_path / "project" / "in")
        before = tree(tmp_path)
        res = invoke("run", scen, "--out", tmp_path / "project")
        assert res.exit_code == 2 and "holds an input of the scenario" in one_line(res)
        assert tree(tmp_path) == before

    def test_an_input_named_in_another_folder_guards_that_folder(self, tmp_path):
        """The task file sits elsewhere (absolute path): a link to *its* folder is refused too."""
        scen = inputs(tmp_path / "in")
        (tmp_path / "data").mkdir()
        shutil.move(str(tmp_path / "in" / "tasks.jsonl"), tmp_path / "data" / "tasks.jsonl")
        scen.write_text(SCENARIO.replace("file: tasks.jsonl", f"file: {tmp_path / 'data' / 'tasks.jsonl'}"))
        (tmp_path / "latest").symlink_to(tmp_path / "data")
        before = tree(tmp_path)
        res = invoke("run", scen, "--out", tmp_path / "latest")
        assert res.exit_code == 2 and "tasks.jsonl" in one_line(res)
        assert tree(tmp_path) == before

    def test_a_multi_seed_run_is_refused_the_same_way(self, tmp_path):
        scen = inputs(tmp_path / "in")
        before = tree(tmp_path)
        res = invoke("run", scen, "--seeds", "1-2", "--out", tmp_path / "in")
        assert res.exit_code == 2 and "holds an input of the scenario" in one_line(res)
        assert tree(tmp_path) == before


class TestARunRemovesOnlyItsOwnFiles:
    def test_a_file_under_a_run_files_name_that_meshsim_did_not_write_is_refused_and_kept(self, tmp_path):
        scen = inputs(tmp_path / "in")
        out = tmp_path / "out"
        out.mkdir()
        (out / "tasks.jsonl").write_text("my own notes\n")  # a user's file that happens to carry a table's name
        for extra in ([], ["--force"]):
            res = invoke("run", scen, "--out", out, *extra)
            assert res.exit_code == 2, res.stderr
            line = one_line(res)
            assert "holds tasks.jsonl, which meshsim did not write" in line and str(out) in line, line
        assert (out / "tasks.jsonl").read_text() == "my own notes\n"
        assert sorted(p.name for p in out.iterdir()) == ["tasks.jsonl"]  # refused before the lock file

    def test_a_rerun_replaces_its_own_files_and_keeps_the_users(self, tmp_path):
        scen = inputs(tmp_path / "in")
        out = tmp_path / "out"
        assert invoke("run", scen, "--out", out, "-q").exit_code == 0
        own = json.loads((out / OWN_FILES).read_text())["files"]
        assert {"summary.json", "scenario.resolved.yaml", "events.jsonl.gz", "tasks.jsonl.gz"} <= set(own)
        (out / "notes.txt").write_text("mine\n")
        (out / ".plot.abcd1234.tmp").write_text("mine too\n")  # looks like a temp file; is not meshsim's
        res = invoke("run", scen, "--out", out, "-q", "--force", "--set", "output.format=jsonl")
        assert res.exit_code == 0, res.stderr
        names = {p.name for p in out.iterdir()}
        assert "events.jsonl" in names and "events.jsonl.gz" not in names  # its own: replaced
        assert (out / "notes.txt").read_text() == "mine\n" and (out / ".plot.abcd1234.tmp").is_file()

    def test_a_name_the_run_no_longer_writes_is_not_claimed_later(self, tmp_path):
        """After a rerun removed a table, a file the user then puts under that name is the user's."""
        scen = inputs(tmp_path / "in")
        out = tmp_path / "out"
        assert invoke("run", scen, "--out", out, "-q").exit_code == 0
        assert invoke("run", scen, "--out", out, "-q", "--force", "--set", "output.format=jsonl").exit_code == 0
        (out / "events.jsonl.gz").write_bytes(b"not meshsim's")
        res = invoke("run", scen, "--out", out, "--force")
        assert res.exit_code == 2 and "holds events.jsonl.gz, which meshsim did not write" in one_line(res)
        assert (out / "events.jsonl.gz").read_bytes() == b"not meshsim's"

    def test_a_folder_from_before_the_list_is_adopted(self, tmp_path):
        scen = inputs(tmp_path / "in")
        out = tmp_path / "out"
        assert invoke("run", scen, "--out", out, "-q").exit_code == 0
        (out / OWN_FILES).unlink()  # as an older meshsim left it: provenance.json, no list
        assert invoke("run", scen, "--out", out, "-q").exit_code == 0  # resumed
        assert invoke("run", scen, "--out", out, "-q", "--force").exit_code == 0
        assert "summary.json" in json.loads((out / OWN_FILES).read_text())["files"]


def _sweep_inputs(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(STAGGERED, d / "staggered.yaml")
    return d / "staggered.yaml"


class TestASweepNeverWritesAmongItsInputs:
    def test_a_sweep_folder_holding_the_scenario_is_refused_through_a_link(self, tmp_path):
        """A sweep folder (it has a manifest) with the scenario copied into it, reached through runs/latest:
        the sweep would write results.csv and runs/ among its inputs."""
        first = _sweep_inputs(tmp_path / "in")
        s = tmp_path / "s"
        assert invoke("sweep", first, "--smoke", *GRID, "--out", s).exit_code == 0
        scen = _sweep_inputs(s)
        (tmp_path / "runs").mkdir()
        (tmp_path / "runs" / "latest").symlink_to(s)
        before = tree(tmp_path)
        for extra in ([], ["--dry-run"]):
            res = invoke("sweep", scen, "--smoke", *GRID, "--out", tmp_path / "runs" / "latest", *extra)
            assert res.exit_code == 2, res.output + res.stderr
            assert "holds an input of the scenario" in one_line(res)
        assert tree(tmp_path) == before

    def test_a_sweep_into_the_inputs_folder_names_the_input(self, tmp_path):
        scen = _sweep_inputs(tmp_path / "in")
        before = tree(tmp_path)
        res = invoke("sweep", scen, "--smoke", *GRID, "--out", tmp_path / "in")
        assert res.exit_code == 2 and "holds an input of the scenario" in one_line(res)
        assert tree(tmp_path) == before

    def test_a_search_into_the_inputs_folder_is_refused(self, tmp_path):
        pytest.importorskip("optuna")
        scen = _sweep_inputs(tmp_path / "in")
        (tmp_path / "latest").symlink_to(tmp_path / "in")
        before = tree(tmp_path)
        for extra in ([], ["--dry-run"]):
            res = invoke("sweep", scen, "--smoke", "--search", "optuna", "--range", "protocol.params.beta=2.1:4",
                         "--minimize", "detection.delay_mean", "--trials", "2", "--seeds", "1",
                         "--out", tmp_path / "latest", *extra)
            assert res.exit_code == 2, res.output + res.stderr
            assert "holds an input of the scenario" in one_line(res)
        assert tree(tmp_path) == before

    def test_a_study_into_its_profiles_folder_is_refused(self, tmp_path):
        pytest.importorskip("SALib")
        import yaml

        d = tmp_path / "in"
        d.mkdir()
        prof = yaml.safe_load((ROOT / "backends" / "fake-default.yaml").read_text())
        prof["ranges"] = yaml.safe_load((ROOT / "tests" / "data" / "uncertainty" / "fake-ranges.ranges.yaml")
                                        .read_text())["ranges"]
        (d / "fake-ranges.yaml").write_text(yaml.safe_dump(prof, sort_keys=False))
        (d / "small.yaml").write_text((ROOT / "tests" / "data" / "uncertainty" / "small.yaml").read_text())
        out = tmp_path / "study"  # a fresh folder whose link goes to the profile's folder
        out.symlink_to(d)
        before = tree(tmp_path)
        res = invoke("uncertainty", d / "small.yaml", "--metric", "detection.false_isolations", "--budget", "50",
                     "--seeds", "1-2", "--top", "2", "--out", out)
        assert res.exit_code == 2, res.output + res.stderr
        assert "holds an input of the scenario" in one_line(res)
        assert tree(tmp_path) == before
