"""SAC as the MeshHeal paper runs it: three teams, two rounds of filter-and-refine, majority.

MeshHeal Sec. 6: "SAC uses three teams with two rounds of filtering and
refinement followed by majority aggregation (Lee et al., 2026)". SAC itself
(papers/sac-2605.09076.md Sec. 4.1, Alg. 1; :mod:`meshsim.protocols.sac`) is
run among agents that each answer the whole query; under the shared
Handoff-Contribute-Finalize interface no agent can (a task needs two abilities
held by disjoint agents), so here a *team* is a chain of agents covering the
task's inferred pair, and SAC runs among the three teams:

* **Teams.** The entry agent infers the pair (InferAbilities) and forms
  ``teams`` (3) teams: for each ability, its holders (the entry and its
  neighbours, by declared abilities) shuffled and dealt one per team. Each
  team solves the task as a chain (Contribute, then Finalize); its finalizer
  is the team's *representative*.
* **Rounds** (SAC Alg. 1, ``rounds`` = 2). Each representative scores its
  own answer (s_ii = phi_i(x, r_i)), then every round broadcasts its current
  answer and text to the other representatives, scores what arrived
  receiver-side (s_ij = phi_i(x, r_j)), keeps L = those scored strictly below
  its own score, drops the min(F, |L|) lowest of L (``F`` = 1: SAC needs F
  smaller than each agent's degree, two here) — the same
  :func:`meshsim.protocols.consensus.sac_filter` SAC runs — and refines its
  answer on the retained ones **with their scores** (SAC Eq. 4,
  r_i <- M_i(x, r_i, {(r_j, s_ij)}_{j in R_i}); App. B.2: the own answer
  without its self-score and the retained answers sorted by score, highest
  first, each with its score — the prompt content
  :func:`meshsim.protocols.consensus.refine_shown` builds for SAC too), then
  rescores its own. An empty retained set keeps the current answer (SAC
  App. B.2).
* **Majority.** The entry agent takes the plurality of the three final
  answers (ties at random).

Call-level models (:mod:`meshsim.backends.fake`): phi is the App. D.1 rubric
``review`` call (reading a text and scoring it is the same mechanism as
MeshHeal's review), by the representative with its own finalize ability, so
Model-Backed MAS Evaluation gives a healthy representative the strong model;
the refine is the Mixture-of-Agents ``synthesis`` call (revising one's own
answer in the light of retained candidates is the same mechanism as
MeshHeal's Takeover synthesis), here with each candidate's score
(``candidate_scores``); a failed synthesis takes a candidate in proportion to
its shown score (an assumption of the fake; uniform is the other end). No
agent is ever excluded: detection delay infinite.

**Assumed**: teams are chains of holders dealt at random (SAC's agents each
answer alone; MeshHeal's shared interface needs two abilities); ``F`` = 1
(range 0 .. 1: F must stay below a representative's two peers); the entry's
one InferAbilities call fixes the pair for all three teams; phi and the refine
are priced as MeshHeal's review and synthesis calls (Tab. C2 prompt sizes).
"""
from __future__ import annotations

from typing import Annotated, Any, Generator, Optional

from pydantic import Field
from ...core.sim import Event

from ...core.calls import CallKind
from ...core.names import node_order
from ...net.messages import HEADER_BYTES
from ..consensus import refine_shown, sac_filter
from ..execution import Output, TaskState, answer_of, infer_pair
from .common import Baseline, BaselineParams, judge, plurality, score_of
from .plans import PlanAgent

__all__ = ["SACTeams", "SACTeamsParams", "SACTeamsAgent"]


class SACTeamsParams(BaselineParams):
    teams: Annotated[int, Field(ge=2, le=9)] = 3  # MeshHeal Sec. 6: three teams
    rounds: Annotated[int, Field(ge=0, le=10)] = 2  # MeshHeal Sec. 6: two rounds of filter-and-refine
    F: Annotated[int, Field(ge=0, le=8)] = 1  # SAC Eq. 3; must be < a representative's degree (teams - 1)


