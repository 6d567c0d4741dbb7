"""Golden files of pinned runs and a readable diff against them (not a test module).

tests/acceptance/test_determinism.py pins whole run folders by digest: the byte-level guard, which can
only say "changed". Beside it, ``tests/data/golden/<scenario>-seed<N>/`` keeps the run's
``summary.json`` and ``scenario.resolved.yaml`` as they were when pinned, and :func:`check` says what
moved, one line per value, as ``detection.A3.delay: 12 -> 14``. ``pytest --update-golden``
(tests/conftest.py) rewrites them from the run instead.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

GOLDEN = Path(__file__).resolve().parent / "data" / "golden"

#: the files of a run folder kept as golden: what a reader checks first (the record tables stay
#: under the digest only: they are large, and a change in them shows in the summary's counts)
FILES = ("summary.json", "scenario.resolved.yaml")

#: lines shown before "... and N more": enough to see the pattern, short enough to read
MAX_LINES = 40


def golden_dir(scenario: str, seed: int) -> Path:
    return GOLDEN / f"{scenario}-seed{seed}"


def _show(v: Any) -> str:
    s = json.dumps(v, sort_keys=True, default=str)
    return s if len(s) <= 80 else s[:77] + "..."


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def diff(want: Any, got: Any, path: str = "") -> list[str]:
    """Every difference between two parsed JSON / YAML values, one line each, by dotted path:
    ``a.b: 1 -> 2`` (changed), ``+ a.c: 3`` (only in ``got``), ``- a.d: 4`` (only in ``want``).
    ``1`` and ``1.0`` differ (a summary that turns an int into a float has changed its bytes)."""
    if isinstance(want, dict) and isinstance(got, dict):
        out: list[str] = []
        for k in want:
            if k in got:
                out += diff(want[k], got[k], _join(path, k))
            else:
                out.append(f"- {_join(path, k)}: {_show(want[k])}")
        out += [f"+ {_join(path, k)}: {_show(got[k])}" for k in got if k not in want]
        return out
    if isinstance(want, list) and isinstance(got, list):
        out = []
        for i, (w, g) in enumerate(zip(want, got)):
            out += diff(w, g, _join(path, i))
        out += [f"- {_join(path, i)}: {_show(w)}" for i, w in enumerate(want[len(got):], len(got))]
        out += [f"+ {_join(path, i)}: {_show(g)}" for i, g in enumerate(got[len(want):], len(want))]
        return out
    if want == got and type(want) is type(got):
        return []
    return [f"{path or '(top)'}: {_show(want)} -> {_show(got)}"]


def _load(path: Path) -> Any:
    text = path.read_text()
    return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)


def check(gold: Path, run: Path, update: bool = False) -> list[str]:
    """Lines saying how ``run``'s golden files differ from those in ``gold`` (empty: none).
    With ``update`` the golden files are rewritten from ``run`` first (and nothing differs)."""
    if update:
        gold.mkdir(parents=True, exist_ok=True)
        for name in FILES:
            shutil.copyfile(run / name, gold / name)
        return []
    out: list[str] = []
    for name in FILES:
        if not (gold / name).is_file():
            out.append(f"{name}: no golden file in {gold} (write it with pytest --update-golden)")
            continue
        out += [f"{name}: {line}" for line in diff(_load(gold / name), _load(run / name))]
    return out


def report(lines: list[str]) -> str:
    """``lines`` for a failure message, cut at :data:`MAX_LINES`."""
    shown = lines[:MAX_LINES]
    more = len(lines) - len(shown)
    return "\n".join(["  " + line for line in shown] + ([f"  ... and {more} more"] if more else []))
