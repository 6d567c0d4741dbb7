"""Task files with known answers, their loaders and graders.

A task file is JSONL, one item per line::

    {"id": "oc-1", "question": "...", "answer": "7", "type": "object_counting",
     "choices": ["...", "..."], "dataset": "bbh", "grader": "numeric"}

``id``, ``question``, ``answer`` and ``type`` are required; ``choices``
(multiple choice: the answer is a letter, an index or the option text),
``dataset``, ``grader`` (exact, numeric, math, choice; inferred when absent),
``tolerance`` (relative, numeric grader) and ``aliases`` (other accepted
answers, exact grader) are optional. ``load_bigbench`` reads a BIG-bench
``task.json``. ``grade(item, reply)`` grades a model's reply.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from ...core.errors import InputError
from ...core.files import check_numbers, is_input_dir, json_loads, read_text
from .graders import LETTERS, GRADERS, grade_answer, grader_kind

__all__ = ["Item", "load_jsonl", "write_jsonl", "load_bigbench", "load_items", "grade", "grade_task", "to_taskref",
           "grader_kind", "grade_answer", "GRADERS"]


@dataclass(frozen=True)
class Item:
    id: str
    question: str
    answer: Any
    type: str
    choices: tuple[str, ...] = ()
    dataset: str = ""
    grader: str = ""
    tolerance: Optional[float] = None
    aliases: tuple[str, ...] = ()
    meta: dict = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return grader_kind(self.answer, self.choices, self.dataset, self.type, self.grader or None)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["choices"] = list(self.choices)
        d["aliases"] = list(self.aliases)
        return {k: v for k, v in d.items() if v not in ((), [], {}, "", None)}


_KNOWN = {"id", "question", "answer", "type", "choices", "dataset", "grader", "tolerance", "aliases", "meta"}


def _item(d: Any, where: str, line: int) -> Item:
    if not isinstance(d, dict):
        raise InputError("each line must be a JSON object", file=where, field=f"line {line}")
    for k in ("id", "question", "answer", "type"):
        if k not in d:
            raise InputError(f"missing '{k}'", file=where, field=f"line {line}")
    unknown = set(d) - _KNOWN
    if unknown:
        import difflib

        key = sorted(unknown)[0]
        close = difflib.get_close_matches(key, sorted(_KNOWN), n=1)
        raise InputError("unknown key" + (f" (did you mean '{close[0]}'?)" if close else
                                          f" (choose from {', '.join(sorted(_KNOWN))})"),
                         file=where, field=f"line {line}.{key}")
    # checked like a scenario file: finite numbers, 64-bit integers, encodable text (issue 19)
    check_numbers(d, where, f"line {line}")
    tol = d.get("tolerance")
    if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 <= tol <= 1):
        raise InputError("a relative tolerance is a number in [0, 1]", file=where, field=f"line {line}.tolerance",
                         value=tol)
    g = d.get("grader") or ""
    if g and g not in GRADERS:
        raise InputError(f"unknown grader; choose one of {sorted(GRADERS)}", file=where, field=f"line {line}.grader",
                         value=g)
    choices = tuple(str(c) for c in d.get("choices") or ())
    if len(choices) > len(LETTERS):
        raise InputError(f"at most {len(LETTERS)} choices", file=where, field=f"line {line}.choices")
    return Item(id=str(d["id"]), question=str(d["question"]), answer=d["answer"], type=str(d["type"]),
                choices=choices, dataset=str(d.get("dataset") or ""), grader=g,
                tolerance=d.get("tolerance"), aliases=tuple(str(a) for a in d.get("aliases") or ()),
                meta=dict(d.get("meta") or {}))


def load_jsonl(path: str | Path) -> list[Item]:
    """Items of a JSONL task file (blank lines ignored; duplicate ids rejected)."""
    path = Path(path)
    items: list[Item] = []
    seen: set[str] = set()
    for n, line in enumerate(read_text(path, "tasks").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json_loads(line)
        except ValueError as exc:
            raise InputError(f"invalid JSON ({getattr(exc, 'msg', exc)})", file=str(path),
                             field=f"line {n}") from None
        it = _item(d, str(path), n)
        if it.id in seen:
            raise InputError("duplicate id", file=str(path), field=f"line {n}", value=it.id)
        seen.add(it.id)
        items.append(it)
    return items


def write_jsonl(path: str | Path, items: Iterable[Item]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(it.to_json(), ensure_ascii=False, sort_keys=True) for it in items]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def load_bigbench(path: str | Path, task_type: Optional[str] = None, dataset: str = "bbh") -> list[Item]:
    """Items of a BIG-bench ``task.json`` (``examples`` with ``input`` and ``target`` or ``target_scores``).

    ``target_scores`` become lettered choices (the highest-scoring option is the
    answer); a list ``target`` gives the first as the answer and the rest as
    aliases. The task prefix, if any, is prepended to each question.
    """
    path = Path(path)
    if is_input_dir(path):
        path = path / "task.json"
    text = read_text(path, "tasks")
    try:
        data = json_loads(text)
    except ValueError as exc:
        raise InputError(f"invalid JSON ({getattr(exc, 'msg', exc)})", file=str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("examples"), list):
        raise InputError("not a BIG-bench task (no 'examples' list)", file=str(path))
    check_numbers(data, str(path))
    name = task_type or str(data.get("name") or path.parent.name).replace(" ", "_")
    prefix = str(data.get("task_prefix") or "")
    items = []
    for k, ex in enumerate(data["examples"]):
        if not isinstance(ex, dict) or "input" not in ex:
            raise InputError("example without 'input'", file=str(path), field=f"examples[{k}]")
        q = prefix + str(ex["input"])
        if isinstance(ex.get("target_scores"), dict) and ex["target_scores"]:
            opts = list(ex["target_scores"].items())
            for o, v in opts:
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise InputError("a target score must be a number", file=str(path),
                                     field=f"examples[{k}].target_scores.{o}", value=v)
            choices = tuple(str(o) for o, _ in opts)
            best = max(range(len(opts)), key=lambda i: float(opts[i][1]))
            items.append(Item(id=f"{name}-{k}", question=q, answer=LETTERS[best], type=name, choices=choices,
                              dataset=dataset, grader="choice"))
            continue
        target = ex.get("target")
        if target is None:
            raise InputError("example without 'target' or 'target_scores'", file=str(path), field=f"examples[{k}]")
        targets = [str(t) for t in target] if isinstance(target, list) else [str(target)]
        items.append(Item(id=f"{name}-{k}", question=q, answer=targets[0], type=name, dataset=dataset,
                          aliases=tuple(targets[1:])))
    return items


def load_items(path: str | Path) -> list[Item]:
    """A JSONL task file or a BIG-bench ``task.json`` (by name)."""
    p = Path(path)
    if p.name == "task.json" or is_input_dir(p):
        return load_bigbench(p)
    return load_jsonl(p)


def grade(item: Item, reply: str) -> bool:
    kw: dict[str, Any] = {}
    if item.kind == "choice":
        kw["choices"] = item.choices
    if item.kind == "numeric" and item.tolerance is not None:
        kw["rel_tol"] = float(item.tolerance)
    if item.kind == "exact":
        kw["aliases"] = item.aliases
    if grade_answer(item.kind, reply, item.answer, **kw):
        return True
    # other accepted spellings ("four" for 4) match exactly whatever the grader
    return bool(item.aliases) and item.kind != "exact" and grade_answer("exact", reply, item.answer,
                                                                        aliases=item.aliases)


def grade_task(task: Any, reply: str) -> Optional[bool]:
    """Grade a reply against a ``TaskRef`` (None when the task has no known answer)."""
    if task is None or getattr(task, "answer", None) is None:
        return None
    kind = grader_kind(task.answer, tuple(task.choices or ()), task.dataset, task.type)
    kw: dict[str, Any] = {"choices": tuple(task.choices)} if kind == "choice" else {}
    return grade_answer(kind, reply, task.answer, **kw)


def to_taskref(item: Item, index: int, required: tuple[str, ...] = ()):
    """The simulator's view of an item."""
    from ...core.calls import TaskRef

    return TaskRef(index=index, id=item.id, type=item.type, question=item.question, answer=item.answer,
                   required=tuple(required), dataset=item.dataset, choices=tuple(item.choices))
