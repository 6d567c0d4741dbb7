"""The MeshHeal fake's profile: what each model does, as validated numbers (``backends/fake-*.yaml``).

The schema of :class:`FakeProfile` and its loading; the backend that draws
from it is :mod:`.fake`, whose docstring explains every distribution. Every
number carries its source (``sources:``, ``meshsim backends explain``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import Field, model_validator

from ..core.errors import InputError
from ..core.strict import Strict
from .profiles import load_validated

__all__ = ["FakeProfile", "ModelSpec", "MeshModel", "TokenSpec", "ReviewSpec", "ReviewerScores", "CommitteeSpec",
           "TakeoverSpec", "CLASSES", "VERDICTS", "INCOHERENT", "compile_table", "score_distribution",
           "load_fake_profile", "load_fake"]

P = Annotated[float, Field(ge=0.0, le=1.0)]
#: a non-negative scale (seconds, score spreads): at most 1e6, so no draw or sum overflows (issue 19)
NonNeg = Annotated[float, Field(ge=0.0, le=1e6)]
INCOHERENT = frozenset({"incoherent"})
#: App. D.1 score anchors: "1.00 half is sound / 0.50 cannot verify or weak /
#: 0.25 concrete error / 0.00 unusable garbage"
VERDICTS = ("sound", "unverified", "error", "garbage")


class ModelSpec(Strict):
    """A model's identity and simulated latency (shared with the consensus fake)."""

    id: str
    ttft: NonNeg = 0.5
    rate: Annotated[float, Field(ge=1e-3, le=1e9)] = 60.0  # tokens/s: a slower one never finishes a reply


class MeshModel(ModelSpec):
    """One model's behaviour in every MeshHeal call."""

    #: P(a call derives its half soundly), per dataset name ("default" as fallback)
    skill: dict[str, P]
    #: absolute skill per dataset and task type (``backends fit`` writes these); wins where given
    skill_by_type: dict[str, dict[str, P]] = {}
    garbage: P = 0.0  # P(a failed derivation reads as unusable garbage: feature 'incoherent')
    infer: P = 0.9  # P(InferAbilities picks the documented true pair)
    #: P(a selection call picks an agent holding a needed ability named in its prompt)
    select: P = 0.9
    #: P(a summary of a committed final answer keeps that answer)
    summary_keep: P = 1.0
    #: baselines, issue 21 (assumptions; the shipped profiles state 1 with range 0 .. 1 in sources/ranges):
    #: P(a failed synthesis whose prompt shows each candidate's score - SAC teams' refine, Eq. 4 -
    #: takes a candidate in proportion to its score rather than uniformly)
    follow_scores: P = 1.0
    #: P(a selection whose prompt shows each candidate's success rate - AgentNet's router - picks
    #: in proportion to it rather than uniformly)
    follow_rates: P = 1.0
    #: P(a call committing a final answer, reading an unsound draft, re-derives that draft's half
    #: itself instead of building on it) - issue 21; the re-derivation then succeeds through the
    #: same copula as every derivation (a half its writer failed is a hard one). 0: a broken draft
    #: always breaks the final (the rule before issue 21; profiles that state nothing keep it)
    repair: P = 0.0

    @model_validator(mode="before")
    @classmethod
    def _moved_review(cls, data: Any) -> Any:
        if isinstance(data, dict) and "review" in data:
            raise ValueError(
                "review: a reviewer's behaviour moved to review.scores.<model>.<class>, P(verdict | class): "
                "uncritical u, flag_error f, sees_garbage g become unverifiable: {sound: u, error: (1-u) f, "
                "unverified: rest}, garbage: {garbage: g, otherwise: unverifiable} (docs/backends.md)")
        return data


#: what a reviewer can tell about the output it reviews (App. D.1's rubric re-derives the half)
CLASSES = ("sound", "wrong", "unverifiable", "garbage")
#: one score distribution: verdict (score bin) -> probability, or "rest"; key "otherwise" -> a class
ScoreTable = dict[str, Any]


class ReviewerScores(Strict):
    """P(rubric verdict | class of the output under review), for one reviewer model.
    Defaults are the rubric applied without error (an explicit profile states every class)."""

    sound: ScoreTable = {"sound": 1.0}
    wrong: ScoreTable = {"error": 1.0}
    unverifiable: ScoreTable = {"unverified": 1.0}
    garbage: ScoreTable = {"garbage": 1.0}
    #: classes whose distribution differs for Finalize outputs (App. D.1's Finalize card)
    finalize: dict[Literal["sound", "wrong", "unverifiable", "garbage"], ScoreTable] = {}


