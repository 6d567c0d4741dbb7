"""Runtime prompts for real LLM backends, and the parsers of their replies.

Templates are text files in ``meshsim/workload/prompts/templates/`` (package data). A
template is either a fragment (plain text) or a chat prompt with
``=== system ===`` and ``=== user ===`` sections. Placeholders use
``string.Template`` syntax (``$question``), so JSON braces need no escaping;
unknown placeholders are left as they are.

``build_messages(request)`` turns a :class:`~meshsim.core.calls.Request`
into chat messages; ``parse_reply(request, text)`` turns the model's reply into
the same ``Response.fields`` the fake backend returns (``pair``, ``score``,
``half_correct``, ``final_correct``, ``candidate_correct``,
``synthesis_correct``...). What each call kind reads from ``request.context``
is listed in ``CONTEXT_KEYS`` (docs/backends.md).

Templates can be overridden from a backend profile or a scenario
(``prompts: {dir: my-prompts/, templates: {sac_score: "..."}}``): a file
``<name>.txt`` in ``dir`` or an entry in ``templates`` (inline text, or a path
ending in ``.txt``) replaces the built-in template of that name.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, Iterable, Mapping, Optional

from ...core.calls import CallKind, Request, TaskRef
from ..datasets.graders import (extract_boxed, extract_choice, extract_final, extract_number, grader_kind,
                                LETTERS)
from ...core.errors import InputError
from ...core.files import read_text

__all__ = ["PromptSet", "build_messages", "parse_reply", "extract_json", "parse_review", "parse_sac_score",
           "extract_answer", "parse_pair", "parse_competence", "template_names", "CONTEXT_KEYS", "SAC_NUMBER"]

#: SAC App. B.1: the first numeric token of the reply.
SAC_NUMBER = re.compile(r"([0-9]+(?:\.[0-9]+)?)")

#: What each call kind reads from ``Request.context`` (all optional; missing
#: texts are rendered as a note saying they were not provided).
CONTEXT_KEYS: dict[str, tuple[str, ...]] = {
    CallKind.INFER: ("pairs", "vocabulary", "types"),
    CallKind.CONTRIBUTE: ("required", "agent_abilities", "drafts", "competence"),
    CallKind.FINALIZE: ("required", "agent_abilities", "drafts", "competence"),
    CallKind.REVIEW: ("action", "output_text", "drafts", "producer", "reviewer_abilities"),
    CallKind.COMMITTEE: ("action", "output_text", "drafts", "round", "label", "own", "other",
                         "own_explanation", "other_explanation", "explanations"),
    CallKind.TAKEOVER_CANDIDATE: ("action", "output_text", "drafts", "label"),
    CallKind.SYNTHESIS: ("action", "output_text", "drafts", "candidates"),
    CallKind.SAC_ANSWER: ("attack", "rank"),
    CallKind.SAC_SCORE: ("response",),
    CallKind.SAC_REFINE: ("own", "neighbors", "retained"),
    "cpwbft_answer": (),
    "cpwbft_aggregate": ("own", "peers"),
}

#: a verbal confidence line (CP-WBFT's solve prompt): "Confidence: 0.85"
_CONFIDENCE = re.compile(r"confidence\s*[:=]\s*\**\s*([0-9]+(?:\.[0-9]+)?)", re.IGNORECASE)

_SECTION = re.compile(r"^=== (system|user) ===[ \t]*$", re.MULTILINE)


def template_names() -> list[str]:
    folder = resources.files("meshsim.workload.prompts") / "templates"
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".txt"))


@lru_cache(maxsize=None)
def _builtin(name: str) -> str:
    res = resources.files("meshsim.workload.prompts") / "templates" / f"{name}.txt"
    if not res.is_file():
        raise KeyError(name)
    return res.read_text(encoding="utf-8")


class PromptSet:
    """Built-in templates with optional overrides (a folder and/or a name -> text mapping)."""

    def __init__(self, dir: Optional[str | Path] = None, templates: Optional[Mapping[str, str]] = None,
                 base_dir: Optional[Path] = None):
        self._over: dict[str, str] = {}
        known = set(template_names())
        if dir is not None:
            d = Path(dir)
            if base_dir is not None and not d.is_absolute():
                d = base_dir / d
            if not d.is_dir():
                raise InputError("prompt folder not found", field="prompts.dir", value=str(dir))
            for f in sorted(d.glob("*.txt")):
                if f.stem not in known:
                    raise InputError(f"unknown prompt template; choose from {sorted(known)}", file=str(f))
                self._over[f.stem] = read_text(f, "prompt")
        for name, text in (templates or {}).items():
            if name not in known:
                raise InputError(f"unknown prompt template; choose from {sorted(known)}",
                                 field=f"prompts.templates.{name}")
            text = str(text)
            if "\n" not in text and text.endswith(".txt"):
                p = Path(text)
                if base_dir is not None and not p.is_absolute():
                    p = base_dir / p
                if not p.is_file():
                    raise InputError("prompt file not found", field=f"prompts.templates.{name}", value=text)
                text = read_text(p, "prompt")
            self._over[name] = text
        self.overridden = sorted(self._over)

    @classmethod
    def from_spec(cls, spec: Any, base_dir: Optional[Path] = None) -> "PromptSet":
        """``None``, a folder path, or ``{dir: ..., templates: {...}}``."""
        if spec is None:
            return cls()
        if isinstance(spec, (str, Path)):
            return cls(dir=spec, base_dir=base_dir)
        if isinstance(spec, Mapping):
            extra = set(spec) - {"dir", "templates"}
            if extra:
                raise InputError("unknown key", field=f"prompts.{sorted(extra)[0]}")
            return cls(dir=spec.get("dir"), templates=spec.get("templates"), base_dir=base_dir)
        raise InputError("'prompts' must be a folder or {dir, templates}", field="prompts", value=spec)

    def text(self, name: str) -> str:
        return self._over[name] if name in self._over else _builtin(name)

    def render(self, name: str, values: Mapping[str, Any]) -> str:
        return Template(self.text(name)).safe_substitute({k: _s(v) for k, v in values.items()}).strip()

    def chat(self, name: str, values: Mapping[str, Any]) -> tuple[str, str]:
        """(system, user) of a sectioned template."""
        raw = self.text(name)
        parts = _SECTION.split(raw)
        sec = {"system": "", "user": ""}
        if len(parts) == 1:
            sec["user"] = raw
        else:
            for i in range(1, len(parts) - 1, 2):
                sec[parts[i]] = parts[i + 1]
        vals = {k: _s(v) for k, v in values.items()}
        return (Template(sec["system"]).safe_substitute(vals).strip(),
                Template(sec["user"]).safe_substitute(vals).strip())


def _s(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.2f}"
    if isinstance(v, (list, tuple)):
        return ", ".join(map(str, v))
    return str(v)


DEFAULT = PromptSet()

# ---------------------------------------------------------------------- rendering helpers

_NOT_GIVEN = "(not provided to this call)"


def _choices(task: Optional[TaskRef]) -> str:
    if task is None or not task.choices:
        return ""
    return "Options:\n" + "\n".join(f"({LETTERS[i]}) {c}" for i, c in enumerate(task.choices)) + "\n"


def _kind(task: Optional[TaskRef]) -> str:
    if task is None:
        return "exact"
    return grader_kind(task.answer, tuple(task.choices), task.dataset, task.type)


def _answer_format(ps: PromptSet, task: Optional[TaskRef]) -> str:
    return ps.render({"math": "format_boxed", "choice": "format_choice", "numeric": "format_number"}
                     .get(_kind(task), "format_text"), {})


def _problem_kind(task: Optional[TaskRef]) -> str:
    return "mathematical reasoning problem" if _kind(task) == "math" else "question"


def _drafts(ctx: Mapping[str, Any]) -> str:
    d = ctx.get("drafts")
    if d is None:
        n = int(ctx.get("context_items", 0) or 0)
        return "(none yet)" if n == 0 else f"({n} earlier output(s); their text was {_NOT_GIVEN[1:-1]})"
    if not d:
        return "(none yet)"
    out = []
    for k, x in enumerate(d, 1):
        if isinstance(x, Mapping):
            who = x.get("agent", f"teammate {k}")
            ab = x.get("abilities")
            head = f"[{who}" + (f", abilities {_s(ab)}" if ab else "") + "]"
            out.append(f"{head}\n{x.get('text', '')}")
        else:
            out.append(f"[draft {k}]\n{x}")
    return "\n\n".join(out)


def _competence(ps: PromptSet, req: Request) -> str:
    ctx = req.context
    held = list(req.abilities)
    required = list(ctx.get("required") or held)
    verdict = ctx.get("competence")
    if verdict not in ("yes", "partial", "no"):
        if not held:
            verdict = "no"
        elif req.kind == CallKind.CONTRIBUTE:
            verdict = "partial"
        elif set(required) <= set(held) and not (ctx.get("drafts") or ctx.get("context_items")):
            verdict = "yes"
        else:
            verdict = "partial"
    return ps.render(f"competence_{verdict}", {"required": ", ".join(required), "held": ", ".join(held) or "none"})


def _base_values(ps: PromptSet, req: Request) -> dict[str, Any]:
    t, ctx = req.task, req.context
    agent_ab = ctx.get("agent_abilities") or req.abilities
    return {
        "agent": req.agent,
        "agent_abilities": ", ".join(agent_ab) if agent_ab else "none declared",
        "abilities": ", ".join(req.abilities) if req.abilities else "(unspecified)",
        "question": t.question if t else _NOT_GIVEN,
        "task_type": t.type if t else "",
        "choices": _choices(t),
        "answer_format": _answer_format(ps, t),
        "problem_kind": _problem_kind(t),
        "drafts": _drafts(ctx),
        "action": ctx.get("action", "contribute"),
        "output_text": ctx.get("output_text") or _NOT_GIVEN,
        "producer": ctx.get("producer", "the producer"),
        "reviewer_abilities": ", ".join(ctx.get("reviewer_abilities") or req.abilities) or "(unspecified)",
        "label": ctx.get("label", "A"),
    }


@lru_cache(maxsize=32)
def _profile(dataset: str):
    from ..tasks import load_profile

    try:
        return load_profile(dataset)
    except InputError:
        return None


def _infer_values(req: Request) -> dict[str, str]:
    ctx = req.context
    prof = _profile(req.task.dataset) if req.task and req.task.dataset else None
    vocab = ctx.get("vocabulary") or (prof.abilities if prof else None)
    types = ctx.get("types") or (prof.types if prof else None)
    pairs = [tuple(p) for p in ctx.get("pairs") or (types.values() if types else [])]
    if vocab:
        vtext = "\n".join(f"- {k}: {v}" for k, v in vocab.items()) if isinstance(vocab, Mapping) else \
            "\n".join(f"- {k}" for k in vocab)
    else:
        vtext = "\n".join(f"- {s}" for s in sorted({s for p in pairs for s in p}))
    if types:
        ex = "\n".join(f"- {t}: {a}, {b}" for t, (a, b) in types.items())
    else:
        ex = "\n".join(f"- {a}, {b}" for a, b in pairs)
    return {"vocabulary": vtext, "examples": ex}


def _review_system(ps: PromptSet, req: Request, vals: Mapping[str, Any]) -> str:
    name = "review_finalize" if req.context.get("action") == "finalize" else "review_contribute"
    return ps.chat(name, vals)[0]


# ---------------------------------------------------------------------- build_messages

def build_messages(request: Request, prompts: Optional[PromptSet] = None) -> list[dict[str, str]]:
    """Chat messages (``[{"role": "system", ...}, {"role": "user", ...}]``) for one call."""
    ps = prompts or DEFAULT
    req = request
    ctx = req.context
    kind = req.kind
    vals = _base_values(ps, req)
    vals["agent_system"] = ps.render("agent_system", vals)
    if kind == CallKind.INFER:
        vals.update(_infer_values(req))
        name = "infer_abilities"
    elif kind in (CallKind.CONTRIBUTE, CallKind.FINALIZE):
        vals["competence"] = _competence(ps, req)
        name = "contribute" if kind == CallKind.CONTRIBUTE else "finalize"
    elif kind == CallKind.REVIEW:
        vals["review_material"] = ps.render("review_material", vals)
        name = "review_finalize" if ctx.get("action") == "finalize" else "review_contribute"
    elif kind == CallKind.COMMITTEE:
        vals["review_material"] = ps.render("review_material", vals)
        vals["review_system"] = _review_system(ps, req, vals)
        rnd = int(ctx.get("round", 1))
        if rnd >= 2:
            expl = list(ctx.get("explanations") or [])
            own_e = ctx.get("own_explanation", expl[0] if len(expl) > 0 else "")
            other_e = ctx.get("other_explanation", expl[1] if len(expl) > 1 else "")
            vals.update(own=_fmt_score(ctx.get("own")), other=_fmt_score(ctx.get("other")),
                        own_explanation=_short_expl(own_e), other_explanation=_short_expl(other_e),
                        other_label="B" if vals["label"] == "A" else "A")
        name = "committee_round2" if rnd >= 2 else "committee_round1"
    elif kind in (CallKind.TAKEOVER_CANDIDATE, CallKind.SYNTHESIS):
        vals["candidate_format"] = (vals["answer_format"] if vals["action"] == "finalize" else
                                    "State the corrected intermediate result clearly; do not finalize.")
        cands = ctx.get("candidates")
        sc = ctx.get("candidate_scores")  # SAC's refine (Eq. 4): each retained answer with its score
        if cands and isinstance(sc, (list, tuple)) and len(sc) == len(cands):
            vals["candidates"] = "\n\n".join(
                f"Candidate {LETTERS[i]} (your score {_fmt_score(sc[i])}):\n<<<\n{c}\n>>>" for i, c in enumerate(cands))
        elif cands:
            vals["candidates"] = "\n\n".join(f"Candidate {LETTERS[i]}:\n<<<\n{c}\n>>>" for i, c in enumerate(cands))
        else:
            vals["candidates"] = _NOT_GIVEN
        name = "takeover_candidate" if kind == CallKind.TAKEOVER_CANDIDATE else "synthesis"
    elif kind == CallKind.SAC_ANSWER:
        attack = ctx.get("attack")
        vals["rank"] = int(ctx.get("rank", 0) or 0) + 1
        # "cached" (the authors' adversary: the weak model's own answer) is a plain solve
        name = {"ood": "sac_ood", "plausible_wrong": "sac_plausible_wrong",
                "persuasive": "sac_persuasive"}.get(attack, "sac_answer")
    elif kind == "cpwbft_answer":
        name = "cpwbft_answer"
    elif kind == "cpwbft_aggregate":
        own = ctx.get("own") or {}
        vals["own"] = _resp_text(own)
        vals["own_confidence"] = _fmt_score(own.get("confidence") if isinstance(own, Mapping) else None)
        vals["peers"] = "\n\n".join(
            f"Answer {k} (reported confidence {_fmt_score(p.get('confidence'))}):\n<<<\n{_resp_text(p)}\n>>>"
            for k, p in enumerate(ctx.get("peers") or (), 1) if isinstance(p, Mapping)) or "(none)"
        name = "cpwbft_aggregate"
    elif kind == CallKind.SAC_SCORE:
        vals["response"] = _resp_text(ctx.get("response"))
        name = "sac_score"
    elif kind == CallKind.SAC_REFINE:
        vals["own"] = _resp_text(ctx.get("own"))
        nb = []
        for x in ctx.get("neighbors") or ctx.get("retained") or ():
            if isinstance(x, Mapping):
                text, score = _resp_text(x.get("response", x)), x.get("score", 0.5)
            else:
                text, score = x
            nb.append((float(score if score is not None else 0.5), _resp_text(text)))
        nb.sort(key=lambda p: -p[0])  # descending reliability (SAC App. B.2)
        vals["neighbors"] = "\n\n".join(f"Answer {k} (reliability {s:.2f}):\n<<<\n{t}\n>>>"
                                        for k, (s, t) in enumerate(nb, 1)) or "(none)"
        name = "sac_refine"
    elif kind == CallKind.SELECT:  # baselines: AutoGen's speaker selection, AgentNet's router
        vals["needed"] = ", ".join(ctx.get("needed") or ()) or "(none)"
        vals["candidates"] = "\n".join(
            f"- {c.get('agent')}: " + (", ".join(c.get("abilities") or ()) or "no declared abilities") + _record(c)
            for c in ctx.get("candidates") or () if isinstance(c, Mapping)) or "(none)"
        name = "select"
    elif kind == CallKind.SUMMARIZE:  # baselines: AutoGen's manager summarizing the conversation
        name = "summarize"
    else:
        raise ValueError(f"no prompt for call kind {kind!r}")
    system, user = ps.chat(name, vals)
    msgs = []
    if system:
        msgs.append({"role": "system", "content": system})
    msgs.append({"role": "user", "content": user})
    return msgs


def _resp_text(x: Any) -> str:
    """A response as SAC prompts show it: a string, or ``{text, answer}`` from the protocols."""
    if x is None:
        return ""
    if isinstance(x, Mapping):
        text = str(x.get("text") or "").strip()
        if text:
            return text
        ans = x.get("answer")
        return f"Answer: {ans}" if ans is not None else "(no answer)"
    return str(x)


def _record(c: Mapping) -> str:
    """AgentNet's router lines for a neighbour (``router_make_prompt``): its success rate for this
    task type and its processed tasks, when the caller shows them."""
    if "success_rate" not in c:
        return ""
    r = c.get("success_rate")
    rate = "Not Succeed Yet" if not r else f"{float(r):.2%}"
    return f"; success rate for this task type: {rate}; processed tasks of this type: {int(c.get('processed') or 0)}"


def _fmt_score(v: Any) -> str:
    try:
        return f"{float(v):.2f}"
    except (TypeError, ValueError):
        return "n/a"


def _short_expl(text: Any) -> str:
    """An exchanged explanation: the reason field of a JSON review, else the text (bounded)."""
    if not text:
        return "(none)"
    d = extract_json(str(text))
    if d and d.get("one_sentence_reason"):
        return str(d["one_sentence_reason"])[:600]
    return str(text).strip()[:600]


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
