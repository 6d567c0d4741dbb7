"""Damaged sweep and search folders (issue 30): a manifest with wrong types,
a run listed twice, a summary.json cut short, garbage in a search's
``study.journal`` are refused in one line naming the file and what is wrong
(exit 2), or repaired without losing a finished run; never an internal
error, never a duplicated row in results.csv. A killed pool's temp folder
goes at the next pool start.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshsim.cli import main
from meshsim.sweep import MANIFEST

ROOT = Path(__file__).resolve().parents[2]
STAGGERED = str(ROOT / "scenarios" / "meshheal" / "staggered-math.yaml")
GRID = [STAGGERED, "--smoke", "--grid", "protocol.params.beta=2,3", "--seeds", "1-2", "--workers", "1", "-q"]
SEARCH = [STAGGERED, "--smoke", "--search", "optuna", "--range", "protocol.params.beta=2.1:4",
          "--minimize", "detection.delay_mean", "--trials", "2", "--batch", "2", "--seeds", "1-2",
          "--max-seeds", "2", "--workers", "1", "-q"]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def one_line(res) -> str:
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    return lines[0]


def rows(folder: Path) -> list[dict]:
    with open(folder / "results.csv", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> Path:
    """2 points x 2 seeds, finished."""
    out = tmp_path_factory.mktemp("grid") / "s"
    res = invoke("sweep", *GRID, "--out", out)
    assert res.exit_code == 0, res.output + res.stderr
    return out


@pytest.fixture
def copy(grid, tmp_path) -> Path:
    out = tmp_path / "s"
    shutil.copytree(grid, out)
    return out


def edit_manifest(folder: Path, **changes) -> dict:
    m = json.loads((folder / MANIFEST).read_text())
    m.update(changes)
    (folder / MANIFEST).write_text(json.dumps(m))
    return m


class TestADamagedManifest:
    def test_points_of_the_wrong_type_is_one_line_naming_the_file_and_field(self, copy):
        m = json.loads((copy / MANIFEST).read_text())
        edit_manifest(copy, points=[[k, v] for k, v in m["points"].items()])
        for args in (["--out", copy], [*GRID, "--out", copy], [*GRID, "--out", copy, "--dry-run"]):
            res = invoke("sweep", *args)
            assert res.exit_code == 2, res.output + res.stderr
            line = one_line(res)
            assert f"{copy / MANIFEST}: points: damaged manifest: must be an object, not a list" in line, line

    def test_a_run_listed_twice_is_one_run_and_one_row(self, copy):
        m = json.loads((copy / MANIFEST).read_text())
        edit_manifest(copy, runs=m["runs"] + m["runs"])
        res = invoke("sweep", "--out", copy)
        assert res.exit_code == 0, res.output + res.stderr
        got = rows(copy)
        assert len(got) == 4 and len({(r["point"], r["seed"]) for r in got}) == 4
        assert all(r["status"] == "ok" for r in got)
        assert json.loads((copy / MANIFEST).read_text())["runs"] == m["runs"]  # repaired on disk too

    @pytest.mark.parametrize("change, field", [
        ({"runs": "all of them"}, "runs"),
        ({"runs": [["p-000000000000", 1]]}, "runs.0"),
        ({"runs": [[1, 2, 3]]}, "runs.0"),
        ({"axes": [7]}, "axes.0"),
        ({"base": ["not", "a", "scenario"]}, "base"),
        ({"skipped": ["x"]}, "skipped.0"),
        ({"output": None}, "output"),
        ({"command": {"path": STAGGERED, "grid": 5}}, "command.grid"),
    ])
    def test_wrong_types_and_dangling_runs_are_one_line(self, copy, change, field):
        edit_manifest(copy, **change)
        res = invoke("sweep", "--out", copy)
        assert res.exit_code == 2, res.output + res.stderr
        assert f"{copy / MANIFEST}: {field}: damaged manifest" in one_line(res)

    def test_a_manifest_cut_short_is_one_line_and_the_runs_stay(self, copy):
        text = (copy / MANIFEST).read_text()
        (copy / MANIFEST).write_text(text[: len(text) // 2])
        res = invoke("sweep", *GRID, "--out", copy)
        assert res.exit_code == 2 and "manifest.json is not valid JSON" in one_line(res)
        assert len(list(copy.glob("runs/*/seed-*/summary.json"))) == 4


class TestADamagedRun:
    def test_a_summary_cut_short_is_run_again_and_the_others_are_kept(self, copy):
        summaries = sorted(copy.glob("runs/*/seed-*/summary.json"))
        cut = summaries[0]
        cut.write_text(cut.read_text()[:20])
        kept = {p: p.stat().st_mtime_ns for p in summaries[1:]}
        dry = invoke("sweep", "--out", copy, "--dry-run")
        assert dry.exit_code == 0 and "3 done" in dry.output.replace("\n", " "), dry.output
        res = invoke("sweep", "--out", copy)
        assert res.exit_code == 0, res.output + res.stderr
        assert "4 runs: 4 finished (3 resumed)" in res.output
        json.loads(cut.read_text())
        assert {p: p.stat().st_mtime_ns for p in summaries[1:]} == kept
        assert [r["status"] for r in rows(copy)] == ["ok"] * 4

    def test_a_temp_file_that_is_not_meshsims_is_left_alone(self, copy):
        d = sorted(copy.glob("runs/*/seed-*"))[0]
        (d / "summary.json").unlink()
        (d / ".notes.abcd1234.tmp").write_text("mine")  # not a name meshsim writes
        (d / ".summary.json.abcd1234.tmp").write_text("{")  # meshsim's, left by a kill
        assert invoke("sweep", "--out", copy).exit_code == 0
        assert (d / ".notes.abcd1234.tmp").read_text() == "mine"
        assert not (d / ".summary.json.abcd1234.tmp").exists()


@pytest.fixture(scope="module")
def search(tmp_path_factory) -> Path:
    pytest.importorskip("optuna")
    out = tmp_path_factory.mktemp("search") / "s"
    res = invoke("sweep", *SEARCH, "--out", out)
    assert res.exit_code == 0, res.output + res.stderr
    return out


class TestADamagedStudyJournal:
    @pytest.mark.parametrize("garbage, what", [(b"this is not json", "line 3 is not a JSON record"),
                                              (b"[1, 2]", "line 3 is not an Optuna journal record"),
                                              (b'{"worker_id": "x"}', "line 3 is not an Optuna journal record")])
    def test_a_garbage_line_is_one_line_naming_the_journal_and_the_line(self, search, tmp_path, garbage, what):
        out = tmp_path / "s"
        shutil.copytree(search, out)
        f = out / "study.journal"
        lines = f.read_bytes().split(b"\n")
        f.write_bytes(b"\n".join(lines[:2] + [garbage] + lines[2:]))
        before = f.read_bytes()
        for extra in ([], ["--dry-run"]):
            res = invoke("sweep", *SEARCH, "--out", out, *extra)
            assert res.exit_code == 2, res.output + res.stderr
            line = one_line(res)
            assert line.startswith(f"error: {f}: damaged study journal: {what}"), line
        assert f.read_bytes() == before  # refused, not rewritten

    def test_a_journal_with_every_line_twice_is_refused_not_read_as_more_trials(self, search, tmp_path):
        out = tmp_path / "s"
        shutil.copytree(search, out)
        f = out / "study.journal"
        lines = f.read_bytes().split(b"\n")[:-1]
        f.write_bytes(b"\n".join(line for line in lines for _twice in (0, 1)) + b"\n")
        res = invoke("sweep", *SEARCH, "--out", out)
        assert res.exit_code == 2, res.output + res.stderr
        assert "line 2 repeats line 1 (the same study or trial created twice)" in one_line(res)
        assert (out / "trials.csv").read_text() == (search / "trials.csv").read_text()

    def test_the_advice_holds_a_journal_moved_aside_is_rebuilt_from_the_finished_runs(self, search, tmp_path):
        out = tmp_path / "s"
        shutil.copytree(search, out)
        (out / "study.journal").rename(tmp_path / "old.journal")
        summaries = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/seed-*/summary.json")}
        res = invoke("sweep", *SEARCH, "--out", out)
        assert res.exit_code == 0, res.output + res.stderr
        assert {p: p.stat().st_mtime_ns for p in out.glob("runs/*/seed-*/summary.json")} == summaries
        assert (out / "trials.csv").read_text() == (search / "trials.csv").read_text()


class TestTempFoldersOfKilledPools:
    def test_marked_folders_of_gone_processes_are_removed_others_kept(self, tmp_path, monkeypatch):
        import tempfile

        from meshsim.sweep.lifeline import TEMP_MARK, _start_time, remove_stale_temp_dirs

        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True)
        dead = int(done.stdout)
        me = os.getpid()
        marks = {"pymp-dead": {"pid": dead, "start": None}, "pymp-live": {"pid": me, "start": _start_time(me)},
                 "pymp-reused": {"pid": me, "start": "1"}, "pymp-foreign": None}
        for name, mark in marks.items():
            (tmp_path / name).mkdir()
            if mark is not None:
                (tmp_path / name / TEMP_MARK).write_text(json.dumps(mark))
        (tmp_path / "pymp-dead" / "listener-x").write_text("")
        assert remove_stale_temp_dirs() == (2 if _start_time(me) else 1)
        left = sorted(p.name for p in tmp_path.iterdir())
        assert "pymp-dead" not in left and {"pymp-live", "pymp-foreign"} <= set(left)

    @pytest.mark.slow
    @pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
    def test_kill_9_of_a_pool_sweep_leaves_its_temp_folder_until_the_next_start_only(self, tmp_path, request):
        # a short TMPDIR: the pool's forkserver socket lives in it, and an AF_UNIX path has at most
        # 107 bytes (xdist's tmp_path, popen-gwN/..., is too long for it)
        tmp = Path(tempfile.mkdtemp(prefix="mstmp"))
        request.addfinalizer(lambda: shutil.rmtree(tmp, ignore_errors=True))
        env = dict(os.environ, TMPDIR=str(tmp))
        env.pop("MESHSIM_DEBUG", None)
        # the forkserver is what keeps a pymp-* socket folder; a single-threaded sweep forks its
        # workers straight from itself (no such folder), so this test asks for the forkserver
        env["MESHSIM_POOL_START"] = "forkserver"
        out = tmp_path / "s"
        args = [STAGGERED, "--smoke", "--grid", "protocol.params.beta=2,2.5,3,3.5", "--seeds", "1-4",
                "--workers", "2", "-q", "--out", str(out)]
        cmd = [sys.executable, "-m", "meshsim.cli", "sweep"]
        proc = subprocess.Popen(cmd + args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + 300  # (a loaded CI machine starts the pool slowly)
            while time.monotonic() < deadline and proc.poll() is None and not (list(tmp.glob("pymp-*"))
                                                       and list(out.glob("runs/*/seed-*/summary.json"))):
                time.sleep(0.05)
            assert proc.poll() is None, "the sweep ended before it could be killed"
            assert list(tmp.glob("pymp-*")), "the pool's temp folder"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
        time.sleep(1.0)  # the workers end (lifeline)
        done = subprocess.run(cmd + args, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert not list(tmp.glob("pymp-*"))
