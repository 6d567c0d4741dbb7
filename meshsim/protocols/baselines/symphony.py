"""Symphony-Coord (Guan et al. 2026, arXiv 2602.00966) as its released code runs, on the shared execution layer.

Source: the authors' repository ``guanzhaoyang86-lab/symphony2.0`` (read, not
copied): ``symphony.py`` (``SymphonyOrchestrator``, "Path-1"), ``core/linucb_selector.py``
(``GlobalLinUCB``, ``build_x``), ``core/capability.py`` (``CapabilityManager.match``),
``agents/agent.py`` (``get_dynamic_state``) and the authors' BBH runner
``run_path1_bbh_3deepseek.py`` (its defaults). The MeshHeal paper runs Symphony
as "parallel plans and voting" (Sec. 6) with "the authors' released
implementation" (App. B.4): that is the orchestrator's **planner mode**
(``plan_k > 1``; the runner's ``--plan-k`` default is 3), not its
single-chain multi-CoT mode. Per mechanism:

* **Coordinator.** The task's entry agent plays the orchestrator for its task
  (task-local coordination); its candidates are itself and its neighbours,
  with the abilities they declared in ``hello`` messages.
* **Planners** (``_plan_chains_v1`` / ``_select_planning_agents``). ``plans``
  (3) planners each write one plan: the agents declaring a ``planning``
  capability, else the first ``plans`` agents of the registry — no agent here
  declares one, so the first ``plans`` candidates in registry order. Each planner makes one InferAbilities call with its own
  model (App. B.2's planner call; a remote planner gets a ``plan_req`` and
  answers ``plan_rep`` with the ability pair it inferred); a plan that does
  not come back is skipped, and with none the coordinator plans alone (the
  code's single fallback chain). ``planners: coordinator`` (sensitivity) has
  the coordinator write every plan.
* **Shortlist** (``_find_suitable_agents``, ``_select_agent_dynamic``). For each
  step (ability s) every candidate gets a similarity: the best
  ``difflib.SequenceMatcher`` ratio between s and one of its declared
  abilities, rounded to 3 places (``CapabilityManager.match``; 1.0 for a
  holder). Candidates are ranked by similarity (ties in registry order) and
  the top ``top_l`` (3, the orchestrator's default; the runner passes 32,
  more than its three agents, i.e. all of them) are shortlisted; within one
  plan an agent already used by an earlier step is skipped while fewer
  agents were used than are shortlisted.
* **Global LinUCB** (``GlobalLinUCB``). One model per coordinator shared by
  every candidate (not one per arm): A = l2 I + sum x x', b = sum r x,
  UCB(x) = x' A^-1 b + beta_t sqrt(x' A^-1 x) with
  beta_t = alpha sqrt(d log(1 + t/l2) + 2 log(1/delta)) + sqrt(l2) S after t
  updates. The context is ``build_x``: x = [1, similarity, load,
  latency / 2 s, prior success, available], scaled to unit norm. The
  shortlisted candidate with the highest UCB is picked; on equal UCB the
  first in shortlist order (the code keeps the first strictly larger score;
  ``tie_break: random`` is a sensitivity). Each step's agent is picked when
  the step is reached, so the model has every earlier update.
* **Dynamic state.** Path-1 reads each agent's ``get_dynamic_state()``; nothing
  on that path ever changes it (in-flight count, latency EMA and reputation
  are only updated on the ISEP message path), so every candidate reports its
  initial state: load 0, latency 500 ms, prior success (``reputation``) 0.5,
  available. The same constants are used here (:data:`PATH1_STATE`): the
  candidates' contexts differ only in similarity.
* **Execution.** Each plan runs as a chain (Contribute, then Finalize) with
  the shared worker calls (:mod:`.plans`); the plans run in parallel.
* **Step reward** (``_execute_one_subtask_beacon``). After each step:
  r = 1{the reply has text} - ``latency_penalty`` sqrt(min(1, round trip /
  ``latency_scale``)) for that step's context.
* **Weighted vote** (``_run_plan_chain_v1``, ``_weighted_vote``). A plan's
  weight is the mean similarity of its steps' agents; each plan votes its
  parsed final answer (a plan without one votes its own text) with that
  weight; the answer with the largest total wins, ties going to the answer
  that appeared first. The returned output is the winning plan with the
  largest weight (first on ties).
* **Winner bonus.** Every step of every plan that voted for the winner is
  updated once more with reward ``win_bonus`` (0.5). The code's optional
  correctness bonus needs the gold answer and is 0 by default; it is not
  modelled (a deployed network has no gold answer).

**Cost.** The risk guard (extra CoT samples and a re-vote on unstable
outputs) belongs to the non-planner mode and the authors' runner disables it
(``enable_risk_guard=False``): nothing in planner mode repeats work, so the
cost per task does not grow after degradation (the MeshHeal paper reports
86k -> 115k; the released planner mode has no mechanism for it). The runner's
dynamic selection is a flag (``--use-dynamic``, on in its documented example);
off, each step takes the first shortlisted agent, which with Path-1's
constant state is the same pick the LinUCB's tie-break makes here.

**Assumed** (numbers are profile-free protocol parameters with ranges):
``top_l`` 3 (range 1 .. all candidates: the orchestrator's default vs. the
runner's 32); the coordinator is the entry agent (Path-1 has one central
orchestrator); the registry order — the order agents registered in, which
decides every tie above — is drawn once per run from the named stream
``symphony/registry`` (``registry: random``; no source says who registers
first in this setting: the authors' runner registers three identical agents;
``registry: name``, the earlier reading, gave every step to the first agents
by name, issue 34); a step's latency is the
simulated round trip the coordinator measures (the code measures wall time
of the agent call). Nothing is excluded: no isolation, detection delay
infinite. Tokens: Symphony's planner prompt is priced as InferAbilities (the
fake has no separate planner call).
"""
from __future__ import annotations

