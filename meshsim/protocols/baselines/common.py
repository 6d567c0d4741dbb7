"""What the baselines share on top of the shared execution layer (MeshHeal App. B.4).

* :class:`BaselineParams` — transport and routing-budget parameters every
  baseline has (the same values as MeshHeal's: App. B.7's routing limit of
  four hops, acknowledged handoffs).
* :class:`Baseline` — the harness (:class:`..execution.ExecutionLayer`) plus
  the observer's view of *exclusion*: a baseline whose agents stop routing
  to a peer (AgentNet prunes an edge, RAPS blacklists a peer) reports it;
  when every agent linked to a peer excludes it, the peer is recorded as
  isolated (and as normal again when one readmits it), so detection delay,
  closure and reintegration (Sec. 3.2) are measured exactly as for MeshHeal.
  A method that never excludes anyone shows infinite detection delay.
* :class:`ChainAgent` — a controller running the Handoff-Contribute-Finalize
  task flow (Sec. 4.1) with the shared worker calls; a baseline decides only
  where the task goes next (:meth:`ChainAgent.choose_next`) and what happens
  around outputs (:meth:`ChainAgent.before_output`, :meth:`ChainAgent.on_result`).
* :func:`judge` — one rubric-scored review call (App. D.1) by the agent that
  consumes an output: the observable outcome signal of the baselines that
  learn from outcomes (AgentNet, RAPS), never the gold answer.

A controller reads only its own node (own links), its own state and the
messages it receives: declared abilities arrive in ``hello`` messages.
"""
from __future__ import annotations

from typing import Annotated, Any, Callable, Generator, Optional

from pydantic import BeforeValidator, Field

from ...core.strict import Strict

from ...core.calls import CallKind
from ...core.errors import InputError
from ...core.names import node_order
from ...net.messages import HEADER_BYTES
from ...net.node import Node
from ...net.reliable import Reliable
from ...core.types import parse_duration
from ..execution import ExecutionLayer, Output, TaskState, generate, infer_pair

__all__ = ["BaselineParams", "Baseline", "ChainAgent", "judge", "score_of", "plurality"]

#: a protocol time: a microsecond .. about 32 years (MAX_PARAM_SECONDS): a smaller one is below any
#: meaningful timescale, a larger one overflows timer arithmetic or never fires (issue 19)
_Dur = Annotated[float, BeforeValidator(parse_duration), Field(ge=1e-6, le=1e9)]
_Prob = Annotated[float, Field(ge=0.0, le=1.0)]


class BaselineParams(Strict):
    """Parameters every baseline shares (MeshHeal's values: App. B.7, Tab. B11)."""

    route_limit: Annotated[int, Field(ge=1, le=255)] = 4  # App. B.7: hops per leg before the task is unanswered
    #: a judged output counts as a success when its rubric score is above this (App. D.1 / B.5:
    #: a score <= 0.40 must name a concrete error; MeshHeal's tau_TO)
    judge_threshold: _Prob = 0.40
    ack_timeout: _Dur = 1.0
    retries: Annotated[int, Field(ge=0, le=100)] = 4
    task_timeout: _Dur = 7200.0
    round_timeout: _Dur = 900.0  # waiting for parallel plans / teams / a worker's reply

    def check(self, sc: Any, G: Any) -> None:
        if sc.tasks is None:
            raise InputError(f"{sc.protocol.name} needs a 'tasks' stream", field="tasks")
        if sc.backend is None:
            raise InputError(f"{sc.protocol.name} needs a 'backend'", field="backend")


