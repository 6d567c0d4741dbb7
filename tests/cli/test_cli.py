"""The ``meshsim`` command line: validate, run (run folders, --set, resume, --force), topology.

Exit codes and the one-line error contract are checked on real subprocesses;
the rest goes through click's CliRunner (in-process, fast).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from meshsim.io.records import read_records
from tests.helpers import invoke

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "scenarios" / "routing" / "sparse-failures.yaml"
# 60 simulated seconds; the file's events (up to 500s) would then lie after
# the end, which is itself an input error, so drop them for the short runs.
SHORT = ["--set", "duration=60s", "--set", "events=[]"]


def meshsim_cmd() -> list[str]:
    exe = shutil.which("meshsim", path=str(Path(sys.executable).parent)) or shutil.which("meshsim")
    return [exe] if exe else [sys.executable, "-m", "meshsim.cli"]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("MESHSIM_DEBUG", None)
    return subprocess.run(meshsim_cmd() + [str(a) for a in args], capture_output=True, text=True,
                          env=env, cwd=cwd, stdin=subprocess.DEVNULL, timeout=120)


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {stderr!r}"
    assert lines[0].startswith("error:"), lines[0]
    return lines[0]


def resolved(out: Path) -> dict:
    return yaml.safe_load((out / "scenario.resolved.yaml").read_text())


def table(output: str) -> dict[str, str]:
    """``meshsim topology`` prints ``key  value`` lines."""
    rows = {}
    for line in output.splitlines():
        key, _, value = line.strip().partition(" ")
        rows[key] = value.strip()
    return rows


# ---------------------------------------------------------------- subprocess


def test_validate_good_scenario_exits_0(tmp_path):
    proc = cli("validate", GOOD, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok:")
    assert "40 agents" in proc.stdout and "70 links" in proc.stdout
    assert proc.stderr == ""


def test_set_unknown_key_is_one_line_exit_2(tmp_path):
    out = tmp_path / "run"
    proc = cli("run", GOOD, "--out", out, *SHORT, "--set", "network.links.lossy=0.1", cwd=tmp_path)
    assert proc.returncode == 2
    line = one_error_line(proc.stderr)
    assert "network.links.lossy" in line and "unknown key" in line
    assert not (out / "summary.json").exists()


def test_bad_flag_is_one_line_exit_2(tmp_path):
    proc = cli("run", GOOD, "--nope", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--nope" in one_error_line(proc.stderr)


def test_missing_scenario_file_exit_2(tmp_path):
    missing = tmp_path / "no-such-scenario.yaml"
    proc = cli("validate", missing, cwd=tmp_path)
    assert proc.returncode == 2
    line = one_error_line(proc.stderr)
    assert "no-such-scenario.yaml" in line and "not found" in line


# ---------------------------------------------------------------- in-process


def test_validate_good_scenario_in_process():
    res = invoke("validate", GOOD)
    assert res.exit_code == 0
    assert "routing-sparse-failures" in res.output


def test_set_unknown_top_level_key_names_it():
    res = invoke("validate", GOOD, "--set", "bogus_field=1")
    assert res.exit_code == 2
    line = one_error_line(res.stderr)
    assert "bogus_field" in line and GOOD.name in line


def test_missing_scenario_file_run(tmp_path):
    res = invoke("run", tmp_path / "absent.yaml", "--out", tmp_path / "out")
    assert res.exit_code == 2
    assert "absent.yaml" in one_error_line(res.stderr)
    assert not (tmp_path / "out").exists()


def test_run_writes_run_folder(tmp_path):
    out = tmp_path / "run"
    res = invoke("run", GOOD, "--out", out, *SHORT)
    assert res.exit_code == 0, res.stderr
    for name in ("scenario.resolved.yaml", "summary.json", "events.jsonl.gz"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"] == "routing-sparse-failures"
    assert summary["sim_time"] == pytest.approx(60.0)
    data = resolved(out)
    assert data["duration"] == pytest.approx(60.0)
    assert data["events"] == []
    assert data["network"]["links"]["loss"] == pytest.approx(0.02)
    assert read_records(out, "events.jsonl")  # gzip-compressed JSONL, one record per line
    assert "(resumed)" not in res.output


def test_set_loss_changes_resolved_yaml(tmp_path):
    out = tmp_path / "lossy"
    res = invoke("run", GOOD, "--out", out, *SHORT, "--set", "network.links.loss=0.1")
    assert res.exit_code == 0, res.stderr
    assert resolved(out)["network"]["links"]["loss"] == pytest.approx(0.1)


def test_rerun_resumes_then_needs_force(tmp_path):
    out = tmp_path / "run"
    first = invoke("run", GOOD, "--out", out, *SHORT)
    assert first.exit_code == 0, first.stderr
    assert "(resumed)" not in first.output
    summary = (out / "summary.json").read_text()

    again = invoke("run", GOOD, "--out", out, *SHORT)
    assert again.exit_code == 0, again.stderr
    assert "(resumed)" in again.output
    assert (out / "summary.json").read_text() == summary

    other = invoke("run", GOOD, "--out", out, *SHORT, "--set", "network.links.loss=0.1")
    assert other.exit_code == 2
    line = one_error_line(other.stderr)
    assert "--force" in line and str(out) in line
    assert (out / "summary.json").read_text() == summary  # untouched
    assert resolved(out)["network"]["links"]["loss"] == pytest.approx(0.02)

    forced = invoke("run", GOOD, "--out", out, *SHORT, "--set", "network.links.loss=0.1", "--force")
    assert forced.exit_code == 0, forced.stderr
    assert "(resumed)" not in forced.output
    assert resolved(out)["network"]["links"]["loss"] == pytest.approx(0.1)
    assert (out / "summary.json").is_file()


def test_topology_of_scenario():
    res = invoke("topology", GOOD)
    assert res.exit_code == 0, res.stderr
    rows = table(res.output)
    assert rows["nodes"] == "40"
    assert rows["edges"] == "70"
    assert rows["connected"] == "True"
    assert int(rows["diameter"]) >= 1


def test_topology_of_edgelist(tmp_path):
    path = tmp_path / "chain.edgelist"
    path.write_text("# a path of four agents\nA B latency=0.02\nB C loss=0.1\nC D\n")
    res = invoke("topology", path)
    assert res.exit_code == 0, res.stderr
    rows = table(res.output)
    assert rows["nodes"] == "4"
    assert rows["edges"] == "3"
    assert rows["diameter"] == "3"

    res = invoke("topology", path, "--json")
    assert res.exit_code == 0, res.stderr
    info = json.loads(res.output)
    assert (info["nodes"], info["edges"], info["diameter"], info["connected"]) == (4, 3, 3, True)


def test_topology_missing_file(tmp_path):
    res = invoke("topology", tmp_path / "gone.edgelist")
    assert res.exit_code == 2
    assert "gone.edgelist" in one_error_line(res.stderr)
