"""The parsers of real models' replies (the other half of :mod:`meshsim.workload.prompts`).

``parse_reply(request, text)`` turns a reply into the same ``Response.fields``
the fake backend returns; the helpers below it (JSON extraction with repairs,
review scores, SAC's first number, answers in the form the task's grader
compares, ability pairs) are public. Import them from
:mod:`meshsim.workload.prompts`.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Iterable, Mapping, Optional

from ...core.calls import CallKind, Request, TaskRef
from ...core.errors import InputError
from ..datasets.graders import extract_boxed, extract_choice, extract_final, extract_number, grader_kind

__all__ = ["parse_reply", "extract_json", "parse_review", "parse_sac_score", "extract_answer", "parse_pair",
           "parse_competence", "parse_agent", "SAC_NUMBER"]

#: SAC App. B.1: the first numeric token of the reply.
SAC_NUMBER = re.compile(r"([0-9]+(?:\.[0-9]+)?)")

#: a verbal confidence line (CP-WBFT's solve prompt): "Confidence: 0.85"
_CONFIDENCE = re.compile(r"confidence\s*[:=]\s*\**\s*([0-9]+(?:\.[0-9]+)?)", re.IGNORECASE)


def _kind(task: Optional[TaskRef]) -> str:
    if task is None:
        return "exact"
    return grader_kind(task.answer, tuple(task.choices), task.dataset, task.type)


@lru_cache(maxsize=32)
def _profile(dataset: str):
    from ..tasks import load_profile

    try:
        return load_profile(dataset)
    except InputError:
        return None


# ---------------------------------------------------------------------- parsers

def _balanced_objects(text: str) -> Iterable[str]:
    """Every top-level ``{...}`` substring, braces matched outside strings."""
    i = 0
    n = len(text)
    while i < n:
        j = text.find("{", i)
        if j < 0:
            return
        depth, k, in_str, esc = 0, j, False, False
        while k < n:
            c = text[k]
            if in_str:
                if esc:
                    esc = False
                elif c == "\\":
                    esc = True
                elif c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    yield text[j:k + 1]
                    break
            k += 1
        else:
            yield text[j:]  # unterminated: let the repairs try
            return
        i = k + 1


def _repair(s: str) -> str:
    s = s.replace("“", '"').replace("”", '"').replace("‘", "'").replace("’", "'")
    s = re.sub(r",\s*([}\]])", r"\1", s)  # trailing commas
    s = re.sub(r"\bTrue\b", "true", s)
    s = re.sub(r"\bFalse\b", "false", s)
    s = re.sub(r"\bNone\b", "null", s)
    if '"' not in s and "'" in s:
        s = s.replace("'", '"')
    s = re.sub(r"([{,]\s*)([A-Za-z_][A-Za-z0-9_]*)\s*:", r'\1"\2":', s)  # bare keys
    s = re.sub(r":\s*\.(\d)", r": 0.\1", s)  # .8 -> 0.8
    if s.count("{") > s.count("}"):
        s = s.rstrip().rstrip(",") + "}" * (s.count("{") - s.count("}"))
    return s


def extract_json(text: str) -> Optional[dict]:
    """The first JSON object in a reply (code fences, prose around it, trailing
    commas, Python literals, smart or single quotes and a missing closing brace
    are tolerated); None if there is none."""
    if not text:
        return None
    t = re.sub(r"```(?:json|JSON)?", "", text)
    for cand in _balanced_objects(t):
        for attempt in (cand, _repair(cand)):
            try:
                d = json.loads(attempt)
            except (json.JSONDecodeError, ValueError, RecursionError):  # RecursionError: nested 100k deep
                continue
            if isinstance(d, dict):
                return d
    return None


def _unit(v: Any) -> Optional[float]:
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    try:
        x = float(v)
    except (TypeError, ValueError):
        if isinstance(v, str):
            m = SAC_NUMBER.search(v)
            return _unit(m.group(1)) if m else None
        return None
    if x != x:  # NaN
        return None
    return min(1.0, max(0.0, x))


def _truthy(v: Any) -> Optional[bool]:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        if v.strip().lower() in ("true", "yes", "1"):
            return True
        if v.strip().lower() in ("false", "no", "0", ""):
            return False
    if isinstance(v, (int, float)):
        return bool(v)
    return None


def parse_review(text: str) -> dict[str, Any]:
    """A review reply -> ``score`` (= ``normal_working_score`` clipped to [0, 1]) and the rest.

    Fallbacks in order: the JSON's ``normal_working_score``; its
    ``half_correct`` / ``own_half_correct``; a ``"normal_working_score": x``
    pattern in broken JSON; else 0.5 (the neutral anchor, App. D.1) with
    ``parsed: False``. ``constraint_violated`` flags a score <= 0.40 without
    a specific failure and evidence.
    """
    d = extract_json(text) or {}
    score = None
    for key in ("normal_working_score", "half_correct", "own_half_correct", "score"):
        if key in d:
            score = _unit(d[key])
            if score is not None:
                break
    parsed = score is not None
    if score is None:
        m = re.search(r"normal_working_score[\"']?\s*[:=]\s*([0-9]*\.?[0-9]+)", text or "")
        if m:
            score, parsed = _unit(m.group(1)), True
    out: dict[str, Any] = {"score": 0.5 if score is None else round(score, 4), "parsed": parsed}
    for key in ("half_correct", "in_scope", "own_half_correct", "combination_faithful", "confidence"):
        if key in d and _unit(d[key]) is not None:
            out[key] = _unit(d[key])
    for key in ("specific_failure_found", "concrete_answer"):
        if key in d and _truthy(d[key]) is not None:
            out[key] = _truthy(d[key])
    for key in ("failure_type", "failure_evidence"):
        if key in d and d[key] is not None:
            out[key] = str(d[key])[:500]
    out["explanation"] = str(d.get("one_sentence_reason") or "")[:600]
    if parsed and out["score"] <= 0.40:
        out["constraint_violated"] = not (out.get("specific_failure_found") and
                                          (out.get("failure_evidence") or out.get("failure_type") == "no_answer"))
    return out


def parse_sac_score(text: str) -> float:
    """SAC App. B.1: first numeric token, clipped to [0, 1]; 0.5 when absent."""
    m = SAC_NUMBER.search(text or "")
    if not m:
        return 0.5
    try:
        return min(1.0, max(0.0, float(m.group(1))))
    except ValueError:  # pragma: no cover - the regex only matches numbers
        return 0.5


def parse_competence(text: str) -> Optional[str]:
    m = re.search(r"COMPETENCE_MATCH\s*:\s*(yes|partial|no)", text or "", re.IGNORECASE)
    return m.group(1).lower() if m else None


def extract_answer(text: str, task: Optional[TaskRef] = None) -> Optional[str]:
    """The committed answer of a reply, in the form the task's grader compares."""
    if not text:
        return None
    kind = _kind(task)
    if kind == "choice":
        return extract_choice(text, tuple(task.choices) if task else ())
    if kind == "numeric":
        v = extract_number(text)
        if v is None:
            return None
        return str(int(v)) if float(v).is_integer() else repr(v)
    if kind == "math":
        return extract_boxed(text) or extract_final(text)
    ans = extract_final(text) or extract_boxed(text)
    if ans is None:
        lines = [l for l in text.strip().splitlines() if l.strip() and not l.strip().startswith("COMPETENCE_MATCH")]
        ans = lines[-1].strip() if lines else None
    return ans


