"""Helpers shared by the backends: finding and loading a profile, stable hashing, one call's PRNG."""
from __future__ import annotations

import copy
import hashlib
import math
from math import cos as _cos, log as _log, sqrt as _sqrt
from pathlib import Path
from typing import Any, Callable, Final, Optional, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from ..core.errors import InputError
from ..core.files import load_yaml
from ._rng64 import MachineSplitMix64, machine_arithmetic

M = TypeVar("M", bound=BaseModel)


def find_profile(name: str, base_dir: Optional[Path]) -> Path:
    """A backend profile by path or name: relative to ``base_dir`` (the scenario's folder), as given,
    ``backends/<name>.yaml`` beside the scenario, then in the working folder (a user's own profiles
    win), then among the profiles shipped in the package (:mod:`meshsim.core.bundled`: found from any
    folder, wheel or checkout)."""
    cands = []
    p = Path(name)
    if base_dir is not None and not p.is_absolute():
        cands.append(base_dir / p)
    cands.append(p)
    stem = name if name.endswith((".yaml", ".yml")) else f"{name}.yaml"
    if base_dir is not None:
        cands.append(base_dir / "backends" / stem)
    cands.append(Path("backends") / stem)
    from ..core.bundled import bundled
    from ..core.files import is_input_file

    cands.append(bundled(Path("backends") / stem))

    for c in cands:
        if is_input_file(c):  # shipped to a sweep's Dask worker (files.shipped), or on this machine
            return c
    raise InputError("backend profile not found (looked beside the scenario, in backends/ beside it, in "
                     f"./backends and among the shipped profiles){_profiles_hint(name, base_dir)}",
                     field="profile", value=name)


def _profiles_hint(name: str, base_dir: Optional[Path]) -> str:
    """``; did you mean 'fake-default'?; profiles: a, b, …``: the profiles that exist where
    :func:`find_profile` looks by name (one line; issue 32)."""
    import difflib

    from ..core.bundled import bundled

    names: set[str] = set()
    for folder in ([base_dir / "backends"] if base_dir is not None else []) + [Path("backends"),
                                                                                 bundled("backends")]:
        try:
            names.update(p.stem for p in folder.glob("*.yaml"))
        except OSError:
            continue
    if not names:
        return ""
    stem = Path(name).name.removesuffix(".yaml").removesuffix(".yml")
    close = difflib.get_close_matches(stem, sorted(names), n=1, cutoff=0.6)
    return (f"; did you mean '{close[0]}'?" if close else "") + f"; profiles: {', '.join(sorted(names))}"


def load_validated(path: str | Path, model: type[M], overrides: Optional[dict[str, Any]] = None) -> M:
    """Read a YAML profile into ``model``; one-line InputError naming file and field.

    ``overrides`` (dotted path -> value, e.g. ``{"refine.qwen3-4b.sway": 0.5}``)
    replace numbers of the file before validation: how a scenario or a
    sensitivity sweep changes one profile field without a copy of the file
    (``backend: {..., overrides: {...}}``). A path that does not name an
    existing field is an error naming ``overrides.<path>``.
    """
    path = Path(path)
    data = load_yaml(path, "profile")
    if overrides:
        data = override_profile(data, overrides, path.stem)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        e = exc.errors(include_url=False)[0]
        loc = ".".join(str(x) for x in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            from ..core.types import closest_key

            msg = "unknown key" + closest_key(model, tuple(e["loc"]))
        hit = next((str(k) for k in (overrides or {}) if loc == str(k) or loc.startswith(f"{k}.")
                    or str(k).startswith(f"{loc}.") or (not loc and str(k) in msg)), None)
        if hit is not None:  # the override is at fault, not the file: the caller names its scenario
            raise InputError(f"{msg} (profile {path.stem})", field=f"overrides.{hit}",
                             value=(overrides or {})[hit]) from None
        raise InputError(msg, file=str(path), field=loc or None) from None


def override_profile(data: Any, overrides: dict[str, Any], source: Optional[str] = None) -> Any:
    """A copy of profile ``data`` with ``overrides`` (dotted path -> value) applied
    (``source`` names the profile in error messages).

    Only existing leaves can be replaced (a typo must not silently add an
    unused field); list items are addressed by index (``score.qwen3-4b.agree.0``).
    """
    if not isinstance(overrides, dict):
        raise InputError("must be a mapping of dotted profile path -> value", field="overrides", value=overrides)
    from ..core.dotted import PathError, set_path

    data = copy.deepcopy(data)
    for path, value in overrides.items():
        try:
            set_path(data, str(path).split("."), value, create=False)
        except PathError:
            where = f" {source}" if source else ""
            raise InputError(f"no such field in the profile{where}", field=f"overrides.{path}", value=value) from None
    return data


def hash_unit(*parts: Any) -> float:
    """A uniform in (0, 1) from a stable hash of ``parts`` (no global state)."""
    h = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return (int.from_bytes(h, "little") + 0.5) / 2.0 ** 64


def model_role(model: str) -> str:
    """The fakes know two models: ``weak``, and ``strong`` for anything else."""
    return "weak" if model == "weak" else "strong"

_M64 = (1 << 64) - 1


class SplitMix64:
    """A tiny deterministic PRNG for one call (seeding ``random.Random`` costs
    ~5 µs, more than the whole fake call; SplitMix64 seeds for free)."""

    __slots__ = ("s",)

    def __init__(self, seed: int):
        self.s = seed & _M64

    def random(self) -> float:
        self.s = z = (self.s + 0x9E3779B97F4A7C15) & _M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        return ((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0)

    def gauss(self, mu: float, sigma: float) -> float:
        # two draws of random(), inlined (the same arithmetic: this is on every fake call's path)
        self.s = z = (self.s + 0x9E3779B97F4A7C15) & _M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        u1 = ((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0) or 5e-324
        self.s = z = (self.s + 0x9E3779B97F4A7C15) & _M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        u2 = ((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0)
        # math's functions bound at import (the same functions: one attribute lookup less each)
        return mu + sigma * _sqrt(-2.0 * _log(u1)) * _cos(6.283185307179586 * u2)

    def randrange(self, n: int) -> int:
        return min(n - 1, int(self.random() * n))


class Rng(Protocol):
    """What a fake's call draws from (``SplitMix64``, or its machine-integer build)."""

    def random(self) -> float: ...

    def gauss(self, mu: float, sigma: float) -> float: ...

    def randrange(self, n: int) -> int: ...


def _rng_class() -> Callable[[int], Rng]:
    """The class behind :func:`new_rng`: the machine-integer SplitMix64 where its module is compiled and draws the
    reference's stream (checked here on a few seeds, each through all three draws), the reference otherwise."""
    if not machine_arithmetic():
        return SplitMix64
    for seed in (0, 1, 2 ** 63, _M64, 0x9E3779B97F4A7C15):
        a, b = SplitMix64(seed), MachineSplitMix64(seed)
        if (a.random(), a.gauss(0.5, 2.0), a.randrange(7)) != (b.random(), b.gauss(0.5, 2.0), b.randrange(7)):
            return SplitMix64  # pragma: no cover - a build whose integers do not behave as C's
    return MachineSplitMix64


#: a per-call generator for ``seed``: the same stream on every path (pure or compiled), the fastest there
new_rng: Final[Callable[[int], Rng]] = _rng_class()
