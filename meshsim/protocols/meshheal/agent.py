"""A MeshHeal agent's controller: task flow, routing, evidence, probes (Sec. 4, Alg. 1).

The controller reads only its own state (abilities, detector, routing table)
and what neighbours told it in messages: their original abilities
(``hello``), routing states and probe timers (``state``), score/shortfall
summaries (``summary``) and distance vectors (``dv``). Ground truth (is this
agent degraded? was that output correct?) lives in the infrastructure — the
model choice and the opaque output records that only backends interpret.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Generator, Optional

from ...core.calls import TaskInfo
from ...net.messages import HEADER_BYTES
from ...net.node import Node
from ...net.reliable import Reliable
from ...net.routing import DistanceVector
from ...core.sim import Deadlines, Event, randbelow, shuffle
from ...core.types import RoutingState
from ..execution import Output, TaskState, generate, infer_pair
from .defences import committee_agreement, credibility, evidence_score, msr_trim
from .routing_defences import ForwardWatch, advert_consistent
from .byzantine import Lies, rescore, route_lies, state_lie, summary_lie
from .detector import Update
from .review import Assessment, assess, serve_review

if TYPE_CHECKING:  # pragma: no cover
    from ..llm import LLMClient
    from . import MeshHealParams

NORMAL, WATCHED, ISOLATED = RoutingState.NORMAL, RoutingState.WATCHED, RoutingState.ISOLATED
_STATES = {s.value: s for s in RoutingState}
ANY = "*"  # pseudo-ability every eligible agent advertises: RawRelay heads for the nearest one

__all__ = ["MeshHealAgent", "TaskState", "Output"]


class MeshHealAgent:
    def __init__(self, node: Node, abilities: list[str], params: "MeshHealParams", llm: "LLMClient",
                 detector: Any, pairs: list[tuple[str, str]], sink: Callable[..., None]):
        self.node = node
        self.name = node.name
        self.env = node.env
        self.params = params
        self.llm = llm
        self.detector = detector
        self.pairs = pairs  # the documented vocabulary of ability pairs (InferAbilities input)
        self.sink = sink  # write-only: records for metrics, never read back
        self.K_orig = frozenset(abilities)
        self.K_sorted = tuple(sorted(self.K_orig))
        self.rnd = node.env.pyrandom("meshheal", node.name)
        self.probe_at: int | float = float("-inf")  # p_i^probe: task index of isolation / last probe
        # L_i: what neighbours told us
        self.peer_abilities: dict[str, frozenset] = {}
        self.peer_state: dict[str, RoutingState] = {}
        self.peer_probe_at: dict[str, float] = {}
        # probe_clock "local": tasks this agent has handled, and the count at
        # each neighbour's last probe/isolation advert
        self.handled = 0
        self.peer_probe_mark: dict[str, int] = {}
        # latest summaries from neighbours, indexed so that one detector update
        # costs O(holders of s), not O(neighbours x keys): μ by (T, s), x̄ by T
        self._mu_index: dict[tuple[str, str], dict[str, float]] = {}
        self._xbar_index: dict[str, dict[tuple[str, str], float]] = {}
        # issue 20 credibility: per reviewer, [agreed, disagreed] with committees this agent ran
        self.agreement: dict[str, list[int]] = {}
        self.reliable = Reliable(node, timeout=params.ack_timeout, retries=params.retries)
        self.dv = DistanceVector(node, sorted(self.K_orig | {ANY}), infinity=params.infinity,
                                 refresh=params.refresh, timeout=params.route_timeout,
                                 jitter=0.1 if params.refresh else 0.0, on_change=None)
        self._next_req = 0
        self._waiting: dict[int, tuple[Event, list]] = {}  # request id -> (reply, deadline)
        # review deadlines: nearly all are met, so they are queued lazily (meshsim.core.sim.Deadlines)
        self._deadlines = Deadlines(self.env, self._deadline)
        # Byzantine behaviours (issue 20; byzantine.py): None for an honest controller
        self.byz: Optional[Lies] = None
        # routing defences (issue 34; routing_defences.py), off by default: nothing below runs then
        if params.e2e_ack:
            self.watch: Optional[ForwardWatch] = ForwardWatch(params.e2e_timeout, params.e2e_retries,
                                                              params.rate_prior, params.rate_min)
            self._e2e_deadlines = Deadlines(self.env, self._e2e_expire)
            # task index -> the neighbours it came from, in order (a task may pass twice): acks go back to each
            self._upstream: dict[int, list[str]] = {}
            node.on("task_ack", self._on_task_ack)
        else:
            self.watch = None
        if params.advert_check:
            self.dv.check = self._advert_consistent
        # every message is handled on arrival; a handler's generator (work) runs as its own process
        node.on("hello", self._on_hello)
        node.on("state", self._on_state)
        node.on("summary", self._on_summary)
        node.on("review_rep", self._on_review_rep)
        node.on("task", self._on_task)
        node.on("probe", self._on_task)
        node.on("review_req", self._on_review_req)
        node.link_listeners.append(self._on_link)
        node.call_later(0.0, self._hello_all)

    # ------------------------------------------------------------------ state
    @property
    def state(self) -> RoutingState:
        return self.detector.state

    def _hello_all(self) -> None:
        for peer in self.node.neighbors:
            self._hello(peer)

    def _hello(self, peer: str) -> None:
        state = state_lie(self.byz, peer, sorted(self.node.links), self.state.value)
        self.reliable.send(peer, "hello", {"abilities": sorted(self.K_orig), "state": state,
                                           "probe_at": self.probe_at}, size=HEADER_BYTES + 24 + 24 * len(self.K_orig),
                          wait=False)

    def _on_link(self, peer: str, up: bool) -> None:
        if up:
            self.node.call_later(0.0, lambda: self._hello(peer))

    def _on_hello(self, msg) -> None:
        self.peer_abilities[msg.src] = frozenset(msg.payload["abilities"])
        self.peer_state[msg.src] = _STATES[msg.payload["state"]]
        self.peer_probe_at[msg.src] = msg.payload["probe_at"]

    def _on_state(self, msg) -> None:
        self.peer_state[msg.src] = _STATES[msg.payload["state"]]
        if msg.payload["probe_at"] != self.peer_probe_at.get(msg.src):
            self.peer_probe_mark[msg.src] = self.handled
        self.peer_probe_at[msg.src] = msg.payload["probe_at"]

    def _on_summary(self, msg) -> None:
        src = msg.src
        p = msg.payload
        T = p["type"]
        key = (T, p["ability"])
        mus = self._mu_index.get(key)
        if mus is None:
            mus = self._mu_index[key] = {}
        if p["mu"] is None:
            mus.pop(src, None)
        else:
            mus[src] = p["mu"]
        xb = self._xbar_index.get(T)
        if xb is None:
            xb = self._xbar_index[T] = {}
        if p["xbar"] is None:
            xb.pop((src, key[1]), None)
        else:
            xb[(src, key[1])] = p["xbar"]

    def _advertise_state(self) -> None:
        """Routing-state advertisement to direct neighbours (sent on change)."""
        order = sorted(self.node.links)
        for peer in self.node.neighbors:
            self.reliable.send(peer, "state", {"state": state_lie(self.byz, peer, order, self.state.value),
                                               "probe_at": self.probe_at}, size=HEADER_BYTES + 24, wait=False)

    def _apply_state(self, old: RoutingState, task_index: int) -> None:
        new = self.state
        if new is ISOLATED:
            # K_i := ∅ for ordinary work: withdraw every ability (and ANY) from routing.
            self.probe_at = task_index
            self.dv.set_held(())
        elif old is ISOLATED:
            self.dv.set_held(sorted(self.K_orig | {ANY}))
        self._advertise_state()
        self.sink("state", agent=self.name, task=task_index, old=old.value, new=new.value)

    # ------------------------------------------------------------- neighbours
    def eligible_reviewers(self, H: frozenset) -> list[str]:
        """Normal direct neighbours holding every ability in H (Sec. 4.2.1)."""
        links = self.node.links
        return sorted(j for j, ks in self.peer_abilities.items()
                      if H <= ks and self.peer_state.get(j) is NORMAL and j in links and links[j].up)

    def _probe_target(self, M: set, t: int) -> Optional[str]:
        """A probe-eligible isolated neighbour whose original abilities meet M (Alg. 1, line 14).

        Eligible ``probe_every`` tasks after its isolation or last probe, counted
        on the task stream (``probe_clock: stream``, the six-agent setting) or
        as tasks this agent handled since it heard of them (``local``: at scale
        the stream runs 96x faster than any one neighbourhood).
        """
        if ISOLATED not in self.peer_state.values():
            return None  # no isolated neighbour (nearly always): the same answer, without the search below
        every = self.params.probe_every
        links = self.node.links
        if self.params.probe_clock == "local":
            h = self.handled
            mark = self.peer_probe_mark
            ready = (lambda j: h - mark.get(j, h) >= every)
        else:
            ready = (lambda j: t - self.peer_probe_at.get(j, t) >= every)
        cands = sorted(j for j, st in self.peer_state.items()
                       if st is ISOLATED and ready(j)
                       and self.peer_abilities.get(j, frozenset()) & M and j in links and links[j].up)
        if not cands:
            return None
        return cands[randbelow(self.rnd, len(cands))]

    # ------------------------------------------------------------ task flow
    def start(self, task: TaskInfo) -> None:
        """The task enters the network here (entry agent, Alg. 1 line 4)."""
        self.sink("hop", task=task.index, agent=self.name)
        self.node.start(self._work(TaskState(task=task)))

    def _on_task(self, msg) -> Generator:
        X: TaskState = msg.payload
        # the delivery, as the observer sees it (issue 34): before any behaviour of this controller
        self.sink("hop", task=X.task.index, agent=self.name)
        X.probe = msg.kind == "probe"
        if self.watch is not None:
            ups = self._upstream.setdefault(X.task.index, [])
            if msg.src not in ups:
                ups.append(msg.src)
        if self.byz is not None and self.byz.hole is not None:
            return self._hole(X)
        return self._work(X)

    def _hole(self, X: TaskState) -> Generator[Any, Any, None]:
        """A routing liar's treatment of a task that reached it over a link:
        ``black`` drops it (nobody is told; the task times out), ``grey`` answers
        a ``hole_rate`` share itself with its own model, unreviewed, and handles
        the rest honestly."""
        lies = self.byz
        assert lies is not None
        t = X.task.index
        if lies.hole == "black":
            self.sink("byz_route", agent=self.name, task=t, outcome="drop")
            return
        if self.rnd_byz.random() < lies.hole_rate:
            X.visits.append(self.name)
            self.handled += 1
            if X.R is None:
                X.R = yield from infer_pair(self.llm, X.task, self.pairs)
            M = frozenset(set(X.R) - X.C)
            y = yield from generate(self.llm, self.name, self.K_orig, "finalize", M, X)
            X.actions.append((self.name, "finalize"))
            X.Y.append(y)
            X.P.append(self.name)
            self.sink("byz_route", agent=self.name, task=t, outcome="corrupt")
            self.sink("done", task=X.task, state=X, output=y)
            self._ack_upstream(t)  # as an honest finalizer would: a grey hole looks honest
            return
        self.sink("byz_route", agent=self.name, task=t, outcome="pass")
        yield from self._work(X)

    # ------------------------------------------------------------ Byzantine
    @property
    def rnd_byz(self) -> Any:
        """The liar's own stream (grey-hole draws): honest streams stay untouched."""
        return self.env.pyrandom("byzantine", self.name)

    def set_lies(self, lies: Optional[Lies]) -> None:
        """Turn this controller Byzantine (or honest again, ``None``) and push the
        new adverts at once: states, distance vectors and, for a summary
        poisoner, a summary of every (T, s) it has evidence on."""
        old = self.byz
        self.byz = lies if lies is not None and lies.active else None
        byz = self.byz
        if byz is not None and (byz.route or byz.route_all is not None):
            self.dv.lie = lambda s, byz=byz: route_lies(byz, [s]).get(s)
        else:
            self.dv.lie = None
        # re-advertise whatever was or now is a lie (the truth again for an ``honest`` event)
        what = {k for lz in (old, byz) if lz is not None for k, on in
                (("state", lz.state is not None), ("dv", bool(lz.route) or lz.route_all is not None),
                 ("summary", lz.poisons_summaries)) if on}
        if what:
            self.node.call_later(0.0, lambda: self._readvertise(what))

    def _readvertise(self, what: set) -> None:
        if "state" in what:
            self._advertise_state()
        if "dv" in what:
            self.dv.advertise_all()
        if "summary" in what:
            for key in sorted(self.detector.scores):
                self._send_summary(key)

    def _work(self, X: TaskState) -> Generator[Any, Any, None]:
        t = X.task.index
        X.visits.append(self.name)
        self.handled += 1
        p = self.params
        if self.state is ISOLATED and not X.probe:
            X.actions.append((self.name, "raw_relay"))
            yield from self._forward(X, raw=True)
            return
        if X.R is None:
            # InferAbilities: one LLM call choosing a documented pair (App. B.2).
            X.R = yield from infer_pair(self.llm, X.task, self.pairs)
            X.actions.append((self.name, "infer"))
        M = set(X.R) - X.C
        if not X.probe and t > p.warmup:  # warm-up: ordinary routing only, no probe
            j = self._probe_target(M, t)
            if j is not None:
                self.peer_probe_at[j] = t
                self.peer_probe_mark[j] = self.handled
                X.actions.append((self.name, f"probe->{j}"))
                ok = yield from self._send_state(j, X, "probe")
                if ok:
                    return
        probe = X.probe
        X.probe = False
        H = frozenset(self.K_orig & M)
        if probe:
            self.probe_at = t
            self._advertise_state()
        if not H:
            X.actions.append((self.name, "handoff"))
            yield from self._forward(X)
            return
        action = "contribute" if H < M else "finalize"
        y = yield from generate(self.llm, self.name, self.K_orig, action, H, X)
        if p.review:
            a: Assessment = yield from assess(self, y, H, X, probe)
        else:
            a = Assessment(q=None, output=y)
        y_hat = a.output
        X.actions.append((self.name, action + ("+takeover" if a.takeover else "") + ("+probe" if probe else "")))
        self.sink("review", agent=self.name, task=X.task, action=action, abilities=sorted(H), assessment=a,
                  probe=probe, output=y)
        if a.q is not None:
            self._update_evidence(X.task, H, a.q, probe, a)
        if action == "contribute":
            X.Y.append(y_hat)
            X.C |= H
            X.P.append(self.name)
            X.leg_hops = 0
            yield from self._forward(X)
        else:
            X.Y.append(y_hat)
            X.P.append(self.name)
            self.sink("done", task=X.task, state=X, output=y_hat)
            self._ack_upstream(t)

    # ---------------------------------------------------------------- routing
    def _forward(self, X: TaskState, raw: bool = False) -> Generator[Any, Any, None]:
        """NextHop / RawRelay: sample a missing ability uniformly, follow D_i(s) (Sec. 4.1)."""
        p = self.params
        X.leg_hops += 1
        if X.leg_hops > p.route_limit:
            self.sink("unanswered", task=X.task, state=X, reason="route_limit")
            return
        if X.R is None:
            targets = [ANY]  # isolated entry agent: head for the nearest eligible agent
        else:
            missing = sorted(set(X.R) - X.C)
            s = missing[randbelow(self.rnd, len(missing))]
            targets = [s] + [m for m in missing if m != s]
        tried: set[str] = set()
        for s in targets:
            hops = self.dv.next_hops(s)
            shuffle(self.rnd, hops)
            if self.watch is not None and self.params.rating:
                hops = self.watch.route_around(hops, self._alternatives(s), X.visits)
            for nxt in hops:
                if nxt in tried:
                    continue
                tried.add(nxt)
                ok = yield from self._send_state(nxt, X, "task")
                if ok:
                    return
        self.sink("unanswered", task=X.task, state=X, reason="no_route")

    def _send_state(self, dst: str, X: TaskState, kind: str) -> Generator[Any, Any, bool]:
        ok = yield self.reliable.send(dst, kind, X.copy(), size=HEADER_BYTES + X.size_bytes())
        if ok and self.watch is not None:
            self._e2e_watch(X, dst)
        return bool(ok)

    # ---------------------------------------------------- routing defences (issue 34)
    def _e2e_watch(self, X: TaskState, dst: str) -> None:
        """Wait for the task's end-to-end ack from ``dst``: deeper forwarders
        (more agents already visited) wait less, so the one next to a drop
        retries first (routing_defences.ForwardWatch.timeout)."""
        t = X.task.index
        w = self.watch
        assert w is not None  # only called with end-to-end acks on
        old = w.pending.get(t)
        if old is not None:  # the task came back through here: the newer forward is the one to watch
            Deadlines.cancel(old.deadline)
        tried = (old.tried | {dst}) if old is not None else {dst}
        w.watch(t, X.copy(), dst, tried, self._e2e_deadlines.add(w.timeout(len(X.visits) - 1), t))

    def _ack_upstream(self, t: int) -> None:
        """The task is finished here, or its ack came back: pass the ack to
        the neighbour the task came from (the reverse of its route)."""
        if self.watch is None:
            return
        links = self.node.links
        for up in self._upstream.pop(t, ()):
            if up in links and links[up].up:
                self.reliable.send(up, "task_ack", {"task": t}, size=HEADER_BYTES + 8, wait=False)

    def _on_task_ack(self, msg) -> None:
        t = msg.payload["task"]
        assert self.watch is not None  # the handler is registered only with a watch
        p = self.watch.acked(t, msg.src)
        if p is None:
            return  # not waiting (already acked, retried elsewhere, or never forwarded it)
        Deadlines.cancel(p.deadline)
        self._ack_upstream(t)

    def _e2e_expire(self, t: int) -> None:
        if not self.node.alive:
            return
        assert self.watch is not None  # deadlines are set only with a watch
        p = self.watch.expired(t)
        if p is None:
            return
        self.sink("route_defence", what="timeout", agent=self.name, peer=p.dst, task=t)
        if p.retries >= self.params.e2e_retries:
            self.sink("route_defence", what="gave_up", agent=self.name, peer=p.dst, task=t)
            return
        self.node.start(self._e2e_retry(p))

    def _alternatives(self, s: str) -> list[str]:
        """Up neighbours that advertise a finite distance to ``s``, nearest first
        (name order among equals): where a retry or a re-route may go when the
        shortest next hops are tried or rated down."""
        links = self.node.links
        inf = self.params.infinity
        cands = [(vec.get(s, inf), j) for j, vec in self.dv.nbr.items()
                 if vec.get(s, inf) < inf and j in links and links[j].up]
        return [j for _d, j in sorted(cands, key=lambda e: (e[0], len(e[1]), e[1]))]

    def _e2e_retry(self, p) -> Generator[Any, Any, None]:
        """No ack in time: send the task (as it left here) to another next hop."""
        X = p.state
        assert self.watch is not None  # a retry comes from the watch's deadline
        missing = sorted(set(X.R) - X.C) if X.R is not None else [ANY]
        tried = set(p.tried) | set(self._upstream.get(X.task.index, ()))  # never back where it came from
        for s in missing:
            for nxt in self.watch.route_around(self._alternatives(s), [], X.visits) if self.params.rating \
                    else self._alternatives(s):
                if nxt in tried:
                    continue
                tried.add(nxt)
                ok = yield self.reliable.send(nxt, "task", X.copy(), size=HEADER_BYTES + X.size_bytes())
                if ok:
                    self.sink("route_defence", what="retry", agent=self.name, peer=nxt, task=X.task.index)
                    t = X.task.index
                    wait = self._e2e_deadlines.add(self.watch.timeout(len(X.visits) - 1), t)
                    self.watch.watch(t, X, nxt, tried, wait, retries=p.retries + 1)
                    return
        self.sink("route_defence", what="gave_up", agent=self.name, peer=None, task=X.task.index)

    def _advert_consistent(self, peer: str, ability: str, d: int) -> bool:
        ok = advert_consistent(self.peer_abilities.get(peer), ability, d, ANY)
        if not ok:
            self.sink("route_defence", what="advert_rejected", agent=self.name, peer=peer, task=None)
        return ok

    # --------------------------------------------------------------- evidence
    def _update_evidence(self, task: TaskInfo, H: frozenset, q: float, probe: bool,
                         a: Optional[Assessment] = None) -> None:
        """UpdateEvidence + RelativeUpdate (App. B.1): one detector update per s in H."""
        links = self.node.links
        state = self.peer_state
        p = self.params
        act = task.index > p.warmup  # warm-up (App. C.2): collect evidence, change no state
        defended = a is not None and p.defended
        if defended:
            assert a is not None  # (defended implies it)
            ev = self._evidence(q, a, task.index)
            if ev is None:
                return  # no credible reviewer behind this score: no evidence
            q, weight, witnesses = ev
        for s in sorted(H):
            key = (task.type, s)
            # P_{i,T,s} and C_{i,T}: only neighbours currently normal (and still linked)
            mus = [mu for j, mu in self._mu_index.get(key, {}).items()
                   if state.get(j) is NORMAL and j in links]
            pool = [x for (j, _s), x in self._xbar_index.get(task.type, {}).items()
                    if state.get(j) is NORMAL and j in links]
            if p.trim_f:  # W-MSR (issue 20): drop the F highest and F lowest neighbours' summaries
                mus, pool = self._trimmed(key)
            old = self.state
            if defended:
                self.detector.note_evidence(witnesses, weight)
            u: Update = self.detector.update_lists(task.type, s, q, mus, pool, act)
            if u.blocked:
                self.sink("defence", what="blocked", agent=self.name, task=task.index)
            self.sink("evidence", agent=self.name, task=task, ability=s, q=q, update=u, probe=probe, act=act)
            key = (task.type, s)
            self._send_summary(key)
            if u.changed:
                self._apply_state(old, task.index)

    def _trimmed(self, key: tuple[str, str]) -> tuple[list[float], list[float]]:
        """P_{i,T,s}'s μ and C_{i,T}'s x̄ after W-MSR trimming by neighbour (defences.msr_trim)."""
        p = self.params
        links = self.node.links
        state = self.peer_state
        mus, full_mu = msr_trim([(j, mu) for j, mu in self._mu_index.get(key, {}).items()
                                 if state.get(j) is NORMAL and j in links], p.trim_f, p.trim_short)
        pool, full_pool = msr_trim([(j, x) for (j, _s), x in self._xbar_index.get(key[0], {}).items()
                                    if state.get(j) is NORMAL and j in links], p.trim_f, p.trim_short)
        self.sink("defence", what="trim", full_mu=full_mu, full_pool=full_pool)
        return mus, pool

    def _evidence(self, q: float, a: Assessment, task_index: int) -> Optional[tuple[float, float, frozenset]]:
        """Issue 20 defences at the producer: the score's reviewers (for
        ``min_reviewers``) and its credibility-adjusted value and weight. Only
        this agent's own committees and the scores its reviewers sent it."""
        p = self.params
        done = bool(a.committee and a.round2)  # a committee that ran to the end decided q
        members = a.reviewers[1:] if done else []
        if done:
            entries = list(zip(members, a.round2))
        else:
            entries = [(a.reviewers[0], q)] if a.reviewers else []
        if p.credibility == "off" or not entries:
            return q, 1.0, frozenset(j for j, _s in entries)
        for j, agreed in committee_agreement(a.reviewers[0] if a.reviewers else None, a.q0, members,
                                             a.round1, a.q, p.tau_to):
            c = self.agreement.get(j)
            if c is None:
                c = self.agreement[j] = [0, 0]
            c[0 if agreed else 1] += 1
        cred = {j: credibility(*self.agreement.get(j, (0, 0)), prior=p.credibility_prior)  # type: ignore[misc]
                for j, _s in entries}  # (the unpacked pair is agree, disagree: prior is never filled by it)
        ev = evidence_score(entries, cred, p.credibility, p.credibility_min)
        low = sum(1 for j, _s in entries if cred[j] < p.credibility_min)
        if low:
            self.sink("defence", what="low_credibility", scores=low, dropped=ev is None, agent=self.name,
                      task=task_index)
        return ev
    def _send_summary(self, key: tuple[str, str]) -> None:
        """Score-and-shortfall summary of (T, s) to direct neighbours (Sec. 4.2.2);
        a summary poisoner sends each neighbour its own lie."""
        summ = self.detector.summary(key)
        T, s = key
        if self.byz is None or not self.byz.poisons_summaries:
            self.node.broadcast("summary", {"type": T, "ability": s, "mu": summ.mu,
                                            "xbar": summ.xbar, "n": summ.n}, size=HEADER_BYTES + 48)
            return
        order = sorted(self.node.links)
        for peer in self.node.neighbors:
            mu, xbar = summary_lie(self.byz, peer, order, summ.mu, summ.xbar)
            self.node.send(peer, "summary", {"type": T, "ability": s, "mu": mu, "xbar": xbar, "n": summ.n},
                           size=HEADER_BYTES + 48)

    # ------------------------------------------------------ review service
    def ask(self, reviewer: str, req: dict, y: Output, H: frozenset, X: TaskState) -> Generator[Any, Any, Optional[dict]]:
        (rep,) = yield from self.ask_all([reviewer], [req], y, H, X)
        return rep

    def ask_all(self, reviewers: list[str], reqs: list[dict], y: Output, H: frozenset,
                X: TaskState) -> Generator[Any, Any, list[Optional[dict]]]:
        """Send review requests (reliably) and wait for the replies or the deadline."""
        events = []
        for reviewer, req in zip(reviewers, reqs):
            self._next_req += 1
            rid = self._next_req
            ev = Event(self.env)
            body = dict(req, id=rid, task=X.task, abilities=sorted(H), action=y.action, context_items=len(X.Y),
                        output_text=y.text, drafts=[o.text for o in X.Y], producer=self.name)
            self.reliable.send(reviewer, "review_req", body, size=HEADER_BYTES + 600 + 400 * len(X.Y), wait=False)
            self._waiting[rid] = (ev, self._deadlines.add(self.params.review_timeout, rid))
            events.append(ev)
        results = []
        for ev in events:
            res = yield ev
            results.append(res)
        return results

    def _deadline(self, rid: int) -> None:
        if self.node.alive:
            self._expire(rid)

    def _expire(self, rid: int) -> None:
        w = self._waiting.pop(rid, None)
        if w is not None and not w[0].triggered:
            w[0].succeed(None)

    def _on_review_rep(self, msg) -> None:
        w = self._waiting.pop(msg.payload["id"], None)
        if w is None:
            return
        ev, deadline = w
        Deadlines.cancel(deadline)  # answered: the deadline passes with nothing to do
        if not ev.triggered:
            ev.succeed(msg.payload["result"])

    def _on_review_req(self, msg) -> Generator:
        return self._serve(msg.src, msg.payload)

    def _serve(self, src: str, req: dict) -> Generator[Any, Any, None]:
        result = yield from serve_review(self, req)
        if self.byz is not None:
            result = rescore(self.byz, req["mode"], req.get("producer"), result)
        self.reliable.send(src, "review_rep", {"id": req["id"], "result": result}, size=HEADER_BYTES + 300,
                           wait=False)

    def sink_record(self, kind: str, task_index: int, agent: str) -> None:
        self.sink(kind, task_index=task_index, agent=agent)
