"""Shared machinery of the consensus protocols SAC and CP-WBFT (papers/sac-2605.09076.md).

Both run a stream of queries; every query is a fixed number of rounds driven
by messages: each agent broadcasts its current answer to its neighbours,
collects what arrives until its round deadline (a lost or late message is
simply absent), updates its answer from what it received and its own state,
and goes on to the next round. The two protocols differ only in the update
(:mod:`.sac`: receiver-side scoring, bottom-F filter, refine; :mod:`.cpwbft`:
aggregation weighted by sender-reported confidence).

This module is the *harness* (query stream, who uses which model, records
for metrics) plus the per-agent controller skeleton and the Byzantine
behaviours. A controller reads only its own state (its answer, self-score,
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
import re
import sys
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Generator, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from simpy.events import Event

from ..core.calls import CallKind, Request, Response, TaskInfo, TaskRef
from ..core.errors import InputError
from ..net.messages import HEADER_BYTES
from ..core.names import node_order
from ..core.types import parse_duration
from .base import Protocol
from .llm import LLMClient

__all__ = ["ROLES", "HONEST_ROLES", "ADVERSARIAL_ROLES", "DATASETS", "ConsensusDataset", "make_queries", "refine_shown",
           "sac_filter", "parse_score", "parse_answer", "ConsensusParams", "ConsensusProtocol", "ConsensusAgent",
           "group_of", "CPWBFT_AGGREGATE", "CPWBFT_ANSWER"]

#: Keep in step with ``meshsim.scenario.model.Role`` (a test checks it).
ROLES = ("strong", "weak", "faulty", "adversarial", "ood", "persuasive", "equivocating", "colluding")
HONEST_ROLES = frozenset({"strong", "weak", "faulty"})
ADVERSARIAL_ROLES = frozenset({"adversarial", "ood", "persuasive", "equivocating", "colluding"})
CPWBFT_AGGREGATE = "cpwbft_aggregate"  # CallKind names are plain strings
CPWBFT_ANSWER = "cpwbft_answer"
#: the Byzantine material each replaying role fetches once per query (``sac_answer`` context)
_ATTACK = {"adversarial": "cached", "ood": "ood", "persuasive": "persuasive"}

#: a protocol time: a microsecond .. about 32 years (MAX_PARAM_SECONDS): a smaller one is below any
#: meaningful timescale, a larger one overflows timer arithmetic or never fires (issue 19)
_Dur = Annotated[float, BeforeValidator(parse_duration), Field(ge=1e-6, le=1e9)]
_Prob = Annotated[float, Field(ge=0.0, le=1.0)]


def group_of(role: str) -> str:
    """``strong`` (reliable), ``weak`` (faulty honest) or ``adversarial``."""
    if role == "strong":
        return "strong"
    if role in ("weak", "faulty"):
        return "weak"
    return "adversarial"


def model_of(role: str) -> str:
    """The model behind a role: only reliable agents run the strong model."""
    return "strong" if role == "strong" else "weak"


# ---------------------------------------------------------------------------
# datasets: answer formats (accuracies live in the backend profile)


@dataclass(frozen=True)
class ConsensusDataset:
    name: str
    description: str
    choices: tuple[str, ...] = ()  # empty: free-form numeric answers
    low: int = 0  # numeric answers: range of the ground truth
    high: int = 1000
    #: mixed-format sets: (choices, how many items of the sample have that format)
    formats: tuple[tuple[tuple[str, ...], int], ...] = ()

    @property
    def numeric(self) -> bool:
        return not self.choices and not self.formats


_ABCD = ("A", "B", "C", "D")
DATASETS: dict[str, ConsensusDataset] = {d.name: d for d in (
    ConsensusDataset("math500", "MATH-500-like: free-form numeric answers (SAC Tab. 3-4)", low=-100, high=2000),
    ConsensusDataset("math_l4", "Hendrycks MATH level 4 sample, 100 problems (SAC Tab. 1-2)", low=-100, high=2000),
    ConsensusDataset("math_l4_30", "the 30-problem MATH level 4 subset of the ablations (SAC Tab. 7-8)",
                     low=-100, high=2000),
    ConsensusDataset("aime", "AIME-2025-like: integers 0-999 (SAC Tab. 5)", low=0, high=999),
    # HMMT February 2025 answers are exact expressions (integers, fractions, radicals); the fake compares
    # answers as strings, so integer stand-ins with near-miss distractors keep what matters: one truth per query
    ConsensusDataset("hmmt", "HMMT-25-like: free-form exact answers, stood in for by integers (SAC Tab. 6)",
                     low=-100, high=2000),
    ConsensusDataset("arc", "ARC-Challenge-like: four options", _ABCD),
    ConsensusDataset("hellaswag", "HellaSwag-like: four endings", ("ending1", "ending2", "ending3", "ending4")),
    ConsensusDataset("obqa", "OpenBookQA-like: four options", _ABCD),
    ConsensusDataset("boolq", "BoolQ-like: true / false", ("true", "false")),
    ConsensusDataset("rte", "RTE-like: entailment / not_entailment", ("entailment", "not_entailment")),
    # SAC App. C.1.2, Tab. 10: the 30 sampled items by format
    ConsensusDataset("commonsense170k", "Commonsense170k sample: true/false, two options, 2-4 answers, 4 endings "
                     "(SAC Tab. 1-2, App. C.1.2)", formats=(
                         (("true", "false"), 15), (("option1", "option2"), 4), (("solution1", "solution2"), 2),
                         (("answer1", "answer2", "answer3"), 3), (("answer1", "answer2", "answer3", "answer4"), 2),
                         (("ending1", "ending2", "ending3", "ending4"), 3))),
)}


def make_queries(dataset: ConsensusDataset, count: int, rnd) -> list[TaskRef]:
    """``count`` queries with ground-truth answers drawn from the dataset's answer space."""
    out = []
    for i in range(1, count + 1):
        choices = dataset.choices
        if dataset.formats:
            choices = rnd.choices([f for f, _ in dataset.formats], weights=[w for _, w in dataset.formats])[0]
        if choices:
            truth = choices[rnd.randrange(len(choices))]
        else:
            truth = str(rnd.randint(dataset.low, dataset.high))
        out.append(TaskRef(index=i, id=f"{dataset.name}/{i}", type=dataset.name,
                           question=f"[{dataset.name} #{i}]", answer=truth, dataset=dataset.name,
                           choices=choices))
    return out


