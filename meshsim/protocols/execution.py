"""The shared execution layer of the MeshHeal paper's comparison (App. B.4).

"Each baseline ... [is connected] to a shared execution layer that fixes the
task order, agent identities, ability assignments, models, degradation
schedule, worker prompts, and Handoff-Contribute-Finalize task interface. We
count every model call and all model tokens across routing, execution,
review, and aggregation" (MeshHeal App. B.4). This module is that layer, for
MeshHeal and every baseline (:mod:`.baselines`):

* :class:`ExecutionLayer` — the harness: the task stream (same tasks, same
  order and the same entry agent per task for every method: both come from
  the run seed's named streams ``tasks`` and ``entry``), Model-Backed MAS
  Evaluation (:meth:`ExecutionLayer.model_for`, Sec. 5), the degradation
  schedule (:meth:`ExecutionLayer.set_degraded`), per-task records, the
  token and call accounting (every LLM call of every agent passes through
  :meth:`ExecutionLayer._llm_sink`, whatever the method), the observer's
  grading and the routing-state records the self-healing metrics read.
* :class:`TaskState` and :class:`Output` — what travels with a task (Sec. 4.1).
* :func:`infer_pair` and :func:`generate` — the worker calls every method
  shares: InferAbilities (App. B.2) and Contribute / Finalize (Sec. 4.1).
  Whether a committed final is right (and whether a finalizer repairs an
  unsound draft) is the backend's call-level model, the same for every
  method (:mod:`meshsim.backends.fake`, ``models.<m>.repair``).

A method only decides routing, selection and aggregation.
"""
from __future__ import annotations

from mypy_extensions import mypyc_attr

import heapq
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, ClassVar, Generator, Optional, cast

from ..core.calldata import rebuilt
from ..core.calls import CallKind, Request, Response, TaskInfo, TaskRef
from ..core.errors import InputError
from ..core.names import node_order
from ..core.sim import Deadlines, Event, randbelow
from .base import Protocol
from .ledger import TaskLedger
from .llm import LLMClient

__all__ = ["Output", "TaskState", "ExecutionLayer", "infer_pair", "generate", "generate_answer", "answer_of"]


# ---------------------------------------------------------------------------------------------
# what travels with a task


@dataclass(slots=True)
class Output:  # not frozen (3x cheaper to build, issue 22); never mutated: replaced() copies
    """One accepted output in Y_t: who wrote it, for which abilities, and its
    text (an opaque token with fakes). Whether it is right is not in it: only
    a model reading the text, or the observer grading it, can tell."""

    agent: str
    abilities: tuple[str, ...]
    action: str
    text: str = ""
    replaced_by: Optional[str] = None

    def __init__(self, agent: str, abilities: tuple[str, ...], action: str, text: str = "",
                 replaced_by: Optional[str] = None) -> None:
        # written out: compiled, it is native; the one dataclasses generates runs interpreted (docs/scaling.md)
        self.agent = agent
        self.abilities = abilities
        self.action = action
        self.text = text
        self.replaced_by = replaced_by

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuilt(self)

    def replaced(self, by: str, text: str) -> "Output":
        return replace(self, replaced_by=by, text=text)


@dataclass
class TaskState:
    """X_t = (Q, T, R, C, Y, P) plus routing bookkeeping (Sec. 4.1)."""

    task: TaskInfo
    R: Optional[tuple[str, ...]] = None
    C: set = field(default_factory=set)
    Y: list = field(default_factory=list)
    P: list = field(default_factory=list)
    probe: bool = False
    leg_hops: int = 0  # hops since the last contribution (routing limit, App. B.7)
    visits: list = field(default_factory=list)  # every agent the state passed through
    actions: list = field(default_factory=list)

    def __init__(self, task: TaskInfo, R: Optional[tuple[str, ...]] = None, C: Optional[set] = None,
                 Y: Optional[list] = None, P: Optional[list] = None, probe: bool = False, leg_hops: int = 0,
                 visits: Optional[list] = None, actions: Optional[list] = None) -> None:
        # written out: compiled, it is native; the one dataclasses generates runs interpreted (docs/scaling.md)
        self.task = task
        self.R = R
        self.C = set() if C is None else C
        self.Y = [] if Y is None else Y
        self.P = [] if P is None else P
        self.probe = probe
        self.leg_hops = leg_hops
        self.visits = [] if visits is None else visits
        self.actions = [] if actions is None else actions

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuilt(self)

    def size_bytes(self) -> int:
        return 200 + 400 * len(self.Y) + 16 * len(self.visits)

    def copy(self) -> "TaskState":
        """What one message carries: a copy. A state sent again after a lost
        ack (to another next hop) must not share lists with the copy the first
        receiver already works on."""
        # the constructor directly (what dataclasses.replace calls, without its field walk)
        return TaskState(task=self.task, R=self.R, C=set(self.C), Y=list(self.Y), P=list(self.P), probe=self.probe,
                         leg_hops=self.leg_hops, visits=list(self.visits), actions=list(self.actions))


