"""The collector policy of a simulation (meshsim.core.sim.long_run_gc, issue 22):
survivors of a full collection are frozen inside the block, everything is put
back on exit, and a process that manages the collector itself is left alone."""
from __future__ import annotations

import gc
import weakref

import pytest

from meshsim.core.sim import GC_THRESHOLD0, long_run_gc


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_freezes_survivors_inside_and_restores_on_exit():
    before = gc.get_threshold()
    keep = [_Cycle() for _ in range(10)]
    with long_run_gc():
        assert gc.get_threshold()[0] == max(before[0], GC_THRESHOLD0)
        gc.collect()  # a full collection: its survivors are frozen
        assert gc.get_freeze_count() > 0
        gc.collect()
        assert all(not gc.is_finalized(k) for k in keep)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    # a cycle frozen inside is collected once unreachable after the block
    ref = weakref.ref(keep[0])
    del keep
    gc.collect()
    assert ref() is None


def test_restores_after_an_error():
    before = gc.get_threshold()
    n_callbacks = len(gc.callbacks)
    with pytest.raises(RuntimeError):
        with long_run_gc():
            gc.collect()
            raise RuntimeError("boom")
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0 and len(gc.callbacks) == n_callbacks


def test_leaves_a_managed_collector_alone():
    before = gc.get_threshold()
    gc.disable()
    try:
        with long_run_gc():
            assert gc.get_threshold() == before
            gc.collect()
            assert gc.get_freeze_count() == 0
    finally:
        gc.enable()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with long_run_gc():
            assert gc.get_threshold() == before
        assert gc.get_freeze_count() == frozen  # the caller's frozen objects stay frozen
    finally:
        gc.unfreeze()
