"""The pure parts of the consensus protocols SAC and CP-WBFT (papers/sac-2605.09076.md).

Roles and their models, answer formats and query streams, the SAC filter
(Eq. 2-3), the parsing of replies (App. B.1-B.2), the parameters and the
scenario checks (F-local, Def. 3.2): free of the simulator,
shared by the harness (:mod:`.consensus`) and the controllers
(:mod:`.consensus_agent`). Import them from :mod:`meshsim.protocols.consensus`.
"""
from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from typing import Annotated, Any, Optional

from pydantic import BeforeValidator, Field, field_validator

from ..core.strict import Strict

from ..core.calls import Response, TaskRef
from ..core.errors import InputError
from ..core.names import node_order
from ..core.types import parse_duration

__all__ = ["ROLES", "HONEST_ROLES", "ADVERSARIAL_ROLES", "DATASETS", "ConsensusDataset", "make_queries",
           "queries_from_file", "refine_shown", "sac_filter", "parse_score", "parse_answer", "group_of", "model_of",
           "CPWBFT_AGGREGATE", "CPWBFT_ANSWER", "ConsensusParams", "warn", "byzantine_set",
           "f_local_violations", "f_local_message"]

#: Keep in step with ``meshsim.scenario.model.Role`` (a test checks it).
ROLES = ("strong", "weak", "faulty", "adversarial", "ood", "persuasive", "equivocating", "colluding")
HONEST_ROLES = frozenset({"strong", "weak", "faulty"})
ADVERSARIAL_ROLES = frozenset({"adversarial", "ood", "persuasive", "equivocating", "colluding"})
CPWBFT_AGGREGATE = "cpwbft_aggregate"  # CallKind names are plain strings
CPWBFT_ANSWER = "cpwbft_answer"
#: the Byzantine material each replaying role fetches once per query (``sac_answer`` context)
_ATTACK = {"adversarial": "cached", "ood": "ood", "persuasive": "persuasive"}


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


#: a protocol time: a microsecond .. about 32 years (MAX_PARAM_SECONDS): a smaller one is below any
#: meaningful timescale, a larger one overflows timer arithmetic or never fires (issue 19)
_Dur = Annotated[float, BeforeValidator(parse_duration), Field(ge=1e-6, le=1e9)]
_Prob = Annotated[float, Field(ge=0.0, le=1.0)]


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


class ConsensusParams(Strict):
    """Parameters shared by SAC and CP-WBFT; every field can be set in ``protocol.params``."""

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
