"""``meshsim sweep --executor dask`` against a real cluster (issue 22, Build 3):
a ``dask scheduler`` and ``dask worker ADDRESS`` processes started here as
separate processes on localhost, the way a cluster runs them, each worker in
its own empty working folder.

* the sweep gives byte for byte what the local process pool gives;
* the workers get the input files' *content* (topology, task file, replay
  cassette), never a path: the files are moved away after the client read
  them and before any worker exists, and the runs still match;
* a worker killed (SIGKILL) while it runs a run costs nothing: the run is
  resubmitted to the other worker, even with a scheduler that allows no
  failures of its own, and the results are unchanged.

Slow (a cluster starts in a few seconds on two busy cores): ``pytest -m slow``,
which .ci/run runs.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import pytest

pytest.importorskip("distributed")

from meshsim.sweep.results import comparable_results  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
GRID = ["--grid", "protocol.params.beta=2.5,3", "--seeds", "1-2"]
#: timings differ from run to run; results.csv and results.parquet are compared without them (comparable_results)
TIMED = {"timing.json", "results.csv", "results.parquet", ".sweep.lock"}

SCENARIO = """\
name: shipped-files
seed: 1
network:
  topology: {kind: file, path: topo.edgelist}
agents: {profile: bbh}
protocol: {name: meshheal}
backend: {kind: replay, mode: MODE, cassette: cas.jsonl, backend: {kind: fake, profile: fake-default}}
tasks: {dataset: bbh, file: tasks.jsonl, count: 84, block: 42}
phases: [{name: healthy, tasks: 42}, {name: degraded, tasks: 42}]
events: [{at_task: 43, type: degrade, agents: [A3, A5]}]
"""


def _dask_cli() -> str:
    exe = BIN / "dask"
    return str(exe) if exe.exists() else (shutil.which("dask") or pytest.skip("no dask CLI"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(cond, timeout: float, what: str, procs: tuple = ()) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"{what}: a process ended early (exit {p.returncode})")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Cluster:
    """A scheduler and workers as separate processes (no nanny: the worker
    process is the one a kill hits), always killed on exit."""

    def __init__(self, tmp: Path, allowed_failures: Optional[int] = None):
        self.tmp = tmp
        self.port = _free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.env = dict(os.environ)
        if allowed_failures is not None:
            self.env["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] = str(allowed_failures)
        self.procs: list[subprocess.Popen] = []
        self.workers: dict[str, subprocess.Popen] = {}  # address -> process

    def _start(self, args: list[str], name: str, cwd: Path) -> subprocess.Popen:
        log = open(self.tmp / f"{name}.log", "w")
        p = subprocess.Popen([_dask_cli(), *args], cwd=cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        log.close()
        self.procs.append(p)
        return p

    def __enter__(self) -> "Cluster":
        try:
            sched = self._start(["scheduler", "--host", "127.0.0.1", "--port", str(self.port), "--no-dashboard"],
                                "scheduler", self.tmp)

            def up() -> bool:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                    return True
                except OSError:
                    return False

            _wait(up, 60, "the scheduler", (sched,))
        except BaseException:
            self.__exit__()
            raise
        return self

    def add_workers(self, n: int, wait: bool = True) -> list[subprocess.Popen]:
        """``n`` workers, each in its own empty working folder (relative paths resolve elsewhere)."""
        new = []
        for _ in range(n):
            i = len(self.workers)
            cwd = self.tmp / f"worker-{i}"
            cwd.mkdir()
            port = _free_port()
            p = self._start(["worker", self.address, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                             "--host", "127.0.0.1", "--worker-port", str(port)], f"worker-{i}", cwd)
            self.workers[f"tcp://127.0.0.1:{port}"] = p
            new.append((i, p))
        if wait:
            for i, p in new:
                _wait(lambda i=i: "Registered to" in (self.tmp / f"worker-{i}.log").read_text(), 60,
                      f"worker {i} to register", (p,))
        return [p for _, p in new]

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait(timeout=30)


def _sweep_cmd(scenario: str, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "meshsim.cli", "sweep", scenario, *GRID, "--out", str(out), *extra]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name not in TIMED}


def assert_identical(got: Path, want: Path) -> None:
    """Every file of the two sweep folders byte for byte (the measured seconds aside)."""
    a, b = _files(got), _files(want)
    assert sorted(a) == sorted(b)
    assert [k for k in a if a[k] != b[k]] == []
    assert comparable_results(got) == comparable_results(want)
    assert len(list(got.glob("runs/*/seed-*/summary.json"))) == 4


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """``root/inputs/``: a scenario naming a topology file, a task file and a
    replay cassette (recorded here, in process, over the fake backend), all
    relative to it; and ``root/pool``: the sweep on the local process pool,
    run from ``root`` with the scenario named by a relative path."""
    from meshsim.sweep import plan_sweep, run_sweep

    root = tmp_path_factory.mktemp("cluster")
    d = root / "inputs"
    d.mkdir()
    shutil.copy(ROOT / "scenarios" / "data" / "bbh-sample.jsonl", d / "tasks.jsonl")
    (d / "topo.edgelist").write_text("".join(f"A{u} A{v} latency={0.01 * (u + v):.2f}\n"
                                             for u in range(1, 7) for v in range(u + 1, 7)))
    (d / "scen.yaml").write_text(SCENARIO.replace("MODE", "record-missing"))
    rec = plan_sweep(d / "scen.yaml", GRID[1:2], seeds="1-2")
    assert run_sweep(rec, root / "recording", workers=1, quiet=True).failed == 0
    (d / "scen.yaml").write_text(SCENARIO.replace("MODE", "replay"))
    res = subprocess.run(_sweep_cmd("inputs/scen.yaml", root / "pool", "--workers", "2"), cwd=root,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "local process pool, 2 workers" in res.stderr
    return root


def test_workers_get_file_contents_not_paths_and_match_the_pool(inputs, tmp_path):
    """No worker exists until the sweep has read its inputs and submitted the
    runs; then the inputs folder is moved away and two workers start, each in
    an empty folder: they can open neither the relative topology path nor the
    absolute task file and cassette paths, and still give the pool's bytes."""
    out = inputs / "dask-shipped"
    err = tmp_path / "sweep.err"
    hidden = inputs / "moved-away"
    with Cluster(tmp_path) as cl:
        with open(err, "w") as fh:
            sweep = subprocess.Popen(_sweep_cmd("inputs/scen.yaml", out, "--executor", "dask", "--scheduler",
                                                cl.address), cwd=inputs, stdout=subprocess.PIPE, stderr=fh,
                                     text=True)
        try:
            # the sweep line is printed after the inputs are read, just before the runs are submitted
            _wait(lambda: "Dask distributed on scheduler" in err.read_text(), 60, "the sweep to connect", (sweep,))
            (inputs / "inputs").rename(hidden)
            cl.add_workers(2, wait=False)
            stdout, _ = sweep.communicate(timeout=90)
        finally:
            if sweep.poll() is None:
                sweep.kill()
            if hidden.exists():
                hidden.rename(inputs / "inputs")
    assert sweep.returncode == 0, stdout + err.read_text()[-2000:]
    assert "4 runs: 4 finished (0 resumed), 0 failed" in stdout
    assert_identical(out, inputs / "pool")


