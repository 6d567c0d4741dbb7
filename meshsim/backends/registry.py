"""The registry of backend kinds, at the bottom of :mod:`meshsim.backends`.

A scenario's ``backend: {kind: NAME, ...}`` looks ``NAME`` up here. A kind is
two functions:

- ``check(spec, base_dir, need_key) -> loaded``: refuse a bad spec with a
  one-line :class:`~meshsim.core.errors.InputError` naming the field, and
  return what it had to load to check it (the profile, or ``None``);
- ``build(spec, seed, base_dir, need_key, loaded) -> Backend``: the backend,
  from that checked ``loaded`` (so a profile is read and validated once per
  backend built, not once to check and again to build).

Each backend module registers its kind when it is imported, as the topology
generators do (:mod:`meshsim.graphs.registry`): the first lookup imports every
module of the package that calls :func:`register_backend`
(:class:`meshsim.core.discovery.Registry`), so adding a backend is one new
module and one registration call, nothing else edited. The package's
``__init__`` imports the built-in kinds only to keep the order error messages
list them in; nothing here imports upward.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from ..core.calls import Backend, NullBackend
from ..core.discovery import Registry
from ..core.errors import InputError

__all__ = ["BACKENDS", "BackendKind", "BackendPlan", "register_backend", "backend_kind", "ranged_kinds",
           "check_backend", "plan_backend",
           "make_backend", "build_backend", "check_fields"]

Check = Callable[[dict[str, Any], Optional[Path], bool], Any]
Build = Callable[[dict[str, Any], int, Optional[Path], bool, Any], Backend]


@dataclass(frozen=True)
class BackendKind:
    """A registered kind: its ``check`` and ``build``, and what the rest of meshsim asks of a kind
    (declared at its registration, never read off its name)."""

    name: str
    check: Check
    build: Build
    #: its calls reach outside the run (an endpoint; a cassette it writes): a Byzantine run's paired
    #: attribution run (issue 34) is skipped, not sent to it again
    calls_out: bool = False
    #: spec fields that say where the answers come from, not what was run: left out of
    #: ``scenario.resolved.yaml`` (a recorded run and its replay resolve alike)
    unresolved: tuple[str, ...] = ()
    #: the spec field holding a wrapped backend's spec (whose profile the scenario's inputs list)
    wraps: Optional[str] = None
    #: the files a spec names besides a profile: ``spec -> {name: (path, may be absent)}``
    files: Optional[Callable[[dict[str, Any]], dict[str, tuple[str, bool]]]] = None
    #: a fake whose profile's numbers are assumptions with plausible ranges (``meshsim
    #: uncertainty`` varies them, ``meshsim profile check`` requires them): the profile's model
    ranged_profile: Optional[type] = None
    #: of a ranged profile's factors, those that can move a run on the given datasets (None: all)
    factors_in_use: Optional[Callable[[list[Any], dict[str, Any], list[str]], list[Any]]] = None


#: backend kind -> its check and build (in registration order: error messages list them so); a lookup
#: first imports every module of the package that calls :func:`register_backend` (:mod:`meshsim.core.discovery`)
BACKENDS: Registry[BackendKind] = Registry(__package__ or "meshsim.backends", "register_backend")


def register_backend(name: str, check: Check, build: Build, **capabilities: Any) -> BackendKind:
    """Add a backend kind (see the module docstring for ``check`` and ``build``; ``capabilities``:
    the other fields of :class:`BackendKind`)."""
    kind = BackendKind(name, check, build, **capabilities)
    BACKENDS[name] = kind
    return kind


def backend_kind(name: Any) -> Optional[BackendKind]:
    """The registered kind called ``name`` (``None``: not a registered name)."""
    return BACKENDS.get(name) if isinstance(name, str) else None


def ranged_kinds() -> list[str]:
    """The kinds whose profiles carry assumption ranges (:attr:`BackendKind.ranged_profile`), in registration order."""
    return [k.name for k in BACKENDS.values() if k.ranged_profile is not None]


def check_fields(spec: dict[str, Any], allowed: set[str]) -> None:
    """Refuse a key of ``spec`` outside ``allowed`` (naming the closest allowed one)."""
    for k in spec:
        if k not in allowed:
            from ..core.types import unknown_key

            raise InputError(unknown_key(k, allowed), field=k)


def _kind(spec: dict[str, Any]) -> BackendKind:
    kind = spec.get("kind")
    entry = backend_kind(kind)
    if entry is None:
        raise InputError(f"unknown backend kind; choose one of {list(BACKENDS)}", field="kind", value=kind)
    return entry


def check_backend(spec: dict[str, Any], base_dir: Optional[Path], need_key: bool = True) -> Any:
    """Check a scenario's ``backend:`` spec; returns what the check loaded (its profile, or ``None``)."""
    return _kind(spec).check(spec, base_dir, need_key)


def build_backend(spec: dict[str, Any], seed: int, base_dir: Optional[Path], need_key: bool, loaded: Any) -> Backend:
    """The backend of a spec already checked by :func:`check_backend` (which returned ``loaded``)."""
    return _kind(spec).build(spec, seed, base_dir, need_key, loaded)


@dataclass(frozen=True)
class BackendPlan:
    """A ``backend:`` spec checked once, with what its check loaded (the profile): a run
    plans its backend once and builds one backend per seed from it (its preflight too),
    rather than reading and validating the profile again for each."""

    spec: Optional[dict[str, Any]]
    base_dir: Optional[Path]
    need_key: bool
    loaded: Any

    def build(self, seed: int) -> Backend:
        if self.spec is None:
            return NullBackend()
        return build_backend(self.spec, seed, self.base_dir, self.need_key, self.loaded)


def plan_backend(spec: Optional[dict[str, Any]], base_dir: Optional[Path], need_key: bool = True) -> BackendPlan:
    """Check ``spec`` (``None``: no backend) and keep what the check loaded, to build from."""
    loaded = None if spec is None else check_backend(spec, base_dir, need_key=need_key)
    return BackendPlan(spec, base_dir, need_key, loaded)


def make_backend(spec: Optional[dict[str, Any]], seed: int, base_dir: Optional[Path],
                 need_key: bool = True) -> Backend:
    """The backend a scenario's ``backend:`` section names (none: :class:`NullBackend`)."""
    return plan_backend(spec, base_dir, need_key).build(seed)
