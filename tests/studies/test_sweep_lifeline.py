"""Workers die with the sweep, however it dies (issue 18): ``kill -9`` of the
main process, SIGTERM, Ctrl-C, an exception. Every process of the sweep is
found by an environment marker that the test gives the sweep process (every
descendant inherits it: the forkserver, pool workers, the resource tracker,
Dask's nannies and workers), so the check does not depend on how the sweep
arranges its processes.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STAGGERED = str(ROOT / "scenarios" / "meshheal" / "staggered-math.yaml")
#: 16 smoke runs (about 0.3 CPU s each): the kill lands as the first finishes, the workers busy with the rest
ARGS = ["--smoke", "--grid", "protocol.params.beta=2,2.5,3,3.5", "--seeds", "1-4", "--workers", "2", "-q"]


def _alive(mark: str) -> list[tuple[int, str]]:
    """Processes (not zombies) whose environment holds ``MESHSIM_TEST_MARK=mark``."""
    needle = f"MESHSIM_TEST_MARK={mark}".encode()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if needle not in (d / "environ").read_bytes().split(b"\0"):
                continue
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if state not in ("Z", "X"):
            found.append((int(d.name), cmd))
    return found


def _start(out: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    mark = uuid.uuid4().hex
    env = dict(os.environ, MESHSIM_TEST_MARK=mark)
    cmd = [sys.executable, "-m", "meshsim.cli", "sweep", STAGGERED, *ARGS, "--out", str(out), *extra]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own process group: a group signal spares pytest
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(out.glob("runs/*/seed-*/summary.json")):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    assert list(out.glob("runs/*/seed-*/summary.json")), "no run finished within 120 s"
    return proc, mark


def _gone_within(mark: str, seconds: float) -> list[tuple[int, str]]:
    deadline = time.monotonic() + seconds
    left = _alive(mark)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _alive(mark)
    return left


def _finish(proc: subprocess.Popen, mark: str) -> None:
    """Clean up after a failed assertion: nothing of the test may outlive it."""
    for pid, _cmd in _alive(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
@pytest.mark.parametrize("executor", ["local", pytest.param("dask", marks=pytest.mark.slow)])  # dask: ~5 s
def test_kill_9_of_the_sweep_leaves_no_process_of_it_alive_within_10_s(executor, tmp_path):
    extra = []
    if executor == "dask":
        pytest.importorskip("distributed")
        extra = ["--executor", "dask"]
    proc, mark = _start(tmp_path / "s", *extra)
    try:
        before = _alive(mark)
        assert len(before) >= 3, before  # the sweep and at least two workers, mid-run
        os.kill(proc.pid, signal.SIGKILL)  # the main process only, as `kill -9 PID` does
        proc.wait()
        left = _gone_within(mark, 10.0)
        assert not left, f"alive 10 s after kill -9 of the sweep: {left}"
    finally:
        _finish(proc, mark)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_sigterm_stops_the_sweep_and_its_workers(tmp_path):
    proc, mark = _start(tmp_path / "s")
    try:
        os.kill(proc.pid, signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
        assert proc.returncode == 143, err
        assert "Traceback" not in err, err
        left = _gone_within(mark, 10.0)
        assert not left, f"alive 10 s after SIGTERM: {left}"
    finally:
        _finish(proc, mark)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_ctrl_c_stops_the_sweep_and_its_workers_without_tracebacks(tmp_path):
    proc, mark = _start(tmp_path / "s")
    try:
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole foreground group
        _out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
        left = _gone_within(mark, 10.0)
        assert not left, f"alive 10 s after Ctrl-C: {left}"
    finally:
        _finish(proc, mark)


def test_an_exception_in_the_sweep_process_stops_the_pool(tmp_path, monkeypatch):
    """The sweep process raising (here: writing a run fails) leaves no worker behind."""
    from meshsim.sweep import core, executors, plan_sweep, run_sweep

    pools = []
    real = executors.PoolExecutor.run

    def spy(self, tasks, *a, **kw):
        gen = real(self, tasks, *a, **kw)
        first = next(gen)
        pools.append(list(self.pool._processes.values()))
        yield first
        yield from gen

    def broken(out, res, fmt):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(executors.PoolExecutor, "run", spy)
    monkeypatch.setattr(core, "write_run", broken)
    plan = plan_sweep(STAGGERED, ["protocol.params.beta=2,2.5,3,3.5"], seeds="1-2", smoke=True)
    with pytest.raises(OSError, match="No space left"):
        run_sweep(plan, tmp_path / "s", workers=2, quiet=True)
    (procs,) = pools
    assert procs
    deadline = time.monotonic() + 10
    while any(p.is_alive() for p in procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(p.is_alive() for p in procs)


#: a process that stops its pool while a worker is in the middle of sending a 4 MB result, then exits:
#: the worker blocks in its write once the pipe is full, because this process keeps the interpreter lock
#: (a 30 s switch interval) while the pool's manager thread waits to read
_MID_SEND = """
import sys, time
from meshsim.sweep.executors import PoolExecutor
from meshsim.sweep.worker import run_batch


