"""Symphony-Coord (Guan et al. 2026, arXiv 2602.00966) on the shared execution layer.

"A decentralized multi-agent framework that transforms agent selection into
an online multi-armed bandit problem ... a two-stage dynamic beacon protocol:
(i) a lightweight candidate screening mechanism ...; (ii) an adaptive LinUCB
selector that routes subtasks based on context features derived from task
requirements and agent states, ... updated through delayed post-execution
feedback" (abstract); the MeshHeal paper runs it as "parallel plans and
voting" (Sec. 6). As modelled here:

* **Plans.** The task's entry agent coordinates it (task-local coordination).
  It writes ``plans`` (3) plans, each in its own context: one InferAbilities
  call per plan (App. B.2's planner call; sample k), giving the plan's
  ability pair.
* **Beacon screening.** For each step (ability s) of a plan the candidates
  are the agents that declared s (the coordinator and its neighbours; the
  declarations arrived in ``hello`` messages): no LLM call.
* **LinUCB selection** (Li et al. 2010, disjoint arms): each candidate agent
  is an arm with A_a = I, b_a = 0; context x = [1, one-hot task type,
  one-hot ability]; the coordinator picks argmax theta_a.x + alpha sqrt(x' A_a^-1 x)
  (``alpha`` = 1.0), the plans taking distinct agents for the same step while
  any are left ("several parallel plans by different agent chains"), so the
  first plan gets the best-ranked agents.
* **Execution.** Each plan runs as a chain (Contribute, then Finalize) with
  the shared worker calls (:mod:`.plans`).
* **Vote.** The coordinator takes the plurality of the plans' parsed final
  answers (ties at random).
* **Delayed post-vote reward.** Every agent of plan k is rewarded
  r = 1 if plan k's answer agrees with the vote, else 0, with the context it
  was selected in: A_a += x x', b_a += r x.

**Observed outcome.** Agreement with the vote — an observable signal (the
plans' parsed answers), never the gold answer. A plan with a degraded member
tends to disagree and its members rank lower, so later plans pair the
low-ranked agents together and the vote outweighs them; nothing is ever
excluded (every holder still works in some plan): no isolation, detection
delay infinite.
"""
from __future__ import annotations

import math
from typing import Annotated, Any, Generator

from pydantic import Field

from ...backends.base import CallKind
from ..execution import TaskState
from .common import Baseline, BaselineParams, plurality
from .plans import PlanAgent

__all__ = ["Symphony", "SymphonyParams", "SymphonyAgent", "LinUCB"]


class SymphonyParams(BaselineParams):
    plans: Annotated[int, Field(ge=1, le=9)] = 3  # parallel plans (assumption: an odd count >= 3 for a majority)
    alpha: Annotated[float, Field(ge=0.0, le=1e6)] = 1.0  # LinUCB exploration (assumption: Li et al. 2010's common choice)
    #: our reading of "parallel plans by different agent chains": False (default) - the plans take
    #: distinct agents for each step while any are left; True - the plans are distinct *chains*
    #: ranked by their summed UCB, so the best-ranked agents may serve several plans (sensitivity)
    share_agents: bool = False


class LinUCB:
    """Disjoint LinUCB (Li et al. 2010, Alg. 1) with A^-1 kept by Sherman-Morrison."""

    def __init__(self, d: int, alpha: float):
        self.d = d
        self.alpha = alpha
        self.Ainv: dict[str, list[list[float]]] = {}
        self.b: dict[str, list[float]] = {}
        self.n: dict[str, int] = {}

    def _arm(self, a: str) -> tuple[list[list[float]], list[float]]:
        if a not in self.Ainv:
            self.Ainv[a] = [[1.0 if i == j else 0.0 for j in range(self.d)] for i in range(self.d)]
            self.b[a] = [0.0] * self.d
            self.n[a] = 0
        return self.Ainv[a], self.b[a]

    def ucb(self, a: str, x: list[float]) -> float:
        Ainv, b = self._arm(a)
        Ax = [sum(r[j] * x[j] for j in range(self.d)) for r in Ainv]
        theta_x = sum(sum(Ainv[i][j] * b[j] for j in range(self.d)) * x[i] for i in range(self.d))
        return theta_x + self.alpha * math.sqrt(max(0.0, sum(x[i] * Ax[i] for i in range(self.d))))

    def mean(self, a: str, x: list[float]) -> float:
        Ainv, b = self._arm(a)
        return sum(sum(Ainv[i][j] * b[j] for j in range(self.d)) * x[i] for i in range(self.d))

    def update(self, a: str, x: list[float], r: float) -> None:
        Ainv, b = self._arm(a)
        Ax = [sum(row[j] * x[j] for j in range(self.d)) for row in Ainv]
        denom = 1.0 + sum(x[i] * Ax[i] for i in range(self.d))
        for i in range(self.d):
            for j in range(self.d):
                Ainv[i][j] -= Ax[i] * Ax[j] / denom  # A^-1 symmetric: x'A^-1 = (A^-1 x)'
        for i in range(self.d):
            b[i] += r * x[i]
        self.n[a] += 1


