"""What the observer reads of a protocol, as typed views (issue 31, "typed seams").

The observer computes its metrics from a protocol's run-level records, never from
its controllers. These :class:`typing.Protocol` classes name every attribute and
method it reads, so a protocol satisfies one by having them (structurally: no base
class to inherit) and a checker (mypy) sees a missing or renamed record. Each is
read-only (properties): the observer never writes to a protocol. The views a
protocol family must satisfy are runtime-checkable (tests/protocols/test_observer_views.py).

* :class:`RoutingView`: routing tables (``RoutingConvergence``), every protocol;
* :class:`ExecutionView`: the shared execution layer
  (:class:`meshsim.protocols.execution.ExecutionLayer` and the baselines on it);
* :class:`MeshHealView`: MeshHeal on top of it (reviews, Byzantine agents);
* :class:`ConsensusView`: SAC and CP-WBFT (:class:`meshsim.protocols.consensus.ConsensusProtocol`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Optional, Protocol, Sequence, Sized, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from ..net.routing import DistanceVector
    from ..protocols.ledger import ReviewLedger, TaskLedger

__all__ = ["BackendView", "ContextView", "RoutingView", "ExecutionView", "MeshHealView", "ConsensusParamsView",
           "ConsensusView"]


class BackendView(Protocol):
    """The run's model backend, as the summary names it."""

    def describe(self) -> Any: ...


class ContextView(Protocol):
    """The protocol's context: only its backend is read."""

    @property
    def backend(self) -> Optional[BackendView]: ...


@runtime_checkable
class RoutingView(Protocol):
    def routing_tables(self) -> Mapping[str, "DistanceVector"]: ...


@runtime_checkable
class ExecutionView(Protocol):
    """A method on the shared execution layer (MeshHeal App. B.4)."""

    # deliberate repetition: one typed read-only property per record the observer reads (issue 31)
    @property
    def ctx(self) -> ContextView: ...

    #: the task stream (only its length is read)
    @property
    def stream(self) -> Sized: ...

    #: running counts over tasks.jsonl
    @property
    def ledger(self) -> "TaskLedger": ...

    #: routing-state changes (states.jsonl rows: agent, task, old, new, degraded)
    @property
    def state_rows(self) -> Sequence[Mapping[str, Any]]: ...

    #: injected degradations and recoveries (agent, degraded, task)
    @property
    def degraded_log(self) -> Sequence[Mapping[str, Any]]: ...

    #: (task, {agent: linked neighbours}) from that task on
    @property
    def topology_rows(self) -> Sequence[tuple[int, Mapping[str, tuple[str, ...]]]]: ...

    #: each agent's abilities
    @property
    def K(self) -> Mapping[str, frozenset]: ...

    #: (task, last holder, "wrong" | "unanswered") of every lost task reached by a route record
    @property
    def lost_rows(self) -> Sequence[tuple[int, Optional[str], str]]: ...

    def evidence_outputs(self) -> Mapping[str, Sequence[int]]: ...


@runtime_checkable
class MeshHealView(ExecutionView, Protocol):
    """MeshHeal on the execution layer: its reviews and its Byzantine agents."""

    # deliberate repetition: one typed read-only property per record the observer reads (issue 31)
    @property
    def unreviewed(self) -> int: ...

    @property
    def reviews(self) -> "ReviewLedger": ...

    #: Byzantine behaviour changes (agent, behaviour, task, targets, coalition, ...)
    @property
    def byz_log(self) -> Sequence[Mapping[str, Any]]: ...

    #: tasks that reached a routing liar (task, outcome)
    @property
    def byz_route_rows(self) -> Sequence[Mapping[str, Any]]: ...


class ConsensusParamsView(Protocol):
    @property
    def rounds(self) -> int: ...

    @property
    def dataset(self) -> str: ...

    @property
    def F(self) -> int: ...


@runtime_checkable
class ConsensusView(Protocol):
    """SAC and CP-WBFT (SAC paper Sec. 5.1): per-query and per-round records."""

    # deliberate repetition: one typed read-only property per record the observer reads (issue 31)
    @property
    def name(self) -> str: ...

    @property
    def ctx(self) -> ContextView: ...

    @property
    def params(self) -> ConsensusParamsView: ...

    #: one raw record per query (answers per agent and round, roles, costs, traffic)
    @property
    def query_rows(self) -> Sequence[Mapping[str, Any]]: ...

    #: one record per agent and round (retained / dropped peers, received)
    @property
    def round_rows(self) -> Sequence[Mapping[str, Any]]: ...

    @property
    def agents(self) -> Mapping[str, Any]: ...

    def role(self, agent: str) -> str: ...

    @property
    def calls_by_kind(self) -> Mapping[str, int]: ...

    @property
    def role_log(self) -> Sequence[Mapping[str, Any]]: ...

    @property
    def warnings(self) -> Sequence[str]: ...

    @property
    def graph_info(self) -> Mapping[str, Any]: ...

    #: gray failures of honest agents (empty without)
    @property
    def degraded_log(self) -> Sequence[Mapping[str, Any]]: ...
