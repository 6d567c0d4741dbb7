"""Reading a run folder: one seed (:class:`RunFolder`) or a multi-seed folder (:class:`RunSet`).

Files are read on first use and cached; per-record files are read in plain
(``.jsonl``) or compressed (``.jsonl.gz``) form. Every check of what is missing
raises :class:`~meshsim.core.errors.RunFolderError` naming the folder.
"""
from __future__ import annotations

from array import array

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from ..core.errors import RunFolderError
from ..core.files import read_output_yaml
from ..core.dotted import get_path
from ..core.names import node_order
from ..io.records import find_records, has_records, iter_records


#: what the per-agent MeshHeal figures and the report read beside summary.json
MESHHEAL_TABLES = ("tasks.jsonl", "states.jsonl", "reviews.jsonl")

SAC_METHODS = {"sac": "SAC", "cp-wbft": "CP-WBFT", "cp_wbft": "CP-WBFT", "cpwbft": "CP-WBFT"}


def _order(agents: Iterable[str]) -> list[str]:
    return sorted(set(agents), key=node_order)


class RunFolder:
    """One seed's run folder; files are read on first use and cached."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._cache: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    def has(self, name: str) -> bool:
        """Whether the folder holds ``name``; a table (``*.jsonl``) also as ``*.jsonl.gz``."""
        if name.endswith(".jsonl"):
            return has_records(self.path, name)
        return (self.path / name).is_file()

    def require(self, *names: str, why: str = "") -> None:
        missing = [n for n in names if not self.has(n)]
        if missing:
            raise RunFolderError(f"{' and '.join(missing)} missing" + (f" ({why})" if why else ""),
                                 file=str(self.path))

    def json(self, name: str) -> Any:
        if name not in self._cache:
            self.require(name)
            try:
                self._cache[name] = json.loads((self.path / name).read_text(encoding="utf-8"))
            except ValueError as exc:
                raise RunFolderError(f"not valid JSON ({exc.msg}, line {exc.lineno})",
                                     file=str(self.path / name)) from None
        return self._cache[name]

    def jsonl(self, name: str, why: str = "") -> list[dict[str, Any]]:
        """Every row of table ``name`` (kept in memory: the figures use the slim
        per-agent index of :meth:`agent_reviews` for reviews instead)."""
        if name not in self._cache:
            self._cache[name] = list(self.iter_jsonl(name, why))
        return self._cache[name]

    def iter_jsonl(self, name: str, why: str = ""):
        """The rows of table ``name``, one at a time, not kept."""
        self.require(name, why=why)
        return iter_records(find_records(self.path, name))

    @property
    def summary(self) -> dict[str, Any]:
        return self.json("summary.json")

    @property
    def scenario(self) -> dict[str, Any]:
        if "scenario" not in self._cache:
            self.require("scenario.resolved.yaml")
            data = read_output_yaml(self.path / "scenario.resolved.yaml")
            self._cache["scenario"] = data if isinstance(data, dict) else {}
        return self._cache["scenario"]

    @property
    def seed(self) -> Optional[int]:
        s = self.summary.get("seed", self.scenario.get("seed"))
        return s if isinstance(s, int) else None

    @property
    def protocol(self) -> str:
        return str((self.scenario.get("protocol") or {}).get("name", ""))

    @property
    def params(self) -> dict[str, Any]:
        return dict((self.scenario.get("protocol") or {}).get("params") or {})

    @property
    def is_meshheal(self) -> bool:
        return self.has("reviews.jsonl") and self.has("states.jsonl")

    @property
    def is_sac(self) -> bool:
        s = self.summary
        return self.protocol.lower() in SAC_METHODS or any(k in s for k in ("iaa", "faa", "bfti"))

    def tasks(self) -> list[dict]:
        return self.jsonl("tasks.jsonl", why="a MeshHeal run writes it")

    def states(self) -> list[dict]:
        if "_states" not in self._cache:
            rows = self.jsonl("states.jsonl", why="a MeshHeal run writes it")
            self._cache["_states"] = sorted(rows, key=lambda r: (r["task"], r.get("t", 0.0)))
        return self._cache["_states"]

    def reviews(self) -> list[dict]:
        """Every row of reviews.jsonl, whole (a 576-agent run: about 100k rows)."""
        return self.jsonl("reviews.jsonl", why="a MeshHeal run writes it")

    # What the figures read of the reviews, one slim row per review (task, type,
    # q, probe, degraded and the detector's ability / state / z), grouped by
    # agent in file order: one streaming pass, so a large run's reviews are
    # never held whole (and never twice).
    _SLIM = ("task", "type", "q", "probe", "degraded")
    _SLIM_DET = ("ability", "state", "z")

    def review_index(self) -> dict[str, "ReviewColumns"]:
        if "_rindex" not in self._cache:
            codes = _Codes()
            index: dict[str, ReviewColumns] = {}
            for r in self.iter_jsonl("reviews.jsonl", why="a MeshHeal run writes it"):
                agent = r["agent"]
                cols = index.get(agent)
                if cols is None:
                    cols = index[agent] = ReviewColumns(codes)
                cols.append(r)
            self._cache["_rindex"] = index
        return self._cache["_rindex"]

    def agent_reviews(self, agent: str) -> "ReviewColumns | list":
        """Slim review rows of ``agent`` (see :meth:`review_index`), in file order."""
        return self.review_index().get(agent, [])

    def _task_scan(self) -> tuple[set[str], int]:
        """Agents named by tasks.jsonl (entry and route) and its largest task index, in one pass."""
        if "_tscan" not in self._cache:
            names: set[str] = set()
            top = 0
            for t in self.iter_jsonl("tasks.jsonl", why="a MeshHeal run writes it"):
                names.update(t.get("route") or ())
                if t.get("entry"):
                    names.add(t["entry"])
                top = max(top, t["index"])
            self._cache["_tscan"] = (names, top)
        return self._cache["_tscan"]

    @property
    def n_tasks(self) -> int:
        if "_n" not in self._cache:
            n = self.summary.get("tasks")
            if not isinstance(n, int):
                n = (self.scenario.get("tasks") or {}).get("count")
            if not isinstance(n, int):
                n = self._task_scan()[1] if self.has("tasks.jsonl") else 0
            self._cache["_n"] = n
        return self._cache["_n"]

    def phases(self) -> list[tuple[str, int, int]]:
        """(name, first task, last task) of each phase, in scenario order."""
        out, k = [], 1
        for ph in self.scenario.get("phases") or []:
            n = int(ph.get("tasks", 0))
            out.append((str(ph["name"]), k, k + n - 1))
            k += n
        return out

    def agents(self) -> list[str]:
        """Every agent named in the records (natural order)."""
        if "_agents" not in self._cache:
            # a sweep run at output level records has no reviews.jsonl: its states name the agents
            names: set[str] = set(self.review_index()) if self.has("reviews.jsonl") else set()
            for s in self.states():
                names.add(s["agent"])
            names.update(_summary_agents(self.summary))
            if self.has("tasks.jsonl"):
                names.update(self._task_scan()[0])
            self._cache["_agents"] = _order(names)
        return self._cache["_agents"]

    def output_level(self) -> str:
        """Which output level the folder's record tables look like (docs/sweeps.md#outputs):
        ``summary`` (none: a sweep's default), ``records`` (every table but reviews),
        ``full``; a folder ``meshsim run`` wrote (its provenance.json) is always ``full``."""
        if self.has("provenance.json"):
            return "full"
        states, reviews = self.has("states.jsonl"), self.has("reviews.jsonl")
        if not states and not reviews:
            return "summary"
        if states and not reviews and self.has("tasks.jsonl"):
            return "records"
        return "full"  # (a damaged one: the figures name what is missing)

    def need_records(self, what: str, names: Iterable[str] = MESHHEAL_TABLES) -> None:
        """Raise one line when a table ``what`` reads is missing: for a folder kept at a
        lower output level (a sweep's run) the line names the level needed and ``--rerun``."""
        names = tuple(names)
        missing = [n for n in names if not self.has(n)]
        if not missing:
            return
        level = self.output_level()
        if level != "full":
            need = "records" if "reviews.jsonl" not in names else "full"
            raise RunFolderError(
                f"{' and '.join(missing)} missing: the run was kept at output level '{level}'"
                f"{' (a sweep default)' if level == 'summary' else ''} and the {what} needs level '{need}'; add "
                f"--rerun to run this seed again with full records into the folder, or sweep with --output {need}",
                file=str(self.path))
        self.require(*names, why=f"partial run folder: the {what} needs them")


class _Codes:
    """Small integer codes for the few distinct values of a column (types, abilities, states)."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._code: dict[Any, int] = {}

    def __call__(self, v: Any) -> int:
        c = self._code.get(v)
        if c is None:
            c = self._code[v] = len(self.values)
            self.values.append(v)
        return c


_NONE, _FALSE, _TRUE = 0, 1, 2


def _flag(v: Any) -> int:
    return _NONE if v is None else _TRUE if v is True else _FALSE if v is False else -1


def _unflag(c: int, raw: Any) -> Any:
    return None if c == _NONE else True if c == _TRUE else False if c == _FALSE else raw


class ReviewColumns:
    """One agent's slim review rows (``RunFolder._SLIM`` and the detector's
    ``_SLIM_DET``), kept as columns: a 5,760-agent run has ~900k reviews, which as
    dicts took ~600 MB (issue 22: ``meshsim report`` bounded). Iterating yields
    the same dicts, one at a time."""

    __slots__ = ("codes", "task", "type", "q", "q_none", "probe", "degraded", "ndet", "d_ability", "d_state", "d_z",
                 "d_z_none", "other")

    def __init__(self, codes: _Codes):
        self.codes = codes
        self.task, self.type = array("q"), array("l")
        self.q, self.q_none = array("d"), bytearray()
        self.probe, self.degraded = bytearray(), bytearray()
        self.ndet = array("l")
        self.d_ability, self.d_state = array("l"), array("l")
        self.d_z, self.d_z_none = array("d"), bytearray()
        self.other: dict[tuple[int, str], Any] = {}  # a value no column takes (never, from meshsim)

    def append(self, r: dict[str, Any]) -> None:
        i = len(self.task)
        code = self.codes
        t = r.get("task")
        if type(t) is int:
            self.task.append(t)
        else:
            self.task.append(0)
            self.other[(i, "task")] = t
        self.type.append(code(r.get("type")))
        q = r.get("q")
        if q is None or type(q) in (int, float):
            self.q.append(0.0 if q is None else float(q))
            self.q_none.append(1 if q is None else 2 if type(q) is int else 0)
        else:
            self.q.append(0.0)
            self.q_none.append(3)
            self.other[(i, "q")] = q
        for name, col in (("probe", self.probe), ("degraded", self.degraded)):
            v = r.get(name)
            f = _flag(v)
            col.append(f if f >= 0 else 3)
            if f < 0:
                self.other[(i, name)] = v
        det = r.get("detector") or ()
        self.ndet.append(len(det))
        for d in det:
            self.d_ability.append(code(d.get("ability")))
            self.d_state.append(code(d.get("state")))
            z = d.get("z")
            if z is None or type(z) is float:
                self.d_z.append(0.0 if z is None else z)
                self.d_z_none.append(1 if z is None else 0)
            else:  # an int or anything else: kept as it was read
                self.d_z.append(0.0)
                self.d_z_none.append(2)
                self.other[(len(self.d_z) - 1, "z")] = z

    def __len__(self) -> int:
        return len(self.task)

    def __iter__(self):
        vals = self.codes.values
        other = self.other
        j = 0
        for i in range(len(self.task)):
            qn = self.q_none[i]
            q = None if qn == 1 else self.q[i] if qn == 0 else int(self.q[i]) if qn == 2 else other[(i, "q")]
            row = {"task": other.get((i, "task"), self.task[i]) if other else self.task[i],
                   "type": vals[self.type[i]], "q": q,
                   "probe": _unflag(self.probe[i], other.get((i, "probe"))),
                   "degraded": _unflag(self.degraded[i], other.get((i, "degraded")))}
            det = []
            for _ in range(self.ndet[i]):
                zn = self.d_z_none[j]
                det.append({"ability": vals[self.d_ability[j]], "state": vals[self.d_state[j]],
                            "z": None if zn == 1 else self.d_z[j] if zn == 0 else other[(j, "z")]})
                j += 1
            row["detector"] = det
            yield row


def _summary_agents(summary: dict) -> dict[str, dict]:
    a = summary.get("agents")
    return a if isinstance(a, dict) else {}


@dataclass
class RunSet:
    """A run folder as given on the command line: one seed, or a multi-seed
    folder (``seed-<s>/`` sub-folders plus ``aggregate.json``)."""

    path: Path
    runs: dict[int, RunFolder]
    aggregate: Optional[dict[str, Any]] = None
    _single: Optional[RunFolder] = field(default=None, repr=False)
    #: a multi-seed folder without aggregate.json (``meshsim run --seed S`` of a
    #: multi-seed scenario, a sweep point's ``runs/<point>/``): the aggregate was
    #: computed here from the finished seeds' summaries; what this says is shown
    #: beside every seed note (which seeds, which are unfinished)
    note: str = ""

    @property
    def multi(self) -> bool:
        return self.aggregate is not None

    @property
    def seeds(self) -> list[int]:
        return list(self.runs)

    def run(self, seed: Optional[int] = None) -> RunFolder:
        if seed is None:
            return next(iter(self.runs.values()))
        if seed not in self.runs:
            raise RunFolderError(f"no seed {seed} in this run folder (seeds: {', '.join(map(str, self.runs))})",
                                 file=str(self.path))
        return self.runs[seed]

    @property
    def first(self) -> RunFolder:
        return self.run()

    def summaries(self) -> list[dict[str, Any]]:
        return [r.summary for r in self.runs.values()]

    def stat(self, path: str) -> Optional[dict[str, Any]]:
        """``{mean, std, min, max, n[, missing]}`` (or ``{true, n}``) of a flattened summary field."""
        if self.aggregate is not None:
            return (self.aggregate.get("metrics") or {}).get(path)
        v = get_path(self.first.summary, path, None)
        if isinstance(v, bool):
            return {"true": int(v), "n": 1}
        if isinstance(v, (int, float)) and math.isfinite(v):
            return {"mean": float(v), "std": 0.0, "min": float(v), "max": float(v), "n": 1}
        return None


def _seed_dirs(path: Path) -> dict[int, Path]:
    out = {}
    for p in path.iterdir():
        if p.is_dir() and p.name.startswith("seed-") and p.name[5:].lstrip("-").isdigit():
            out[int(p.name[5:])] = p
    return dict(sorted(out.items()))


def _check_single(path: Path) -> None:
    has_sum = (path / "summary.json").is_file()
    has_sc = (path / "scenario.resolved.yaml").is_file()
    if has_sum and has_sc:
        return
    if not has_sum and not has_sc:
        raise RunFolderError("not a run folder (no summary.json, scenario.resolved.yaml or seed-*/ folders)",
                             file=str(path))
    if not has_sum:
        why = "the run failed, see error.txt" if (path / "error.txt").is_file() else "the run did not finish"
        raise RunFolderError(f"summary.json missing ({why})", file=str(path))
    raise RunFolderError("scenario.resolved.yaml missing (partial run folder)", file=str(path))


def open_run(path: Path | str | RunSet | RunFolder) -> RunSet:
    """Open and check a run folder; raises :class:`RunFolderError` naming what is missing."""
    if isinstance(path, RunSet):
        return path
    if isinstance(path, RunFolder):
        _check_single(path.path)
        return RunSet(path.path, {path.seed if path.seed is not None else 0: path})
    p = Path(path)
    if not p.exists():
        raise RunFolderError("run folder not found", file=str(p))
    if not p.is_dir():
        raise RunFolderError("not a folder (give the run folder, e.g. runs/<scenario>)", file=str(p))
    seeds = _seed_dirs(p)
    has_agg = (p / "aggregate.json").is_file()
    if not seeds and not has_agg:
        _check_single(p)
        rf = RunFolder(p)
        return RunSet(p, {rf.seed if rf.seed is not None else 0: rf})
    # multi-seed folder
    if not has_agg:
        return _without_aggregate(p, seeds)
    agg = RunFolder(p).json("aggregate.json")
    if not isinstance(agg, dict) or "metrics" not in agg:
        raise RunFolderError("aggregate.json has no 'metrics'", file=str(p / "aggregate.json"))
    listed = [int(s) for s in agg.get("seeds", [])] or list(seeds)
    problems = []
    for s in listed:
        d = seeds.get(s)
        if d is None:
            problems.append(f"seed-{s}/")
            continue
        for name in ("summary.json", "scenario.resolved.yaml"):
            if not (d / name).is_file():
                problems.append(f"seed-{s}/{name}")
    if problems:
        shown = ", ".join(problems[:4]) + (f" and {len(problems) - 4} more" if len(problems) > 4 else "")
        raise RunFolderError(f"partial multi-seed run folder: {shown} missing (rerun 'meshsim run' to resume)",
                             file=str(p))
    return RunSet(p, {s: RunFolder(seeds[s]) for s in listed}, agg)


def _seed_list(seeds: Iterable[int]) -> str:
    xs = list(seeds)
    return ", ".join(map(str, xs[:12])) + (f" and {len(xs) - 12} more" if len(xs) > 12 else "")


def _without_aggregate(p: Path, seeds: dict[int, Path]) -> RunSet:
    """A multi-seed folder with no aggregate.json: some of its seeds were run
    (``meshsim run --seed S``), or it is a sweep point (``runs/<point>/``), or
    its last seed is still running. Its finished seeds are what there is: their
    aggregate is computed here and :attr:`RunSet.note` says which seeds it covers."""
    from ..observe.aggregate import aggregate

    done = {s: d for s, d in seeds.items()
            if (d / "summary.json").is_file() and (d / "scenario.resolved.yaml").is_file()}
    open_ = [s for s in seeds if s not in done]
    if not done:
        shown = ", ".join(f"seed-{s}/summary.json" for s in open_[:4]) + \
            (f" and {len(open_) - 4} more" if len(open_) > 4 else "")
        raise RunFolderError(f"no finished seed in this multi-seed run folder: {shown or 'aggregate.json'} missing "
                             "(rerun 'meshsim run' to resume)", file=str(p))
    runs = {s: RunFolder(d) for s, d in done.items()}
    agg = {"seeds": list(done), "metrics": aggregate([r.summary for r in runs.values()])}
    note = "the folder has no aggregate.json; " + (
        f"seed {_seed_list(done)} is its one finished seed" if len(done) == 1
        else f"computed here from its {len(done)} finished seeds")
    if open_:
        note += f"; unfinished: seed {_seed_list(open_)}"
    return RunSet(p, runs, agg, note=note)


def _as_runset(run: Any) -> RunSet:
    return open_run(run)


def _as_folder(run: Any, seed: Optional[int] = None) -> RunFolder:
    if isinstance(run, RunFolder):
        return run
    return open_run(run).run(seed)


def _need_meshheal(rf: RunFolder, what: str) -> None:
    names = ("states.jsonl",) if what == "heatmap" else ("states.jsonl", "reviews.jsonl")
    if rf.protocol == "meshheal":
        rf.need_records(what, names)
    rf.require(*names, why=f"the {what} needs a MeshHeal run")


def _agent_list(rf: RunFolder, k: int = 8) -> str:
    names = rf.agents()
    return ", ".join(names[:k]) + (f", … ({len(names)} in all)" if len(names) > k else "")
