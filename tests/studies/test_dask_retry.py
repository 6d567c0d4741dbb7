"""The Dask executor's bookkeeping without a cluster (issue 22): a run whose
worker is lost is resubmitted up to ``RETRIES`` times and only then recorded as
failed; at most ``WINDOW`` runs per worker thread are in flight. The real
thing, a ``dask worker`` killed with SIGKILL, is in test_dask_cluster.py (slow).
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

distributed = pytest.importorskip("distributed")

from meshsim.sweep import executors  # noqa: E402
from meshsim.sweep.executors import RETRIES, WINDOW, DaskExecutor  # noqa: E402


class _Future:
    def __init__(self, client, value=None, exc=None):
        self.client, self.value, self.exc = client, value, exc

    def result(self):
        self.client.inflight -= 1
        if self.exc is not None:
            raise self.exc
        return self.value

    def release(self):
        pass

    def cancel(self):
        pass


class _AsCompleted:
    def __init__(self, futs):
        self.queue = list(futs)

    def __iter__(self):
        while self.queue:
            yield self.queue.pop(0)

    def add(self, fut):
        self.queue.append(fut)


class _Client:
    """Two single-thread workers; ``deaths[seed]``: how often the worker running that seed dies."""

    def __init__(self, deaths):
        self.deaths = dict(deaths)
        self.inflight = self.most = 0
        self.submitted: list[int] = []

    def nthreads(self):
        return {"tcp://w1": 1, "tcp://w2": 1}

    def submit(self, fn, task, pure=True):
        assert pure is False
        self.inflight += 1
        self.most = max(self.most, self.inflight)
        self.submitted.append(task["seed"])
        if self.deaths.get(task["seed"], 0) > 0:
            self.deaths[task["seed"]] -= 1
            return _Future(self, exc=distributed.KilledWorker(f"run-{task['seed']}", SimpleNamespace(address="tcp://w1"), 0))
        return _Future(self, value=fn(task))


def test_a_lost_worker_is_retried_then_the_run_fails_and_the_window_holds(monkeypatch):
    monkeypatch.setattr(distributed, "as_completed", _AsCompleted)
    ex = object.__new__(DaskExecutor)
    ex.client, ex.workers, ex.cluster = _Client({2: 1, 5: RETRIES + 1}), 2, None
    said: list[str] = []
    ex.notify = said.append
    tasks = [{"point": "p-x", "seed": s, "resolved": None} for s in range(1, 9)]
    out = list(ex.run(tasks, fn=lambda t: {"point": t["point"], "seed": t["seed"], "status": "ok"}))
    status = {r["seed"]: r["status"] for r in out}
    assert status == {s: ("failed" if s == 5 else "ok") for s in range(1, 9)}  # seed 2 came back after one loss
    (bad,) = [r for r in out if r["status"] == "failed"]
    assert bad["error"].startswith(f"worker lost {RETRIES + 1} times: KilledWorker")
    assert ex.client.submitted.count(2) == 2 and ex.client.submitted.count(5) == RETRIES + 1
    assert len(said) == 1 + RETRIES and "worker lost running p-x seed 2" in said[0] and "(1/2)" in said[0]
    assert ex.client.most <= WINDOW * 2  # two worker threads
    assert executors.RETRIES == 2