import difflib
import functools
import math
from typing import Annotated, Any, Generator, Literal, Optional, cast

from pydantic import BeforeValidator, Field
from ...core.sim import Event

from ...core.names import node_order
from ...net.messages import HEADER_BYTES
from ...core.types import parse_duration
from ..execution import Output, TaskState, infer_pair
from .common import Baseline, BaselineParams
from .plans import PlanAgent

__all__ = ["Symphony", "SymphonyParams", "SymphonyAgent", "GlobalLinUCB", "similarity", "context_vector",
           "weighted_vote", "PATH1_STATE"]

#: what every candidate reports on the released Path-1 (``Agent._init_dynamic_state`` defaults, never
#: updated there): (load, latency in seconds, prior success, available)
PATH1_STATE = (0.0, 0.5, 0.5, True)


class SymphonyParams(BaselineParams):
    plans: Annotated[int, Field(ge=1, le=9)] = 3  # plan_k: run_path1_bbh_3deepseek.py --plan-k default
    top_l: Annotated[int, Field(ge=1, le=1000)] = 3  # SymphonyOrchestrator(topL=3); the runner passes 32
    alpha: Annotated[float, Field(ge=0.0, le=1e6)] = 1.0  # linucb_alpha (orchestrator and runner default)
    l2: Annotated[float, Field(gt=0.0, le=1e6)] = 1.0  # linucb_l2 (lambda)
    delta: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.05  # GlobalLinUCB default confidence
    S: Annotated[float, Field(ge=0.0, le=1e6)] = 1.0  # GlobalLinUCB default bound on ||theta||
    win_bonus: Annotated[float, Field(ge=-1e6, le=1e6)] = 0.5  # SymphonyOrchestrator(win_bonus=0.5)
    latency_penalty: Annotated[float, Field(ge=0.0, le=1e6)] = 0.2  # SymphonyOrchestrator(latency_penalty=0.2)
    latency_scale: Annotated[float, BeforeValidator(parse_duration), Field(gt=0.0, le=1e9)] = 2.0  # 2000 ms
    #: who writes the plans: the first ``plans`` candidates (the code's registry rule) or the coordinator
    planners: Literal["registry", "coordinator"] = "registry"
    #: equal UCB: the first in shortlist order (the code) or at random (sensitivity)
    tie_break: Literal["order", "random"] = "order"
    #: the registry's order, which decides equal similarities, equal UCBs and the planners (the code
    #: keeps the order agents registered in): drawn once per run from the named stream
    #: ``symphony/registry`` (no source says who registers first here; issue 34), or name order
    #: (``name``: the earlier reading, under which degraded A3 and A5 never got a step; a sensitivity)
    registry: Literal["random", "name"] = "random"