def big(n):
    time.sleep(0.2)  # sent once the parent holds the lock
    return bytes(n)


if __name__ == "__main__":
    ex = PoolExecutor(2)
    futs = [ex.pool.submit(run_batch, [4_000_000], big) for _ in range(4)]
    time.sleep(0.05)
    sys.setswitchinterval(30)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        pass
    sys.setswitchinterval(0.005)
    ex.close(abort=True)
    print("closed", flush=True)
    sys.exit(130)
"""


@pytest.mark.parametrize("start", ["fork", pytest.param("forkserver", marks=pytest.mark.slow)])
def test_a_sweep_stopped_while_a_worker_sends_its_results_still_exits(start, tmp_path):
    """The CI failure of 6 December (Ctrl-C printed "interrupted" and the
    process never ended): a worker stopped mid-message left half a result in
    the pipe, the pool's manager thread waited for the rest, and the
    interpreter's exit joined that thread. Without the fix in
    ``PoolExecutor.close`` this script hangs every time."""
    script = tmp_path / "mid_send.py"
    script.write_text(_MID_SEND)
    env = dict(os.environ, MESHSIM_POOL_START=start)
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert proc.returncode == 130 and "closed" in proc.stdout, proc.stderr


def test_a_pool_worker_ends_when_the_lifeline_closes():
    """The mechanism itself, without a sweep: a forkserver child holding the
    read end dies as soon as the write end closes (what the kernel does when
    the sweep process dies)."""
    import multiprocessing as mp

    from meshsim.sweep.lifeline import lifeline

    r, w = lifeline()
    ctx = mp.get_context("forkserver")
    p = ctx.Process(target=_initialize_and_sleep, args=(r,))
    p.start()
    try:
        time.sleep(0.5)
        assert p.is_alive()
        w.close()
        p.join(10)
        assert not p.is_alive() and p.exitcode == -signal.SIGKILL
    finally:
        if p.is_alive():
            p.kill()
        r.close()


def _initialize_and_sleep(conn) -> None:
    from meshsim.sweep.lifeline import pool_initializer

    pool_initializer(conn)
    time.sleep(60)


def test_an_exit_that_would_wait_for_ever_ends_after_the_grace():
    """The CLI's last guard (``cli.app._exit_within``): Ctrl-C or SIGTERM ends
    the process even if something in the interpreter's exit waits for ever
    (here a thread that never returns, which the exit joins)."""
    code = ("import sys, threading\n"
            "from meshsim.cli.app import _exit_within\n"
            "threading.Thread(target=threading.Event().wait).start()\n"
            "_exit_within(130, 0.5)\n"
            "sys.exit(130)\n")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 130 and "exit took over 0.5 s; ending now" in proc.stderr, proc.stderr
    assert time.monotonic() - t0 < 20


def test_the_exit_guard_waits_for_the_interpreter_to_exit():
    """A caller that catches the CLI's ``SystemExit`` and goes on (a test's
    CliRunner, a notebook) is not ended by the guard: it starts counting only
    when the interpreter's exit begins."""
    code = ("import sys, time\n"
            "from meshsim.cli.app import _exit_within\n"
            "try:\n"
            "    _exit_within(130, 0.2)\n"
            "    sys.exit(130)\n"
            "except SystemExit:\n"
            "    pass\n"
            "time.sleep(1.0)\n"
            "print('still here')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and "still here" in proc.stdout and not proc.stderr, proc.stderr