def compile_table(table: Any, where: str) -> tuple[tuple[tuple[str, float], ...], Optional[str]]:
    """((verdict, probability) in listed order, class taking the remaining mass or None).

    Raises ValueError naming ``where`` when the table is not a distribution."""
    if not isinstance(table, dict) or not table:
        raise ValueError(f"{where}: a score distribution is a mapping verdict -> probability")
    common = table.get("common", 0.0)
    if not isinstance(common, (int, float)) or isinstance(common, bool) or not 0.0 <= common <= 1.0:
        raise ValueError(f"{where}.common: a share in [0, 1] (got {common!r})")
    other = table.get("otherwise")
    if other is not None and other not in CLASSES:
        raise ValueError(f"{where}.otherwise: must name a class, one of {list(CLASSES)} (got {other!r})")
    rest = [k for k, v in table.items() if v == "rest"]
    entries: list[tuple[str, Any]] = []
    for k, v in table.items():
        if k in ("otherwise", "common"):
            continue
        if k not in VERDICTS:
            raise ValueError(f"{where}.{k}: not a rubric verdict, one of {list(VERDICTS)}")
        if v != "rest" and (not isinstance(v, (int, float)) or isinstance(v, bool) or not 0.0 <= v <= 1.0):
            raise ValueError(f"{where}.{k}: a probability in [0, 1] or 'rest' (got {v!r})")
        entries.append((k, v))
    if len(rest) > 1 or (rest and other is not None):
        raise ValueError(f"{where}: at most one 'rest', and not together with 'otherwise'")
    total = sum(float(v) for _, v in entries if v != "rest")
    if total > 1.0 + 1e-9:
        raise ValueError(f"{where}: probabilities sum to {total:g} > 1")
    if not rest and other is None and abs(total - 1.0) > 1e-6:
        raise ValueError(f"{where}: probabilities sum to {total:g}, not 1 (give one verdict 'rest', "
                         "or 'otherwise: <class>')")
    if other is not None and not entries and total == 0:
        raise ValueError(f"{where}: 'otherwise' alone: name the class's own verdicts")
    out = tuple((k, max(0.0, 1.0 - total) if v == "rest" else float(v)) for k, v in entries)
    return out, other


class ReviewSpec(Strict):
    #: score level of each verdict bin: App. D.1's anchors; ``unverified`` is where a
    #: reviewer that cannot verify puts its non-committal score
    anchors: dict[Literal["sound", "unverified", "error", "garbage"], P] = {
        "sound": 1.0, "unverified": 0.5, "error": 0.25, "garbage": 0.0}
    noise: NonNeg = 0.05  # sd of one call's score around its anchor
    granularity: Annotated[float, Field(ge=0, le=0.5)] = 0.05
    persist: P = 0.0  # share of a review call's non-difficulty variance that is the reviewer's lasting view
    #: P(verdict | reviewer model, class of the output), per model role (strong, weak)
    scores: dict[str, ReviewerScores] = {}

    @model_validator(mode="after")
    def _tables(self) -> "ReviewSpec":
        for role, rs in self.scores.items():
            for cls in CLASSES:
                compile_table(getattr(rs, cls), f"review.scores.{role}.{cls}")
            for cls, t in rs.finalize.items():
                compile_table(t, f"review.scores.{role}.finalize.{cls}")
            for action in ("contribute", "finalize"):
                for cls in CLASSES:  # 'otherwise' chains must end
                    seen = [cls]
                    nxt = _table_of(rs, action, cls)[1]
                    while nxt is not None:
                        if nxt in seen:
                            raise ValueError(f"review.scores.{role}: 'otherwise' loops: {' -> '.join(seen + [nxt])}")
                        seen.append(nxt)
                        nxt = _table_of(rs, action, nxt)[1]
        return self


def _raw_table(rs: ReviewerScores, action: str, cls: str) -> dict[str, Any]:
    t = rs.finalize.get(cls) if action == "finalize" else None  # type: ignore[call-overload]
    return t if t is not None else getattr(rs, cls)


def _table_of(rs: ReviewerScores, action: str, cls: str):
    return compile_table(_raw_table(rs, action, cls), cls)