class SACTeamsAgent(PlanAgent):
    method = "sac_teams"

    params: SACTeamsParams

    def __init__(self, *a: Any, **kw: Any):
        super().__init__(*a, **kw)
        self._buf: dict[tuple[int, int], dict[str, dict]] = {}
        self._wait: dict[tuple[int, int], tuple[set, Event]] = {}
        self.node.on("sac_team", self._on_round)

    # -- the entry agent: teams and the majority --------------------------------------------
    def start(self, task) -> None:
        self.node.spawn(self._coordinate(task))

    def _coordinate(self, task) -> Generator[Any, Any, None]:
        p = self.params
        R = yield from infer_pair(self.llm, task, self.pairs)
        pool = sorted(set(self.neighbours()) | {self.name}, key=node_order)
        dealt = []
        for s in R:
            cands = [a for a in pool if s in (self.K if a == self.name else self.peer_abilities.get(a, ()))]
            if not cands:
                X = TaskState(task=task, R=R, visits=[self.name], actions=[(self.name, "infer")])
                self.sink("unanswered", task=task, state=X, reason="no_team")
                return
            self.rnd.shuffle(cands)
            dealt.append(cands)
        chains: list[list[Optional[str]]] = [[c[k % len(c)] for c in dealt] for k in range(p.teams)]
        plans = [(TaskState(task=task, R=R, visits=[self.name], actions=[(self.name, "infer")]), chain)
                 for chain in chains]
        got = yield from self.run_plans(plans, {"reps": [c[-1] for c in chains]})
        answers = [got[k][1] if k in got else None for k in range(len(plans))]
        winner = plurality(answers, self.rnd)
        if winner is None:
            self.sink("unanswered", task=task, state=plans[0][0], reason="no_answer", extra={"teams": chains})
            return
        k = answers.index(winner)
        self.sink("done", task=task, state=plans[k][0], output=got[k][0],
                  extra={"teams": chains, "agree": [a == winner for a in answers], "teams_done": len(got)})

    # -- a representative: SAC's rounds among the teams --------------------------------------
    def finish_chain(self, X: TaskState, y: Output, answer: Optional[str],
                     body: dict) -> Generator[Any, Any, tuple[Output, Optional[str]]]:
        p = self.params
        t = X.task.index
        peers = sorted({r for r in body.get("reps", ()) if r != self.name and r in self.node.links},
                       key=node_order)
        if not p.rounds or not peers:
            return y, answer
        drafts = X.Y[:-1]
        own, own_answer = y, answer
        own_score = yield from judge(self.llm, X, own, drafts)
        for rnd_i in range(1, p.rounds + 1):
            for j in peers:
                self.node.send(j, "sac_team", {"task": t, "round": rnd_i, "answer": own_answer, "text": own.text},
                               size=HEADER_BYTES + 440)
            got = yield from self._gather_round(t, rnd_i, peers)
            senders = sorted(got, key=node_order)
            if not senders:
                X.actions.append((self.name, f"sac_round{rnd_i}:nothing_received"))
                continue
            # phi_i(x, r_j): receiver-side scores, one review call per received answer
            seen = [Output(agent=j, abilities=own.abilities, action="finalize", text=got[j].get("text", ""))
                    for j in senders]
            reqs = [self.llm.request(CallKind.REVIEW, X.task, own.abilities,
                                     {"action": "finalize", "context_items": len(drafts), "output_text": o.text,
                                      "drafts": [d.text for d in drafts], "producer": o.agent}) for o in seen]
            resps = yield from self.llm.call_many(reqs)
            scores = {j: score_of(r) for j, r in zip(senders, resps)}
            tiebreak = {j: self.rnd.random() for j in senders}
            retained, dropped = sac_filter(own_score, scores, p.F, tiebreak)
            X.actions.append((self.name, f"sac_round{rnd_i}:kept={','.join(retained)}"))
            if not retained:
                continue  # R empty: keep the current answer (SAC App. B.2)
            # Eq. 4: r_i <- M_i(x, r_i, {(r_j, s_ij)}): the retained answers with the scores this
            # representative gave them, highest first (App. B.2), its own answer without its self-score
            shown = refine_shown(retained, got, scores)
            r = yield from self.llm.call(self.llm.request(
                CallKind.SYNTHESIS, X.task, own.abilities,
                {"action": "finalize", "context_items": len(drafts), "output_text": own.text,
                 "drafts": [d.text for d in drafts], "candidates": [c["text"] for c in shown],
                 "candidate_scores": [c["score"] for c in shown]}))
            new = answer_of(r)
            if r.error is None and r.text and new is not None:
                own, own_answer = own.replaced(by=self.name, text=r.text), new
            own_score = yield from judge(self.llm, X, own, drafts)
        return own, own_answer

    def _on_round(self, msg) -> None:
        p = msg.payload
        key = (p["task"], p["round"])
        d = self._buf.setdefault(key, {})
        d.setdefault(msg.src, p)
        w = self._wait.get(key)
        if w is not None and w[0] <= d.keys() and not w[1].triggered:
            w[1].succeed()

    def _gather_round(self, t: int, rnd_i: int, peers: list[str]) -> Generator[Any, Any, dict[str, dict]]:
        key = (t, rnd_i)
        d = self._buf.setdefault(key, {})
        if not set(peers) <= d.keys():
            ev = Event(self.env)
            self._wait[key] = (set(peers), ev)
            yield ev | self.env.timeout(self.params.round_timeout)
            self._wait.pop(key, None)
        for k in [k for k in self._buf if k[0] < t]:
            del self._buf[k]
        return self._buf.pop(key, {})


class SACTeams(Baseline):
    name = "sac_teams"
    Params = SACTeamsParams
    Agent = SACTeamsAgent
