"""Shared machinery of the consensus protocols SAC and CP-WBFT (papers/sac-2605.09076.md).

Both run a stream of queries; every query is a fixed number of rounds driven
by messages: each agent broadcasts its current answer to its neighbours,
collects what arrives until its round deadline (a lost or late message is
simply absent), updates its answer from what it received and its own state,
and goes on to the next round. The two protocols differ only in the update
(:mod:`.sac`: receiver-side scoring, bottom-F filter, refine; :mod:`.cpwbft`:
aggregation weighted by sender-reported confidence).

This module is the *harness* (query stream, who uses which model, records
for metrics); the per-agent controller skeleton and the Byzantine behaviours
are :mod:`.consensus_agent`; the roles, answer formats, SAC filter, reply
parsing and parameters :mod:`.consensus_rules` (all importable from here). A controller reads only its own state (its answer, self-score,
role, the queries it is asked, as :class:`TaskInfo`) and the messages it
receives, which carry an answer and its text; ground truth lives in
``TaskRef.answer``, which only backends and the observer read.

Roles (``agents.roles`` in the scenario; ``set_role`` events change them):

* ``strong`` (default) — reliable: strong model, follows the protocol;
* ``weak`` / ``faulty`` — faulty Byzantine (Def. 3.1): weak model, follows
  the protocol;
* ``adversarial`` — as in the authors' code (``fixed`` Byzantine mode):
  broadcasts the weak model's precomputed answer to the *same* query, the
  same to every neighbour in every round, reports confidence 1.0 to CP-WBFT
  and never scores or refines (one ``sac_answer`` call per query, the
  precomputation);
* ``ood`` — the paper's wording of App. B.4: a cached weak-model answer to an
  *out-of-distribution* query, whose text reads as off-topic (observable
  feature ``off_topic``), confidence 1.0;
* ``persuasive`` — a swaying adversary: a plausible wrong answer (the query's
  most common wrong answer) in an insistent, authoritative text (observable
  feature ``persuasive``, drawn by the producing fake) every round,
  confidence 1.0. A model that keeps it in its refine context is pulled
  toward it whatever score it gave it: the case SAC's filter guards against;
* ``equivocating`` — sends different plausible wrong answers to different
  neighbours (rotating each round), confidence 1.0;
* ``colluding`` — all colluders agree out of band on one plausible wrong
  answer per query, broadcast it every round, report confidence 1.0 and score
  each other 1.0 (everyone else 0.0), so they never leave it.
"""
from __future__ import annotations

import bisect
import math
from typing import Any, Optional

from ..core.sim import Event

from ..core.calls import Request, Response, TaskRef
from ..core.errors import InputError
from ..core.names import node_order
from .base import Protocol
# the controller and the pure parts live in their own modules; this one is their public address
from .consensus_agent import ConsensusAgent
from .consensus_rules import (ADVERSARIAL_ROLES, CPWBFT_AGGREGATE, CPWBFT_ANSWER, DATASETS, HONEST_ROLES, ROLES,
                              ConsensusDataset, ConsensusParams, byzantine_set, f_local_message, f_local_violations,
                              group_of, make_queries, model_of, parse_answer, parse_score, queries_from_file,
                              refine_shown, sac_filter, warn)
from .llm import LLMClient

__all__ = ["ROLES", "HONEST_ROLES", "ADVERSARIAL_ROLES", "DATASETS", "ConsensusDataset", "make_queries", "refine_shown",
           "sac_filter", "parse_score", "parse_answer", "ConsensusParams", "ConsensusProtocol", "ConsensusAgent",
           "group_of", "CPWBFT_AGGREGATE", "CPWBFT_ANSWER"]


# ---------------------------------------------------------------------------
# the harness


