"""The protocol strategy interface (like Ciw's ``NoDetection``: the base does nothing).

A protocol is handed a :class:`ProtocolContext` and attaches a controller to
each node. Controllers may read only their own node, their own state and the
messages they receive; the protocol object itself may keep run-level records
for metrics (what an outside observer would log), never feed them back to
agents.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional

from pydantic import BaseModel

from ..core.strict import Strict

from ..core.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from ..core.sim import Event

    from ..net.network import Network
    from ..net.node import Node
    from ..net.routing import DistanceVector
    from ..core.sim import Environment
    from .llm import Bridge

__all__ = ["Protocol", "ProtocolContext", "NoParams", "TableRows", "Timer"]


class TableRows:
    """Where a protocol's finished record rows go (``ProtocolContext.tables``):
    kept in lists here, for a run without a folder (a sweep's worker sends
    them back); a run with a folder swaps in :class:`meshsim.io.records.TableWriter`,
    which writes each row as it comes (issue 22)."""

    def __init__(self) -> None:
        self.tables: dict[str, list[dict[str, Any]]] = {}

    def add(self, name: str, row: dict[str, Any]) -> None:
        rows = self.tables.get(name)
        if rows is None:
            rows = self.tables[name] = []
        rows.append(row)

    def extend(self, name: str, rows: Any) -> None:
        self.tables.setdefault(name, []).extend(rows)


class NoParams(Strict):
    pass


@dataclass
class ProtocolContext:
    env: "Environment"
    net: "Network"
    abilities: dict[str, list[str]]
    seed: int
    trace: Callable[..., None]
    tasks: Any = None
    phases: list[Any] = field(default_factory=list)
    backend: Any = None
    #: Called by task-driven protocols before task ``index`` (1-based) starts,
    #: so ``at_task`` events fire at the right point of the stream.
    task_starting: Callable[[int], None] = lambda index: None
    #: Called with (done, total) as the protocol makes progress.
    progress: Callable[[int, int], None] = lambda done, total: None
    #: Observers of routing-table changes (metrics only).
    route_changed: Optional[Callable[[str, str, int], None]] = None
    #: Where finished record rows go, in file order (:class:`TableRows`, or a
    #: run folder's streaming writer); rows handed over are never touched again.
    tables: Any = field(default_factory=TableRows)
    #: each agent's role (``agents.roles``; consensus protocols: SAC, CP-WBFT)
    roles: dict[str, str] = field(default_factory=dict)
    #: the task file (``tasks.file``) resolved against the scenario's folder; None without one
    tasks_file: Optional[Path] = None
    #: the batcher of async model calls (:class:`meshsim.protocols.llm.Bridge`), one per run,
    #: made by the runner (None: no async backend can be called)
    bridge: Optional["Bridge"] = None


@dataclass(frozen=True)
class Timer:
    """A periodic timer a protocol runs, as the event budget sees it (issue 30):
    every ``period`` simulated seconds it sends ``messages`` messages, all
    agents together, for as long as the run lasts."""

    field: str  # the parameter that sets the period (protocol.params.refresh)
    period: float  # simulated seconds between two firings
    messages: int  # messages one firing sends, all agents together
    what: str  # what it is, for the error line


class Protocol:
    """Base strategy: attaches nothing, never finishes on its own.

    What scenario events call on a protocol is declared here (:meth:`set_degraded`,
    :meth:`degrade_share`, :meth:`set_role`, :meth:`set_behaviour`); the base refuses
    each with one line. The class flags say which of them a protocol supports: the
    scenario checks read them before the run, so a refusal at run time means a check
    let an event through."""

    # class variables: read off the class (the registry, the scenario checks), and kept class attributes by the
    # compiled build, where a subclass may be native (meshsim.protocols.meshheal.method)
    name: ClassVar[str] = "none"
    Params: ClassVar[type[BaseModel]] = NoParams
    #: ``degrade`` / ``recover`` events (gray failures)
    supports_degradation: ClassVar[bool] = False
    #: ``set_role`` events and ``agents.roles``
    supports_roles: ClassVar[bool] = False
    #: the ``degrade`` modes it takes (None: every mode of the scenario field)
    degrade_modes: ClassVar[Optional[tuple[str, ...]]] = None

    def __init__(self, params: BaseModel, ctx: ProtocolContext):
        self.params = params
        self.ctx = ctx

    def setup(self) -> None:
        for name, node in list(self.ctx.net.nodes.items()):
            self.attach(node, self.ctx.abilities.get(name, []))

    def attach(self, node: "Node", abilities: list[str]) -> None:
        """Give ``node`` its controller (also called for agents added mid-run)."""

    def detach(self, name: str) -> None:
        """``name`` left the network (its node is already shut down)."""

    def finished(self) -> Optional["Event"]:
        """An event that fires when the protocol's work is done (None: run to duration)."""
        return None

    def timers(self) -> list[Timer]:
        """The periodic timers it runs once set up (the runner checks the event budget against them
        before the clock starts). A protocol with one must list it here."""
        return []

    def summary(self) -> dict[str, Any]:
        """The protocol's own summary fields: what only it knows (its defences, learned
        weights, ...). The observer's metrics of it come first
        (:func:`meshsim.observe.summary.protocol_summary`); these are added after them."""
        return {}

    def close_records(self) -> None:
        """The run ended: hand every finished row still held to ``ctx.tables``
        (called before :meth:`summary` and :meth:`output_tables`)."""

    def output_tables(self) -> dict[str, list[dict[str, Any]]]:
        """Extra JSONL files for the run folder: ``{"tasks.jsonl": rows, ...}``,
        every table the protocol writes, each with the rows it has not already
        streamed to ``ctx.tables`` (those come first in the file). Tables the
        observer derives are added by :func:`meshsim.observe.summary.protocol_tables`."""
        return {}

    def routing_tables(self) -> dict[str, "DistanceVector"]:
        """Per-agent routing tables, for convergence metrics (empty if none)."""
        return {}

    # -- what scenario events call (meshsim.scenario.events through the run's World) ------------
    def set_degraded(self, agent: str, degraded: bool, fault: Optional[dict[str, Any]] = None) -> None:
        """Inject (``degraded``) or lift a gray failure of ``agent``; ``fault`` says how
        (``mode``, and for consensus protocols the ``round``)."""
        raise InputError(f"protocol '{self.name}' has no degraded agents (degrade / recover events)",
                         field="protocol.name", value=self.name)

    def degrade_share(self, share: float) -> list[str]:
        """``degrade`` with ``share``: the agents the protocol draws for it."""
        raise InputError("'share' needs a protocol that picks degradable agents (SAC, CP-WBFT)",
                         field="share", value=share)

    def set_role(self, agent: str, role: str) -> None:
        """``agent``'s role changes (``set_role`` events)."""
        raise InputError(f"protocol '{self.name}' has no roles (set_role events)", field="protocol.name",
                         value=self.name)

    def set_behaviour(self, agent: str, kind: str, spec: dict[str, Any]) -> None:
        """``agent`` turns Byzantine (``kind``: frame, shield, poison, route_lie) or honest again."""
        raise InputError(f"protocol '{self.name}' has no Byzantine agents ({kind} events)",
                         field="protocol.name", value=self.name)
