"""MeshHeal (papers/meshheal-2609.29015.md): self-healing routing of tasks.

The *harness* (task stream, Model-Backed MAS Evaluation, degradation, token
and call accounting, records) is the shared execution layer of
:mod:`meshsim.protocols.execution`, which every baseline of the paper's
comparison runs on too. Every decision is made by the
per-agent controllers in :mod:`.agent` (task flow, routing, probes),
:mod:`.review` (fast timescale) and :mod:`.detector` (slow timescale).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import BeforeValidator, Field, model_serializer

from ...core.strict import Strict

from ...core.errors import InputError, SimulationError
from ...core.types import parse_duration
from ..base import Timer
from ..execution import ExecutionLayer
from ..ledger import ReviewLedger
from .agent import MeshHealAgent
from .defences import credibility
from .byzantine import apply_behaviour
from .detector import DETECTORS, NONE, RELATIVE, DetectorParams, detector_names, make_detector

__all__ = ["MeshHeal", "MeshHealParams"]

#: a protocol time: a microsecond .. about 32 years (MAX_PARAM_SECONDS): a smaller one is below any
#: meaningful timescale, a larger one overflows timer arithmetic or never fires (issue 19)
_Dur = Annotated[float, BeforeValidator(parse_duration), Field(ge=1e-6, le=1e9)]
_Prob = Annotated[float, Field(ge=0.0, le=1.0)]


def _registered_detector(v: Any) -> str:
    """``detector``: a name of :data:`.detector.DETECTORS` (registered ones, not a fixed list)."""
    if not isinstance(v, str) or v not in DETECTORS:
        names = [repr(n) for n in detector_names()]
        raise ValueError("Input should be " + (", ".join(names[:-1]) + " or " if len(names) > 1 else "") + names[-1])
    return v


_Detector = Annotated[str, BeforeValidator(_registered_detector),
                      Field(json_schema_extra=lambda s: s.update(enum=detector_names()))]


class MeshHealParams(Strict):
    """Tab. B11 defaults; every field can be set in ``protocol.params``."""

    # fast timescale (Sec. 4.2.1, App. B.5)
    review: bool = True  # False: no review at all (with detector none: the no-healing control)
    review_calls: Annotated[int, Field(ge=1, le=9)] = 3
    tau_to: _Prob = 0.40
    sigma_com: Annotated[float, Field(ge=0.0, le=1e6)] = 0.55
    committee: bool = True  # False: single-reviewer ablation
    takeover: bool = True  # False: no-Takeover ablation
    # slow timescale (Sec. 4.2.2)
    detector: _Detector = RELATIVE  # a registered detector (.detector.register_detector)
    window: Annotated[int, Field(ge=1, le=100_000)] = 8
    min_obs: Annotated[int, Field(ge=1, le=100_000)] = 3
    # thresholds on a shortfall z-score: |z| beyond 1e6 never happens (bounded numbers, issue 19)
    alpha: Annotated[float, Field(ge=-1e6, le=1e6)] = 1.2
    beta: Annotated[float, Field(ge=-1e6, le=1e6)] = 2.0
    consecutive: Annotated[int, Field(ge=1, le=100_000)] = 2
    # Our reading of Sec. 4.2.2 (see docs/meshheal.md): x̄ over the agent's latest
    # `window` matched shortfalls and its consecutive-crossing count, both across
    # its (T, s) detectors; "key" keeps them per (T, s).
    count_scope: Literal["key", "agent"] = "agent"
    shortfall_scope: Literal["key", "agent"] = "agent"
    spread_floor: Annotated[float, Field(gt=0, le=1e6)] = 0.10
    probe_every: Annotated[int, Field(ge=1, le=10 ** 9)] = 10
    probe_clock: Literal["stream", "local"] = "stream"
    # App. C.2 / Tab. C5 warm-up: the first `warmup` tasks of the stream collect detector
    # evidence while every agent stays in ordinary routing (no transition, no probe).
    # The paper gives no length; 0 (off) keeps the runs as they were (docs/meshheal.md#warm-up).
    warmup: Annotated[int, Field(ge=0, le=10 ** 9)] = 0
    abs_watch: _Prob = 0.6
    abs_isolate: _Prob = 0.5
    cusum_k: Annotated[float, Field(ge=-1e6, le=1e6)] = 0.1
    cusum_h: Annotated[float, Field(ge=-1e6, le=1e6)] = 1.0
    cusum_target: _Prob = 0.85
    # routing (Sec. 4.1, App. B.7)
    route_limit: Annotated[int, Field(ge=1, le=255)] = 4
    infinity: Annotated[int, Field(ge=2, le=255)] = 16
    refresh: Optional[_Dur] = None  # periodic distance-vector refresh; None = triggered only
    route_timeout: Optional[_Dur] = None
    # transport
    ack_timeout: _Dur = 1.0
    retries: Annotated[int, Field(ge=0, le=100)] = 4
    review_timeout: _Dur = 900.0
    task_timeout: _Dur = 7200.0
    # defences against lying neighbours (issue 20; docs/adversarial.md#defences), all off by default
    trim_f: Annotated[int, Field(ge=0, le=1000)] = 0  # W-MSR: drop the F highest / lowest neighbour summaries
    trim_short: Literal["shrink", "skip"] = "shrink"  # fewer than 2F+1 neighbours: trim less / no update
    min_reviewers: Annotated[int, Field(ge=1, le=4)] = 1  # distinct reviewers behind an isolation's crossings
    credibility: Literal["off", "weight", "exclude"] = "off"  # reviewer credibility from committee agreement
    credibility_min: _Prob = 0.5
    credibility_prior: tuple[Annotated[float, Field(ge=0, le=1e6)], Annotated[float, Field(ge=0, le=1e6)]] = (4.0, 1.0)
    robustness_time_limit: Annotated[float, Field(gt=0, le=86400)] = 10.0  # trim_f > 0: the graph check's budget
    # defences against routing liars (issue 34; docs/adversarial.md#routing-defences), all off by default
    e2e_ack: bool = False  # end-to-end task acknowledgement back along the route, retry via another next hop
    e2e_timeout: _Dur = 600.0  # a first forwarder's wait for the ack (deeper ones wait less: routing_defences.py)
    e2e_retries: Annotated[int, Field(ge=0, le=16)] = 2
    rating: bool = False  # route around neighbours whose forwarded tasks were not acknowledged (needs e2e_ack)
    rate_min: _Prob = 0.5
    rate_prior: tuple[Annotated[float, Field(gt=0, le=1e6)], Annotated[float, Field(gt=0, le=1e6)]] = (2.0, 1.0)
    advert_check: bool = False  # ignore a neighbour's distance-0 advert for an ability it did not declare

    def detector_params(self) -> DetectorParams:
        return DetectorParams(window=self.window, min_obs=self.min_obs, alpha=self.alpha, beta=self.beta,
                              consecutive=self.consecutive, count_scope=self.count_scope,
                              shortfall_scope=self.shortfall_scope, spread_floor=self.spread_floor,
                              abs_watch=self.abs_watch, abs_isolate=self.abs_isolate, cusum_k=self.cusum_k,
                              cusum_h=self.cusum_h, cusum_target=self.cusum_target,
                              min_reviewers=self.min_reviewers)

    @model_serializer(mode="wrap")
    def _omit_defaults_of_defences(self, handler):
        # The issue-20 defences appear in a resolved scenario only when set, so
        # that runs without them resolve (and digest) exactly as before.
        data = handler(self)
        for name in _DEFENCE_FIELDS + _OMIT_AT_DEFAULT:
            if getattr(self, name) == type(self).model_fields[name].default:
                data.pop(name, None)
        return data

    @property
    def defended(self) -> bool:
        """Is any issue-20 defence on?"""
        return bool(self.trim_f) or self.min_reviewers > 1 or self.credibility != "off"

    def check(self, sc: Any, G: Any) -> None:
        if self.alpha >= self.beta:
            raise InputError("alpha must be < beta", field="protocol.params.alpha", value=self.alpha)
        if sum(self.credibility_prior) <= 0:
            raise InputError("credibility_prior needs a positive count ([agree, disagree])",
                             field="protocol.params.credibility_prior", value=list(self.credibility_prior))
        for name, on in (("trim_f", self.trim_f > 0), ("min_reviewers", self.min_reviewers > 1),
                         ("credibility", self.credibility == "weight")):
            if on and (self.detector != RELATIVE or not self.review):
                raise InputError(f"{name} acts on the relative detector's window: needs detector: relative and review: true",
                                 field=f"protocol.params.{name}", value=getattr(self, name))
        if self.rating and not self.e2e_ack:
            raise InputError("rating rates neighbours by end-to-end acks: needs e2e_ack: true",
                             field="protocol.params.rating", value=self.rating)
        if sc.tasks is None:
            raise InputError("meshheal needs a 'tasks' stream", field="tasks")
        if self.warmup and self.warmup >= sc.tasks.count:
            raise InputError(f"a warm-up of {self.warmup} tasks leaves no task of the {sc.tasks.count}-task stream "
                             "to detection", field="protocol.params.warmup", value=self.warmup)
        if sc.backend is None:
            raise InputError("meshheal needs a 'backend'", field="backend")


_DEFENCE_FIELDS = ("trim_f", "trim_short", "min_reviewers", "credibility", "credibility_min", "credibility_prior",
                   "robustness_time_limit",
                   "e2e_ack", "e2e_timeout", "e2e_retries", "rating", "rate_min", "rate_prior", "advert_check")
# later keys, likewise absent from a resolved scenario while off (runs digest as before)
_OMIT_AT_DEFAULT = ("warmup",)


class MeshHeal(ExecutionLayer):
    """MeshHeal on the shared execution layer (:mod:`..execution`): the harness
    there runs the stream, the models and the accounting; this class attaches
    MeshHeal's controllers and keeps the review records of App. C.5."""

    name = "meshheal"
    Params = MeshHealParams
    supports_degradation = True
    reviews_are_evidence = True

    def __init__(self, params: MeshHealParams, ctx):
        super().__init__(params, ctx)
        self.det_params = params.detector_params()
        self.detector_kind = params.detector if params.review else NONE
        # reviews.jsonl: a row is complete when the next one comes (its evidence rows are
        # added at once, before the controller yields), then it goes to ctx.tables and the
        # audit's running counts (issue 22: rows are not kept)
        self.reviews = ReviewLedger(params.tau_to)
        self._review: Optional[dict] = None
        self.unreviewed = 0
        # issue 20 defences: what each one did (summary.defences, only when one is on)
        self.defence_counts = {"updates": 0, "short_mu": 0, "short_pool": 0, "blocked_crossings": 0,
                               "low_credibility_scores": 0, "dropped_evidence": 0}
        self.graph_info: dict[str, Any] = {}
        # Byzantine behaviours (issue 20): what each liar was told to do, and the
        # observer's log of it and of the tasks routing lies caught (metrics only)
        self.lies: dict[str, Any] = {}
        self.byz_log: list[dict] = []
        self.byz_route_rows: list[dict] = []
        # issue 34 routing defences: what they did, by kind and by the neighbour concerned
        self.route_defence_counts: dict[str, dict[str, int]] = {}

    # -- setup ------------------------------------------------------------------
    def attach(self, node, abilities):
        name = node.name
        llm = self.make_llm(name, abilities)
        det = make_detector(self.detector_kind, self.det_params)
        self.agents[name] = MeshHealAgent(node, abilities, self.params, llm, det, self.pairs, self._sink)
        self._names = None

    def routing_tables(self):
        return {}  # MeshHeal's tables carry the ANY pseudo-ability; see summary instead

    def timers(self) -> list[Timer]:
        if not self.params.refresh:
            return []  # triggered updates only (the default)
        # every agent sends its full distance vector to every neighbour each refresh
        return [Timer("protocol.params.refresh", float(self.params.refresh), 2 * len(self.ctx.net.links),
                      "distance-vector refreshes")]

    def set_behaviour(self, agent: str, kind: str, spec: dict) -> None:
        """A scenario event turns ``agent`` Byzantine (``frame``, ``shield``,
        ``poison``, ``route_lie``) or honest again (``honest``)."""
        if agent not in self.agents:
            raise InputError("unknown agent", field="agents", value=agent)
        self.lies[agent] = apply_behaviour(self.lies.get(agent), kind, spec)
        self.agents[agent].set_lies(self.lies[agent])
        rec = {"agent": agent, "behaviour": kind, "task": self._task_index, "t": self.ctx.env.now, **spec}
        self.byz_log.append(rec)
        self.ctx.trace("byzantine", **rec)  # events.jsonl: who was drawn, as the event fired

    # -- sinks (controllers write, never read) ---------------------------------------
    def _sink(self, kind: str, **kw: Any) -> None:
        env = self.ctx.env
        if kind == "hop":
            self.record_hop(kw["task"], kw["agent"])
        elif kind == "done":
            self.complete(kw["task"], kw["state"], kw["output"])
        elif kind == "unanswered":
            self.fail(kw["task"], kw["state"], kw["reason"])
        elif kind == "state":
            self.record_state(kw["agent"], kw["task"], kw["old"], kw["new"])
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
            if self._review is not None:
                self._review_out(self._review)
            self._review = rec
            if row is not None:
                row["reviews"].append(a.q)
                row["takeovers"] += int(a.takeover)
        elif kind == "evidence":
            u = kw["update"]
            rec = self._review
            if rec is None or rec["task"] != kw["task"].index or rec["agent"] != kw["agent"]:
                raise SimulationError(f"detector evidence of {kw['agent']} on task {kw['task'].index} "
                                      "without its review")  # the controller's order broke
            rec.setdefault("detector", []).append(
                {"ability": kw["ability"], "matched": u.matched, "shortfall": u.shortfall, "xbar": u.xbar,
                 "m": u.m, "p25": u.p25, "z": u.z, "state": u.state.value,
                 **({"blocked": True} if u.blocked else {}), **({"warmup": True} if not kw["act"] else {})})
        elif kind == "unreviewed":
            self.unreviewed += 1
        elif kind == "defence":
            c = self.defence_counts
            what = kw["what"]
            if what == "trim":
                c["updates"] += 1
                c["short_mu"] += int(not kw["full_mu"])
                c["short_pool"] += int(not kw["full_pool"])
            elif what == "blocked":
                c["blocked_crossings"] += 1
            elif what == "low_credibility":
                c["low_credibility_scores"] += kw["scores"]
                c["dropped_evidence"] += int(kw["dropped"])
        elif kind == "route_defence":
            per = self.route_defence_counts.setdefault(kw["what"], {})
            peer = kw["peer"] or "-"
            per[peer] = per.get(peer, 0) + 1
        elif kind == "byz_route":
            self.byz_route_rows.append({"agent": kw["agent"], "task": kw["task"], "t": env.now,
                                        "outcome": kw["outcome"]})

    # -- outputs -------------------------------------------------------------------
    def _review_out(self, rec: dict) -> None:
        self.reviews.add(rec)
        self.ctx.tables.add("reviews.jsonl", rec)

    def close_records(self) -> None:
        super().close_records()
        if self._review is not None:
            self._review_out(self._review)
            self._review = None

    def evidence_outputs(self) -> dict[str, Any]:
        """MeshHeal's evidence about an agent: its reviewed outputs (a final score q, so a
        detector update; probes included; outputs accepted without a reviewer left out)."""
        return self.reviews.outputs

    def output_tables(self) -> dict[str, list[dict]]:
        out = super().output_tables()
        out["reviews.jsonl"] = []  # streamed
        return out

    def summary(self) -> dict[str, Any]:
        # after the observer's fields (meshsim.observe.execution.meshheal_summary): what only MeshHeal knows
        out: dict[str, Any] = {}
        if self.params.defended:
            out["defences"] = self.defence_summary()
        p = self.params
        if p.e2e_ack or p.advert_check:
            out["routing_defences"] = self.routing_defence_summary()
        return out

    def routing_defence_summary(self) -> dict[str, Any]:
        """Issue 34: what the routing defences did, split by whether the neighbour
        concerned was a routing liar (observer's knowledge; agents never read it):
        a timeout, rating or rejected advert against an honest agent is a false
        accusation."""
        p = self.params
        liars = {r["agent"] for r in self.byz_log if r["behaviour"] == "route_lie"}
        out: dict[str, Any] = {"e2e_ack": p.e2e_ack, "rating": p.rating, "advert_check": p.advert_check}

        def split(what: str) -> dict[str, int]:
            per = self.route_defence_counts.get(what, {})
            return {"total": sum(per.values()), "at_liars": sum(c for a, c in per.items() if a in liars),
                    "at_honest": sum(c for a, c in per.items() if a not in liars and a != "-")}

        if p.e2e_ack:
            out["e2e_timeout"], out["e2e_retries"] = p.e2e_timeout, p.e2e_retries
            out["timeouts"] = split("timeout")
            out["retries"] = split("retry")
            out["gave_up"] = split("gave_up")["total"]
        if p.rating:
            out["rate_min"], out["rate_prior"] = p.rate_min, list(p.rate_prior)
            low = [(name, j) for name in sorted(self.agents) for j in sorted(self.agents[name].watch.counts)
                   if self.agents[name].watch.low(j)]
            out["rated_down"] = {"total": len(low), "at_liars": sum(1 for _a, j in low if j in liars),
                                 "at_honest": sum(1 for _a, j in low if j not in liars)}
        if p.advert_check:
            out["adverts_rejected"] = split("advert_rejected")
        return out

    def defence_summary(self) -> dict[str, Any]:
        """Issue 20: which defences ran and what they did; with ``trim_f`` the
        graph's robustness against what W-MSR's guarantee needs."""
        p = self.params
        c = self.defence_counts
        out: dict[str, Any] = {"trim_f": p.trim_f, "trim_short": p.trim_short, "min_reviewers": p.min_reviewers,
                               "credibility": p.credibility}
        if p.trim_f:
            # updates whose μ list (holders of s) / x̄ pool had fewer than 2F+1 neighbours: no W-MSR guarantee
            out["trim"] = {"updates": c["updates"], "short_mu": c["short_mu"], "short_pool": c["short_pool"],
                           "graph": self._trim_graph()}
        if p.min_reviewers > 1:
            out["blocked_crossings"] = c["blocked_crossings"]
        if p.credibility != "off":
            out["credibility_min"] = p.credibility_min
            out["credibility_prior"] = list(p.credibility_prior)
            out["low_credibility_scores"] = c["low_credibility_scores"]
            out["dropped_evidence"] = c["dropped_evidence"]
            # each agent's view of each reviewer at the end: (agent, reviewer) pairs, lowest credibility
            creds = [credibility(*n, prior=p.credibility_prior) for name in sorted(self.agents)
                     for _j, n in sorted(self.agents[name].agreement.items())]
            out["credibility_pairs"] = len(creds)
            out["credibility_pairs_below_min"] = sum(1 for x in creds if x < p.credibility_min)
            out["credibility_lowest"] = min(creds) if creds else None
        return out

    def _trim_graph(self) -> dict[str, Any]:
        """W-MSR's guarantee under the F-local model needs a (2F+1)-robust graph
        (LeBlanc et al. 2013; under F-total, (F+1, F+1)-robust, which needs at
        least (F+1)-robust). Checked on the graph at the end of the run with
        :func:`meshsim.graphs.robustness.robustness_report`; what its budget
        does not settle is reported as 'undecided within N s'."""
        import networkx as nx

        from ...graphs.robustness import robustness_report

        F = self.params.trim_f
        G = nx.Graph()
        G.add_nodes_from(self.ctx.net.nodes)
        G.add_edges_from(self.ctx.net.links)
        rep = robustness_report(G, 2 * F, time_limit=self.params.robustness_time_limit)
        return {"needs": f"{2 * F + 1}-robust (W-MSR, F-local)", "meets": rep["f_plus_1_robust"],
                "r_robustness": rep["r_robustness"], "r_bounds": rep["r_bounds"],
                "min_degree": rep["min_degree"], "r_method": rep["r_method"]}
