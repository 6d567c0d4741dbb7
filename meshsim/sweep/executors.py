"""Where a sweep's runs execute: in this process, on a local process pool
(``concurrent.futures``, the default) or on Dask distributed (a
``LocalCluster`` started here, or a running scheduler by address).

Every executor takes the task dicts of :mod:`.worker` and yields their results
in completion order; a task that dies with its worker (a crash) comes back as a
failed result, never as an exception. On Dask, a run whose worker is lost
(killed, its machine gone) is resubmitted to the others (``RETRIES``) before
it counts as failed, and the input files travel as content (sweep.core). Connecting
happens when the executor is made, so a scheduler that cannot be reached is a
one-line input error before anything is written.

Runs travel in batches (worker.split: at most ``BATCH_MAX``, smaller towards
the end so no worker idles while another finishes): the pool and Dask send one
message per batch and the results come back batch by batch, each batch's in
its tasks' order. Nothing a run writes depends on the batching: results.csv
and every run folder are the same for any executor, worker count or batch.
"""
from __future__ import annotations

import os
import socket
import struct
import sys
import threading
from typing import Any, Callable, Iterator, Optional
from urllib.parse import urlsplit

from ..core.errors import InputError
from .worker import PRELOAD, failure, run_batch, run_task, split

__all__ = ["Executor", "make_executor", "default_workers", "EXECUTORS"]

EXECUTORS = ("local", "dask")
#: seconds to wait for a Dask scheduler given by address: connect and handshake together
CONNECT_TIMEOUT = 3.0
#: the largest handshake a scheduler is believed to send (bytes; a real one is about 60)
HANDSHAKE_MAX = 64 * 1024
#: batches of runs submitted to Dask per worker thread at a time
WINDOW = 2
#: times a run whose Dask worker was lost is resubmitted before it counts as failed
RETRIES = 2


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class Executor:
    name = "inline"
    workers = 1
    #: where the executor says what the user should know mid-sweep (a lost worker, a retry); set by the sweep
    notify: Callable[[str], None] = staticmethod(lambda msg: None)

    def run(self, tasks: list[dict[str, Any]], fn: Callable = run_task) -> Iterator[dict[str, Any]]:
        for t in tasks:
            yield fn(t)

    def close(self, abort: bool = False) -> None:
        pass

    def describe(self) -> str:
        return "in this process"


def _forked_initializer(life_r: Any, life_w: Any) -> None:
    """A worker forked from the sweep process inherits what the sweep process
    holds: the lifeline's write end (closed here, or the worker would keep its
    own lifeline open), the folder locks (a ``flock`` lasts while any copy of
    its descriptor is open: closed here, so the lock ends with the sweep
    process, not with its last worker) and the sweep's SIGTERM handler (back to
    the default: a terminated worker ends at once)."""
    import signal

    from .lifeline import pool_initializer

    life_w.close()
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:  # pragma: no cover - Linux has it
        fds = []
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}").endswith(".lock"):  # meshsim's locks: .sweep.lock, .meshsim.lock, ...
                os.close(int(fd))
        except OSError:
            continue
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    pool_initializer(life_r)


def _fork_is_safe() -> bool:
    """Forking the sweep process itself is safe on Linux while it runs one
    thread (no lock another thread holds is copied); ``MESHSIM_POOL_START``
    (``fork`` / ``forkserver``) overrides, for tests and benchmarks."""
    choice = os.environ.get("MESHSIM_POOL_START", "")
    if choice in ("fork", "forkserver"):
        return choice == "fork"
    return sys.platform == "linux" and threading.active_count() == 1


