"""Estimate a fake-backend profile from recorded calls (``meshsim backends fit``).

Input: a cassette (JSONL written by the replay backend) or a run folder whose
scenario recorded one (``backend: {kind: replay, cassette: ...}``; the
cassette is looked up as written, beside the run folder and in it), or any
cassette files inside the folder.

What is estimated (everything else is taken from a base profile,
``fake-default`` unless ``--base`` names another):

* ``models.<role>.skill.<dataset>``: the rate of right graded answers
  (Finalize, SAC answers and refinements, Takeover outputs of Finalize), and
  ``skill_by_type`` per task type, shrunk toward the role's rate; per-ability
  rates are reported as comments. Contribute halves cannot be graded alone.
* ``models.<role>.infer``: how often InferAbilities chose the true pair.
* ``review.scores.<role>``: the review-score distribution per reviewer model
  and output class, from initial reviews and committee round 1 of outputs
  whose outcome the cassette knows (with real endpoints: Finalize outputs
  only). Each parsed score is binned to its nearest rubric anchor (App. D.1).
  A review of a right output is of class ``sound`` or, when the reviewer's
  own re-derivation failed, ``unverifiable``; of a wrong output, ``wrong`` or
  ``unverifiable`` (the chance of a failed re-derivation follows from the
  reviewer's skill and ``difficulty_rho``). Which one a review was is not
  recorded, so the ``unverifiable`` distribution (and, given Contribute
  reviews too, the error mass of the Finalize ``sound`` table) is the
  maximum-likelihood mixture fit (EM); ``sound`` and ``wrong`` keep the
  rubric's verdicts. ``garbage.garbage`` is the share of a weak model's wrong
  outputs scored at the 0.00 anchor. Also the score granularity.
* ``tokens.<kind>``: mean prompt and completion tokens, the lognormal spread
  of completions and the prompt growth per context item.
* ``models.<role>``: model id, and ``ttft`` / ``rate`` from a least-squares
  fit of wall time on completion tokens (wall time includes queueing at the
  server, so fit from runs with little contention).

Every fitted number's source says ``recording: <cassette>`` and how many calls
it came from; the rest keep the base profile's numbers and sources.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import yaml

from ..core.errors import InputError, RunFolderError
from ..core.calls import CallKind
from ..core.files import load_yaml, read_output_yaml
from .replay import read_cassette, text_digest

__all__ = ["find_cassettes", "load_entries", "fit_profile", "write_profile", "tally", "Tally", "Fit", "FITTERS"]

#: calls whose graded outcome is drawn with the model's accuracy in the fake
_GRADED = {CallKind.FINALIZE, CallKind.SAC_ANSWER, CallKind.SAC_REFINE}


def _is_cassette(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            first = f.readline()
    except OSError:
        return False
    return first.startswith(b"{") and b'"key"' in first and b'"response"' in first


def find_cassettes(source: str | Path) -> list[Path]:
    p = Path(source)
    if p.is_file():
        if not _is_cassette(p):
            raise InputError("not a cassette (JSONL lines with 'key' and 'response')", file=str(p))
        return [p]
    if not p.is_dir():
        raise InputError("no such cassette or run folder", file=str(p))
    found: list[Path] = []
    resolved = p / "scenario.resolved.yaml"
    if resolved.is_file():
        try:
            sc = read_output_yaml(resolved) or {}
        except RunFolderError:
            sc = {}
        spec = sc.get("backend") or {}
        cas = spec.get("cassette") if spec.get("kind") == "replay" else None
        if cas:
            for base in (Path.cwd(), p, p.parent, p.parent.parent):
                c = Path(cas) if Path(cas).is_absolute() else base / cas
                if c.is_file():
                    found.append(c)
                    break
    found += [f for f in sorted(p.rglob("*.jsonl")) if _is_cassette(f) and f not in found]
    if not found:
        raise InputError("no cassette found in the run folder (record the run through a "
                         "'kind: replay' backend, or give the cassette path)", file=str(p))
    return found


def load_entries(paths: Iterable[Path]) -> list[dict[str, Any]]:
    by_key: dict[str, dict[str, Any]] = {}
    for path in paths:
        entries, _ = read_cassette(path)
        for e in entries:
            by_key[e["key"]] = e
    return list(by_key.values())


def _rate(k: int, n: int) -> float:
    """Maximum-likelihood rate, kept inside (0, 1): the fit describes the
    recorded run itself, so no prior pulls small samples toward 1/2."""
    return round(min(0.999, max(0.001, k / n)), 4) if n else 0.5


def _sd(xs: list[float], floor: float) -> float:
    return round(max(floor, statistics.stdev(xs)), 4) if len(xs) > 1 else floor


def _linfit(xs: list[float], ys: list[float]) -> Optional[tuple[float, float]]:
    if len(xs) < 3 or len(set(xs)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def _conditional_failure(skill: float, rho: float) -> tuple[float, float]:
    """P(a reviewer's re-derivation fails | the producer's failed) and (| it succeeded),
    for two derivations of the same skill correlated ``rho`` (the fake's copula)."""
    from statistics import NormalDist

    skill = min(0.999, max(0.001, skill))
    t = NormalDist().inv_cdf(skill)
    if rho <= 0:
        return 1 - skill, 1 - skill
    from scipy.stats import multivariate_normal

    both_fail = float(multivariate_normal(mean=[0, 0], cov=[[1, rho], [rho, 1]]).cdf([-t, -t]))
    p_fail = 1 - skill
    return both_fail / p_fail, (p_fail - both_fail) / skill


def _nearest_bin(anchors: dict[str, float], score: float) -> str:
    return min(anchors, key=lambda k: (abs(anchors[k] - score), k))


def _fit_unverifiable(obs: list[tuple[str, str, str]], phi_r: float, phi_w: float, e0: float, fit_e: bool,
                      iters: int = 300) -> tuple[dict[str, float], float]:
    """EM for the unverifiable class's verdict distribution U (and the error mass e of
    the Finalize sound table when ``fit_e``). A review of a right output is from the
    sound class (verdict 'sound'; a Finalize one 'error' with probability e) with
    probability 1 - phi_r, else from U; of a wrong output from the wrong class
    ('error') with probability 1 - phi_w, else from U."""
    bins = ("sound", "unverified", "error", "garbage")
    U = {b: 0.25 for b in bins}
    e = e0
    rows = [(b, act, v) for b, act, v in obs if b in ("correct", "incorrect")]
    for _ in range(iters):
        acc = {b: 1e-9 for b in bins}
        e_num = e_den = 0.0
        for bucket, act, v in rows:
            if bucket == "correct":
                own = (e if v == "error" else (1 - e) if v == "sound" else 0.0) if act == "finalize" else \
                    (1.0 if v == "sound" else 0.0)
                a, c = phi_r * U[v], (1 - phi_r) * own
            else:
                a, c = phi_w * U[v], (1 - phi_w) * (1.0 if v == "error" else 0.0)
            r = a / (a + c) if a + c > 0 else 1.0
            acc[v] += r
            if bucket == "correct" and act == "finalize":
                e_den += 1 - r
                e_num += (1 - r) * (v == "error")
        tot = sum(acc.values())
        U = {b: acc[b] / tot for b in bins}
        if fit_e and e_den > 0:
            e = min(0.999, e_num / e_den)
    return U, e


def _base(base: Optional[str]) -> dict[str, Any]:
    from .profiles import find_profile

    path = find_profile(base or "fake-default", None)
    data = load_yaml(path, "profile")
    if data.get("kind") != "fake":
        raise InputError("the base profile must be a fake profile", file=str(path))
    return data


@dataclass
class Tally:
    """What one pass over the recorded calls counts: each fitter reads its part.

    Counters are ``[right, n]``; every table keeps its keys in the order the
    calls first showed them (the profile's keys and report lines follow it)."""

    #: graded outcomes: a real model (an observer grades its text), or a fake run in graded mode
    real: bool
    #: dataset -> role -> graded answers (Finalize, SAC answers and refinements)
    skill: dict[str, dict[str, list[int]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(_pair)))
    #: (dataset, task type, role) and (ability, role) -> graded answers
    skill_by_type: dict[tuple[str, str, str], list[int]] = field(default_factory=lambda: defaultdict(_pair))
    by_ability: dict[tuple[str, str], list[int]] = field(default_factory=lambda: defaultdict(_pair))
    #: role -> InferAbilities calls that chose the true pair
    infer: dict[str, list[int]] = field(default_factory=lambda: defaultdict(_pair))
    #: (reviewer role, output bucket, action) -> round-1 review scores of outputs whose outcome is known
    scores: dict[tuple[str, str, str], list[float]] = field(default_factory=lambda: defaultdict(list))
    #: call kind -> (prompt tokens, completion tokens, context items)
    tokens: dict[str, list[tuple[int, int, int]]] = field(default_factory=lambda: defaultdict(list))
    #: role -> (completion tokens, wall seconds)
    latency: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    #: role -> the model id the endpoint was called with
    ids: dict[str, str] = field(default_factory=dict)
    errors: int = 0


def _pair() -> list[int]:
    return [0, 0]


def _count(counter: list[int], right: bool) -> None:
    counter[0] += int(right)
    counter[1] += 1


def tally(entries: list[dict[str, Any]]) -> Tally:
    """Count the recorded calls once, for every fitter."""
    t = Tally(real=any(str(e.get("backend", "")).startswith("openai")
                       or ((e.get("response") or {}).get("fields") or {}).get("graded") for e in entries))
    # what each produced text turned out to be (graded, or a fake's own outcome),
    # and whether a weak model wrote it: how a review's target is known offline
    produced: dict[str, tuple[Optional[bool], bool]] = {}
    for e in entries:
        rq, rs = e.get("request") or {}, e.get("response") or {}
        if rq.get("kind") in (CallKind.CONTRIBUTE, CallKind.FINALIZE, CallKind.TAKEOVER_CANDIDATE,
                              CallKind.SYNTHESIS) and rs.get("text") and not rs.get("error"):
            c = rs.get("correct")
            produced[text_digest(rs["text"])] = (c if isinstance(c, bool) else None, rq.get("model") == "weak")
    for e in entries:
        rq, rs = e.get("request") or {}, e.get("response") or {}
        kind, role = rq.get("kind"), "weak" if rq.get("model") == "weak" else "strong"
        ctx = rq.get("context") or {}
        task = rq.get("task") or {}
        call = e.get("call") or {}
        if isinstance(call.get("model"), str):
            t.ids.setdefault(role, call["model"])
        if rs.get("error"):
            t.errors += 1
            continue
        correct = rs.get("correct")
        fields = rs.get("fields") or {}
        # Takeover candidates are left out: they are written for the outputs reviews
        # flagged, i.e. for the hard questions, so their rate understates a model's skill
        if kind in _GRADED and isinstance(correct, bool):
            ds = task.get("dataset") or "default"
            _count(t.skill[ds][role], correct)
            _count(t.skill_by_type[(ds, task.get("type", ""), role)], correct)
            for ab in rq.get("abilities") or ():
                _count(t.by_ability[(ab, role)], correct)
        if kind == CallKind.INFER and isinstance(correct, bool):
            _count(t.infer[role], correct)
        digest = ctx.get("output_text#")
        oc, weak_writer = produced.get(digest, (None, False)) if isinstance(digest, str) else (None, False)
        if kind in (CallKind.REVIEW, CallKind.COMMITTEE) and int(ctx.get("round", 1)) == 1 \
                and isinstance(oc, bool) and isinstance(fields.get("score"), (int, float)) \
                and (not t.real or ctx.get("action") == "finalize"):
            bucket = "correct" if oc else ("weak_incorrect" if weak_writer else "incorrect")
            t.scores[(role, bucket, "finalize" if ctx.get("action") == "finalize" else "contribute")].append(
                float(fields["score"]))
        pt, ct = int(rs.get("prompt_tokens", 0)), int(rs.get("completion_tokens", 0))
        if kind:
            t.tokens[kind].append((pt, ct, int(ctx.get("context_items", 0) or 0)))
        if isinstance(e.get("wall"), (int, float)) and ct > 0:
            t.latency[role].append((float(ct), float(e["wall"])))
    return t


@dataclass
class Fit:
    """The profile being fitted: its data, the sources of the numbers set and the report lines."""

    prof: dict[str, Any]
    sources: dict[str, str]
    notes: list[str]
    #: how a source names the recording
    rec: str

    def model(self, role: str) -> dict[str, Any]:
        return self.prof["models"][role]


def _fit_graded(f: Fit, t: Tally) -> None:
    """An observer graded the final texts: outcomes are not composed from drafts
    (ungraded halves) and routes, the graded rate is the outcome."""
    if t.real:
        f.prof["graded"] = True
        f.prof["type_spread"] = 0.0
        f.sources["type_spread"] = f"{f.rec}: per-type skills are fitted directly, no spread added"
        f.notes.append("graded: true (real model: final texts graded, halves unknown)")


def _fit_skill(f: Fit, t: Tally) -> None:
    """``models.<role>.skill.<dataset>`` and ``skill_by_type`` (what a simulation of the same
    stream needs to reproduce its per-type accuracy)."""
    for ds, roles in sorted(t.skill.items()):
        for role, (k, n) in roles.items():
            m = f.model(role)
            m.setdefault("skill", {})[ds] = _rate(k, n)
            f.sources[f"models.{role}.skill.{ds}"] = f"{f.rec}: {k} of {n} graded answers right"
            f.notes.append(f"skill {ds}/{role}: {k}/{n} correct -> {m['skill'][ds]}")
        for (d, tt, r), (k, n) in sorted(t.skill_by_type.items()):
            if d == ds and tt:
                # shrunk toward the role's overall rate by two pseudo-tasks, so a
                # type seen once or twice does not get 0 or 1
                p0 = f.model(r)["skill"].get(ds, 0.5)
                v = round(min(0.999, max(0.001, (k + 2 * p0) / (n + 2))), 4)
                f.model(r).setdefault("skill_by_type", {}).setdefault(ds, {})[tt] = v
                f.notes.append(f"skill {ds}/{tt}/{r}: {k}/{n} correct -> {v}")
        for role in ("strong", "weak"):
            if f.model(role).get("skill_by_type", {}).get(ds):
                f.sources[f"models.{role}.skill_by_type.{ds}"] = \
                    f"{f.rec}: graded answers per task type, shrunk toward the role's rate by two pseudo-tasks"


def _note_abilities(f: Fit, t: Tally) -> None:
    """Per-ability rates are reported only: a Contribute half cannot be graded alone."""
    for (ab, role), (k, n) in sorted(t.by_ability.items()):
        f.notes.append(f"ability {ab}/{role}: {k}/{n} correct")


def _fit_infer(f: Fit, t: Tally) -> None:
    """``models.<role>.infer``: how often InferAbilities chose the true pair."""
    for role, (k, n) in sorted(t.infer.items()):
        f.model(role)["infer"] = _rate(k, n)
        f.sources[f"models.{role}.infer"] = f"{f.rec}: {k} of {n} inferred pairs were the true pair"
        f.notes.append(f"infer {role}: {k}/{n} true pairs -> {f.model(role)['infer']}")


def _fit_reviews(f: Fit, t: Tally) -> None:
    """``review.scores.<role>``: each recorded score is binned to its nearest anchor; the class
    behind it (could the reviewer re-derive the half?) is latent, so the unverifiable class's
    distribution is fitted as a mixture component (meshsim/backends/fake_review.py)."""
    rho = float(f.prof.get("difficulty_rho", 0.0))
    review = f.prof.setdefault("review", {})
    anchors = {"sound": 1.0, "unverified": 0.5, "error": 0.25, "garbage": 0.0, **(review.get("anchors") or {})}
    for role in ("strong", "weak"):
        obs = [(b, act, _nearest_bin(anchors, x)) for (r, b, act), xs in t.scores.items() if r == role for x in xs]
        if obs:
            _fit_reviewer(f, role, obs, rho, review.setdefault("scores", {}).setdefault(role, {}))


def _fit_reviewer(f: Fit, role: str, obs: list[tuple[str, str, str]], rho: float, table: dict[str, Any]) -> None:
    """One reviewer model's tables from its binned reviews ``obs`` (bucket, action, bin)."""
    skill = f.model(role)["skill"]
    named = [v for k, v in skill.items() if k != "default"]
    sk = sum(named) / len(named) if named else skill.get("default", 0.5)
    fail_given_wrong, fail_given_right = _conditional_failure(sk, rho)
    fin = table.get("finalize", {}).get("sound") or {}
    fit_e = any(b == "correct" and act != "finalize" for b, act, _ in obs) and \
        any(b == "correct" and act == "finalize" for b, act, _ in obs)
    e0 = float(fin.get("error", 0.0)) if isinstance(fin.get("error", 0.0), (int, float)) else 0.0
    U, e = _fit_unverifiable(obs, fail_given_right, fail_given_wrong, e0, fit_e)
    n_r = sum(1 for b, _, _ in obs if b == "correct")
    n_w = sum(1 for b, _, _ in obs if b == "incorrect")
    if n_r + n_w:
        unv: dict[str, Any] = {k: round(U[k], 4) for k in ("sound", "error", "garbage") if round(U[k], 4) > 0}
        unv["unverified"] = "rest"
        table["unverifiable"] = unv
        for k in ("sound", "error", "garbage"):
            f.sources.pop(f"review.scores.{role}.unverifiable.{k}", None)
        f.sources[f"review.scores.{role}.unverifiable"] = (
            f"{f.rec}: {n_r} reviews of right and {n_w} of wrong outputs, scores binned to the nearest anchor; "
            f"the unverifiable class is the EM mixture component (P(re-derivation fails) "
            f"{fail_given_right:.3f} for a right output, {fail_given_wrong:.3f} for a wrong one)")
        f.notes.append(f"review {role}: unverifiable {unv} from {n_r} right / {n_w} wrong outputs")
    if fit_e:
        table.setdefault("finalize", {})["sound"] = {"error": round(e, 4), "sound": "rest",
                                                     **({"common": fin["common"]} if "common" in fin else {})}
        f.sources[f"review.scores.{role}.finalize.sound.error"] = \
            f"{f.rec}: reviews of right Finalize outputs beyond the unverifiable class's error mass (EM)"
        f.notes.append(f"review {role}: Finalize sound error {e:.4f}")
    garbage = [bin_ for b, _, bin_ in obs if b == "weak_incorrect"]
    if garbage:
        seen = sum(1 for x in garbage if x == "garbage") / len(garbage)
        table["garbage"] = {"garbage": round(seen, 4), "otherwise": "unverifiable"}
        f.sources[f"review.scores.{role}.garbage.garbage"] = \
            f"{f.rec}: {len(garbage)} reviews of weak-model wrong outputs, {seen:.2f} at the 0.00 anchor"
        f.notes.append(f"review {role}: garbage recognised {seen:.3f} from {len(garbage)} weak-model wrong outputs")


def _fit_granularity(f: Fit, t: Tally) -> None:
    """``review.granularity``: the coarsest step every recorded score sits on."""
    all_scores = [s for v in t.scores.values() for s in v]
    if not all_scores:
        return
    f.prof["review"]["granularity"] = next(
        (g for g in (0.25, 0.1, 0.05, 0.01) if all(abs(s / g - round(s / g)) < 1e-6 for s in all_scores)), 0.0)
    f.sources["review.granularity"] = f"{f.rec}: the coarsest step every recorded score sits on"


def _fit_tokens(f: Fit, t: Tally) -> None:
    """``tokens.<kind>``: mean prompt and completion tokens, prompt growth per context item
    and the lognormal spread of completions."""
    for kind, rows in sorted(t.tokens.items()):
        pts = [r[0] for r in rows]
        cts = [max(1, r[1]) for r in rows]
        spec: dict[str, float] = {"prompt": int(round(statistics.fmean(pts))),
                                  "completion": int(round(statistics.fmean(cts)))}
        fit = _linfit([float(r[2]) for r in rows], [float(p) for p in pts])
        if fit is not None and fit[1] > 0:
            spec["prompt"] = int(round(max(0.0, fit[0])))
            spec["per_context"] = int(round(fit[1]))
        spec["spread"] = _sd([math.log(c) for c in cts], 0.05)
        f.prof["tokens"][kind] = spec
        f.sources[f"tokens.{kind}"] = f"{f.rec}: {len(rows)} calls (means, prompt growth per context item, spread)"
        f.notes.append(f"tokens {kind}: n={len(rows)} {spec}")


def _fit_models(f: Fit, t: Tally) -> None:
    """``models.<role>``: the model id, and ``ttft`` / ``rate`` from a least-squares fit of
    wall time on completion tokens (wall time includes queueing at the server)."""
    for role in ("strong", "weak"):
        m = dict(f.model(role))
        if role in t.ids:
            m["id"] = t.ids[role]
        pts = t.latency.get(role, [])
        fit = _linfit([p[0] for p in pts], [p[1] for p in pts])
        if fit is not None and fit[1] > 0:
            m["ttft"] = round(max(0.01, fit[0]), 4)
            m["rate"] = round(1.0 / fit[1], 2)
            f.sources[f"models.{role}.ttft"] = f.sources[f"models.{role}.rate"] = \
                f"{f.rec}: least squares of wall time on completion tokens over {len(pts)} calls"
            f.notes.append(f"latency {role}: n={len(pts)} ttft={m['ttft']}s rate={m['rate']} tok/s")
        elif pts:
            f.notes.append(f"latency {role}: n={len(pts)}, too few or too alike to fit; kept the base values")
        f.prof["models"][role] = m


#: one fitter per estimated quantity, in the order they write the profile and the report
#: (the review tables read the fitted skills)
FITTERS: tuple[tuple[str, Callable[[Fit, Tally], None]], ...] = (
    ("graded", _fit_graded), ("skill", _fit_skill), ("abilities", _note_abilities), ("infer", _fit_infer),
    ("review scores", _fit_reviews), ("granularity", _fit_granularity), ("tokens", _fit_tokens),
    ("models", _fit_models))


def fit_profile(entries: list[dict[str, Any]], name: str = "fitted", base: Optional[str] = None,
                cassette_name: Optional[str] = None) -> tuple[dict[str, Any], list[str]]:
    """(fake profile data, report lines): the base profile with every quantity the
    recording informs refitted (:data:`FITTERS`), from one :func:`tally` of the calls."""
    if not entries:
        raise InputError("the cassette holds no calls")
    prof = _base(base)
    prof["name"] = name
    prof["description"] = f"fitted by 'meshsim backends fit' from {len(entries)} recorded calls"
    notes: list[str] = [f"{len(entries)} recorded calls"]
    t = tally(entries)
    if t.errors:
        notes.append(f"{t.errors} recorded failures skipped")
    f = Fit(prof, prof.setdefault("sources", {}), notes,
            f"recording: {cassette_name}" if cassette_name else "recording: the fitted cassette")
    for _name, fitter in FITTERS:
        fitter(f, t)
    _prune_ranges(prof)
    return prof, notes


def _prune_ranges(prof: dict[str, Any]) -> None:
    """Ranges belong to assumptions: drop entries whose numbers the recording now sources."""
    from .provenance import explain_rows, range_for

    ranges = prof.get("ranges") or {}
    keep = set()
    for r in explain_rows(prof):
        got = range_for(r["path"], prof) if r["kind"] == "assumption" else None
        if got:
            keep.add(got[0])
    for k in list(ranges):
        if str(k) not in keep:
            del ranges[k]


def write_profile(prof: dict[str, Any], notes: list[str], out: str | Path) -> Path:
    from .fake import load_fake_profile

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    head = "".join(f"# {n}\n" for n in ["Fitted by 'meshsim backends fit' (docs/backends.md).", *notes])
    text = head + yaml.safe_dump(prof, sort_keys=False, default_flow_style=None, width=110)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text)
    load_fake_profile(tmp)  # the result must load as a fake profile
    tmp.replace(out)
    return out