def test_a_worker_killed_mid_run_is_retried_and_the_results_are_unchanged(inputs, tmp_path):
    """SIGKILL the worker that is running a run. The scheduler allows no
    failures of its own (``allowed-failures: 0``: the first loss is a
    ``KilledWorker`` for the client), so the retry shown is the sweep's."""
    from distributed import Client

    out = inputs / "dask-killed"
    err = tmp_path / "sweep.err"
    with Cluster(tmp_path, allowed_failures=0) as cl:
        cl.add_workers(2)
        with Client(cl.address, timeout=30) as client, open(err, "w") as fh:
            sweep = subprocess.Popen(_sweep_cmd("inputs/scen.yaml", out, "--executor", "dask", "--scheduler",
                                                cl.address), cwd=inputs, stdout=subprocess.PIPE, stderr=fh,
                                     text=True)
            try:
                busy: list[str] = []

                def running() -> bool:
                    busy[:] = [w for w, keys in client.processing().items() if keys]
                    return bool(busy)

                _wait(running, 60, "a run in flight", (sweep,))
                victim = cl.workers[busy[0]]
                victim.kill()  # SIGKILL: no goodbye to the scheduler
                victim.wait(timeout=30)
                stdout, _ = sweep.communicate(timeout=90)
            finally:
                if sweep.poll() is None:
                    sweep.kill()
    log = err.read_text()
    assert sweep.returncode == 0, stdout + log[-2000:]
    assert "4 runs: 4 finished (0 resumed), 0 failed" in stdout
    assert "worker lost running" in log and "resubmitted (1/2)" in log, log[-2000:]
    assert_identical(out, inputs / "pool")
