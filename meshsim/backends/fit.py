"""Estimate a fake-backend profile from recorded calls (``meshsim backends fit``).

Input: a cassette (JSONL written by the replay backend) or a run folder whose
scenario recorded one (``backend: {kind: replay, cassette: ...}``; the
cassette is looked up as written, beside the run folder and in it), or any
cassette files inside the folder.

What is estimated (everything else is taken from a base profile,
``fake-default`` unless ``--base`` names another):

* ``accuracy.<dataset>``: strong / weak accuracy of graded answers (Finalize,
  SAC answers and refinements, Takeover outputs of Finalize), Laplace-smoothed,
  with per-task-type offsets; per-ability rates are reported as comments
  (the fake's schema has none). Contribute halves cannot be graded alone.
* ``infer``: how often InferAbilities chose the true pair, per role.
* ``review``: mean and sd of review scores (initial reviews and committee
  round 1) by reviewer role and the reviewed output's correctness
  (``weak_incorrect`` for wrong outputs of weak models), and the score
  granularity. With real endpoints only Finalize outputs have a known
  correctness, so only their reviews are used.
* ``tokens.<kind>``: mean prompt and completion tokens, the lognormal spread
  of completions and the prompt growth per context item.
* ``models.<role>``: model id, and ``ttft`` / ``rate`` from a least-squares
  fit of wall time on completion tokens (wall time includes queueing at the
  server, so fit from runs with little contention).
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Optional

import yaml

from ..errors import InputError
from .base import CallKind
from .replay import read_cassette, text_digest

__all__ = ["find_cassettes", "load_entries", "fit_profile", "write_profile"]

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
            sc = yaml.safe_load(resolved.read_text()) or {}
        except yaml.YAMLError:
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


def _base(base: Optional[str]) -> dict[str, Any]:
    from . import find_profile

    path = find_profile(base or "fake-default", None)
    data = yaml.safe_load(path.read_text())
    if data.get("kind") != "fake":
        raise InputError("the base profile must be a fake profile", file=str(path))
    return data


def fit_profile(entries: list[dict[str, Any]], name: str = "fitted", base: Optional[str] = None
                ) -> tuple[dict[str, Any], list[str]]:
    """(fake profile data, report lines)."""
    if not entries:
        raise InputError("the cassette holds no calls")
    prof = _base(base)
    prof["name"] = name
    prof["description"] = f"fitted by 'meshsim backends fit' from {len(entries)} recorded calls"
    notes: list[str] = [f"{len(entries)} recorded calls"]
    # graded outcomes: a real model (an observer grades its text), or a fake run in graded mode
    real = any(str(e.get("backend", "")).startswith("openai")
               or ((e.get("response") or {}).get("fields") or {}).get("graded") for e in entries)

    acc: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    acc_type: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    acc_ability: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    infer: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    scores: dict[tuple[str, str], list[float]] = defaultdict(list)
    tokens: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    lat: dict[str, list[tuple[float, float]]] = defaultdict(list)
    ids: dict[str, str] = {}
    synth: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    synth_break = [0, 0]
    errors = 0
    # what each produced text turned out to be (graded, or a fake's own outcome),
    # and whether a weak model wrote it: how a review's target is known offline
    produced: dict[str, tuple[Optional[bool], bool]] = {}
    for e in entries:
        rq, rs = e.get("request") or {}, e.get("response") or {}
        if rq.get("kind") in (CallKind.CONTRIBUTE, CallKind.FINALIZE, CallKind.TAKEOVER_CANDIDATE,
                              CallKind.SYNTHESIS) and rs.get("text") and not rs.get("error"):
            c = rs.get("correct")
            produced[text_digest(rs["text"])] = (c if isinstance(c, bool) else None, rq.get("model") == "weak")

    def outcome(digest: Any) -> Optional[bool]:
        return produced.get(digest, (None, False))[0] if isinstance(digest, str) else None

    for e in entries:
        rq, rs = e.get("request") or {}, e.get("response") or {}
        kind, role = rq.get("kind"), "weak" if rq.get("model") == "weak" else "strong"
        ctx = rq.get("context") or {}
        task = rq.get("task") or {}
        call = e.get("call") or {}
        if isinstance(call.get("model"), str):
            ids.setdefault(role, call["model"])
        if rs.get("error"):
            errors += 1
            continue
        correct = rs.get("correct")
        fields = rs.get("fields") or {}
        graded = kind in _GRADED or (kind == CallKind.TAKEOVER_CANDIDATE and ctx.get("action") == "finalize")
        if kind == CallKind.SYNTHESIS and ctx.get("action") == "finalize" and isinstance(correct, bool):
            cands = [outcome(c) for c in ctx.get("candidates#") or ()]
            if cands:
                if outcome(ctx.get("output_text#")) is True:
                    synth_break[0] += int(not correct)
                    synth_break[1] += 1
                else:
                    k = min(2, sum(1 for c in cands if c is True))
                    synth[k][0] += int(correct)
                    synth[k][1] += 1
        if graded and isinstance(correct, bool):
            ds = task.get("dataset") or "default"
            acc[ds][role][0] += int(correct)
            acc[ds][role][1] += 1
            acc_type[(ds, task.get("type", ""), role)][0] += int(correct)
            acc_type[(ds, task.get("type", ""), role)][1] += 1
            for ab in rq.get("abilities") or ():
                acc_ability[(ab, role)][0] += int(correct)
                acc_ability[(ab, role)][1] += 1
        if kind == CallKind.INFER and isinstance(correct, bool):
            infer[role][0] += int(correct)
            infer[role][1] += 1
        oc = outcome(ctx.get("output_text#"))
        if kind in (CallKind.REVIEW, CallKind.COMMITTEE) and int(ctx.get("round", 1)) == 1 \
                and isinstance(oc, bool) and isinstance(fields.get("score"), (int, float)) \
                and (not real or ctx.get("action") == "finalize"):
            weak_writer = produced.get(ctx.get("output_text#"), (None, False))[1]
            bucket = "correct" if oc else ("weak_incorrect" if weak_writer else "incorrect")
            scores[(role, bucket)].append(float(fields["score"]))
        pt, ct = int(rs.get("prompt_tokens", 0)), int(rs.get("completion_tokens", 0))
        if kind:
            tokens[kind].append((pt, ct, int(ctx.get("context_items", 0) or 0)))
        if isinstance(e.get("wall"), (int, float)) and ct > 0:
            lat[role].append((float(ct), float(e["wall"])))
    if errors:
        notes.append(f"{errors} recorded failures skipped")

    # accuracy: per dataset and role, and per task type and role (what a
    # simulation of the same stream needs to reproduce its per-type accuracy)
    if real:
        # an observer graded the final texts: outcomes are not composed from
        # drafts (ungraded halves) and routes, the graded rate is the outcome
        prof["graded"] = True
        prof["review"]["type_offset_sd"] = 0.0
        notes.append("graded: true (real model: final texts graded, halves unknown)")
    for ds, roles in sorted(acc.items()):
        a = dict(prof["accuracy"].get(ds) or prof["accuracy"]["default"])
        a.pop("types", None)
        a.pop("by_type", None)
        for role, (k, n) in roles.items():
            a[role] = _rate(k, n)
            notes.append(f"accuracy {ds}/{role}: {k}/{n} correct -> {a[role]}")
        by_type: dict[str, dict[str, float]] = {}
        for (d, t, r), (k, n) in sorted(acc_type.items()):
            if d == ds and t:
                # shrunk toward the role's overall rate by two pseudo-tasks, so a
                # type seen once or twice does not get 0 or 1
                p0 = a.get(r, 0.5)
                by_type.setdefault(t, {})[r] = round(min(0.999, max(0.001, (k + 2 * p0) / (n + 2))), 4)
                notes.append(f"accuracy {ds}/{t}/{r}: {k}/{n} correct -> {by_type[t][r]}")
        if by_type:
            a["by_type"] = by_type
        prof["accuracy"][ds] = a
    # Takeover synthesis: P(correct) by the number of correct candidates, and
    # how often a correct original is broken
    syn = list(prof.get("takeover", {}).get("synthesis", (0.1, 0.5, 0.85)))
    for k, (c, n) in sorted(synth.items()):
        syn[k] = _rate(c, n)
        notes.append(f"takeover synthesis with {k} correct candidates: {c}/{n} correct -> {syn[k]}")
    if synth or synth_break[1]:
        prof.setdefault("takeover", {})["synthesis"] = syn
    if synth_break[1]:
        prof["takeover"]["break"] = _rate(*synth_break)
        notes.append(f"takeover broke {synth_break[0]}/{synth_break[1]} correct outputs -> "
                     f"{prof['takeover']['break']}")
    for (ab, role), (k, n) in sorted(acc_ability.items()):
        notes.append(f"ability {ab}/{role}: {k}/{n} correct")
    for role, (k, n) in sorted(infer.items()):
        prof["infer"][role] = _rate(k, n)
        notes.append(f"infer {role}: {k}/{n} true pairs -> {prof['infer'][role]}")

    # reviews
    all_scores = [s for v in scores.values() for s in v]
    for (role, bucket), xs in sorted(scores.items()):
        prof["review"][role][bucket] = [round(min(1.0, max(0.0, statistics.fmean(xs))), 4), _sd(xs, 0.02)]
        notes.append(f"review {role}/{bucket}: n={len(xs)} mean={prof['review'][role][bucket][0]} "
                     f"sd={prof['review'][role][bucket][1]}")
    if all_scores:
        for g in (0.25, 0.1, 0.05, 0.01):
            if all(abs(s / g - round(s / g)) < 1e-6 for s in all_scores):
                prof["review"]["granularity"] = g
                break
        else:
            prof["review"]["granularity"] = 0.0

    # tokens
    for kind, rows in sorted(tokens.items()):
        pts = [r[0] for r in rows]
        cts = [max(1, r[1]) for r in rows]
        items = [r[2] for r in rows]
        spec = {"prompt": int(round(statistics.fmean(pts))), "completion": int(round(statistics.fmean(cts)))}
        fit = _linfit([float(i) for i in items], [float(p) for p in pts])
        if fit is not None and fit[1] > 0:
            spec["prompt"] = int(round(max(0.0, fit[0])))
            spec["per_context"] = int(round(fit[1]))
        logs = [math.log(c) for c in cts]
        spec["spread"] = _sd(logs, 0.05)
        prof["tokens"][kind] = spec
        notes.append(f"tokens {kind}: n={len(rows)} {spec}")

    # models and latency
    for role in ("strong", "weak"):
        m = dict(prof["models"][role])
        if role in ids:
            m["id"] = ids[role]
        pts = lat.get(role, [])
        fit = _linfit([p[0] for p in pts], [p[1] for p in pts])
        if fit is not None and fit[1] > 0:
            m["ttft"] = round(max(0.01, fit[0]), 4)
            m["rate"] = round(1.0 / fit[1], 2)
            notes.append(f"latency {role}: n={len(pts)} ttft={m['ttft']}s rate={m['rate']} tok/s")
        elif pts:
            notes.append(f"latency {role}: n={len(pts)}, too few or too alike to fit; kept the base values")
        prof["models"][role] = m
    return prof, notes


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