def queries_from_file(path: Any, count: int, rnd) -> list[TaskRef]:
    """``count`` distinct items of a task file (``tasks.file``) in a seeded order."""
    from ..workload.datasets import load_items, to_taskref

    items = load_items(path)
    if len(items) < count:
        raise InputError(f"task file has only {len(items)} items for {count} queries", file=str(path),
                         field="tasks.count", value=count)
    order = list(range(len(items)))
    rnd.shuffle(order)
    return [to_taskref(items[k], i) for i, k in enumerate(order[:count], start=1)]


# ---------------------------------------------------------------------------
# the SAC filter (Eq. 2-3) and reply parsing (App. B.1-B.2)


def sac_filter(self_score: float, scores: dict[str, float], F: int,
               tiebreak: Optional[dict[str, float]] = None) -> tuple[list[str], list[str]]:
    """``(retained, dropped)``: L = neighbours scored strictly below ``self_score``;
    the ``min(F, |L|)`` lowest of L are dropped (Eq. 2-3). ``retained`` is sorted
    by score, highest first. Equal scores are ordered by ``tiebreak`` (random keys
    the agent draws) and then by name, never by who sent them."""
    tb = tiebreak or {}
    key = lambda j: (scores[j], tb.get(j, 0.0), node_order(j))  # noqa: E731
    below = sorted((j for j in scores if scores[j] < self_score), key=key)
    dropped = below[:min(F, len(below))]
    gone = set(dropped)
    retained = sorted((j for j in scores if j not in gone), key=lambda j: (-scores[j], tb.get(j, 0.0),
                                                                            node_order(j)))
    return retained, dropped


_NUM = re.compile(r"([0-9]+(?:\.[0-9]+)?)")


def refine_shown(retained: list[str], got: dict[str, dict], scores: dict[str, float]) -> list[dict]:
    """What SAC's refine prompt shows of the retained neighbours (Eq. 4, App. B.2): each one's
    answer and text with the score this agent gave it, in ``retained``'s order (``sac_filter``:
    highest score first). SAC and the MeshHeal paper's SAC teams both build it here."""
    return [{"answer": got[j].get("answer"), "text": got[j].get("text", ""), "score": scores[j]} for j in retained]


