"""``meshsim backends``: explain, calibrate and fit backend profiles (docs/backends.md)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from .app import _seed_text, _seeds_capped, _SEEDS_FROM_1, main


@main.group()
def backends() -> None:
    """LLM backends: explain, calibrate and fit fake profiles (docs/backends.md)."""


@backends.command("fit")
@click.argument("source", type=click.Path(), metavar="CASSETTE_OR_RUN")
@click.option("--out", "-o", type=click.Path(dir_okay=False), required=True, help="Profile YAML to write.")
@click.option("--name", default=None, help="Profile name (default: the output file's stem).")
@click.option("--base", default=None, help="Profile supplying what the calls cannot (default: fake-default).")
@click.option("--check/--no-check", default=True, show_default=True,
              help="With a run folder: re-run its scenario with the fitted profile and compare "
                   "accuracy per task type with the recorded run.")
@click.option("--draws", default=20, show_default=True, type=click.IntRange(1, 10000),
              help="Independent model-outcome draws (backend.draw) simulated for the check.")
@click.option("--calibrate", "rounds", default=6, show_default=True, type=click.IntRange(0, 100),
              help="Rounds tuning per-type accuracy by simulation until the check agrees (0: off).")
@click.option("--tol", default=0.02, show_default=True, type=click.FloatRange(0.0, 1.0),
              help="Calibration stops when every type is within this of the recorded accuracy.")
@click.option("--fail-above", type=click.FloatRange(0.0, 1.0), default=None,
              help="Exit 1 when a type's simulated accuracy differs from the recorded one by more.")
def backends_fit(source: str, out: str, name: str | None, base: str | None, check: bool, draws: int,
                 rounds: int, tol: float, fail_above: float | None) -> None:
    """Estimate a fake profile from a cassette or a recorded run folder."""
    import tempfile

    from ..backends.fit import find_cassettes, fit_profile, load_entries, write_profile

    cassettes = find_cassettes(source)
    entries = load_entries(cassettes)
    prof, notes = fit_profile(entries, name=name or Path(out).stem, base=base,
                              cassette_name=", ".join(c.name for c in cassettes))
    for n in notes:
        click.echo(f"  {n}")
    rows = None
    from ..io.records import has_records

    if check and Path(source).is_dir() and has_records(Path(source), "tasks.jsonl"):
        from ..paper import fitcheck

        with tempfile.TemporaryDirectory(prefix="meshsim-fit-") as tmp:
            prof, rows = fitcheck.calibrate(source, prof, Path(tmp), rounds=rounds, draws=draws, tol=tol,
                                            progress=lambda m: click.echo(f"  calibrate {m}", err=True))
        notes.append(f"check: the recorded scenario re-run with this profile, {draws} draws "
                     f"({rounds} calibration rounds at most):")
        for r in rows:
            notes.append(_fit_row(r))
    path = write_profile(prof, notes, out)
    if rows is not None:
        click.echo(f"  {'type':<40} {'tasks':>5} {'recorded':>9} {'simulated':>9} {'diff':>7}")
        for r in rows:
            click.echo(f"  {_fit_row(r)}")
    click.echo(f"wrote {path}")
    if rows is not None and fail_above is not None:
        bad = [r for r in rows if r["diff"] is not None and abs(r["diff"]) > fail_above]
        if bad:
            click.echo(f"error: {source}: simulated accuracy of {bad[0]['type']!r} differs from the recorded "
                       f"one by {bad[0]['diff']:+.3f} (limit {fail_above})", err=True)
            sys.exit(1)


@backends.command("explain")
@click.argument("profile", metavar="PROFILE")
@click.option("--kind", "only", type=click.Choice(["paper", "recording", "calibrated", "assumption", "missing"]),
              default=None, help="Show only numbers whose source is of this kind.")
def backends_explain(profile: str, only: str | None) -> None:
    """Every number of a backend profile with its source (paper, recording,
    calibrated to a mechanism-level target, or assumption), and each
    assumption's plausible range (ranges:). Exit 2 when a number has no source
    or, in a fake profile, an assumption no range."""
    from ..backends import find_profile
    from ..backends.provenance import assumption_factors, explain_rows, load_profile_data, range_for
    from ..backends.registry import ranged_kinds

    path = find_profile(profile, None)
    data = load_profile_data(path)
    rows = explain_rows(data)
    factors = assumption_factors(data, str(path))  # a malformed ranges: entry stops here (exit 2)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["kind"]] = counts.get(r["kind"], 0) + 1
        got = range_for(r["path"], data) if r["kind"] == "assumption" else None
        r["range"] = _range_text(got[1]) if got else ("none" if r["kind"] == "assumption" else "")
    click.echo(f"{path}: {data.get('name', '')} ({data.get('kind', '?')}), {len(rows)} numbers, "
               f"{len(factors)} assumption factors")
    w = max([len(r["path"]) for r in rows] + [4])
    click.echo(f"  {'path':<{w}} {'value':>10}  {'kind':<10} {'range':<14} source")
    for r in rows:
        if only is None or r["kind"] == only:
            v = r["value"]
            vs = f"{v:g}" if isinstance(v, float) else str(v)
            click.echo(f"  {r['path']:<{w}} {vs:>10}  {r['kind']:<10} {r['range']:<14} {r['source']}")
    if only in (None, "assumption") and factors:
        click.echo(f"  ranges ({len(factors)} factors of meshsim uncertainty; numbers under one entry move together):")
        for f in factors:
            click.echo(f"    {f.name} {_range_text(data['ranges'][f.name])} ({len(f.leaves)} number"
                       f"{'s' if len(f.leaves) != 1 else ''}): {f.why}")
    click.echo("  " + ", ".join(f"{k}: {n}" for k, n in sorted(counts.items())))
    bad = counts.get("missing", 0) + counts.get("?", 0)
    if bad:
        first = next(r["path"] for r in rows if r["kind"] in ("missing", "?"))
        click.echo(f"error: {path}: {bad} number(s) without a source of a known kind, first: {first}", err=True)
        sys.exit(2)
    # a fake's numbers model LLM behaviour: each assumption is a factor of meshsim uncertainty
    # (an endpoint profile's assumptions are settings: timeouts, retries, budgets)
    unranged = [r["path"] for r in rows if r["kind"] == "assumption" and r["range"] == "none"]
    if unranged and data.get("kind") in ranged_kinds():
        click.echo(f"error: {path}: ranges: {len(unranged)} assumption(s) without a plausible range, first: "
                   f"{unranged[0]}", err=True)
        sys.exit(2)


def _range_text(spec: dict) -> str:
    """[low, high] of a ranges: entry, or x[lo, hi] for a scale."""
    if "scale" in spec:
        return "x[{:g}, {:g}]".format(*spec["scale"])
    return f"[{spec['low']:g}, {spec['high']:g}]"


@backends.command("calibrate")
@click.argument("profile", metavar="PROFILE", default="fake-default")
@click.option("--scenario", default=None, type=click.Path(dir_okay=False),
              help="Audit scenario (default: scenarios/meshheal/persistent-bbh.yaml, as App. C.5).")
@click.option("--seeds", default="count:5", show_default=True, metavar="SEEDS",
              help=f"Audit seeds, at most 100: {_SEEDS_FROM_1}; count:5 (seeds 1-5) as App. C.5, which leaves "
                   "about ±0.06 of sampling error on the Takeover rates (the shipped profile was fitted on 20).")
@click.option("--fit", "out", default=None, type=click.Path(dir_okay=False),
              help="Move the profile's calibrated parameters to the targets and write the result here.")
@click.option("--sweeps", default=3, show_default=True, type=click.IntRange(1, 10),
              help="Coordinate-search sweeps over the calibrated parameters (with --fit).")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64),
              help="Processes evaluating candidate profiles (with --fit).")
def backends_calibrate(profile: str, scenario: str | None, seeds: str, out: str | None, sweeps: int,
                       workers: int) -> None:
    """Target vs achieved for the MeshHeal review and Takeover audit (App. C.5):
    the mechanism-level statistics a fake profile is calibrated to."""
    import yaml

    from ..paper import calibration as cal
    from ..backends import find_profile
    from ..core.bundled import bundled
    from ..core.files import load_yaml

    path = find_profile(profile, None)
    data = load_yaml(path, "profile")
    if data.get("kind") != "fake":
        from ..core.errors import InputError

        raise InputError("calibrate needs a MeshHeal fake profile (kind: fake)", file=str(path), field="kind",
                         value=data.get("kind"))
    sc = scenario or str(bundled(cal.AUDIT_SCENARIO))  # from any folder (issue 32)
    seed_list = _seeds_capped(seeds, 1, 100)
    click.echo(f"audit: {len(seed_list)} runs per profile evaluated ({_seed_text(seed_list)})", err=True)
    if out and not Path(out).resolve().parent.is_dir():
        from ..core.errors import InputError

        raise InputError("the folder to write the fitted profile into does not exist", file=str(out))
    if out:
        data, measured = cal.fit(data, sc, seed_list, sweeps=sweeps, workers=workers,
                                 progress=lambda m: click.echo(f"  {m}", err=True))
        from ..io.records import write_atomic

        write_atomic(Path(out), yaml.safe_dump(data, sort_keys=False, width=110))
        click.echo(f"wrote {out}")
    else:
        measured = cal.measure(data, sc, seed_list)
    click.echo(f"{path.name}: App. C.5 audit on {Path(sc).name}, {_seed_text(seed_list)}")
    for line in cal.fmt_rows(cal.rows(measured)):
        click.echo("  " + line)
    tc = measured["takeover_counts"]
    click.echo(f"  Takeover of Finalize outputs (pooled): {tc.get('wrong_fixed', 0)} of {tc.get('wrong_entering', 0)} "
               f"wrong corrected, {tc.get('wrong_changed', 0)} changed; {tc.get('right_broken', 0)} of "
               f"{tc.get('right_entering', 0)} right broken (paper: 15 of 32, 18; 1 of 32)")
    click.echo("")
    for line in cal.fmt_counts(cal.counts(measured), len(seed_list)):
        click.echo("  " + line)
    bad = [r for r in cal.rows(measured) if r["within"] is False]
    if bad:
        click.echo(f"  {len(bad)} target(s) outside the paper's spread and ±0.05: "
                   + ", ".join(r["key"] for r in bad))


def _fit_row(r: dict) -> str:
    def f(x: Any) -> str:
        return "-" if x is None else f"{x:.3f}"
    return f"{r['type']:<40} {r['tasks']:>5} {f(r['recorded']):>9} {f(r['simulated']):>9} " + \
        ("-" if r["diff"] is None else f"{r['diff']:+.3f}").rjust(7)
