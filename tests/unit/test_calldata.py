"""The records of one LLM call (``meshsim.core.calldata``) behave the same
interpreted and compiled: ``build_compiled.py --check`` runs this file on
the build too, where they are native classes (issue 33)."""
from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from meshsim.backends.texts import Latent
from meshsim.core.calls import LatencyModel, Request, Response, TaskInfo, TaskRef
from meshsim.core.types import RoutingState
from meshsim.protocols.execution import Output, TaskState
from meshsim.protocols.meshheal.detector import Update
from meshsim.protocols.meshheal.review import Assessment

TASK = TaskRef(index=3, id="gsm8k/3", type="math", question="1+1?", answer="2", required=("math",),
               dataset="gsm8k", choices=("1", "2"))


@pytest.mark.parametrize("obj", [
    TASK, TASK.info(), LatencyModel(ttft=0.25, rate=40.0, prefill_rate=900.0),
    Request("review", "A1", "strong", TASK, ("math",), {"output": "t-1"}, sample=2, seed=99),
    Response(text="t-2", fields={"score": 4}, correct=True, prompt_tokens=10, completion_tokens=3, latency=1.5),
    # the per-task records whose constructors are written out (native compiled, docs/scaling.md)
    OUT := Output("A1", ("math",), "contribute", "t-3"),
    TaskState(TASK.info(), R=("math", "code"), C={"math"}, Y=[OUT], P=["A1"], visits=["A1"]),
    Update(True, 0.1, 0.7, 0.8, 0.6, 1.5, RoutingState.WATCHED, True),
    Assessment(0.8, OUT, q0=0.8, initial=[0.8, 0.7], reviewers=["A2"], reviewer_views={"A2": "normal"}),
    Latent(True, final=True, answer="2", features=frozenset({"coherent"})),
], ids=lambda o: type(o).__name__)
def test_a_call_record_pickles_and_copies_field_for_field(obj):
    """Sweep and Dask workers and the process pools of calibration ship these between processes."""
    for back in (pickle.loads(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)), copy.copy(obj),
                 copy.deepcopy(obj)):
        assert type(back) is type(obj) and back == obj
        assert [getattr(back, f.name) for f in dataclasses.fields(obj)] == \
            [getattr(obj, f.name) for f in dataclasses.fields(obj)]


def test_written_out_constructors_keep_the_dataclass_defaults():
    """A constructor of its own (native when compiled) gives what the dataclass's would: fresh containers."""
    a, b = TaskState(TASK.info()), TaskState(TASK.info())
    assert a == b and a.C == set() and a.Y == [] and a.Y is not b.Y and a.visits is not b.visits
    assert Assessment(None, OUT).initial == [] and Assessment(None, OUT).reviewer_views == {}
    assert Request("infer", "A1", "weak").context == {} and Response().fields == {}
    assert Request("infer", "A1", "weak").context is not Request("infer", "A1", "weak").context
    assert dataclasses.replace(OUT, text="t-4") == Output("A1", ("math",), "contribute", "t-4")


def test_the_task_records_are_frozen_and_hash_by_value():
    with pytest.raises(AttributeError):
        TASK.answer = "3"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        TASK.info().index = 4  # type: ignore[misc]
    assert hash(TASK) == hash(TaskRef(3, "gsm8k/3", "math", "1+1?", "2", ("math",), "gsm8k", ("1", "2")))
    assert TASK.info() == TaskInfo(3, "gsm8k/3", "math", "1+1?", "gsm8k", ("1", "2"))
    assert not hasattr(TASK.info(), "answer")  # what a message carries holds no gold answer (Sec. 3.1)


def test_latency_is_ttft_plus_decode_plus_prefill():
    assert LatencyModel(ttft=0.5, rate=50.0)(1000, 100) == pytest.approx(2.5)
    assert LatencyModel(ttft=0.5, rate=50.0, prefill_rate=500.0)(1000, 100) == pytest.approx(4.5)
    assert Response(prompt_tokens=7, completion_tokens=5).tokens == 12