class CommitteeSpec(Strict):
    agree: NonNeg = 0.3  # round-1 scores closer than this: each member keeps its verdict
    hint: P = 0.5  # a right explanation's help: skill -> 1 - (1 - skill)(1 - hint)
    mislead: P = 0.0  # P(a wrong explanation is adopted)


class TakeoverSpec(Strict):
    """Synthesis, by the replaced output's action: a committed final answer
    anchors a synthesis more than an intermediate half does."""

    #: help from each sound candidate to the synthesizer's own re-derivation
    hint: dict[Literal["contribute", "finalize"], P] = {"contribute": 0.5, "finalize": 0.5}
    #: the synthesizer anchors on the original output and restates it (else it re-derives)
    keep: dict[Literal["contribute", "finalize"], P] = {"contribute": 0.5, "finalize": 0.5}
    #: P(a sound original is recognised as sound and kept), before any anchoring
    recognize: P = 0.0


class TokenSpec(Strict):
    prompt: Annotated[int, Field(ge=0)]
    completion: Annotated[int, Field(ge=0)]
    per_context: Annotated[int, Field(ge=0)] = 0  # prompt tokens per context item (earlier outputs, ...)
    spread: NonNeg = 0.25  # lognormal sigma of completion length


class FakeProfile(Strict):
    kind: Literal["fake"] = "fake"
    name: str
    description: str = ""
    models: dict[str, MeshModel]
    #: P(a committed final answer is right although its chain is broken), per dataset
    guess: dict[str, P] = {"default": 0.0}
    difficulty_rho: P = 0.5
    #: sd, on the probit scale, of how much harder or easier a task type is than its
    #: dataset's average (the same for every model: a property of the benchmark)
    type_spread: NonNeg = 0.0
    #: False: a Finalize's outcome is composed from its own half, the drafts and the
    #: route. True (profiles fitted from real runs, where an observer graded final
    #: texts): skill is the probability that the committed final answer is right.
    graded: bool = False
    review: ReviewSpec = ReviewSpec()
    committee: CommitteeSpec = CommitteeSpec()
    takeover: TakeoverSpec = TakeoverSpec()
    tokens: dict[str, TokenSpec]
    #: where each number comes from (meshsim.backends.provenance; `meshsim backends explain`)
    sources: dict[str, str] = {}
    #: plausible [low, high] of each assumption and why (meshsim.backends.provenance; `meshsim uncertainty`)
    ranges: dict[str, Any] = {}


def load_fake_profile(path: str | Path) -> FakeProfile:
    path = Path(path)
    prof = load_validated(path, FakeProfile)
    for role in ("strong", "weak"):
        if role not in prof.models:
            raise InputError(f"profile needs a '{role}' model", file=str(path), field="models")
        if "default" not in prof.models[role].skill:
            raise InputError("needs a 'default' skill", file=str(path), field=f"models.{role}.skill")
        if role not in prof.review.scores:
            raise InputError(f"profile needs the '{role}' reviewer's score distributions", file=str(path),
                             field=f"review.scores.{role}")
    return prof


def score_distribution(review: ReviewSpec, role: str, action: str, cls: str) -> dict[str, float]:
    """P(verdict) of one reviewer model reviewing one class of output (``otherwise`` resolved)."""
    rs = review.scores.get(role) or ReviewerScores()
    out: dict[str, float] = {}
    mass, seen = 1.0, set()
    while cls is not None and cls not in seen:
        seen.add(cls)
        entries, nxt = _table_of(rs, action, cls)
        for k, p in entries:
            out[k] = out.get(k, 0.0) + mass * p
        mass *= max(0.0, 1.0 - sum(p for _, p in entries))
        cls = nxt
    return out

def load_fake(path: Path, overrides: Optional[dict[str, Any]] = None) -> FakeProfile:
    """A MeshHeal fake profile, with ``overrides`` (dotted profile path -> value)
    applied before validation. The file is checked on its own first, so an
    error names the file when the file is at fault and ``overrides.<path>``
    when an override is."""
    prof = load_fake_profile(path)
    if not overrides:
        return prof
    prof = load_validated(path, FakeProfile, overrides)
    for role in ("strong", "weak"):
        if role not in prof.models:
            raise InputError(f"profile needs a '{role}' model", field="overrides", value=overrides)
        if "default" not in prof.models[role].skill:
            raise InputError(f"models.{role}.skill needs a 'default' skill", field="overrides", value=overrides)
    return prof