class ConsensusProtocol(Protocol):
    """Query stream, roles and records; the per-agent work is in ``Agent``."""

    # deliberate repetition: every protocol class declares its name, Params and Agent type like this (typed, issue 31)
    name = "consensus"
    Params = ConsensusParams
    params: ConsensusParams
    Agent: type["ConsensusAgent"]
    supports_roles = True
    #: gray failures of honest agents (``degrade`` / ``recover`` events; docs/sac.md)
    supports_degradation = True
    #: ``swap``: the weak model for every call; ``latency`` / ``errors``: the LLM client's
    #: wrappers (slower calls miss round deadlines; failed calls read as unparsable replies).
    #: The other modes hurt context texts SAC's prompts do not carry.
    degrade_modes = ("swap", "latency", "errors")

    def __init__(self, params: ConsensusParams, ctx):
        super().__init__(params, ctx)
        self.dataset = DATASETS[params.dataset]
        count = params.query_count(ctx.tasks)
        tf = ctx.tasks_file
        if tf is not None:
            # real questions with gold answers (what a real model needs)
            self.stream = queries_from_file(tf, count, ctx.env.pyrandom("queries"))
        else:
            self.stream = make_queries(self.dataset, count, ctx.env.pyrandom("queries"))
        self.roles: dict[str, str] = dict(ctx.roles)
        self.agents: dict[str, ConsensusAgent] = {}
        self.query_rows: list[dict] = []
        self.round_rows: list[dict] = []
        self.role_log: list[dict] = []
        self.warnings: list[str] = []
        self.graph_info: dict[str, Any] = {}
        self.calls_by_kind: dict[str, int] = {}
        self._cur: Optional[dict] = None
        self._pending: set[str] = set()
        self._all_done: Optional[Event] = None
        self._finished = Event(ctx.env)
        self._query_index = 0
        self._board: dict = {}  # colluders' out-of-band agreements, by query
        # gray failures: per agent, ((query, round), fault or None) sorted by when they act
        self.health: dict[str, list[tuple[tuple[int, int], Optional[dict]]]] = {}
        self.degraded_log: list[dict] = []
        self._share_draws = 0
        self._health_changed = False

    # -- infrastructure ----------------------------------------------------------
    def role(self, agent: str) -> str:
        return self.roles.get(agent, "strong")

    def model_for(self, agent: str) -> str:
        """Infrastructure: the model behind the agent's next call -- its role's, or
        the weak model while a ``swap`` gray failure holds for its current round."""
        fault = self.fault_now(agent)
        if fault is not None and fault.get("mode", "swap") == "swap" and self.role(agent) in HONEST_ROLES:
            return "weak"
        return model_of(self.role(agent))

    # -- gray failures (degrade / recover events) ------------------------------------
    def fault_at(self, agent: str, q: int, stage: int) -> Optional[dict]:
        """The gray failure acting on ``agent``'s calls of query ``q``, round ``stage``
        (0: the initial answer; t: the exchange that produces round t's answer)."""
        sched = self.health.get(agent)
        if not sched:
            return None
        i = bisect.bisect_right([k for k, _f in sched], (q, stage))
        return sched[i - 1][1] if i else None

    def fault_now(self, agent: str) -> Optional[dict]:
        ctrl = self.agents.get(agent)
        if ctrl is None or ctrl.q is None:
            return None
        return self.fault_at(agent, ctrl.q, ctrl.stage)

    def _client_fault(self, agent: str) -> Optional[dict]:
        """The LLM client's wrappers (``latency``, ``errors``) for an honest agent's call."""
        f = self.fault_now(agent)
        if f is None or f.get("mode", "swap") == "swap" or self.role(agent) not in HONEST_ROLES:
            return None
        return f

    def set_degraded(self, agent: str, degraded: bool, fault: Optional[dict] = None) -> None:
        """A gray failure of an honest agent begins (or ends): from the round the
        event names (``fault['round']``) of the current query, else from now (the
        next query when an ``at_task`` event fires, the agent's current round when
        an ``at`` event fires mid-query)."""
        if agent not in self.agents:
            raise InputError("unknown agent", field="agents", value=agent)
        fault = dict(fault or {})
        mode = fault.get("mode", "swap")
        role = self.role(agent)
        if degraded and role not in HONEST_ROLES:
            raise InputError(f"agent has the Byzantine role '{role}' when the event fires (it replays or forges "
                             "its answers, no model of its own degrades); degrade honest agents", field="agents",
                             value=agent)
        if degraded and mode == "swap" and role != "strong":
            raise InputError(f"agent runs the weak model already (role '{role}' when the event fires): a model "
                             "swap changes nothing", field="agents", value=agent)
        ctrl = self.agents[agent]
        q = self._query_index
        r = fault.pop("round", None)
        if r is None:
            r = ctrl.stage if ctrl.q == q else 0
        key = (q, int(r))
        sched = self.health.setdefault(agent, [])
        sched.insert(bisect.bisect_right([k for k, _f in sched], key), (key, fault if degraded else None))
        self.degraded_log.append({"agent": agent, "degraded": degraded, "query": q, "round": key[1],
                                  "mode": mode if degraded else None, "t": self.ctx.env.now})
        self._health_changed = True  # F-locality is checked once the query's events have all fired

    def degrade_share(self, share: float) -> list[str]:
        """``degrade`` with ``share``: round(share x n) of the n strong agents not
        degraded now, drawn from a named stream (one per share event, in firing order)."""
        q = self._query_index
        pool = [a for a in sorted(self.agents, key=node_order)
                if self.role(a) == "strong" and self.fault_at(a, q, 0) is None]
        k = int(math.floor(share * len(pool) + 0.5))
        rnd = self.ctx.env.pyrandom("degrade_share", self._share_draws)
        self._share_draws += 1
        return sorted(rnd.sample(pool, k), key=node_order)

    def degraded_now(self) -> set[str]:
        """Agents whose latest scheduled health change is a model swap (for the F-local check)."""
        return {a for a, sched in self.health.items()
                if sched and sched[-1][1] is not None and sched[-1][1].get("mode", "swap") == "swap"}

    def task_ref(self, index: int) -> TaskRef:
        """The benchmark's full record of query ``index`` (infrastructure and observer only)."""
        return self.stream[index - 1]

    def colluders(self) -> frozenset:
        return frozenset(a for a in self.agents if self.role(a) == "colluding")

    def set_role(self, agent: str, role: str) -> None:
        """An agent's role changes (``set_role`` event): its model, or its
        behaviour when it turns Byzantine, from its next round on."""
        if agent not in self.agents:
            raise InputError("unknown agent", field="agents", value=agent)
        if role not in ROLES:
            raise InputError(f"unknown role; choose one of {list(ROLES)}", field="role", value=role)
        self.roles[agent] = role
        self.role_log.append({"agent": agent, "role": role, "query": self._query_index, "t": self.ctx.env.now})
        self.agents[agent].role = role
        self._group_colluders()
        self._check_f_local()

    def _group_colluders(self) -> None:
        members = self.colluders()
        for a, ctrl in self.agents.items():
            ctrl.members = members if self.role(a) == "colluding" else frozenset()
            ctrl.board = self._board if self.role(a) == "colluding" else {}

    def _adjacency(self) -> dict[str, set]:
        adj: dict[str, set] = {v: set() for v in self.ctx.net.nodes}
        for (u, v) in self.ctx.net.links:
            adj[u].add(v)
            adj[v].add(u)
        return adj

    def _check_f_local(self) -> None:
        adj = self._adjacency()
        byz = byzantine_set({a: self.role(a) for a in adj})
        viol = f_local_violations(adj, byz, self.params.F)
        gray = self.degraded_now() - byz
        if not viol and gray:
            # a model-swapped honest agent is a faulty agent of Def. 3.1 while it lasts
            viol = f_local_violations(adj, byz | gray, self.params.F)
            if viol:
                msg = ("with the degraded agents " + ", ".join(sorted(gray, key=node_order)) +
                       " counted as faulty (Def. 3.1): " + f_local_message(viol, self.params.F))
                if msg not in self.warnings:
                    self.warnings.append(msg)
                    warn(None, msg)
                return
        if viol:
            msg = f_local_message(viol, self.params.F)
            if msg not in self.warnings:
                self.warnings.append(msg)
                warn(None, msg)

    # -- setup ---------------------------------------------------------------------
    def attach(self, node, abilities):
        name = node.name

        def model(_ab: Any, name: str = name) -> Any:
            return self.model_for(name)

        def fault(name: str = name) -> Any:
            return self._client_fault(name)
        llm = LLMClient(self.ctx.env, self.ctx.backend, name, model,
                        self._llm_sink, fault=fault, tasks=self.task_ref,
                        bridge=self.ctx.bridge)
        ctrl = self.Agent(node, self.params, llm, self._sink, self.role(name))
        self.agents[name] = ctrl
        self._group_colluders()

    def detach(self, name):
        self.agents.pop(name, None)
        if name in self._pending:
            self._pending.discard(name)
            self._maybe_done()

    def setup(self):
        super().setup()
        self._graph_info()
        self._check_f_local()
        self.ctx.env.process(self._driver())

    def _graph_info(self) -> None:
        import networkx as nx

        G = nx.Graph()
        G.add_nodes_from(self.ctx.net.nodes)
        G.add_edges_from(self.ctx.net.links)
        from ..graphs.robustness import robustness_report

        self.graph_info = robustness_report(G, self.params.F, time_limit=self.params.robustness_time_limit)

    def finished(self):
        return self._finished

    # -- the query stream ------------------------------------------------------------
    def _driver(self):
        env = self.ctx.env
        total = len(self.stream)
        for task in self.stream:
            self._query_index = task.index
            self.ctx.task_starting(task.index)
            if self._health_changed:
                self._health_changed = False
                self._check_f_local()
            names = sorted(self.agents, key=node_order)
            row = {"query": task.index, "id": task.id, "truth": task.answer,
                   "roles": {a: self.role(a) for a in names},
                   "answers": {a: [] for a in names}, "scores": {a: [] for a in names},
                   "calls": 0, "tokens": 0, "honest_tokens": 0, "start": env.now,
                   "sent": 0, "received": 0, "late": 0, "unfinished": []}
            self._cur = row
            self._pending = set(names)
            self._all_done = Event(env)
            info = task.info()
            for a in names:
                self.agents[a].start(info)
            if self._pending:
                yield self._all_done | env.timeout(self.params.query_timeout)
            row["unfinished"] = sorted(self._pending, key=node_order)
            row["end"] = env.now
            for a in row["unfinished"]:
                ctrl = self.agents.get(a)
                if ctrl is not None:
                    ctrl.stop()
            self.query_rows.append(row)
            self._cur = None
            if self.ctx.backend is not None:
                self.ctx.backend.forget(task.id)
            self.ctx.progress(task.index, total)
        self._finished.succeed()

    def _maybe_done(self) -> None:
        if not self._pending and self._all_done is not None and not self._all_done.triggered:
            self._all_done.succeed()

    # -- sinks (controllers write, never read) ---------------------------------------
    def _llm_sink(self, req: Request, resp: Response, latency: float) -> None:
        self.calls_by_kind[req.kind] = self.calls_by_kind.get(req.kind, 0) + 1
        row = self._cur
        if row is None or req.task is None or req.task.index != row["query"]:
            return
        row["calls"] += 1
        row["tokens"] += resp.prompt_tokens + resp.completion_tokens
        if row["roles"].get(req.agent, "strong") in HONEST_ROLES:
            row["honest_tokens"] += resp.prompt_tokens + resp.completion_tokens

    def _sink(self, kind: str, **kw: Any) -> None:
        row = self._cur
        if row is None or kw.get("q") != row["query"]:
            return
        a = kw["agent"]
        if kind == "round":
            if a in row["answers"]:
                row["answers"][a].append(kw["answer"])
                row["scores"][a].append(kw.get("score"))
                if "conf" in kw:
                    row.setdefault("confs", {}).setdefault(a, []).append(kw["conf"])
            rec = {"query": row["query"], "round": kw["t"], "agent": a, "role": kw["role"],
                   "answer": kw["answer"], "correct": kw["answer"] is not None and kw["answer"] == row["truth"],
                   "score": kw.get("score")}
            if self.health and kw["role"] in HONEST_ROLES:
                fault = self.fault_at(a, row["query"], kw["t"])
                if fault is not None:  # the observer's mark: this round's calls ran degraded
                    rec["degraded"] = fault.get("mode", "swap")
                    row.setdefault("degraded", {}).setdefault(a, kw["t"])
            for k in ("received", "scores", "retained", "dropped", "sent_answers", "note", "conf"):
                if kw.get(k) is not None:
                    rec[k] = kw[k]
            self.round_rows.append(rec)
        elif kind == "traffic":
            row["sent"] += kw.get("sent", 0)
            row["received"] += kw.get("received", 0)
            row["late"] += kw.get("late", 0)
        elif kind == "done":
            if a in self._pending:
                self._pending.discard(a)
                self._maybe_done()

    # -- outputs -------------------------------------------------------------------
    def output_tables(self) -> dict[str, list[dict]]:
        # queries.jsonl is the observer's (meshsim.observe.consensus.consensus_query_row per query_rows entry)
        return {"rounds.jsonl": self.round_rows}