class SymphonyAgent(PlanAgent):
    method = "symphony"

    def __init__(self, *a: Any, **kw: Any):
        super().__init__(*a, **kw)
        self.abilities = sorted({s for p in self.pairs for s in p})
        self.bandit = LinUCB(1 + len(self.types) + len(self.abilities), self.params.alpha)

    def context(self, task_type: str, ability: str) -> list[float]:
        x = [1.0] + [0.0] * (len(self.types) + len(self.abilities))
        if task_type in self.types:
            x[1 + self.types.index(task_type)] = 1.0
        if ability in self.abilities:
            x[1 + len(self.types) + self.abilities.index(ability)] = 1.0
        return x

    def start(self, task) -> None:
        self.node.spawn(self._coordinate(task))

    def _best_chain(self, task, R: tuple, pool: list[str], taken: set) -> tuple[list[str], list]:
        """``share_agents``: the untaken chain with the highest summed UCB (ties at random)."""
        steps = []
        for s in R:
            cands = [a for a in pool if s in (self.K if a == self.name else self.peer_abilities.get(a, ()))]
            if not cands:
                return [], []
            x = self.context(task.type, s)
            steps.append([(a, x, self.bandit.ucb(a, x)) for a in cands])
        chains: list[list] = [[]]
        for options in steps:
            chains = [c + [o] for c in chains for o in options]
        fresh = [c for c in chains if (R, tuple(a for a, _x, _u in c)) not in taken] or chains
        keys = {id(c): (-sum(u for _a, _x, u in c), self.rnd.random()) for c in fresh}
        best = min(fresh, key=lambda c: keys[id(c)])
        return [a for a, _x, _u in best], [(a, x) for a, x, _u in best]

    def _coordinate(self, task) -> Generator[Any, Any, None]:
        p = self.params
        llm = self.llm
        reqs = [llm.request(CallKind.INFER, task, (), {"pairs": self.pairs}, sample=k) for k in range(p.plans)]
        resps = yield from llm.call_many(reqs)
        pairs = [tuple(r.fields["pair"]) if (r.error is None and r.fields.get("pair")) else tuple(self.pairs[0])
                 for r in resps]
        pool = sorted(set(self.neighbours()) | {self.name}, key=lambda a: (len(a), a))
        used: dict[str, set] = {}
        plans, picks = [], []
        taken: set = set()
        for R in pairs:
            chain, ctxs = [], []
            if p.share_agents:
                chain, ctxs = self._best_chain(task, R, pool, taken)
                if chain:
                    taken.add((R, tuple(chain)))
                    plans.append((TaskState(task=task, R=R, visits=[self.name], actions=[(self.name, "plan")]),
                                  chain))
                    picks.append(ctxs)
                continue
            for s in R:
                cands = [a for a in pool if s in (self.K if a == self.name else self.peer_abilities.get(a, ()))]
                fresh = [a for a in cands if a not in used.get(s, set())] or cands
                if not fresh:
                    chain = []
                    break
                x = self.context(task.type, s)
                keys = {a: (-self.bandit.ucb(a, x), self.rnd.random()) for a in fresh}
                a = min(fresh, key=lambda a: keys[a])
                used.setdefault(s, set()).add(a)
                chain.append(a)
                ctxs.append((a, x))
            if chain:
                plans.append((TaskState(task=task, R=R, visits=[self.name], actions=[(self.name, "plan")]), chain))
                picks.append(ctxs)
        if not plans:
            self.sink("unanswered", task=task, state=None, reason="no_candidates")
            return
        got = yield from self.run_plans(plans)
        answers = [got[k][1] if k in got else None for k in range(len(plans))]
        winner = plurality(answers, self.rnd)
        if winner is None:
            self.sink("unanswered", task=task, state=plans[0][0], reason="no_answer",
                      extra={"plans": [c for _X, c in plans]})
            return
        for k, ctxs in enumerate(picks):
            r = 1.0 if answers[k] == winner else 0.0
            for a, x in ctxs:
                self.bandit.update(a, x, r)
        k = answers.index(winner)
        self.sink("done", task=task, state=plans[k][0], output=got[k][0],
                  extra={"plans": [c for _X, c in plans], "plan_pairs": [list(X.R) for X, _c in plans],
                         "agree": [a == winner for a in answers], "plans_done": len(got)})


class Symphony(Baseline):
    name = "symphony"
    Params = SymphonyParams
    Agent = SymphonyAgent

    def method_summary(self) -> dict[str, Any]:
        return {"bandit_pulls": {a: dict(sorted(ag.bandit.n.items())) for a, ag in sorted(self.agents.items())}}