# ---------------------------------------------------------------------------------------------
# the worker calls every method shares


def infer_pair(llm: LLMClient, task: TaskInfo, pairs: list, sample: int = 0) -> Generator[Any, Any, tuple]:
    """InferAbilities: one LLM call choosing a documented pair (App. B.2); a
    failed call falls back to the first documented pair."""
    r = yield from llm.call(llm.request(CallKind.INFER, task, (), {"pairs": pairs}, sample=sample))
    pair = r.fields.get("pair")
    return tuple(pair) if (r.error is None and pair) else tuple(pairs[0])


def _worker_request(llm: LLMClient, declared: Any, action: str, H: Any, X: TaskState) -> Request:
    """The Contribute/Finalize call (App. B.4: the same worker prompts for every method)."""
    kind = CallKind.CONTRIBUTE if action == "contribute" else CallKind.FINALIZE
    ctx = {"context_items": len(X.Y), "required": list(X.R or ()),
           "agent_abilities": sorted(declared), "drafts": [o.text for o in X.Y]}
    return llm.request(kind, X.task, sorted(H), ctx)


def _worker_output(agent: str, action: str, req: Request, r: Response) -> Output:
    # a failed call leaves no usable text: reviewers will see an empty output
    # (req.abilities is tuple(sorted(H)), made by LLMClient.request: not sorted again)
    return Output(agent=agent, abilities=req.abilities, action=action,
                  text=(r.text or "") if r.error is None else "")


def generate(llm: LLMClient, agent: str, declared: Any, action: str, H: Any,
             X: TaskState) -> Generator[Any, Any, Output]:
    """Contribute or Finalize (Sec. 4.1) by ``agent`` (declared abilities
    ``declared``) for the abilities ``H``: the worker prompt shows the task,
    the inferred requirement and the accepted outputs so far (App. B.4: the
    same worker prompts for every method)."""
    # not via generate_answer: a generator level less on every Contribute/Finalize
    req = _worker_request(llm, declared, action, H, X)
    r = yield from llm.call(req)
    return _worker_output(agent, action, req, r)


def generate_answer(llm: LLMClient, agent: str, declared: Any, action: str, H: Any,
                    X: TaskState) -> Generator[Any, Any, tuple[Output, Optional[str]]]:
    """:func:`generate`, plus the final answer a parser extracts from the reply
    (an opaque identifier with fakes; None for a half or an unparsable reply):
    what a vote over final answers compares."""
    req = _worker_request(llm, declared, action, H, X)
    r = yield from llm.call(req)
    return _worker_output(agent, action, req, r), answer_of(r)


def _open_gate(gate: Event, _ev: Any = None) -> None:
    if not gate.triggered:
        gate.succeed()


def answer_of(resp: Response) -> Optional[str]:
    """The final answer parsed from a reply, if it commits one."""
    if resp.error is not None:
        return None
    a = resp.fields.get("answer")
    return str(a) if a not in (None, "") else None


# ---------------------------------------------------------------------------------------------
# the harness

_NO_ABILITIES: frozenset = frozenset()