class PoolExecutor(Executor):
    """A local process pool, its workers started at once. Where it is safe
    (:func:`_fork_is_safe`) they are forked from this process, which has
    meshsim imported already: no import, no server process (issue 33: the
    fixed second before the first run). Otherwise they are forked from a server
    process that imports :data:`worker.PRELOAD` once (``forkserver``): safe
    next to the parent's threads."""

    name = "local"

    def __init__(self, workers: int):
        import concurrent.futures as cf
        import multiprocessing as mp

        from .lifeline import lifeline, mark_temp_dir, pool_initializer

        self.workers = workers
        # the workers end when this process does, however it ends (lifeline.py)
        self._life_r, self._life_w = lifeline()
        if _fork_is_safe():
            import importlib

            for mod in PRELOAD:  # what a run imports, imported once here rather than once per worker
                importlib.import_module(mod)
            self.start = "fork"
            self.pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("fork"),
                                               initializer=_forked_initializer,
                                               initargs=(self._life_r, self._life_w))
            # a "fork" pool starts every worker at its first submit, before its manager thread: now, while this
            # process has one thread (the progress display starts its own before the runs are submitted)
            self.pool.submit(int).result()
        else:
            self.start = "forkserver"
            mark_temp_dir()  # the forkserver's temp folder: removed at the next start if this process is killed
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(list(PRELOAD))
            self.pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=pool_initializer,
                                               initargs=(self._life_r,))

    def run(self, tasks, fn=run_task):
        import concurrent.futures as cf

        # interrupted, the futures left are not cancelled here: close(abort=True) stops the workers, and the
        # pool then fails them all (CPython 3.11's pool manager would print an InvalidStateError traceback
        # for every future cancelled before its workers died)
        futs = {self.pool.submit(run_batch, batch, fn): batch for batch in split(list(tasks), self.workers)}
        for fut in cf.as_completed(futs):
            try:
                results = fut.result()
            except Exception as exc:  # the worker process died (BrokenProcessPool) or could not unpickle
                results = [failure(t, f"worker lost: {type(exc).__name__}: {exc}") for t in futs[fut]]
            yield from results

    def close(self, abort: bool = False) -> None:
        if abort:  # interrupted: do not wait for the runs in flight
            procs = list((getattr(self.pool, "_processes", None) or {}).values())
            results = getattr(self.pool, "_result_queue", None)
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.join(5)
                if proc.exitcode is None:  # pragma: no cover - SIGTERM is the default action in a worker
                    proc.kill()
                    proc.join(5)
            # A worker stopped in the middle of sending its results leaves half a message in the pipe, and the
            # pool's manager thread would wait for the rest for ever, and the interpreter's exit with it (it joins
            # that thread). With the workers gone this process holds the pipe's last write end: closing it turns
            # that wait into end-of-file (tests/studies/test_sweep_lifeline.py)
            if results is not None:
                results._writer.close()
        manager = getattr(self.pool, "_executor_manager_thread", None)
        self.pool.shutdown(wait=not abort, cancel_futures=not abort)
        if abort and manager is not None:
            # the manager thread now fails the futures left and closes its wakeup pipe: let it finish here, or the
            # interpreter's exit may write to that pipe as it closes (a traceback; CPython 3.11's _python_exit)
            manager.join(10)
        for end in (self._life_r, self._life_w):
            end.close()

    def describe(self) -> str:
        return f"local process pool, {self.workers} worker{'s' if self.workers != 1 else ''}"