class Baseline(ExecutionLayer):
    """The shared harness plus exclusion records; subclasses set ``Agent``."""

    # deliberate repetition: every protocol class declares its name, Params and Agent type like this (typed, issue 31)
    name = "baseline"
    Params = BaselineParams
    params: BaselineParams
    Agent: type["ChainAgent"]
    #: False for a method that is centralized by design (AutoGen's manager)
    decentralized = True

    def __init__(self, params: BaselineParams, ctx):
        super().__init__(params, ctx)
        self.excluded_by: dict[str, set[str]] = {}
        self.isolated: set[str] = set()
        self.exclusion_rows: list[dict] = []

    def attach(self, node, abilities):
        name = node.name
        llm = self.make_llm(name, abilities)
        self.agents[name] = self.Agent(node, abilities, self.params, llm, self.pairs, self._sink,
                                       types=sorted(self.profile.types))
        self._names = None

    # -- what controllers report (write-only) --------------------------------------
    def _sink(self, kind: str, **kw: Any) -> None:
        if kind == "done":
            self.complete(kw["task"], kw.get("state"), kw["output"], kw.get("extra"))
        elif kind == "unanswered":
            self.fail(kw["task"], kw.get("state"), kw["reason"], kw.get("extra"))
        elif kind == "exclude":
            self._exclusion(kw["by"], kw["peer"], bool(kw["excluded"]), kw["task"])
        elif kind == "note":
            row = self.current_row(kw["task"])
            if row is not None:
                row.setdefault("notes", []).append(kw["note"])
        elif kind == "signal":
            # an observed outcome a method learns from (a judged output), as the observer logs it
            row = self.current_row(kw["task"])
            if row is not None:
                row.setdefault("signals", []).append({"by": kw["by"], "about": kw["about"], "score": kw["score"],
                                                      "success": kw["success"]})

    def _exclusion(self, by: str, peer: str, excluded: bool, task: int) -> None:
        """Agent ``by`` stops (or resumes) routing ordinary work to ``peer``."""
        s = self.excluded_by.setdefault(peer, set())
        (s.add if excluded else s.discard)(by)
        self.exclusion_rows.append({"task": task, "t": self.ctx.env.now, "by": by, "peer": peer,
                                    "excluded": excluded, "degraded": peer in self.degraded})
        # the observer's view: isolated once every agent linked to it excludes it
        linked = {a for (u, v) in self.ctx.net.links for a in (u, v) if peer in (u, v)} - {peer}
        now = bool(linked) and linked <= s
        if now and peer not in self.isolated:
            self.isolated.add(peer)
            self.record_state(peer, task, "normal", "isolated")
        elif not now and peer in self.isolated:
            self.isolated.discard(peer)
            self.record_state(peer, task, "isolated", "normal")

    # -- outputs -------------------------------------------------------------------
    def output_tables(self) -> dict[str, list[dict]]:
        out = super().output_tables()
        out["exclusions.jsonl"] = self.exclusion_rows
        return out

    def summary(self) -> dict[str, Any]:
        out = super().summary()
        out["method"] = self.name
        out["decentralized"] = self.decentralized
        out["exclusions"] = {p: sorted(s, key=node_order) for p, s in sorted(self.excluded_by.items())
                             if s}
        out.update(self.method_summary())
        return out

    def method_summary(self) -> dict[str, Any]:
        """Method-specific summary fields (learned weights, reputations, ...)."""
        return {}


# ---------------------------------------------------------------------------------------------
# helpers


def score_of(resp: Any) -> float:
    """A review reply's score; an unparsable one counts as a neutral 0.5 (App. D.1 anchors)."""
    if resp.error is not None:
        return 0.5
    try:
        s = float(resp.fields.get("score"))
    except (TypeError, ValueError):
        return 0.5
    return min(1.0, max(0.0, s))


def judge(llm: Any, X: TaskState, y: Output, drafts: Optional[list] = None) -> Generator[Any, Any, float]:
    """One review call (App. D.1 rubric) by the agent behind ``llm`` on output ``y``:
    the same call MeshHeal's reviewers make, made once, by whoever consumes the
    output. Its model follows Model-Backed MAS Evaluation for the abilities of
    ``y`` (strong only if the judge declares them and is healthy)."""
    prior = [o.text for o in (drafts if drafts is not None else [])]
    ctx = {"action": y.action, "context_items": len(prior), "output_text": y.text, "drafts": prior,
           "producer": y.agent}
    r = yield from llm.call(llm.request(CallKind.REVIEW, X.task, tuple(sorted(y.abilities)), ctx))
    return score_of(r)


def plurality(answers: list[Optional[str]], rnd: Any) -> Optional[str]:
    """The most common non-missing answer; a tie is broken uniformly at random
    (the deciding agent's own stream)."""
    votes: dict[str, int] = {}
    for a in answers:
        if a is not None:
            votes[a] = votes.get(a, 0) + 1
    if not votes:
        return None
    top = max(votes.values())
    best = sorted(a for a, c in votes.items() if c == top)
    return best[rnd.randrange(len(best))] if len(best) > 1 else best[0]


# ---------------------------------------------------------------------------------------------
# the controller


