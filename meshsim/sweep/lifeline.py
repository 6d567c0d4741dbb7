"""Workers die with the sweep, however the sweep dies (docs/sweeps.md,
"Executors").

The process pool's workers are forked from a ``forkserver``, not from the
sweep process, and every one of them holds the write end of the forkserver's
own "alive" pipe and of its task queue: after ``kill -9`` of the sweep nothing
ever tells them to stop, so they finish their runs and then wait for work
forever (issue 18 found ≈ 330 MB idling for 30+ minutes). A parent-death
signal (Linux ``PR_SET_PDEATHSIG``) does not help either: their parent is the
forkserver, which only exits once they have.

So the sweep process holds the only write end of a *lifeline* pipe and every
pool worker gets a read end (passed as an initializer argument, which
multiprocessing sends as a file descriptor). A daemon thread in the worker
blocks on it; the kernel closes the write end when the sweep process dies, for
any reason (``kill -9``, SIGTERM, a crash), the read returns end-of-file and
the worker kills itself at once, in the middle of a run if need be (the sweep
folder holds only finished runs: a worker never writes). With the workers gone
the forkserver and multiprocessing's resource tracker see their pipes close
and exit too. Portable to every system with ``forkserver`` (Linux, macOS).

Dask ``LocalCluster`` workers need nothing here: distributed's nanny already
gives each worker process a pipe to its parent and exits it when that closes
(a test checks both executors).

The sweep process itself turns SIGTERM into an orderly exit (code 143) so that
its ``finally`` blocks stop the pool; Ctrl-C reaches the whole foreground
process group, so pool workers ignore SIGINT and leave it to the sweep
process, which terminates them (no traceback per worker).

Temp folders (issue 30): the forkserver's socket lives in a ``pymp-XXXXXXXX``
folder in the system temp folder, which only an orderly exit of the sweep
process removes. :func:`mark_temp_dir` writes the sweep's pid (and its start
time, against pid reuse) into that folder when a pool starts, and removes
every folder so marked whose process is gone: what a ``kill -9`` left behind
goes at the next pool start. Folders of other programs carry no mark and are
never touched.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

__all__ = ["lifeline", "pool_initializer", "watch", "sigterm_exits", "mark_temp_dir", "remove_stale_temp_dirs"]

#: the mark a pool's temp folder carries: {"pid": ..., "start": ...}
TEMP_MARK = "meshsim-sweep.json"

#: exit status of a sweep stopped by SIGTERM (128 + 15, the shell convention)
SIGTERM_EXIT = 143


def lifeline() -> tuple[Any, Any]:
    """``(read_end, write_end)``: keep the write end in the sweep process, give
    the read end to the workers (a ``multiprocessing`` connection, picklable to
    a forkserver or spawned child)."""
    import multiprocessing as mp

    return mp.Pipe(duplex=False)


def _die() -> None:  # pragma: no cover - runs in a worker whose sweep is gone
    try:
        os.kill(os.getpid(), signal.SIGKILL)
    finally:
        os._exit(1)


def watch(conn: Any) -> threading.Thread:
    """Kill this process when ``conn``'s other end closes (the sweep process died)."""

    def run() -> None:
        try:
            while True:
                conn.recv_bytes()  # the sweep never writes: this returns only at EOF (raises EOFError)
        except BaseException:
            pass
        _die()

    t = threading.Thread(target=run, name="meshsim-sweep-lifeline", daemon=True)
    t.start()
    return t


def pool_initializer(conn: Any) -> None:
    """Initializer of every process-pool worker: Ctrl-C is the sweep process's
    to handle, and the lifeline ends the worker when the sweep process ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch(conn)


@contextmanager
def sigterm_exits() -> Iterator[None]:
    """While the sweep runs, SIGTERM raises ``SystemExit(143)`` in the main
    thread, so the pool is stopped and the lock released on the way out.
    A handler the application installed is left alone."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(SIGTERM_EXIT)

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _start_time(pid: int) -> Optional[str]:
    """When process ``pid`` started (clock ticks since boot, Linux), or None where unknown."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _gone(pid: Any, start: Any) -> bool:
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, someone else's
        return False
    now = _start_time(pid)
    return start is not None and now is not None and now != start  # the pid was reused


def remove_stale_temp_dirs(keep: Optional[Path] = None) -> int:
    """Remove the marked pool temp folders (:data:`TEMP_MARK`) of processes that are gone; returns how many."""
    n = 0
    try:
        dirs = list(Path(tempfile.gettempdir()).glob("pymp-*"))
    except OSError:
        return 0
    for d in dirs:
        if keep is not None and d == keep:
            continue
        try:
            if d.is_symlink() or not d.is_dir() or d.stat().st_uid != os.getuid():
                continue
            mark = json.loads((d / TEMP_MARK).read_text())
        except (OSError, ValueError):
            continue  # not ours (no mark), or not readable
        if isinstance(mark, dict) and _gone(mark.get("pid"), mark.get("start")):
            shutil.rmtree(d, ignore_errors=True)
            n += 1
    return n


def mark_temp_dir() -> Optional[Path]:
    """Mark multiprocessing's temp folder of this process (made now if need
    be, before the pool's forkserver uses it) with this pid, and remove the
    marked folders of processes that are gone. Returns the folder."""
    import multiprocessing.util as mpu

    try:
        d = Path(mpu.get_temp_dir())
        f = d / TEMP_MARK
        if not f.exists():
            f.write_text(json.dumps({"pid": os.getpid(), "start": _start_time(os.getpid())}))
    except OSError:
        return None
    remove_stale_temp_dirs(keep=d)
    return d
