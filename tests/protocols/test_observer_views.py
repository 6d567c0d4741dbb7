"""Issue 31, typed seams: what the observer reads of a protocol is declared
(meshsim/observe/views.py), and what scenario events call on one is declared on
the Protocol base, which refuses it in one line when the protocol has none."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import meshsim.simulate.world as world
from meshsim.core.errors import InputError
from meshsim.observe.views import ConsensusView, ExecutionView, MeshHealView, RoutingView
from meshsim.protocols import PROTOCOLS
from meshsim.protocols.base import NoParams, Protocol
from meshsim.scenario.model import load_scenario
from meshsim.simulate.runner import run_one

ROOT = Path(__file__).resolve().parents[2]


def _observed(path: Path, monkeypatch, overrides: list[str] = ()) -> object:
    """The protocol object the observer summarised in a smoke run of ``path``."""
    seen: list = []
    real = world.protocol_summary

    def spy(proto):
        seen.append(proto)
        return real(proto)

    monkeypatch.setattr(world, "protocol_summary", spy)
    sc = load_scenario(path, list(overrides), smoke=True)
    run_one(sc, sc.seed)
    assert seen  # (a run with liars summarises its paired run too: the first is the run's)
    return seen[0]


def test_meshheal_has_everything_its_observer_reads(monkeypatch):
    p = _observed(ROOT / "scenarios" / "adversarial" / "frame-6.yaml", monkeypatch)
    assert isinstance(p, MeshHealView) and isinstance(p, ExecutionView) and isinstance(p, RoutingView)
    assert not isinstance(p, ConsensusView)
    assert p.byz_log  # (the view is read on a run where the adversarial metrics count)


def test_a_baseline_is_an_execution_view_and_not_meshheal(monkeypatch):
    p = _observed(ROOT / "scenarios" / "compare" / "persistent-math.yaml", monkeypatch,
                  ["protocol.name=agentnet"])
    assert type(p).name == "agentnet"
    assert isinstance(p, ExecutionView) and not isinstance(p, MeshHealView)


def test_sac_has_everything_its_observer_reads(monkeypatch):
    p = _observed(ROOT / "scenarios" / "sac" / "sac-complete-7.yaml", monkeypatch)
    assert isinstance(p, ConsensusView) and not isinstance(p, ExecutionView)


def test_the_observer_reads_protocols_without_getattr():
    """No getattr anywhere in meshsim/observe/: what it reads is what views.py declares."""
    calls = [f"{f.name}:{n.lineno}" for f in sorted((ROOT / "meshsim" / "observe").glob("*.py"))
             for n in ast.walk(ast.parse(f.read_text())) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "hasattr")]
    assert not calls, calls


@pytest.mark.parametrize("call", ["set_degraded", "degrade_share", "set_role", "set_behaviour"])
def test_the_base_protocol_refuses_each_event_call_in_one_line(call):
    p = Protocol(NoParams(), None)  # type: ignore[arg-type]
    args = {"set_degraded": ("A1", True), "degrade_share": (0.5,), "set_role": ("A1", "weak"),
            "set_behaviour": ("A1", "frame", {})}[call]
    with pytest.raises(InputError) as err:
        getattr(p, call)(*args)
    assert "\n" not in str(err.value) and err.value.field


def test_event_calls_are_declared_where_the_checks_allow_them():
    """A protocol flagged for degradation or roles implements what those events call."""
    for cls in PROTOCOLS.values():
        if cls.supports_degradation:
            assert cls.set_degraded is not Protocol.set_degraded, cls.name
        if cls.supports_roles:
            assert cls.set_role is not Protocol.set_role, cls.name
