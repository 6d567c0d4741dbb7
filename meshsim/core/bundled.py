"""Files shipped inside the package (issue 32): backend profiles, example scenarios and their data.

They live under ``meshsim/data/`` and are found through :mod:`importlib.resources`, so an installed
wheel finds them from any folder. In a checkout ``meshsim/data/scenarios`` and ``meshsim/data/backends``
are symbolic links to the top-level ``scenarios/`` and ``backends/`` that README and docs use: one
source of truth, which setuptools follows when it builds the wheel (tests/acceptance/test_wheel.py builds one).
(Not :func:`meshsim.core.files.shipped`: those are a sweep's input files sent to a Dask worker.)

``meshsim scenarios`` lists the examples (:func:`examples`), ``meshsim scenarios copy`` copies one out
to edit (:func:`copy_example`), and ``meshsim run NAME`` runs one by name (:func:`scenario_arg`).
In core: imports nothing of meshsim but the errors.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Optional

from .errors import InputError

__all__ = ["data_root", "bundled", "Example", "examples", "find_example", "copy_example", "scenario_arg",
           "close_examples", "not_found_hint"]


def data_root() -> Path:
    """The package's data folder (``scenarios/``, ``backends/``, ``datasets/``); paths under it
    keep the checkout's layout, so ``data_root() / "scenarios/meshheal/persistent-math.yaml"`` is
    that file wherever meshsim is installed."""
    return Path(str(resources.files("meshsim") / "data"))


def bundled(rel: str | Path) -> Path:
    """A shipped file or folder by its checkout-relative path (``backends/fake-default.yaml``),
    with links resolved: in a checkout that is the top-level file itself."""
    return (data_root() / rel).resolve()


# --------------------------------------------------------------------------
# the example scenarios


@dataclass(frozen=True)
class Example:
    name: str  # path under scenarios/ without .yaml: meshheal/staggered-math
    path: Path
    description: str
    section: str  # the paper section it reproduces, or "beyond the papers"


_REF = r"(?:Sec|Tab|App|Fig)\. ?[A-Z]?\d+(?:\.\d+)*[a-z]?"
_REFS = rf"{_REF}(?:, {_REF})*"
_PAPER = re.compile(rf"\b(MeshHeal|SAC)(?: paper)? ({_REFS})")
_BARE = re.compile(rf"\(({_REFS})")
_DOC = re.compile(r"docs/[\w-]+\.md")
_BEYOND = re.compile(r"\b(?:beyond|ten times) the paper", re.I)
_DESC = re.compile(r"^description:\s*(.+?)\s*$", re.M)
_PROTO = re.compile(r"^protocol:\s*(?:\{\s*name:\s*|\n\s+name:\s*)([\w-]+)", re.M)


def _section(text: str) -> str:
    """The paper section an example reproduces, read off its leading comment (every shipped
    scenario opens with one naming its source, e.g. '(MeshHeal Sec. 6.2, Tab. 3, Fig. C1)' or
    'SAC paper Tab. 7'); scenarios of our own say which doc describes them."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    head = " ".join(lines)
    if m := _PAPER.search(head):
        ref = f"{m.group(1)} {m.group(2)}"
        return f"beyond the papers (extends {ref})" if _BEYOND.search(head) else ref
    if m := _DOC.search(head):
        return f"beyond the papers ({m.group(0)})"
    if m := _BARE.search(head):
        proto = _PROTO.search(text)
        paper = "MeshHeal" if proto is None or proto.group(1) == "meshheal" else "SAC"
        return f"{paper} {m.group(1)}"
    return "beyond the papers"


def examples() -> list[Example]:
    """Every shipped example scenario, sorted by name."""
    root = bundled("scenarios")  # links resolved: in a checkout, paths in the top-level scenarios/
    out = []
    for p in sorted(root.rglob("*.yaml")) if root.is_dir() else ():
        text = p.read_text(encoding="utf-8")
        m = _DESC.search(text)
        desc = m.group(1).strip("'\"") if m else ""
        out.append(Example(p.relative_to(root).with_suffix("").as_posix(), p, desc, _section(text)))
    return out


def _key(name: str) -> str:
    n = name.replace(os.sep, "/").removeprefix("scenarios/")
    return n[:-5] if n.endswith(".yaml") else n


def find_example(name: str) -> Optional[Example]:
    """The shipped example named ``name`` (``meshheal/staggered-math``, with or without ``.yaml`` or
    a leading ``scenarios/``; or a file name such as ``scale-288-sparse`` where only one example has
    it), or None. A file name that several examples share is an error listing them."""
    key = _key(name)
    all_ = examples()
    for e in all_:
        if e.name == key:
            return e
    same = [e for e in all_ if e.name.rsplit("/", 1)[-1] == key]
    if len(same) > 1:
        raise InputError(f"several shipped examples are named so; choose one of {[e.name for e in same]}",
                         field="NAME", value=name)
    return same[0] if same else None


def _unknown(name: str) -> InputError:
    return InputError(f"no shipped example of that name{close_examples(name)} (see 'meshsim scenarios')",
                      field="NAME", value=name)


def copy_example(name: str, dest: str | Path = ".") -> Path:
    """Copy a shipped example into folder ``dest`` (made if missing) to edit; never overwrites.
    Returns the new file. Its backend profile and dataset are found by name, as for the shipped
    copy, unless a ``backends/`` beside it (or in the working folder) holds one of that name."""
    ex = find_example(name)
    if ex is None:
        raise _unknown(name)
    d = Path(dest)
    if d.exists() and not d.is_dir():
        raise InputError("not a folder", field="DIR", value=str(dest))
    target = d / ex.path.name
    if target.exists() or target.is_symlink():
        raise InputError("a file of that name is already there; not overwritten (remove it or choose "
                         "another DIR)", file=str(target))
    data = ex.path.read_bytes()
    d.mkdir(parents=True, exist_ok=True)
    with open(target, "xb") as fh:  # "x": a file that appeared meanwhile is not overwritten either
        fh.write(data)
    return target


def scenario_arg(arg: str) -> str:
    """A command's SCENARIO argument: a file that exists is itself; otherwise the shipped example of
    that name (``meshsim run meshheal/staggered-math``), else the argument unchanged (the command
    then names the missing file)."""
    if Path(arg).exists():
        return arg
    try:
        ex = find_example(arg)
    except InputError:
        if arg.endswith((".yaml", ".yml")):
            return arg
        raise
    return str(ex.path) if ex is not None else arg


def not_found_hint(name: str) -> str:
    """What a ``scenario file not found`` line adds: the close shipped examples and where the list is."""
    return f", nor a shipped example of that name{close_examples(name)}; 'meshsim scenarios' lists the examples"


def close_examples(name: str, n: int = 3) -> str:
    """`` (did you mean 'meshheal/staggered-math'?)``: the shipped examples closest to a mistyped name
    (by full name, or by file name alone), or ``""`` where none is close."""
    import difflib

    key = _key(name)
    names = [e.name for e in examples()]
    close = difflib.get_close_matches(key, names, n=n, cutoff=0.75)
    if not close:  # a file name alone: staggered-mth
        stems: dict[str, list[str]] = {}
        for e in names:
            stems.setdefault(e.rsplit("/", 1)[-1], []).append(e)
        close = [e for s in difflib.get_close_matches(key.rsplit("/", 1)[-1], list(stems), n=n, cutoff=0.75)
                 for e in stems[s]][:n]
    if not close:
        return ""
    return " (did you mean " + " or ".join(f"'{c}'" for c in close) + "?)"