class DaskExecutor(Executor):
    name = "dask"

    def __init__(self, workers: int, scheduler: Optional[str]):
        import importlib.util

        if importlib.util.find_spec("distributed") is None:
            raise InputError("--executor dask needs Dask distributed, which the 'dask' extra installs: "
                             "pip install 'meshsim[dask]'", field="--executor", value="dask")
        remote = scheduler not in (None, "", "local")
        if remote and scheduler is not None:
            _probe(scheduler)  # before importing Dask (a second or more): the 3 s are the scheduler's
        try:
            import logging

            from distributed import Client, LocalCluster
        except ImportError:
            raise InputError("--executor dask needs Dask distributed, which the 'dask' extra installs: "
                             "pip install 'meshsim[dask]'", field="--executor", value="dask") from None
        self.cluster = None
        self.address = scheduler
        if not remote:
            self.cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                        dashboard_address=None, silence_logs=logging.ERROR)
            self.client = Client(self.cluster)
            self.address = "local"
        else:
            try:
                self.client = Client(scheduler, timeout=CONNECT_TIMEOUT)
            except Exception as exc:  # OSError / TimeoutError / ValueError for a malformed address
                msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise InputError(f"cannot reach the Dask scheduler: {msg}", field="--scheduler",
                                 value=scheduler) from None
        info = self.client.scheduler_info()
        self.workers = sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values()) or workers

    def run(self, tasks, fn=run_task):
        """Submit at most ``WINDOW`` batches per worker thread at a time (each
        run carries its input files' content, so the scheduler holds only that
        many copies), and resubmit the runs of a batch whose worker was lost
        (``KilledWorker`` once the scheduler's own ``allowed-failures`` retries
        are spent, a closed connection): each run alone, so that a run that
        kills its worker takes no other down with it, up to ``RETRIES`` times,
        then it is a failed run. ``run_task`` never raises for a failing run,
        so every exception here is the cluster's, never the run's."""
        import time
        import warnings

        from distributed import as_completed

        # (batch, attempt): attempt > 0 only for a run resubmitted alone
        pending: list[tuple[list[dict[str, Any]], int]] = [(b, 0) for b in reversed(split(list(tasks), self.workers))]
        futs: dict[Any, tuple[list[dict[str, Any]], int]] = {}
        sized = [0.0, WINDOW * max(1, self.workers)]  # when the window was sized, its size

        def window() -> int:
            # workers come and go: resized from the scheduler's count at most every 2 s
            if time.monotonic() - sized[0] > 2.0:
                try:
                    threads = sum(self.client.nthreads().values())
                except Exception:  # the scheduler is busy or gone: keep the last size
                    threads = sized[1] // WINDOW
                sized[:] = [time.monotonic(), WINDOW * max(1, threads)]
            return int(sized[1])

        def submit(batch: list[dict[str, Any]], attempt: int) -> Any:
            with warnings.catch_warnings():  # a run carrying a large input file is by design (docs/sweeps.md)
                warnings.filterwarnings("ignore", message="Sending large graph")
                f = self.client.submit(run_batch, batch, fn, pure=False)
            futs[f] = (batch, attempt)
            return f

        ac = as_completed([submit(*pending.pop()) for _ in range(min(window(), len(pending)))])
        try:
            for fut in ac:
                batch, attempt = futs.pop(fut)
                try:
                    results = fut.result()
                except Exception as exc:  # KilledWorker, a lost connection: the run did not fail, its worker did
                    why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}".rstrip(": ")
                    fut.release()
                    runs = ", ".join(f"{t['point']} seed {t['seed']}" for t in batch)
                    if attempt < RETRIES:
                        self.notify(f"sweep: worker lost running {runs} ({why}); "
                                    f"resubmitted ({attempt + 1}/{RETRIES})")
                        # next in line, each alone, within the window
                        pending.extend(([t], attempt + 1) for t in reversed(batch))
                        results = []
                    else:
                        results = [failure(t, f"worker lost {attempt + 1} times: {why}") for t in batch]
                else:
                    fut.release()
                while pending and len(futs) < window():
                    ac.add(submit(*pending.pop()))
                yield from results
        finally:
            for f in futs:
                f.cancel()

    def close(self, abort: bool = False) -> None:
        try:
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()

    def describe(self) -> str:
        where = "a LocalCluster" if self.cluster is not None else f"scheduler {self.address}"
        return f"Dask distributed on {where}, {self.workers} worker thread{'s' if self.workers != 1 else ''}"