def parse_pair(text: str, pairs: Iterable[Iterable[str]] = (), vocabulary: Iterable[str] = ()) -> Optional[list[str]]:
    """The ability pair an InferAbilities reply chose: JSON ``abilities``/``pair``, else
    vocabulary names in order of appearance; snapped to a documented pair when one matches."""
    pairs = [tuple(p) for p in pairs]
    vocab = list(vocabulary) or sorted({s for p in pairs for s in p})
    found: list[str] = []
    d = extract_json(text)
    if d:
        for key in ("abilities", "pair", "required", "required_abilities"):
            v = d.get(key)
            if isinstance(v, list):
                found = [str(x).strip() for x in v]
                break
            if isinstance(v, str):
                found = [x.strip() for x in re.split(r"[,+&]| and ", v) if x.strip()]
                break
    if not found and text:
        hits = []
        for s in vocab:
            for m in re.finditer(r"(?<![A-Za-z_])" + re.escape(s) + r"(?![A-Za-z_])", text):
                hits.append((m.start(), s))
        seen: list[str] = []
        for _, s in sorted(hits):
            if s not in seen:
                seen.append(s)
        found = seen
    if vocab:
        norm = {v.lower().replace(" ", "_"): v for v in vocab}
        found = [norm.get(f.lower().replace(" ", "_"), f) for f in found]
    if not found:
        return None
    for p in pairs:
        if set(p) == set(found[:2]):
            return list(p)
    for p in pairs:  # more than two named: the first documented pair they cover
        if set(p) <= set(found):
            return list(p)
    return found[:2] if len(found) >= 2 else None


