"""Input files travel to a sweep's Dask workers as content, never as a path
(issue 22, Build 3): :func:`meshsim.core.files.shipped` serves them in memory
under the paths the scenario names, so a worker whose filesystem holds none of
them runs exactly as a local run. The real cluster is in test_dask_cluster.py
(slow); these are the pieces, in process, in well under a second each.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from meshsim.core.errors import InputError
from meshsim.core.files import is_input_dir, is_input_file, read_bytes, shipped
from meshsim.sweep import plan_sweep
from meshsim.sweep.core import point_inputs
from meshsim.sweep.worker import run_task

ROOT = Path(__file__).resolve().parents[2]

SCENARIO = """\
name: shipped
seed: 1
network:
  topology: {kind: file, path: topo.edgelist}
agents: {profile: bbh}
protocol: {name: meshheal}
backend: BACKEND
tasks: {dataset: bbh, file: tasks.jsonl, count: 14, block: 7}
"""


def _inputs(d: Path, backend: str = "{kind: fake, profile: fake-default}") -> Path:
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "scenarios" / "data" / "bbh-sample.jsonl", d / "tasks.jsonl")
    (d / "topo.edgelist").write_text("".join(f"A{u} A{v} latency=0.02\n" for u in range(1, 7)
                                             for v in range(u + 1, 7)))
    (d / "scen.yaml").write_text(SCENARIO.replace("BACKEND", backend))
    return d / "scen.yaml"


def test_shipped_files_are_served_by_path_within_their_cap(tmp_path):
    gone = tmp_path / "nowhere" / "topo.edgelist"
    with pytest.raises(InputError, match="not found"):
        read_bytes(gone, "topology")
    with shipped({str(gone): b"A1 A2\n"}):
        assert read_bytes(gone, "topology") == b"A1 A2\n" and is_input_file(gone)
        assert is_input_dir(gone.parent) and not is_input_dir(tmp_path / "elsewhere")
        with pytest.raises(InputError, match="above the 0 MiB limit"):  # the cap holds for shipped content too
            read_bytes(gone, "topology", limit=3)
    assert not is_input_file(gone)  # out of the task, the files are gone again
    with shipped({"rel/t.jsonl": b"x"}):  # a relative path, as a scenario run from its own folder names it
        assert read_bytes(Path("rel") / "t.jsonl", "tasks") == b"x"


def test_a_worker_runs_a_point_whose_files_it_cannot_see(tmp_path):
    """The task carries the topology and task file; the folder is then removed
    and the run gives the same summary, byte for byte."""
    scen = _inputs(tmp_path / "in")
    plan = plan_sweep(scen, ["protocol.params.beta=3"], seeds="1")
    (p,) = plan.points
    task = {"point": p.key, "seed": 1, "scenario": p.data, "source": plan.source, "base_dir": str(plan.base_dir),
            "level": "summary"}
    here = run_task(dict(task))
    assert here["status"] == "ok", here["error"]
    files = point_inputs(p.data, plan.source, plan.base_dir, True, {})
    # the profiles too (dataset, backend): a worker elsewhere may run another checkout
    assert set(files) >= {str(tmp_path / "in" / "topo.edgelist"), str(tmp_path / "in" / "tasks.jsonl")}
    assert any(k.endswith("fake-default.yaml") for k in files) and any(k.endswith("bbh.yaml") for k in files)
    shutil.rmtree(tmp_path / "in")
    lost = run_task(dict(task))
    assert lost["status"] == "failed" and "not found" in lost["error"]  # what a worker elsewhere met before
    there = run_task({**task, "files": files})
    assert there["status"] == "ok", there["error"]
    assert there["summary"] == here["summary"] and there["resolved"] == here["resolved"]


def test_a_replayed_cassette_is_shipped_and_a_recording_one_refused_on_a_scheduler(tmp_path):
    rep = "{kind: replay, mode: MODE, cassette: cas.jsonl, backend: {kind: fake, profile: fake-default}}"
    scen = _inputs(tmp_path / "in", rep.replace("MODE", "record-missing"))
    (tmp_path / "in" / "cas.jsonl").write_text("")
    plan = plan_sweep(scen, ["protocol.params.beta=3"], seeds="1")
    (p,) = plan.points
    with pytest.raises(InputError, match="replays cassettes read-only") as err:
        point_inputs(p.data, plan.source, plan.base_dir, True, {})
    assert err.value.field == "backend.mode" and err.value.value == "record-missing"
    # a LocalCluster shares this machine: a cassette to append to stays a path
    assert str(tmp_path / "in" / "cas.jsonl") not in point_inputs(p.data, plan.source, plan.base_dir, False, {})
    scen.write_text(scen.read_text().replace("record-missing", "replay"))
    plan = plan_sweep(scen, ["protocol.params.beta=3"], seeds="1")
    files = point_inputs(plan.points[0].data, plan.source, plan.base_dir, True, {})
    assert files[str(tmp_path / "in" / "cas.jsonl")] == b""


def test_an_unreadable_input_is_left_to_the_run_to_report(tmp_path):
    scen = _inputs(tmp_path / "in")
    plan = plan_sweep(scen, ["protocol.params.beta=3"], seeds="1")
    (tmp_path / "in" / "tasks.jsonl").unlink()
    cache: dict = {}
    files = point_inputs(plan.points[0].data, plan.source, plan.base_dir, True, cache)
    assert str(tmp_path / "in" / "topo.edgelist") in files and str(tmp_path / "in" / "tasks.jsonl") not in files


def test_a_recording_sweep_against_a_scheduler_is_one_line_exit_2_and_writes_nothing(tmp_path):
    from click.testing import CliRunner

    from meshsim.cli import main

    rep = "{kind: replay, mode: record, cassette: cas.jsonl, backend: {kind: fake, profile: fake-default}}"
    scen = _inputs(tmp_path / "in", rep)
    res = CliRunner().invoke(main, ["sweep", str(scen), "--grid", "protocol.params.beta=3", "--seeds", "1",
                                    "--executor", "dask", "--scheduler", "tcp://127.0.0.1:9",
                                    "--out", str(tmp_path / "s")])
    assert res.exit_code == 2, res.output
    (line,) = [ln for ln in res.stderr.strip().splitlines() if ln.startswith("error:")]
    assert "backend.mode" in line and "read-only" in line and "'record'" in line
    assert not (tmp_path / "s").exists()
