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

The parsers of replies are :mod:`meshsim.workload.prompts.parse` (importable from here).
"""
from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, Mapping, Optional

from ...core.calls import CallKind, Request, TaskRef
from ..datasets.graders import LETTERS
from ...core.errors import InputError
from ...core.files import read_text
# the parsers of replies live in .parse; this package is their public address
from .parse import (SAC_NUMBER, _kind, _profile, extract_answer, extract_json, parse_agent,  # noqa: F401
                    parse_competence, parse_pair, parse_reply, parse_review, parse_sac_score)

__all__ = ["PromptSet", "build_messages", "parse_reply", "extract_json", "parse_review", "parse_sac_score",
           "extract_answer", "parse_pair", "parse_competence", "template_names", "CONTEXT_KEYS", "SAC_NUMBER"]

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
        attack: Any = ctx.get("attack")  # a str or None; None falls to the plain solve
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
