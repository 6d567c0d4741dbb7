"""The MeshHeal protocol on the shared execution layer: its controllers attached, their records kept.

A module of its own, apart from the pydantic parameters (:mod:`.params`), so that the compiled build
(docs/scaling.md) compiles it: its record sink runs on every hop, review and detector update.
"""
from __future__ import annotations

from typing import Any, ClassVar, Optional

from ...core.errors import InputError, SimulationError
from ..base import Timer
from ..execution import ExecutionLayer
from ..ledger import ReviewLedger
from .agent import MeshHealAgent
from .byzantine import apply_behaviour
from .defences import credibility
from .detector import NONE, Update, make_detector
from .params import MeshHealParams
from .review import Assessment

__all__ = ["MeshHeal"]


class MeshHeal(ExecutionLayer):
    """MeshHeal on the shared execution layer (:mod:`..execution`): the harness
    there runs the stream, the models and the accounting; this class attaches
    MeshHeal's controllers and keeps the review records of App. C.5."""

    name: ClassVar[str] = "meshheal"
    Params: ClassVar[type[MeshHealParams]] = MeshHealParams
    params: MeshHealParams
    supports_degradation: ClassVar[bool] = True
    reviews_are_evidence: ClassVar[bool] = True

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
            # typed: the compiled build reads the records' fields natively (a row per review)
            a: Assessment = kw["assessment"]
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
            u: Update = kw["update"]
            cur = self._review
            if cur is None or cur["task"] != kw["task"].index or cur["agent"] != kw["agent"]:
                raise SimulationError(f"detector evidence of {kw['agent']} on task {kw['task'].index} "
                                      "without its review")  # the controller's order broke
            cur.setdefault("detector", []).append(
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
            # (n is [agree, disagree]: the unpacking never fills prior)
            creds = [credibility(*n, prior=p.credibility_prior)  # type: ignore[misc]
                     for name in sorted(self.agents)
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
