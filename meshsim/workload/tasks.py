"""Dataset profiles and task streams (MeshHeal App. B.2-B.3).

A profile names a seven-ability vocabulary, the six-agent ability assignment
(three holders per ability), seven task types each needing two complementary
abilities held by disjoint agent sets, and the degradation targets. Large
networks replicate the six-agent profile: agent ``A{6r+j}`` of replica ``r``
holds what profile agent ``A{j}`` holds (Sec. 6.3).

Streams are balanced blocks (every type equally often in each block, order
shuffled within the block by the run's ``tasks`` stream), so phases keep the
same task-type mix (App. B.3: 504 tasks in 12 balanced blocks).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any


from ..core.calls import TaskRef
from ..core.errors import InputError
from ..core.files import is_input_file, load_yaml
from ..core.names import node_order

__all__ = ["DatasetProfile", "load_profile", "builtin_profiles", "replicate", "make_stream"]


@dataclass(frozen=True)
class DatasetProfile:
    name: str
    abilities: dict[str, str]  # vocabulary: name -> description (for InferAbilities)
    agents: dict[str, list[str]]  # six-agent assignment
    types: dict[str, tuple[str, str]]  # task type -> required ability pair
    targets: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.agents)

    def check(self) -> list[str]:
        """Violations of the App. B.2 structure (empty when the profile is sound)."""
        out = []
        holders = {s: {a for a, ks in self.agents.items() if s in ks} for s in self.abilities}
        for a, ks in self.agents.items():
            for s in ks:
                if s not in self.abilities:
                    out.append(f"agent {a}: unknown ability {s!r}")
        for t, pair in self.types.items():
            if len(pair) != 2 or any(s not in self.abilities for s in pair):
                out.append(f"type {t}: needs two known abilities, got {list(pair)}")
                continue
            if holders[pair[0]] & holders[pair[1]]:
                out.append(f"type {t}: abilities {pair} share holders {sorted(holders[pair[0]] & holders[pair[1]])}")
        used = {s for p in self.types.values() for s in p}
        for s in self.abilities:
            if s not in used:
                out.append(f"ability {s!r} is needed by no task type")
        for tgt in self.targets:
            if tgt not in self.agents:
                out.append(f"target {tgt} is not an agent")
                continue
            for s in self.agents[tgt]:
                healthy = holders[s] - set(self.targets)
                if len(healthy) < 2:
                    out.append(f"target {tgt}: ability {s!r} has {len(healthy)} healthy holders (< 2)")
        return out


def _profile_path(name: str) -> Path | None:
    p = Path(name)
    if p.suffix in (".yaml", ".yml") and is_input_file(p):  # on this machine, or shipped (files.shipped)
        return p
    res = resources.files("meshsim") / "data" / "datasets" / f"{name}.yaml"
    return Path(str(res)) if res.is_file() else None


def builtin_profiles() -> list[str]:
    folder = resources.files("meshsim") / "data" / "datasets"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


#: the keys of a dataset profile file
_PROFILE_KEYS = ("name", "description", "abilities", "agents", "types", "targets")


def load_profile(name: str) -> DatasetProfile:
    """A built-in profile (``bbh``, ``math``, ``mmlu_pro``) or a profile YAML path."""
    path = _profile_path(name)
    if path is None:
        raise InputError(f"unknown dataset profile; choose one of {builtin_profiles()} or a .yaml path",
                         field="tasks.dataset", value=name)
    data = load_yaml(path, "profile")
    if isinstance(data, dict):
        for key in data:
            if key not in _PROFILE_KEYS:  # an unknown key is an error everywhere (issue 19)
                import difflib

                close = difflib.get_close_matches(str(key), _PROFILE_KEYS, n=1)
                raise InputError("unknown key" + (f" (did you mean '{close[0]}'?)" if close else
                                                  f" (choose from {', '.join(_PROFILE_KEYS)})"),
                                 file=str(path), field=str(key))
    try:
        prof = DatasetProfile(
            name=str(data["name"]),
            abilities={str(k): str(v) for k, v in data["abilities"].items()},
            agents={str(k): [str(s) for s in v] for k, v in data["agents"].items()},
            types={str(k): tuple(v) for k, v in data["types"].items()},
            targets=tuple(data.get("targets", ())),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"malformed dataset profile ({type(exc).__name__}: {exc})", file=str(path)) from None
    bad = prof.check()
    if bad:
        raise InputError(f"dataset profile is inconsistent: {bad[0]}", file=str(path))
    return prof


def replicate(profile: DatasetProfile, replicas: int) -> tuple[dict[str, list[str]], list[str]]:
    """Abilities of ``6 * replicas`` agents and the replicated degradation targets."""
    size = profile.size
    order = sorted(profile.agents, key=node_order)
    abilities: dict[str, list[str]] = {}
    targets: list[str] = []
    for r in range(replicas):
        for j, base in enumerate(order, 1):
            name = f"A{r * size + j}"
            abilities[name] = list(profile.agents[base])
            if base in profile.targets:
                targets.append(name)
    return abilities, targets


def make_stream(profile: DatasetProfile, count: int, rnd: random.Random,
                block: int | None = None) -> list[TaskRef]:
    """``count`` tasks in balanced blocks of ``block`` (default: 6 per type)."""
    types = list(profile.types)
    block = block or 6 * len(types)
    if block % len(types):
        raise InputError(f"block size must be a multiple of the {len(types)} task types", field="tasks.block",
                         value=block)
    out: list[TaskRef] = []
    serial = {t: 0 for t in types}
    while len(out) < count:
        chunk = types * (block // len(types))
        rnd.shuffle(chunk)
        for t in chunk:
            if len(out) == count:
                break
            serial[t] += 1
            k = serial[t]
            out.append(TaskRef(index=len(out) + 1, id=f"{profile.name}/{t}/{k}", type=t,
                               question=f"[{profile.name}:{t} #{k}]", answer=None,
                               required=tuple(profile.types[t]), dataset=profile.name))
    return out


def stream_from_file(profile: DatasetProfile, path: Path, count: int, rnd: random.Random,
                     block: int | None = None) -> list[TaskRef]:
    """A balanced stream whose questions (and gold answers) come from a task file.

    Items of types the profile does not know are ignored; within each type,
    items are drawn in a seeded order without replacement, so the stream uses
    distinct questions as long as the file has enough of each type.
    """
    from .datasets import load_items, to_taskref

    items = [it for it in load_items(path) if it.type in profile.types]
    by_type: dict[str, list] = {}
    for it in items:
        by_type.setdefault(it.type, []).append(it)
    missing = [t for t in profile.types if t not in by_type]
    if missing:
        raise InputError(f"task file has no items of type {missing[0]!r} (profile {profile.name})",
                         file=str(path), field="tasks.file")
    for lst in by_type.values():
        rnd.shuffle(lst)
    shape = make_stream(profile, count, rnd, block)
    used = {t: 0 for t in by_type}
    out = []
    for ref in shape:
        pool = by_type[ref.type]
        k = used[ref.type]
        if k >= len(pool):
            raise InputError(f"task file has only {len(pool)} items of type {ref.type!r} for a {count}-task stream",
                             file=str(path), field="tasks.count", value=count)
        used[ref.type] = k + 1
        out.append(to_taskref(pool[k], ref.index, profile.types[ref.type]))
    return out


def profile_summary(profile: DatasetProfile) -> dict[str, Any]:
    return {"name": profile.name, "abilities": sorted(profile.abilities), "types": {t: list(p) for t, p in
                                                                                  profile.types.items()},
            "targets": list(profile.targets)}