def parse_score(resp: Response) -> Optional[float]:
    """The score of a phi_i reply, clipped to [0, 1]; None when it has none (App. B.1:
    the first number in the reply)."""
    v = resp.fields.get("score") if resp.fields else None
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return min(1.0, max(0.0, float(v)))
    if resp.fields and "score" in resp.fields:
        return None
    m = _NUM.search(resp.text or "")
    return min(1.0, max(0.0, float(m.group(1)))) if m else None


def parse_answer(resp: Response) -> Optional[str]:
    """The final answer of an answer / refine reply; None when none can be extracted."""
    if resp.error:
        return None
    v = resp.fields.get("answer") if resp.fields else None
    if v is not None:
        return str(v) if str(v).strip() else None
    if resp.fields and "answer" in resp.fields:
        return None
    text = (resp.text or "").strip()
    if not text:
        return None
    try:
        from ..workload.datasets.graders import extract_final

        got = extract_final(text)
    except ImportError:  # pragma: no cover
        m = re.search(r"answer\s*[:=]\s*(.+)", text, re.IGNORECASE)
        got = m.group(1).strip() if m else None
    return got or None


# ---------------------------------------------------------------------------
# parameters and scenario checks

_warned: set[str] = set()


def warn(source: Optional[str], message: str) -> None:
    """One ``warning:`` line on stderr, once per message per process (validation
    and every seed of a run would otherwise repeat it)."""
    if message not in _warned:
        _warned.add(message)
        print(f"warning: {source}: {message}" if source else f"warning: {message}", file=sys.stderr)


def byzantine_set(roles: dict[str, str]) -> set[str]:
    """B = F ∪ A: every agent that is not reliable (strong) (Def. 3.1)."""
    return {a for a, r in roles.items() if r != "strong"}


def f_local_violations(adj: dict[str, set], byz: set[str], F: int) -> dict[str, int]:
    """Agents outside B with more than F neighbours in B (Def. 3.2)."""
    out = {}
    for v in sorted(adj, key=node_order):
        if v in byz:
            continue
        c = sum(1 for u in adj[v] if u in byz)
        if c > F:
            out[v] = c
    return out


def f_local_message(viol: dict[str, int], F: int) -> str:
    items = ", ".join(f"{a} has {c}" for a, c in list(viol.items())[:5])
    more = f" (+{len(viol) - 5} more)" if len(viol) > 5 else ""
    return (f"the Byzantine set (every agent whose role is not 'strong') is not {F}-local: "
            f"{items}{more} Byzantine neighbours (> F = {F}); SAC's guarantees (Property 4.3) do not apply")


class ConsensusParams(BaseModel):
    """Parameters shared by SAC and CP-WBFT; every field can be set in ``protocol.params``."""

    model_config = ConfigDict(extra="forbid")
    F: Annotated[int, Field(ge=0)] = 3  # adversary bound: SAC drops at most F neighbours per round
    rounds: Annotated[int, Field(ge=1, le=1000)] = 6  # T
    round_deadline: _Dur = 180.0  # round t closes at query start + (t+1) x this (or when all answers are in)
    queries: Optional[Annotated[int, Field(ge=1, le=10 ** 9)]] = None  # default: tasks.count
    dataset: str = "math500"
    query_timeout: _Dur = 7200.0  # the harness moves on to the next query after this
    equivocation_answers: Annotated[int, Field(ge=2, le=1000)] = 3  # distinct lies an equivocator spreads
    adversary_confidence: _Prob = 1.0  # what Byzantine agents report to confidence-based protocols
    parse_default: _Prob = 0.5  # score used when a phi_i reply has no number (App. B.1)
    #: seconds the r-robustness MILP may take for graph.r_robustness (graphs over 16 agents)
    robustness_time_limit: Annotated[float, Field(gt=0, le=86400)] = 10.0

    @field_validator("dataset")
    @classmethod
    def _dataset(cls, v: str) -> str:
        if v not in DATASETS:
            raise ValueError(f"unknown dataset; choose one of {sorted(DATASETS)}")
        return v

    def query_count(self, tasks: Any) -> int:
        return self.queries if self.queries is not None else tasks.count

    def check(self, sc: Any, G: Any) -> None:
        if sc.backend is None:
            raise InputError(f"protocol '{sc.protocol.name}' needs a 'backend' (e.g. kind: fake_consensus)",
                             field="backend")
        if self.queries is None and sc.tasks is None:
            raise InputError("give the number of queries (or a 'tasks' stream)", field="protocol.params.queries")
        if self.queries is not None and sc.tasks is not None and sc.tasks.count != self.queries:
            raise InputError(f"differs from tasks.count ({sc.tasks.count})", field="protocol.params.queries",
                             value=self.queries)
        count = self.query_count(sc.tasks)
        limits = getattr(sc, "limits", None)
        if limits is not None and self.queries is not None and self.queries > limits.tasks:
            raise InputError(f"{self.queries} queries is above limits.tasks ({limits.tasks}); raise it (--set "
                             "limits.tasks=N) if you mean it", field="protocol.params.queries", value=self.queries)
        # budget before work: every round, each agent messages each neighbour (issue 19)
        msgs = 2 * G.number_of_edges() * self.rounds * count
        if limits is not None and msgs > limits.events:
            raise InputError(f"about {msgs:.3g} messages (2 x links x rounds x queries), above limits.events "
                             f"({limits.events}); lower rounds or queries, or raise limits.events if you mean it",
                             field="protocol.params.rounds", value=self.rounds)
        roles = dict(getattr(sc.agents, "roles", {}) or {})
        for a in roles:
            if a not in G:
                raise InputError("unknown agent", field=f"agents.roles.{a}", value=a)
        for v in sorted(G.nodes, key=node_order):
            if self.F >= G.degree(v):
                raise InputError(f"F must be smaller than every agent's degree ({v} has {G.degree(v)} "
                                 "neighbours; filtering could leave it none)", field="protocol.params.F",
                                 value=self.F)
        full = {v: roles.get(v, "strong") for v in G.nodes}
        viol = f_local_violations({v: set(G.adj[v]) for v in G.nodes}, byzantine_set(full), self.F)
        if viol:
            warn(sc.source, f_local_message(viol, self.F))


