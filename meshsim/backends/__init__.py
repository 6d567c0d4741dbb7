"""LLM call backends: the interface, fakes, replay and real endpoints.

``make_backend(spec, seed, base_dir)`` builds the backend a scenario's
``backend:`` section names. A ``profile`` is looked up as a path relative to
the scenario file, then as ``backends/<name>.yaml`` in the working folder,
then in the ``backends/`` folder next to the installed package (a checkout).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ..core.errors import InputError
from ..core.calls import Backend, CallKind, LatencyModel, NullBackend, Request, Response, TaskRef

__all__ = ["Backend", "CallKind", "LatencyModel", "NullBackend", "Request", "Response", "TaskRef",
           "make_backend", "check_backend", "find_profile"]

KINDS = ("fake", "null", "fake_consensus", "openai", "replay")


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
    """``; did you mean 'fake-default'? profiles: a, b, …``: the profiles that exist where
    :func:`find_profile` looks (by name, on one line), the closest first."""
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


def _fields(spec: dict[str, Any], allowed: set[str]) -> None:
    for k in spec:
        if k not in allowed:
            from ..core.types import unknown_key

            raise InputError(unknown_key(k, allowed), field=k)


def check_backend(spec: dict[str, Any], base_dir: Optional[Path], need_key: bool = True) -> None:
    kind = spec.get("kind")
    if kind not in KINDS:
        raise InputError(f"unknown backend kind; choose one of {list(KINDS)}", field="kind", value=kind)
    if kind == "fake":
        _fields(spec, {"kind", "profile", "draw", "overrides"})
        if not isinstance(spec.get("draw", 0), int) or isinstance(spec.get("draw", 0), bool) \
                or spec.get("draw", 0) < 0:
            raise InputError("must be an integer >= 0", field="draw", value=spec.get("draw"))
        if not spec.get("profile"):
            raise InputError("a fake backend needs 'profile'", field="profile")
        # overrides: {dotted.profile.path: value}, as for fake_consensus (sweeps of review quality)
        _load_fake(find_profile(spec["profile"], base_dir), spec.get("overrides"))
    elif kind == "fake_consensus":  # SAC / CP-WBFT answer-space fake (docs/sac.md)
        _fields(spec, {"kind", "profile", "overrides"})
        if not spec.get("profile"):
            raise InputError("a fake_consensus backend needs 'profile'", field="profile")
        from .fake_consensus import load_consensus_profile

        # overrides: {dotted.profile.path: value}, one profile field changed (sensitivity sweeps)
        load_consensus_profile(find_profile(spec["profile"], base_dir), spec.get("overrides"))
    elif kind == "openai":  # real endpoints (docs/backends.md)
        from .openai import check_openai_spec

        check_openai_spec(spec, base_dir, need_key=need_key)
    elif kind == "replay":  # record / replay wrapper (docs/backends.md)
        from .replay import check_replay_spec

        check_replay_spec(spec, base_dir)
    else:
        _fields(spec, {"kind"})


def _load_fake(path: Path, overrides: Optional[dict[str, Any]]):
    """A MeshHeal fake profile, with ``overrides`` (dotted profile path -> value)
    applied before validation. The file is checked on its own first, so an
    error names the file when the file is at fault and ``overrides.<path>``
    when an override is."""
    from .fake import FakeProfile, load_fake_profile

    prof = load_fake_profile(path)
    if not overrides:
        return prof
    from .profiles import load_validated

    prof = load_validated(path, FakeProfile, overrides)
    for role in ("strong", "weak"):
        if role not in prof.models:
            raise InputError(f"profile needs a '{role}' model", field="overrides", value=overrides)
        if "default" not in prof.models[role].skill:
            raise InputError(f"models.{role}.skill needs a 'default' skill", field="overrides", value=overrides)
    return prof


def _describe_overrides(backend: Backend, overrides: dict[str, Any]) -> None:
    """The summary's ``backend`` names the overridden profile fields (as fake_consensus does)."""
    plain = backend.describe

    def describe() -> dict[str, Any]:
        out = plain()
        out["overrides"] = {str(k): overrides[k] for k in sorted(overrides, key=str)}
        return out

    backend.describe = describe  # type: ignore[method-assign]


def make_backend(spec: Optional[dict[str, Any]], seed: int, base_dir: Optional[Path],
                 need_key: bool = True) -> Backend:
    if spec is None:
        return NullBackend()
    check_backend(spec, base_dir, need_key=need_key)
    if spec["kind"] == "openai":
        from .openai import make_openai

        return make_openai(spec, seed, base_dir, require_key=need_key)
    if spec["kind"] == "replay":
        from .replay import make_replay

        return make_replay(spec, seed, base_dir)
    if spec["kind"] == "fake":
        from .fake import FakeBackend

        over = spec.get("overrides")
        backend = FakeBackend(_load_fake(find_profile(spec["profile"], base_dir), over), seed=seed,
                              draw=int(spec.get("draw", 0)))
        if over:
            _describe_overrides(backend, over)
        return backend
    if spec["kind"] == "fake_consensus":
        from .fake_consensus import ConsensusFakeBackend, load_consensus_profile

        over = spec.get("overrides")
        return ConsensusFakeBackend(load_consensus_profile(find_profile(spec["profile"], base_dir), over), seed=seed,
                                    overrides=over)
    return NullBackend()