# ---------------------------------------------------------------------------------------------
# the mechanisms, as pure functions


def similarity(declared: Any, requirement: str) -> float:
    """``CapabilityManager.match``: the best SequenceMatcher ratio between the
    requirement and one declared tag (lower case), rounded to 3 places."""
    return _similarity(frozenset(str(tag).lower() for tag in declared), requirement.lower())


@functools.lru_cache(maxsize=4096)
def _similarity(tags: frozenset, req: str) -> float:
    # a pure function of a handful of ability names, asked once per candidate per step: cached
    best = 0.0
    for tag in tags:
        best = max(best, difflib.SequenceMatcher(None, tag, req).ratio())
    return round(best, 3)


def context_vector(sim: float, load: float, latency: float, prior: float, available: bool,
                   latency_scale: float = 2.0) -> list[float]:
    """``build_x``: [1, similarity, load, latency / scale, prior success, available],
    each clipped to [0, 1], scaled to unit norm when longer than 1."""
    def clip(v: float) -> float:
        return max(0.0, min(1.0, float(v)))

    x = [1.0, clip(sim), clip(load), clip(max(0.0, latency) / max(1e-9, latency_scale)), clip(prior),
         1.0 if available else 0.0]
    n = math.sqrt(sum(v * v for v in x))
    return [v / n for v in x] if n > 1.0 else x


def weighted_vote(keys: list[str], weights: list[float]) -> Optional[str]:
    """``_weighted_vote``: the key with the largest summed weight; a tie goes to the
    key that appeared first."""
    if not keys:
        return None
    score: dict[str, float] = {}
    for k, w in zip(keys, weights):
        score[k] = score.get(k, 0.0) + float(w)
    best = None
    for k, s in score.items():  # insertion order: the first maximum wins, as max() does
        if best is None or s > score[best]:
            best = k
    return best


class GlobalLinUCB:
    """One linear model for every candidate (``GlobalLinUCB``): A^-1 by Sherman-Morrison."""

    def __init__(self, d: int, l2: float = 1.0, alpha: float = 1.0, delta: float = 0.05, S: float = 1.0):
        self.d, self.l2, self.alpha, self.delta, self.S = d, l2, alpha, delta, S
        self.Ainv = [[(1.0 / l2) if i == j else 0.0 for j in range(d)] for i in range(d)]
        self.b = [0.0] * d
        self.t = 0

    def _mv(self, v: list[float]) -> list[float]:
        return [sum(r[j] * v[j] for j in range(self.d)) for r in self.Ainv]

    def theta(self) -> list[float]:
        return self._mv(self.b)

    def beta(self) -> float:
        t = max(1, self.t)
        return (self.alpha * math.sqrt(self.d * math.log(1.0 + t / self.l2) + 2.0 * math.log(1.0 / self.delta))
                + math.sqrt(self.l2) * self.S)

    def ucb(self, x: list[float]) -> float:
        th = self.theta()
        Ax = self._mv(x)
        var = max(0.0, sum(a * b for a, b in zip(x, Ax)))
        return sum(a * b for a, b in zip(th, x)) + self.beta() * math.sqrt(var)

    def update(self, x: list[float], r: float) -> None:
        for i in range(self.d):
            self.b[i] += r * x[i]
        Ax = self._mv(x)
        denom = 1.0 + sum(a * b for a, b in zip(x, Ax))
        if denom > 1e-12:
            for i in range(self.d):
                for j in range(self.d):
                    self.Ainv[i][j] -= Ax[i] * Ax[j] / denom
        self.t += 1


# ---------------------------------------------------------------------------------------------
# the controller


