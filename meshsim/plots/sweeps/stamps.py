"""Which results each figure and report in a sweep folder was drawn from (``.meshsim-figures.json``),
so that ``meshsim sweep`` can tell which ones an extension of the sweep made stale."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping



#: which results each figure and report in a sweep folder was drawn from (``meshsim sweep`` redraws
#: the ones an extension of the sweep made stale)
FIGURES_STAMP = ".meshsim-figures.json"
_STAMPED = ("results.csv", "recommended.json")  # what the figures and reports read, beside the runs


def results_stamp(folder: Path | str) -> dict[str, Any]:
    """``{"digest", "runs"}`` of the results a sweep folder's figures are drawn from: a sha256 of
    results.csv (and a search's recommended.json) and the number of finished runs."""
    import hashlib

    folder = Path(folder)
    h = hashlib.sha256()
    runs = 0
    for name in _STAMPED:
        try:
            data = (folder / name).read_bytes()
        except OSError:
            continue
        h.update(name.encode() + b"\0" + data + b"\0")
        if name == "results.csv":
            import csv
            import io

            runs = sum(1 for r in csv.DictReader(io.StringIO(data.decode("utf-8", "replace")))
                       if r.get("status") == "ok")
    return {"digest": h.hexdigest()[:16], "runs": runs}


def _plain(v: Any) -> Any:
    """An option as JSON keeps it (PATH=VALUE items, or a mapping of them); None when unset."""
    if not v:
        return None
    if isinstance(v, Mapping):
        return {str(k): x for k, x in v.items()}
    return [str(x) for x in v] if isinstance(v, (list, tuple)) else str(v)


def _stamps(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / FIGURES_STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    figs = data.get("figures") if isinstance(data, dict) else None
    return figs if isinstance(figs, dict) else {}


def stamp_figure(folder: Path | str, target: Path | str, args: dict[str, Any], what: str = "plot") -> None:
    """Note that ``target`` (a figure or report inside the sweep folder) was drawn now, with ``args``,
    from the folder's current results; a file outside the folder is not followed."""
    from ...io.records import write_atomic

    folder, target = Path(folder), Path(target)
    try:
        rel = target.resolve().relative_to(folder.resolve()).as_posix()
    except (ValueError, OSError):
        return
    figs = _stamps(folder)
    figs[rel] = {"what": what, "args": args, **results_stamp(folder)}
    try:
        write_atomic(folder / FIGURES_STAMP, json.dumps({"format": 1, "figures": figs}, indent=1, sort_keys=True)
                     + "\n")
    except OSError:  # a read-only folder: the figure is written, its stamp is a convenience
        pass


def stale_figures(folder: Path | str) -> list[tuple[str, dict[str, Any]]]:
    """(file, its stamp) of every figure or report in the sweep folder that was drawn from other
    results than the folder holds now (and is still there)."""
    folder = Path(folder)
    now = results_stamp(folder)["digest"]
    return [(rel, st) for rel, st in sorted(_stamps(folder).items())
            if isinstance(st, dict) and st.get("digest") != now and (folder / rel).is_file()]