def _probe(address: str) -> None:
    """Check a scheduler address before any work, all within ``CONNECT_TIMEOUT``
    (issue 30): a TCP connect, then the handshake a Dask scheduler sends as
    soon as it accepts a connection (an 8-byte length, then msgpack frames).
    Nothing listening, a port that accepts and stays silent, an HTTP server
    (which waits for a request) or bytes that are not a Dask handshake are one
    input error; Dask's own client would wait for the handshake with no
    deadline, or read "HTTP/1.1" as the length of a 3 EiB frame. Other schemes
    (``tls://``, ...) get Dask's own handshake under the same deadline."""
    import time

    deadline = time.monotonic() + CONNECT_TIMEOUT
    if "://" not in address:
        address = "tcp://" + address
    try:
        u = urlsplit(address)
        host, port = u.hostname, u.port
    except ValueError:
        return  # let Dask name what is wrong with it
    if u.scheme != "tcp":
        _probe_other(address, deadline)
        return
    if not host or not port:
        return

    def fail(why: str) -> InputError:
        return InputError(f"cannot reach the Dask scheduler: {why}", field="--scheduler", value=address)

    try:
        sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
    except OSError as exc:
        raise fail(str(exc.strerror or exc)) from None
    try:
        head = _recv(sock, 8, deadline)
        if head is None:
            raise fail(f"it accepts connections but sent no Dask handshake within {CONNECT_TIMEOUT:g} s "
                       "(is it a Dask scheduler? an HTTP server, for one, waits for a request)")
        (size,) = struct.unpack("<Q", head)
        frames = _recv(sock, size, deadline) if 16 <= size <= HANDSHAKE_MAX else None
        if frames is None or not _is_handshake(frames):
            raise fail("it answered, but not with a Dask handshake (is it a Dask scheduler?)")
    finally:
        sock.close()


def _recv(sock: socket.socket, n: int, deadline: float) -> Optional[bytes]:
    """Exactly ``n`` bytes before ``deadline``; None when they do not come (closed, silent, too slow)."""
    import time

    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        sock.settimeout(left)
        try:
            chunk = sock.recv(min(n - len(buf), 65536))
        except OSError:  # socket.timeout, a reset
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _is_handshake(blob: bytes) -> bool:
    """Dask's TCP framing (distributed.comm.utils.unpack_frames): a frame count,
    each frame's length, the frames; the first is a msgpack map (compression,
    python version, pickle protocol)."""
    try:
        (count,) = struct.unpack_from("<Q", blob)
        if not 1 <= count <= 64:
            return False
        sizes = struct.unpack_from(f"<{count}Q", blob, 8)
        start = 8 * (count + 1)
        if start + sum(sizes) != len(blob):
            return False
        import msgpack

        first = msgpack.unpackb(blob[start:start + sizes[0]], raw=False, strict_map_key=False)
    except Exception:  # struct.error, msgpack's errors: not a handshake
        return False
    return isinstance(first, dict)


def _probe_other(address: str, deadline: float) -> None:
    """Dask's own connect and handshake for a scheme meshsim does not speak, in a
    daemon thread given until ``deadline``."""
    import asyncio
    import threading
    import time

    result: dict[str, BaseException] = {}

    async def handshake() -> None:
        from distributed.comm import connect
        from distributed.security import Security

        scheme = address.split("://", 1)[0]
        args = Security().get_connection_args("client") if scheme == "tls" else {}
        comm = await connect(address, timeout=CONNECT_TIMEOUT, **args)
        await comm.close()

    def target() -> None:
        try:
            asyncio.run(asyncio.wait_for(handshake(), max(0.1, deadline - time.monotonic())))
        except BaseException as exc:  # noqa: BLE001 - reported to the caller
            result["exc"] = exc

    t = threading.Thread(target=target, name="meshsim-scheduler-probe", daemon=True)
    t.start()
    t.join(max(0.1, deadline - time.monotonic()) + 0.5)
    exc = result.get("exc")
    if t.is_alive() or isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        raise InputError(f"cannot reach the Dask scheduler: no handshake within {CONNECT_TIMEOUT:g} s",
                         field="--scheduler", value=address)
    if exc is not None:
        msg = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise InputError(f"cannot reach the Dask scheduler: {msg}", field="--scheduler", value=address)


def make_executor(kind: str, workers: Optional[int], scheduler: Optional[str] = None) -> Executor:
    """Connect an executor: ``local`` (``workers`` 1: in this process) or ``dask``."""
    if kind not in EXECUTORS:
        raise InputError(f"unknown executor; choose one of {', '.join(EXECUTORS)}", field="--executor", value=kind)
    if workers is not None and workers < 1:
        raise InputError("must be >= 1", field="--workers", value=workers)
    if kind == "local":
        if scheduler:
            raise InputError("--scheduler goes with --executor dask", field="--scheduler", value=scheduler)
        n = workers or default_workers()
        return Executor() if n == 1 else PoolExecutor(n)
    return DaskExecutor(workers or default_workers(), scheduler)