@mypyc_attr(allow_interpreted_subclasses=True)
class ExecutionLayer(Protocol):
    """Task stream, Model-Backed MAS Evaluation, degradation, records and accounting.

    Subclasses attach their controllers in :meth:`attach` (with
    :meth:`make_llm` for each agent's model access) and report through
    :meth:`complete` / :meth:`fail` (the observer's view of a finished task)
    and :meth:`record_state` (routing-state changes, for detection,
    closure and reintegration). Controllers never read any of it back.
    """

    supports_degradation: ClassVar[bool] = True
    #: a method's evidence about an agent: its reviewed outputs (MeshHeal's reviews.jsonl) or,
    #: when False, the producers the layer records per task
    reviews_are_evidence: ClassVar[bool] = False
    params: Any  # each layer's own Params (every one has task_timeout); subclasses name theirs

    def __init__(self, params: Any, ctx):
        super().__init__(params, ctx)
        from ..workload.tasks import load_profile, make_stream

        spec = ctx.tasks
        self.profile = load_profile(spec.dataset or "math")
        if getattr(spec, "file", None):
            from ..workload.tasks import stream_from_file

            self.stream = stream_from_file(self.profile, ctx.tasks_file, spec.count,
                                           ctx.env.pyrandom("tasks"), getattr(spec, "block", None))
        else:
            self.stream = make_stream(self.profile, spec.count, ctx.env.pyrandom("tasks"),
                                      getattr(spec, "block", None))
        # each task type is a pair of abilities
        self.pairs = cast(list[tuple[str, str]], sorted({tuple(p) for p in self.profile.types.values()}))
        self.agents: dict[str, Any] = {}
        self._names: Optional[list[str]] = None
        self.K: dict[str, frozenset] = {}
        self.degraded: set[str] = set()
        self.fault_of: dict[str, dict] = {}
        self.degraded_log: list[dict] = []
        # records (write-only from controllers). A closed task's row goes to ctx.tables in
        # index order (tasks.jsonl's order) and into the ledger the summary reads: rows are
        # not kept (issue 22). Routing-state changes are few and every metric reads them.
        self.ledger = TaskLedger(len(self.stream), producers=not self.reviews_are_evidence)
        self._closed_rows: list[tuple[int, dict]] = []  # closed out of index order (Poisson arrivals)
        self._next_row = 1
        self.state_rows: list[dict] = []
        # (task, {agent: linked neighbours}) from that task on: taken at a task's start when the
        # topology changed since the last one (observer only: collapse metrics, docs/outputs.md)
        self.topology_rows: list[tuple[int, dict[str, tuple[str, ...]]]] = []
        self._topology_seen = -1
        self._cur: dict[int, dict] = {}
        self._done: dict[int, Event] = {}
        self._task_deadlines = Deadlines(self.ctx.env, _open_gate)
        self._finished = Event(ctx.env)
        self._phase_of = self._phases()
        self._task_index = 0
        # issue 34 (observer only): the agents each open task reached, in order (a controller
        # reports a delivery through its write-only sink; nothing crosses a link: MeshHeal's do), and
        # for every such task that ended unanswered or wrong, (index, last agent reached, "unanswered"|"wrong")
        self._hops: dict[int, list[str]] = {}
        self.lost_rows: list[tuple[int, Optional[str], str]] = []

    def _phases(self) -> dict[int, str]:
        out, k = {}, 1
        for ph in self.ctx.phases:
            for _ in range(ph.tasks):
                out[k] = ph.name
                k += 1
        return out

    # -- infrastructure: Model-Backed MAS Evaluation (Sec. 5) -----------------
    def model_for(self, agent: str, abilities: tuple[str, ...]) -> str:
        """Strong model for a declared ability, weak otherwise; a degraded agent
        uses the weak model for every call, reviews included."""
        if agent in self.degraded and (self.fault_of.get(agent) or {}).get("mode", "swap") == "swap":
            return "weak"
        K = self.K.get(agent, _NO_ABILITIES)
        return "strong" if (abilities and K.issuperset(abilities)) or (not abilities and K) else "weak"

    def set_degraded(self, agent: str, degraded: bool, fault: Optional[dict] = None) -> None:
        """Inject (or lift) a gray failure: ``fault['mode']`` is ``swap`` (the
        paper's model swap, default) or one of the quality-hurting wrappers of
        :func:`meshsim.protocols.llm._inject`."""
        if agent not in self.K:
            raise InputError("unknown agent", field="agents", value=agent)
        (self.degraded.add if degraded else self.degraded.discard)(agent)
        if degraded:
            self.fault_of[agent] = dict(fault or {"mode": "swap"})
        else:
            self.fault_of.pop(agent, None)
        self.degraded_log.append({"agent": agent, "degraded": degraded, "task": self._task_index,
                                  "t": self.ctx.env.now, "mode": (fault or {}).get("mode", "swap")})

    def _fault(self, agent: str) -> Optional[dict]:
        spec = self.fault_of.get(agent)
        return spec if spec and spec.get("mode") != "swap" else None

    def make_llm(self, name: str, abilities: Any) -> LLMClient:
        """Agent ``name``'s model access: the infrastructure picks its model per
        call (Sec. 5) and counts every call and token into the task's row."""
        self.K[name] = frozenset(abilities)
        # partials, not lambdas: one Python frame less on every call's path
        return LLMClient(self.ctx.env, self.ctx.backend, name, partial(self.model_for, name), self._llm_sink,
                         fault=partial(self._fault, name), tasks=self.task_ref, bridge=self.ctx.bridge)

    def detach(self, name):
        self.agents.pop(name, None)
        self._names = None

    def task_ref(self, index: int) -> TaskRef:
        """The benchmark's full record of task ``index`` (infrastructure and observer only)."""
        return self.stream[index - 1]

    def grade(self, task_index: int, output: Any) -> Optional[bool]:
        """The observer grades an output's text (a fake looks up what its token stands for)."""
        b = self.ctx.backend
        if b is None or output is None:
            return None
        return b.grade(self.task_ref(task_index), output.text, output.action)

    def _entry_names(self) -> list[str]:
        if self._names is None:
            self._names = sorted(self.agents, key=node_order)
        return self._names

    def routing_tables(self):
        return {}

    def setup(self):
        super().setup()
        self._task_index = 0
        self.ctx.env.process(self._driver())

    def finished(self):
        return self._finished

    # -- the task stream ----------------------------------------------------------
    def _driver(self):
        """Sequential arrivals (the papers'), or open-loop Poisson arrivals."""
        env = self.ctx.env
        rnd = env.pyrandom("entry")
        total = len(self.stream)
        rate = self.ctx.tasks.poisson_rate() if hasattr(self.ctx.tasks, "poisson_rate") else None
        gaps = env.pyrandom("arrivals")
        watchers = []
        for task in self.stream:
            self._task_index = task.index
            self.ctx.task_starting(task.index)
            self._note_topology(task.index)
            names = self._entry_names()
            entry = names[randbelow(rnd, len(names))]
            row = {"index": task.index, "phase": self._phase_of.get(task.index), "type": task.type,
                   "id": task.id, "entry": entry, "true_pair": list(task.required), "calls": 0, "tokens": 0,
                   "prompt_tokens": 0, "completion_tokens": 0, "reviews": [], "takeovers": 0,
                   "start": env.now}
            self._cur[task.index] = row
            self._done[task.index] = Event(env)
            self.agents[entry].start(task.info())
            if rate is None:
                yield from self._await(task)
                self.ctx.progress(task.index, total)
            else:
                watchers.append(env.process(self._await(task)))
                yield env.timeout(gaps.expovariate(rate))
        if watchers:
            yield env.all_of(watchers)
        self._finished.succeed()

    def _note_topology(self, index: int) -> None:
        net = self.ctx.net
        version = getattr(net, "topology_version", 0)
        if version != self._topology_seen or not self.topology_rows:
            self._topology_seen = version
            self.topology_rows.append((index, {v: tuple(node.links) for v, node in net.nodes.items()}))

    def _await(self, task: TaskRef):
        """Wait for the task to close or its timeout. The same events in the same order as
        ``yield done | env.timeout(task_timeout)``, minus the timeout itself once the task
        closed: it is queued lazily (meshsim.core.sim.Deadlines) rather than left in the event
        queue for task_timeout, where a few hundred of them made every event cost more."""
        env = self.ctx.env
        done = self._done[task.index]
        gate = Event(env)  # what the AnyOf condition was: triggered by whichever comes first
        timer = self._task_deadlines.add(self.params.task_timeout, gate)
        done.callbacks.append(partial(_open_gate, gate))
        yield gate
        Deadlines.cancel(timer)
        if not done.triggered:
            self._finish(task, None, False, "timeout")
        self._done.pop(task.index, None)

    def _finish(self, task: Any, state, correct: bool, unanswered: Optional[str],
                extra: Optional[dict] = None) -> None:
        row = self._cur.pop(task.index, None)
        if row is None:
            return  # already closed (e.g. a late message after a timeout)
        if self.ctx.backend is not None:
            self.ctx.backend.forget(task.id)
        row["end"] = self.ctx.env.now
        row["correct"] = ok = bool(correct) and unanswered is None
        row["unanswered"] = unanswered
        hops = self._hops.pop(task.index, None)
        if not ok and hops:  # methods whose controllers report deliveries (MeshHeal)
            self.lost_rows.append((task.index, hops[-1], "wrong" if unanswered is None else "unanswered"))
            if unanswered is not None:  # only lost tasks: answered rows stay as they were
                row["reached"] = hops
                row["last_holder"] = hops[-1]
        if state is not None:
            row["inferred_pair"] = list(state.R) if state.R else None
            row["route"] = list(state.visits)
            row["producers"] = list(state.P)
            row["actions"] = [f"{a}:{b}" for a, b in state.actions]
        if extra:
            row.update(extra)
        self.ledger.closed(task.index, ok)
        self._release(row)
        ev = self._done.get(task.index)
        if ev is not None and not ev.triggered:
            ev.succeed()

    def _release(self, row: dict) -> None:
        """Hand closed rows on in index order: a row waits only for the tasks
        before it that are still open (none, with sequential arrivals)."""
        if row["index"] != self._next_row:
            heapq.heappush(self._closed_rows, (row["index"], row))
            return
        self._row_out(row)
        heap = self._closed_rows
        while heap and heap[0][0] == self._next_row:
            self._row_out(heapq.heappop(heap)[1])

    def _row_out(self, row: dict) -> None:
        self._next_row = row["index"] + 1
        self.ledger.add(row)
        self.ctx.tables.add("tasks.jsonl", row)

    def close_records(self) -> None:
        # tasks still open before a closed one (a run ended by its duration): in index order
        heap, self._closed_rows = self._closed_rows, []
        for _i, row in sorted(heap, key=lambda e: e[0]):
            self._next_row = row["index"]
            self._row_out(row)

    def current_row(self, task_index: int) -> Optional[dict]:
        """The open record of task ``task_index`` (observer side; None once closed)."""
        return self._cur.get(task_index)

    # -- what controllers report (write-only) --------------------------------------
    def record_hop(self, task_index: int, agent: str) -> None:
        """Task ``task_index`` was delivered to ``agent`` (or entered there): the
        observer's route record (issue 34), kept while the task is open."""
        if task_index in self._cur:
            hops = self._hops.get(task_index)
            if hops is None:
                self._hops[task_index] = [agent]
            else:
                hops.append(agent)

    def complete(self, task: Any, state: Optional[TaskState], output: Any, extra: Optional[dict] = None) -> None:
        """A committed final answer: the observer grades it and closes the task."""
        self._finish(task, state, bool(self.grade(task.index, output)), None, extra)

    def fail(self, task: Any, state: Optional[TaskState], reason: str, extra: Optional[dict] = None) -> None:
        """The task cannot finish: unanswered, counted incorrect (SPEC §1)."""
        self._finish(task, state, False, reason, extra)

    def record_state(self, agent: str, task: int, old: str, new: str) -> None:
        """A routing-state change (normal / watched / isolated) of ``agent`` at
        task ``task``: what detection delay, closure and reintegration read."""
        env = self.ctx.env
        rec = {"agent": agent, "task": task, "t": env.now, "old": old, "new": new,
               "degraded": agent in self.degraded}
        self.state_rows.append(rec)
        self.ctx.trace("state", **rec)

    def _llm_sink(self, req: Request, resp: Response, latency: float) -> None:
        """Token and call accounting: every call of every agent, whatever the method."""
        row = self._cur.get(req.task.index) if req.task else None
        if row is not None:
            row["calls"] += 1
            row["tokens"] += resp.prompt_tokens + resp.completion_tokens
            row["prompt_tokens"] += resp.prompt_tokens
            row["completion_tokens"] += resp.completion_tokens

    # -- outputs -------------------------------------------------------------------
    def evidence_outputs(self) -> dict[str, Any]:
        """Task index of every output each agent produced that counts as evidence about
        it (kept as the rows went by, :mod:`meshsim.protocols.ledger`): here the producers
        the layer recorded per task; a method whose evidence is its reviews
        (``reviews_are_evidence``) returns those."""
        return self.ledger.outputs

    def output_tables(self) -> dict[str, list[dict]]:
        self.close_records()
        return {"tasks.jsonl": [], "states.jsonl": self.state_rows}  # tasks: streamed

    def summary(self) -> dict[str, Any]:
        # the observer computes the layer's fields (meshsim.observe.execution); nothing of its own
        return {}