# ---------------------------------------------------------------------------
# the harness


class ConsensusProtocol(Protocol):
    """Query stream, roles and records; the per-agent work is in ``Agent``."""

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
        llm = LLMClient(self.ctx.env, self.ctx.backend, name, lambda _ab, name=name: self.model_for(name),
                        self._llm_sink, fault=lambda name=name: self._client_fault(name), tasks=self.task_ref,
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


# ---------------------------------------------------------------------------
# the per-agent controller


class ConsensusAgent:
    """One agent's controller: the round loop, message buffers and Byzantine behaviours.

    Subclasses implement :meth:`_update` (the honest protocol step) and may add
    fields to the broadcast (:meth:`_payload`).
    """

    msg_kind = "consensus"

    def __init__(self, node, params: ConsensusParams, llm: LLMClient, sink: Callable[..., None], role: str):
        self.node = node
        self.name = node.name
        self.env = node.env
        self.params = params
        self.llm = llm
        self.sink = sink  # write-only
        self.role = role
        self.members: frozenset = frozenset()  # colluding group (out-of-band knowledge of colluders)
        self.board: dict = {}  # the colluders' out-of-band channel (shared by the group)
        self.rnd = node.env.pyrandom(self.msg_kind, node.name)
        self.q: Optional[int] = None
        self.t0 = 0.0
        self.closed = -1
        self.buf: dict[tuple[int, int], dict[str, dict]] = {}
        self._wait: Optional[tuple[int, int, set, Event]] = None
        self._proc = None
        # per-query state: the current response and self-score
        self.answer: Optional[str] = None
        self.text = ""
        self.score: Optional[float] = None
        self.resp_tokens = 0
        self.lies: dict[str, Any] = {}
        self.late = 0
        #: the round whose answer the agent is working on (0: initial; t: exchange t-1): the
        #: infrastructure reads it to apply a gray failure from a given round
        self.stage = 0
        node.on(self.msg_kind, self._on_msg)

    # -- lifecycle ------------------------------------------------------------
    def start(self, task: TaskInfo) -> None:
        self.stop()
        # per-query call seeds: the same query gets the same initial draws under
        # every protocol (common random numbers for SAC vs CP-WBFT comparisons)
        self.llm._rnd = self.env.pyrandom("llm", self.name, "query", task.index)
        self._proc = self.node.spawn(self._run(task))

    def stop(self) -> None:
        if self._proc is not None and self._proc.is_alive:
            self._proc.interrupt("query over")
        self._proc = None
        self._wait = None

    # -- messages -------------------------------------------------------------
    def _on_msg(self, msg) -> None:
        p = msg.payload
        q, t = p["q"], p["t"]
        cur = self.q if self.q is not None else 0
        if q < cur or (q == cur and t <= self.closed):
            self.late += 1  # after this agent's deadline for that round: absent
            return
        d = self.buf.setdefault((q, t), {})
        if msg.src not in d:
            d[msg.src] = p
        w = self._wait
        if w is not None and w[0] == q and w[1] == t and w[2] <= d.keys() and not w[3].triggered:
            w[3].succeed()

    def _send_round(self, t: int) -> tuple[list[str], int]:
        peers = sorted(self.node.neighbors, key=node_order)
        lies = self.role in ADVERSARIAL_ROLES
        for i, peer in enumerate(peers):
            ans = self._lie_for(i, t) if lies else (self.answer, self.text)
            payload = self._payload(t, *ans)
            size = HEADER_BYTES + 24 + 4 * max(self.resp_tokens, len(str(payload.get("answer") or "")))
            self.node.send(peer, self.msg_kind, payload, size=size)
        return peers, len(peers)

    def _payload(self, t: int, answer: Optional[str], text: str) -> dict:
        """What one round's message carries: the answer and the text it came in."""
        return {"q": self.q, "t": t, "answer": answer, "text": text}

    def _collect(self, t: int, expected: list[str]) -> Generator[Any, Any, dict[str, dict]]:
        """Round t's answers: wait until every neighbour's has arrived or the round's
        deadline passes (query start + (t+1) x round_deadline: a lock-step schedule
        every agent knows, so one lost message does not push an agent's later rounds
        back); whatever came later is late, i.e. absent."""
        key = (self.q, t)
        d = self.buf.setdefault(key, {})
        left = self.t0 + (t + 1) * self.params.round_deadline - self.env.now
        if left > 0 and not set(expected) <= d.keys():
            ev = Event(self.env)
            self._wait = (self.q, t, set(expected), ev)
            yield ev | self.env.timeout(left)
            self._wait = None
        self.closed = t
        return self.buf.pop(key, {})

    # -- the query --------------------------------------------------------------
    def _run(self, task: TaskRef):
        self.q = task.index
        self.t0 = self.env.now  # the query arrived: round t closes at t0 + (t+1) x round_deadline
        self.closed = -1
        self.late = 0
        self.lies = {}
        for k in [k for k in self.buf if k[0] < task.index]:
            del self.buf[k]
        sent = received = 0
        self.stage = 0
        if self.role in HONEST_ROLES:
            yield from self._initial(task)
        else:
            yield from self._prepare_lies(task)
        self._record(0, note=None)
        for t in range(self.params.rounds):
            self.stage = t + 1
            if not self._exchanges(t):
                # the protocol has stopped for this query: the answer stands, nothing is sent
                self._record(t + 1, note="stopped")
                continue
            # a role may change between rounds (set_role): behave as the current one
            if self.role in HONEST_ROLES:
                yield from self._before_send(task, t)
            else:
                yield from self._prepare_lies(task)  # no call when this query's lies are cached
            peers, n = self._send_round(t)
            sent += n
            got = yield from self._collect(t, peers)
            received += len(got)
            if self.role in HONEST_ROLES:
                extra = yield from self._update(task, t, got)
            else:
                self.score = None
                senders = sorted(got, key=node_order)
                extra = {"received": len(got)}
                if self.role == "colluding":
                    extra["scores"] = self.collusion_scores(senders)
                if self.role == "equivocating" and "pool" in self.lies:
                    extra["sent_answers"] = {p: self._lie_for(i, t)[0] for i, p in enumerate(peers)}
            self._record(t + 1, **extra)
        self.sink("traffic", agent=self.name, q=self.q, sent=sent, received=received, late=self.late)
        self.sink("done", agent=self.name, q=self.q)

    def _record(self, t: int, **extra: Any) -> None:
        score = self.score if self.role in HONEST_ROLES else None
        self.sink("round", agent=self.name, q=self.q, t=t, role=self.role, answer=self.answer, score=score,
                  **self._record_extra(), **extra)

    def _record_extra(self) -> dict:
        """Fields the observer records with every round (CP-WBFT: the reported confidence)."""
        return {}

    def _exchanges(self, t: int) -> bool:
        """Whether round t exchanges messages (CP-WBFT as the authors run it stops after one)."""
        return True

    def _before_send(self, task: TaskRef, t: int):
        """An honest agent's step before it broadcasts in round t."""
        if self.score is None:
            yield from self._rescore(task)  # back from a Byzantine spell: score own answer

    def _set_response(self, resp: Response, answer: str) -> None:
        self.answer = answer
        self.text = resp.text or ""
        self.resp_tokens = resp.completion_tokens

    def _initial(self, task: TaskRef):
        resp = yield from self.llm.call(self.llm.request(CallKind.SAC_ANSWER, task, ()))
        ans = parse_answer(resp)
        self.answer = None
        self.text = ""
        self.resp_tokens = resp.completion_tokens
        if ans is not None:
            self._set_response(resp, ans)
        yield from self._rescore(task)

    def _score_requests(self, task: TaskRef, responses: list[dict]) -> list[Request]:
        """phi_i(x, r) calls: the prompt shows the query and the response, nothing
        else (App. B.1) -- not the scorer's own answer, nor whose response it is."""
        return [self.llm.request(CallKind.SAC_SCORE, task, (),
                                 {"response": {"answer": r.get("answer"), "text": r.get("text", "")},
                                  "context_items": 1})
                for r in responses]

    def _rescore(self, task: TaskRef):
        """s_{i->i} = phi_i(x, r_i): the same prompt with the agent's own response."""
        if self.answer is None:
            self.score = 0.0  # nothing to stand on: every neighbour outranks "no answer"
            return
        (req,) = self._score_requests(task, [{"answer": self.answer, "text": self.text}])
        resp = yield from self.llm.call(req)
        s = parse_score(resp)
        self.score = self.params.parse_default if s is None else s

    def _update(self, task: TaskRef, t: int, got: dict[str, dict]):  # pragma: no cover - abstract
        raise NotImplementedError
        yield

    # -- Byzantine behaviours (App. B.4 and ours) ------------------------------------
    def _prepare_lies(self, task: TaskRef):
        role = self.role
        if role in _ATTACK and role not in self.lies:
            resp = yield from self.llm.call(self.llm.request(CallKind.SAC_ANSWER, task, (), {"attack": _ATTACK[role]}))
            self.lies[role] = (parse_answer(resp), resp.text or "", resp.completion_tokens)
        elif role == "equivocating" and "pool" not in self.lies:
            k = self.params.equivocation_answers
            reqs = [self.llm.request(CallKind.SAC_ANSWER, task, (), {"attack": "plausible_wrong", "rank": i})
                    for i in range(k)]
            resps = yield from self.llm.call_many(reqs)
            self.lies["pool"] = [(parse_answer(r), r.text or "", r.completion_tokens) for r in resps]
        elif role == "colluding" and "agreed" not in self.lies:
            # the group's out-of-band channel: the first colluder to get here writes
            # the agreed lie for this query, the others wait for it and copy it
            entry = self.board.get(task.index)
            if entry is None:
                entry = self.board[task.index] = {"ready": Event(self.env)}
                resp = yield from self.llm.call(self.llm.request(CallKind.SAC_ANSWER, task, (),
                                                                 {"attack": "plausible_wrong", "rank": 0}))
                entry["lie"] = (parse_answer(resp), resp.text or "", resp.completion_tokens)
                entry["ready"].succeed()
            elif "lie" not in entry:
                yield entry["ready"]
            self.lies["agreed"] = entry["lie"]
        self.answer, self.text = self._public_lie()

    def _public_lie(self) -> tuple[Optional[str], str]:
        """What the Byzantine agent is recorded as answering (its first lie)."""
        key = "agreed" if self.role == "colluding" else self.role
        if key in self.lies and (self.role in _ATTACK or self.role == "colluding"):
            a, text, tok = self.lies[key]
            self.resp_tokens = tok
            return a, text
        if self.role == "equivocating" and "pool" in self.lies:
            a, text, tok = self.lies["pool"][0]
            self.resp_tokens = tok
            return a, text
        return self.answer, self.text

    def _lie_for(self, i: int, t: int) -> tuple[Optional[str], str]:
        """The answer sent to the i-th neighbour (sorted by name) in round t."""
        if self.role == "equivocating" and "pool" in self.lies:
            pool = self.lies["pool"]
            a, text, _tok = pool[(i + t) % len(pool)]
            return a, text
        return self._public_lie()

    def collusion_scores(self, senders: list[str]) -> dict[str, float]:
        """How a colluder scores: its group 1.0, everyone else 0.0."""
        return {j: 1.0 if j in self.members else 0.0 for j in senders}