class SymphonyAgent(PlanAgent):
    method = "symphony"

    params: SymphonyParams

    def __init__(self, *a: Any, **kw: Any):
        super().__init__(*a, **kw)
        p = self.params
        self.bandit = GlobalLinUCB(6, l2=p.l2, alpha=p.alpha, delta=p.delta, S=p.S)
        self.pulls: dict[str, int] = {}
        self._registry: dict[str, tuple] = {}
        self._steps: dict[tuple[int, int], dict[int, tuple[str, list[float], float]]] = {}
        self._plan_waits: dict[tuple[int, int], Event] = {}
        self.node.on("plan_req", self._on_plan_req)
        self.node.on("plan_rep", self._on_plan_rep)

    def start(self, task) -> None:
        self.node.spawn(self._coordinate(task))

    def pool(self) -> list[str]:
        """The coordinator's candidates in registry order: itself and its neighbours."""
        return sorted(set(self.neighbours()) | {self.name}, key=self.registry_key)

    def registry_key(self, a: str) -> tuple:
        """Where ``a`` stands in the registry. ``registry: random``: one order for the whole run
        (the code has one registry), the same at every coordinator: each agent's place is a draw of
        the run seed's stream ``symphony/registry/<agent>``, computed without advancing any stream,
        so it does not depend on who asks first, nor on the names' order."""
        if self.params.registry == "name":
            return node_order(a)
        key = self._registry.get(a)
        if key is None:
            draw = int(self.env.seed_sequence("symphony", "registry", a).generate_state(2, dtype="uint64")[0])
            key = self._registry[a] = (draw, *node_order(a))
        return key

    def declared(self, a: str) -> frozenset:
        return self.K if a == self.name else self.peer_abilities.get(a, frozenset())

    def dynamic_state(self, a: str) -> tuple[float, float, float, bool]:
        """What candidate ``a`` reports: Path-1's never-updated initial state (:data:`PATH1_STATE`)."""
        return PATH1_STATE

    # -- planning ---------------------------------------------------------------------------
    def _plans(self, task) -> Generator[Any, Any, list[tuple]]:
        p = self.params
        if p.planners == "coordinator":
            planners = [self.name] * p.plans
        else:
            pool = self.pool()
            planners = [pool[k % len(pool)] for k in range(p.plans)]
        got: dict[int, tuple] = {}

        def one(k: int, who: str) -> Generator[Any, Any, None]:
            if who == self.name:
                got[k] = yield from infer_pair(self.llm, task, self.pairs, sample=k)
                return
            ev = Event(self.env)
            self._plan_waits[(task.index, k)] = ev
            ok = yield self.reliable.send(who, "plan_req", {"task": task, "sample": k}, size=HEADER_BYTES + 600)
            if ok:
                res = yield ev | self.env.timeout(p.round_timeout)
                if ev in res and ev.value:
                    got[k] = tuple(ev.value)
            self._plan_waits.pop((task.index, k), None)

        procs = [self.node.spawn(one(k, who)) for k, who in enumerate(planners)]
        yield self.env.all_of(procs)
        if not got:  # the code's fallback: one chain when no plan parsed
            got[0] = yield from infer_pair(self.llm, task, self.pairs)
        return [(got[k], planners[k]) for k in sorted(got)]

    def _on_plan_req(self, msg) -> Generator:
        return self._plan_for(msg.src, msg.payload["task"], int(msg.payload["sample"]))

    def _plan_for(self, coordinator: str, task, k: int) -> Generator[Any, Any, None]:
        R = yield from infer_pair(self.llm, task, self.pairs, sample=k)
        X = TaskState(task=task, R=R)  # only for the message size
        self.reliable.send(coordinator, "plan_rep", {"task": task.index, "sample": k, "pair": list(R)},
                           size=HEADER_BYTES + X.size_bytes())

    def _on_plan_rep(self, msg) -> None:
        ev = self._plan_waits.get((msg.payload["task"], msg.payload["sample"]))
        if ev is not None and not ev.triggered:
            ev.succeed(msg.payload.get("pair"))

    # -- the coordinator ---------------------------------------------------------------------
    def _coordinate(self, task) -> Generator[Any, Any, None]:
        p = self.params
        planned = yield from self._plans(task)
        unpicked: list[Optional[str]] = [None]  # each plan's agents, picked as its steps are reached
        plans = [(TaskState(task=task, R=R, visits=[self.name], actions=[(self.name, f"plan_by:{who}")]),
                  unpicked * len(R)) for R, who in planned]
        for k in range(len(plans)):
            self._steps[(task.index, k)] = {}
        got = yield from self.run_plans(plans)
        steps = {k: self._steps.pop((task.index, k), {}) for k in range(len(plans))}
        done = [k for k in range(len(plans)) if k in got]
        if not done:
            self.sink("unanswered", task=task, state=plans[0][0], reason="no_answer",
                      extra={"plans": [c for _X, c in plans]})
            return
        # a plan's weight: the mean similarity of its steps' agents (_run_plan_chain_v1)
        weights = {k: sum(s[2] for s in steps[k].values()) / max(1, len(plans[k][1])) for k in done}
        keys = cast(dict[int, str], {k: got[k][1] if got[k][1] is not None else f"text:{got[k][0].text}"
                                     for k in done})
        win = weighted_vote([keys[k] for k in done], [weights[k] for k in done])
        best = max((k for k in done if keys[k] == win), key=lambda k: (weights[k], -k))
        for k in done:  # the winner bonus, for every step of every plan that voted for the winner
            if keys[k] == win:
                for _i, (_a, x, _sim) in sorted(steps[k].items()):
                    self.bandit.update(x, p.win_bonus)
        self.sink("done", task=task, state=plans[best][0], output=got[best][0],
                  extra={"plans": [c for _X, c in plans], "plan_pairs": [list(X.R or ()) for X, _c in plans],
                         "planners": [who for _R, who in planned],
                         "weights": [round(weights.get(k, 0.0), 4) for k in range(len(plans))],
                         "agree": [k in done and keys[k] == win for k in range(len(plans))],
                         "plans_done": len(done)})

    def pick_step(self, k: int, i: int, X: TaskState, chain: list) -> Generator[Any, Any, Optional[str]]:
        """``_select_agent_dynamic``: shortlist the top-L by similarity, then the global LinUCB."""
        p = self.params
        assert X.R is not None  # a plan's state carries its pairs
        s = X.R[i]
        pool = self.pool()
        sims = {a: similarity(self.declared(a), s) for a in pool}
        top = sorted(pool, key=lambda a: -sims[a])[:p.top_l]  # stable: registry order on equal similarity
        used = {a for a in chain[:i] if a is not None}
        cands = []
        for a in top:
            if a in used and len(used) < len(top):
                continue
            load, lat, prior, avail = self.dynamic_state(a)
            if not avail:
                continue
            cands.append((a, context_vector(sims[a], load, lat, prior, avail, p.latency_scale)))
        if not cands:  # the code's fallback: the first available shortlisted agent, else the first
            first = next((a for a in top if self.dynamic_state(a)[3]), top[0] if top else None)
            if first is None:
                return None
            load, lat, prior, avail = self.dynamic_state(first)
            cands = [(first, context_vector(sims[first], load, lat, prior, avail, p.latency_scale))]
        scores = [self.bandit.ucb(x) for _a, x in cands]
        if p.tie_break == "random":
            keyed = {j: (-scores[j], self.rnd.random()) for j in range(len(cands))}
            j = min(keyed, key=lambda j: keyed[j])
        else:
            j = 0
            for m in range(1, len(cands)):
                if scores[m] > scores[j]:
                    j = m
        a, x = cands[j]
        step = self._steps.get((X.task.index, k))
        if step is not None:
            step[i] = (a, x, sims[a])
        self.pulls[a] = self.pulls.get(a, 0) + 1
        return a
        yield

    def on_step(self, k: int, i: int, agent: str, X: TaskState, y: Optional[Output], elapsed: float) -> None:
        """The step's base update: 1 for a reply with text, minus the latency penalty."""
        p = self.params
        step = self._steps.get((X.task.index, k), {}).get(i)
        if step is None:
            return
        ok = y is not None and bool(y.text)
        r = (1.0 if ok else 0.0) - p.latency_penalty * math.sqrt(min(1.0, max(0.0, elapsed) / p.latency_scale))
        self.bandit.update(step[1], r)


class Symphony(Baseline):
    name = "symphony"
    Params = SymphonyParams
    Agent = SymphonyAgent

    def method_summary(self) -> dict[str, Any]:
        return {"bandit_pulls": {a: dict(sorted(ag.pulls.items(), key=lambda kv: node_order(kv[0])))
                                 for a, ag in sorted(self.agents.items())},
                "bandit_updates": {a: ag.bandit.t for a, ag in sorted(self.agents.items())},
                "bandit_theta": {a: [round(v, 4) for v in ag.bandit.theta()] for a, ag in sorted(self.agents.items())}}
