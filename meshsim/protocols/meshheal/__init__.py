"""MeshHeal (papers/meshheal-2609.29015.md): self-healing routing of tasks.

This module is the *harness*: it feeds the task stream to entry agents,
realises Model-Backed MAS Evaluation (which model each call uses, degraded
or not) and collects records for metrics. Every decision is made by the
per-agent controllers in :mod:`.agent` (task flow, routing, probes),
:mod:`.review` (fast timescale) and :mod:`.detector` (slow timescale).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from simpy.events import Event

from ...backends.base import Request, Response, TaskRef
from ...errors import InputError
from ...types import parse_duration
from ..base import Protocol
from ..llm import LLMClient
from .agent import MeshHealAgent
from .detector import DetectorParams, make_detector

__all__ = ["MeshHeal", "MeshHealParams"]

_Dur = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]
_Prob = Annotated[float, Field(ge=0.0, le=1.0)]


class MeshHealParams(BaseModel):
    """Tab. B11 defaults; every field can be set in ``protocol.params``."""

    model_config = ConfigDict(extra="forbid")
    # fast timescale (Sec. 4.2.1, App. B.5)
    review: bool = True  # False: no review at all (with detector none: the no-healing control)
    review_calls: Annotated[int, Field(ge=1, le=9)] = 3
    tau_to: _Prob = 0.40
    sigma_com: Annotated[float, Field(ge=0.0)] = 0.55
    committee: bool = True  # False: single-reviewer ablation
    takeover: bool = True  # False: no-Takeover ablation
    # slow timescale (Sec. 4.2.2)
    detector: Literal["relative", "absolute", "cusum", "none"] = "relative"
    window: Annotated[int, Field(ge=1)] = 8
    min_obs: Annotated[int, Field(ge=1)] = 3
    alpha: float = 1.2
    beta: float = 2.0
    consecutive: Annotated[int, Field(ge=1)] = 2
    # Our reading of Sec. 4.2.2 (see docs/meshheal.md): x̄ over the agent's latest
    # `window` matched shortfalls and its consecutive-crossing count, both across
    # its (T, s) detectors; "key" keeps them per (T, s).
    count_scope: Literal["key", "agent"] = "agent"
    shortfall_scope: Literal["key", "agent"] = "agent"
    spread_floor: Annotated[float, Field(gt=0)] = 0.10
    probe_every: Annotated[int, Field(ge=1)] = 10
    probe_clock: Literal["stream", "local"] = "stream"
    abs_watch: _Prob = 0.6
    abs_isolate: _Prob = 0.5
    cusum_k: float = 0.1
    cusum_h: float = 1.0
    cusum_target: _Prob = 0.85
    # routing (Sec. 4.1, App. B.7)
    route_limit: Annotated[int, Field(ge=1)] = 4
    infinity: Annotated[int, Field(ge=2, le=255)] = 16
    refresh: Optional[_Dur] = None  # periodic distance-vector refresh; None = triggered only
    route_timeout: Optional[_Dur] = None
    # transport
    ack_timeout: _Dur = 1.0
    retries: Annotated[int, Field(ge=0)] = 4
    review_timeout: _Dur = 900.0
    task_timeout: _Dur = 7200.0

    def detector_params(self) -> DetectorParams:
        return DetectorParams(window=self.window, min_obs=self.min_obs, alpha=self.alpha, beta=self.beta,
                              consecutive=self.consecutive, count_scope=self.count_scope,
                              shortfall_scope=self.shortfall_scope, spread_floor=self.spread_floor,
                              abs_watch=self.abs_watch, abs_isolate=self.abs_isolate, cusum_k=self.cusum_k,
                              cusum_h=self.cusum_h, cusum_target=self.cusum_target)

    def check(self, sc: Any, G: Any) -> None:
        if self.alpha >= self.beta:
            raise InputError("alpha must be < beta", field="protocol.params.alpha", value=self.alpha)
        if sc.tasks is None:
            raise InputError("meshheal needs a 'tasks' stream", field="tasks")
        if sc.backend is None:
            raise InputError("meshheal needs a 'backend'", field="backend")


class MeshHeal(Protocol):
    name = "meshheal"
    Params = MeshHealParams
    supports_degradation = True

    def __init__(self, params: MeshHealParams, ctx):
        super().__init__(params, ctx)
        from ...tasks import load_profile, make_stream

        spec = ctx.tasks
        self.profile = load_profile(spec.dataset or "math")
        if getattr(spec, "file", None):
            from ...tasks import stream_from_file

            self.stream = stream_from_file(self.profile, ctx.extra["tasks_file"], spec.count,
                                           ctx.env.pyrandom("tasks"), getattr(spec, "block", None))
        else:
            self.stream = make_stream(self.profile, spec.count, ctx.env.pyrandom("tasks"),
                                      getattr(spec, "block", None))
        self.pairs = sorted({tuple(p) for p in self.profile.types.values()})
        self.agents: dict[str, MeshHealAgent] = {}
        self._names: Optional[list[str]] = None
        self.K: dict[str, frozenset] = {}
        self.degraded: set[str] = set()
        self.fault_of: dict[str, dict] = {}
        self.degraded_log: list[dict] = []
        self.det_params = params.detector_params()
        self.detector_kind = params.detector if params.review else "none"
        # records (write-only from controllers)
        self.task_rows: list[dict] = []
        self.review_rows: list[dict] = []
        self.state_rows: list[dict] = []
        self.unreviewed = 0
        self._cur: dict[int, dict] = {}
        self._done: dict[int, Event] = {}
        self._finished = Event(ctx.env)
        self._phase_of = self._phases()

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
        if agent in self.degraded and self.fault_of.get(agent, {}).get("mode", "swap") == "swap":
            return "weak"
        K = self.K.get(agent, frozenset())
        return "strong" if (abilities and set(abilities) <= K) or (not abilities and K) else "weak"

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

    # -- setup ------------------------------------------------------------------
    def attach(self, node, abilities):
        name = node.name
        self.K[name] = frozenset(abilities)
        llm = LLMClient(self.ctx.env, self.ctx.backend, name,
                        lambda ab, name=name: self.model_for(name, ab), self._llm_sink,
                        fault=lambda name=name: self._fault(name), tasks=self.task_ref)
        det = make_detector(self.detector_kind, self.det_params)
        self.agents[name] = MeshHealAgent(node, abilities, self.params, llm, det, self.pairs, self._sink)
        self._names = None

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
            self._names = sorted(self.agents, key=lambda a: (len(a), a))
        return self._names

    def routing_tables(self):
        return {}  # MeshHeal's tables carry the ANY pseudo-ability; see summary instead

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
            names = self._entry_names()
            entry = names[rnd.randrange(len(names))]
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

    def _await(self, task: TaskRef):
        env = self.ctx.env
        done = self._done[task.index]
        yield done | env.timeout(self.params.task_timeout)
        if not done.triggered:
            self._finish(task, None, False, "timeout")
        self._done.pop(task.index, None)

    def _finish(self, task: Any, state, correct: bool, unanswered: Optional[str]) -> None:
        row = self._cur.pop(task.index, None)
        if row is None:
            return  # already closed (e.g. a late message after a timeout)
        if self.ctx.backend is not None:
            self.ctx.backend.forget(task.id)
        row["end"] = self.ctx.env.now
        row["correct"] = bool(correct) and unanswered is None
        row["unanswered"] = unanswered
        if state is not None:
            row["inferred_pair"] = list(state.R) if state.R else None
            row["route"] = list(state.visits)
            row["producers"] = list(state.P)
            row["actions"] = [f"{a}:{b}" for a, b in state.actions]
        self.task_rows.append(row)
        ev = self._done.get(task.index)
        if ev is not None and not ev.triggered:
            ev.succeed()

    # -- sinks (controllers write, never read) ---------------------------------------
    def _llm_sink(self, req: Request, resp: Response, latency: float) -> None:
        row = self._cur.get(req.task.index) if req.task else None
        if row is not None:
            row["calls"] += 1
            row["tokens"] += resp.prompt_tokens + resp.completion_tokens
            row["prompt_tokens"] += resp.prompt_tokens
            row["completion_tokens"] += resp.completion_tokens

    def _sink(self, kind: str, **kw: Any) -> None:
        env = self.ctx.env
        if kind == "done":
            self._finish(kw["task"], kw["state"], bool(self.grade(kw["task"].index, kw["output"])), None)
        elif kind == "unanswered":
            self._finish(kw["task"], kw["state"], False, kw["reason"])
        elif kind == "state":
            rec = {"agent": kw["agent"], "task": kw["task"], "t": env.now, "old": kw["old"], "new": kw["new"],
                   "degraded": kw["agent"] in self.degraded}
            self.state_rows.append(rec)
            self.ctx.trace("state", **rec)
        elif kind == "review":
            a = kw["assessment"]
            task = kw["task"]
            row = self._cur.get(task.index)
            rec = {"task": task.index, "t": env.now, "type": task.type, "agent": kw["agent"], "action": kw["action"],
                   "abilities": kw["abilities"], "probe": kw["probe"], "degraded": kw["agent"] in self.degraded,
                   "output_correct": self.grade(task.index, kw["output"]), "initial": a.initial, "q0": a.q0, "s_u": a.s_u,
                   "committee": a.committee, "trigger": a.trigger, "round1": a.round1, "round2": a.round2,
                   "q": a.q, "takeover": a.takeover, "reviewers": a.reviewers,
                   "same_reviewer_twice": a.same_reviewer_twice, "reviewer_views": a.reviewer_views,
                   "takeover_correct": self.grade(task.index, a.output) if a.takeover else None,
                   "final_before": None, "final_after": None}
            if kw["action"] == "finalize" and a.takeover:
                rec["final_before"], rec["final_after"] = rec["output_correct"], rec["takeover_correct"]
                b = self.ctx.backend
                before = b.final_answer(self.task_ref(task.index), kw["output"].text) if b is not None else None
                after = b.final_answer(self.task_ref(task.index), a.output.text) if b is not None else None
                rec["answer_changed"] = (before != after) if (before is not None or after is not None) else None
            self.review_rows.append(rec)
            if row is not None:
                row["reviews"].append(a.q)
                row["takeovers"] += int(a.takeover)
        elif kind == "evidence":
            u = kw["update"]
            for rec in reversed(self.review_rows):
                if rec["task"] == kw["task"].index and rec["agent"] == kw["agent"]:
                    rec.setdefault("detector", []).append(
                        {"ability": kw["ability"], "matched": u.matched, "shortfall": u.shortfall, "xbar": u.xbar,
                         "m": u.m, "p25": u.p25, "z": u.z, "state": u.state.value})
                    break
        elif kind == "unreviewed":
            self.unreviewed += 1

    # -- outputs -------------------------------------------------------------------
    def output_tables(self) -> dict[str, list[dict]]:
        return {"tasks.jsonl": sorted(self.task_rows, key=lambda r: r["index"]),
                "states.jsonl": self.state_rows, "reviews.jsonl": self.review_rows}

    def summary(self) -> dict[str, Any]:
        from ...metrics import meshheal_summary  # metrics sit above protocols

        return meshheal_summary(self)