# ---------------------------------------------------------------------- parse_reply

def parse_agent(text: str, names: list) -> Optional[str]:
    """The agent a selection reply names: the JSON ``agent`` field, else the first
    listed name that appears as a whole word (None when none does)."""
    names = [str(n) for n in names if n]
    m = re.search(r'"agent"\s*:\s*"([^"]+)"', text or "")
    if m and m.group(1).strip() in names:
        return m.group(1).strip()
    best = None
    for n in names:
        hit = re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text or "")
        if hit and (best is None or hit.start() < best[0]):
            best = (hit.start(), n)
    return best[1] if best else None


def parse_reply(request: Request, text: str) -> tuple[dict[str, Any], Optional[bool]]:
    """(``Response.fields``, ``Response.correct``) for the reply ``text`` to ``request``.

    Answers are graded against ``task.answer`` (when known) with the task's
    grader; ground truth never enters a prompt. A Contribute half cannot be
    graded on its own: ``half_correct`` is None (unknown) for it.
    """
    from ..datasets import grade_task

    req, ctx, task = request, request.context, request.task
    kind = req.kind
    text = text or ""
    if kind == CallKind.INFER:
        prof = _profile(task.dataset) if task and task.dataset else None
        vocab = list(ctx.get("vocabulary") or (prof.abilities if prof else ()))
        pair = parse_pair(text, ctx.get("pairs") or (prof.types.values() if prof else ()), vocab)
        fields: dict[str, Any] = {"parsed": pair is not None}
        if pair:
            fields["pair"] = pair
        ok = set(pair) == set(task.required) if (pair and task is not None and task.required) else None
        return fields, ok
    if kind in (CallKind.CONTRIBUTE, CallKind.FINALIZE):
        fields = {"competence": parse_competence(text), "answer": extract_answer(text, task)}
        if kind == CallKind.CONTRIBUTE:
            fields["half_correct"] = None
            return fields, None
        ok = grade_task(task, text)
        fields["final_correct"] = ok
        fields["half_correct"] = ok
        if ok is not None:
            fields["graded"] = True  # the observer graded this very text: it is the task's outcome
        return fields, ok
    if kind in (CallKind.REVIEW, CallKind.COMMITTEE):
        return parse_review(text), None
    if kind in (CallKind.TAKEOVER_CANDIDATE, CallKind.SYNTHESIS):
        ok = grade_task(task, text) if ctx.get("action") == "finalize" else None
        key = "candidate_correct" if kind == CallKind.TAKEOVER_CANDIDATE else "synthesis_correct"
        fields = {key: ok, "answer": extract_answer(text, task)}
        if kind == CallKind.SYNTHESIS:
            fields["final_correct"] = ok
        if ok is not None:
            fields["graded"] = True
        return fields, ok
    if kind in (CallKind.SAC_ANSWER, CallKind.SAC_REFINE):
        ans = extract_answer(text, task)
        ok = grade_task(task, text)
        return {"answer": ans, "correct": ok}, ok
    if kind in ("cpwbft_answer", "cpwbft_aggregate"):
        ans = extract_answer(text, task)
        ok = grade_task(task, text)
        m = _CONFIDENCE.search(text)
        conf = min(1.0, max(0.0, float(m.group(1)))) if m else None  # none: the protocol's default (0.0)
        return {"answer": ans, "correct": ok, "confidence": conf}, ok
    if kind == CallKind.SELECT:
        return {"agent": parse_agent(text, [c.get("agent") for c in ctx.get("candidates") or ()
                                            if isinstance(c, Mapping)])}, None
    if kind == CallKind.SUMMARIZE:
        ok = grade_task(task, text)
        fields = {"answer": extract_answer(text, task), "final_correct": ok}
        if ok is not None:
            fields["graded"] = True
        return fields, ok
    if kind == CallKind.SAC_SCORE:
        # no number: score None, so the protocol applies its own default (0.5) and counts it
        parsed = SAC_NUMBER.search(text) is not None
        return {"score": parse_sac_score(text) if parsed else None, "parsed": parsed}, None
    return {}, None