class ChainAgent:
    """One agent's controller running the Handoff-Contribute-Finalize flow (Sec. 4.1).

    At agent i with task state X: M = R \\ C, H = K_i ∩ M; H empty -> Handoff
    (no LLM call), H ⊂ M -> Contribute, H = M -> Finalize. Where the task goes
    next is the method's decision (:meth:`choose_next`); a leg longer than the
    routing limit (App. B.7) leaves the task unanswered.
    """

    method = "baseline"  # names this controller's random stream

    def __init__(self, node: Node, abilities: list[str], params: BaselineParams, llm: Any,
                 pairs: list[tuple[str, str]], sink: Callable[..., None], types: Optional[list[str]] = None):
        self.node = node
        self.name = node.name
        self.env = node.env
        self.params = params
        self.llm = llm
        self.pairs = pairs  # the documented vocabulary of ability pairs (InferAbilities input)
        self.types = list(types or [])  # the benchmark's documented task types (App. B.2)
        self.sink = sink  # write-only: records for metrics, never read back
        self.K = frozenset(abilities)
        self.rnd = node.env.pyrandom(self.method, node.name)
        self.peer_abilities: dict[str, frozenset] = {}
        self.reliable = Reliable(node, timeout=params.ack_timeout, retries=params.retries)
        node.on("hello", self._on_hello)
        node.on("task", self._on_task)
        node.on("result", self._on_result)
        node.link_listeners.append(self._on_link)
        node.call_later(0.0, self._hello_all)

    # ------------------------------------------------------------- neighbours
    def _hello_all(self) -> None:
        for peer in self.node.neighbors:
            self._hello(peer)

    def _hello(self, peer: str) -> None:
        self.reliable.send(peer, "hello", {"abilities": sorted(self.K)}, size=HEADER_BYTES + 24 * (1 + len(self.K)))

    def _on_link(self, peer: str, up: bool) -> None:
        if up:
            self.node.call_later(0.0, lambda: self._hello(peer))

    def _on_hello(self, msg) -> None:
        self.peer_abilities[msg.src] = frozenset(msg.payload["abilities"])

    def neighbours(self) -> list[str]:
        """Peers on links that are up, in name order."""
        return sorted(self.node.neighbors, key=node_order)

    def holders(self, abilities: Any, among: Optional[list[str]] = None) -> list[str]:
        """Neighbours that declared any of ``abilities``."""
        want = set(abilities)
        return [j for j in (among if among is not None else self.neighbours())
                if want & self.peer_abilities.get(j, frozenset())]

    def describe(self, names: list[str]) -> list[dict]:
        """Candidates as a selection prompt lists them: name and declared abilities."""
        return [{"agent": j, "abilities": sorted(self.peer_abilities.get(j, frozenset()) if j != self.name
                                                 else self.K)} for j in names]

    # ------------------------------------------------------------ task flow
    def start(self, task) -> None:
        """The task enters the network here (the entry agent)."""
        self.node.start(self._work(TaskState(task=task)))

    def _on_task(self, msg) -> Generator:
        return self._work(msg.payload)

    def _work(self, X: TaskState) -> Generator[Any, Any, None]:
        X.visits.append(self.name)
        if X.R is None:
            X.R = yield from infer_pair(self.llm, X.task, self.pairs)
            X.actions.append((self.name, "infer"))
        M = set(X.R) - X.C
        H = frozenset(self.K & M)
        if not H:
            X.actions.append((self.name, "handoff"))
            yield from self.forward(X)
            return
        action = "contribute" if H < M else "finalize"
        yield from self.before_output(X, H, action)
        y = yield from generate(self.llm, self.name, self.K, action, H, X)
        X.actions.append((self.name, action))
        X.Y.append(y)
        X.P.append(self.name)
        if action == "contribute":
            X.C |= H
            X.leg_hops = 0
            yield from self.forward(X)
        else:
            yield from self.deliver(X, y)

    def before_output(self, X: TaskState, H: frozenset, action: str) -> Generator[Any, Any, None]:
        """Hook before this agent's Contribute / Finalize call (RAPS: its watchdog)."""
        return
        yield

    def forward(self, X: TaskState) -> Generator[Any, Any, None]:
        X.leg_hops += 1
        if X.leg_hops > self.params.route_limit:
            self.sink("unanswered", task=X.task, state=X, reason="route_limit")
            return
        M = sorted(set(X.R or ()) - X.C)
        order = yield from self.choose_next(X, M)
        for nxt in order:
            ok = yield self.reliable.send(nxt, "task", X.copy(), size=HEADER_BYTES + X.size_bytes())
            if ok:
                self.forwarded(X, nxt)
                return
        self.sink("unanswered", task=X.task, state=X, reason="no_route")

    def choose_next(self, X: TaskState, M: list[str]) -> Generator[Any, Any, list[str]]:
        """Neighbours to hand the task to, most preferred first (the method's routing)."""
        raise NotImplementedError
        yield

    def forwarded(self, X: TaskState, nxt: str) -> None:
        """The task left for ``nxt`` (AgentNet remembers its router decisions)."""

    def deliver(self, X: TaskState, y: Output) -> Generator[Any, Any, None]:
        """The committed final answer: by default the task ends here (as in MeshHeal);
        methods whose entry agent judges the answer send it back first."""
        entry = X.visits[0]
        if entry == self.name or not self.returns_results():
            yield from self.on_result(X, y)
            return
        ok = yield self.reliable.send(entry, "result", {"state": X, "output": y},
                                      size=HEADER_BYTES + X.size_bytes())
        if not ok:
            self.sink("unanswered", task=X.task, state=X, reason="no_return")

    def returns_results(self) -> bool:
        return False

    def _on_result(self, msg) -> Generator:
        return self.on_result(msg.payload["state"], msg.payload["output"])

    def on_result(self, X: TaskState, y: Output) -> Generator[Any, Any, None]:
        self.sink("done", task=X.task, state=X, output=y)
        return
        yield
