"""``meshsim reproduce`` and ``meshsim compare``: the papers' experiments and the methods compared on the
same scenarios."""
from __future__ import annotations

import os
from pathlib import Path

import click

from ..core.errors import InputError
from ..scenario.fields import SEEDS_HELP
from .app import _load, _safe, _seeds_capped, _SEEDS_FROM_1, main


@main.command()
@click.argument("which", type=click.Choice(["meshheal", "sac"]))
@click.option("--seeds", default="count:5", show_default=True, metavar="SEEDS",
              help=f"Seeds per setting, at most 50: {_SEEDS_FROM_1}.")
@click.option("--out", "-o", type=click.Path(file_okay=False), default=None,
              help="Report folder (default: runs/reproduce-WHICH); finished runs there are reused.")
@click.option("--quick", is_flag=True, help="Skip the most expensive settings (MeshHeal: 576 agents).")
@click.option("--workers", type=click.IntRange(1, 64), default=None, help="Processes (default: up to 2).")
@click.option("--only", default=None, help="Comma-separated experiment keys (default: all).")
@click.option("--no-sensitivity", is_flag=True, help="Skip the assumption sensitivity curves.")
@click.option("--docs", "docs_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Also rewrite the <!-- reproduce:WHICH --> section of this markdown file (docs/validation.md).")
@click.option("--bands", "bands_dir", type=click.Path(file_okay=False), multiple=True,
              help="A meshsim uncertainty folder whose Latin-hypercube samples give each prediction row its "
                   "assumption band (repeatable: the studies' top factors move together; default: "
                   "runs/uncertainty-<reference scenario> of each reference scenario that has one, else the "
                   "copy shipped with meshsim, each experiment over its own reference studies).")
@click.option("--band-samples", type=click.IntRange(1, 10000), default=None,
              help="Band samples per row (default 20; 8 with --quick).")
@click.option("--no-bands", is_flag=True, help="No assumption bands.")
def reproduce(which: str, seeds: str, out: str | None, quick: bool, workers: int | None, only: str | None,
              no_sensitivity: bool, docs_file: str | None, bands_dir: tuple[str, ...] = (),
              band_samples: int | None = None, no_bands: bool = False) -> None:
    """Run the papers' experiments: every table cell as paper value beside
    simulated mean ± sd, marked calibration target or prediction."""
    from ..paper import reproduce as rep

    out_dir = Path(out) if out else Path("runs") / f"reproduce-{which}"
    report = rep.reproduce(which, out_dir, seeds=_seeds_capped(seeds, 1, 50, keep_count=True), quick=quick,
                           workers=workers,
                           only=[x.strip() for x in only.split(",")] if only else None,
                           sensitivity=not no_sensitivity,
                           progress=lambda m: click.echo(f"  {m}", err=True),
                           bands=[Path(d) for d in bands_dir] or None, band_samples=band_samples,
                           use_bands=not no_bands)
    click.echo((out_dir / "report.md").read_text())
    click.echo(f"wrote {out_dir / 'report.md'} and report.json ({report['wall']:.0f} s)")
    if docs_file:
        rep.fill_docs(Path(docs_file), which, (out_dir / "report.md").read_text(), out_dir)
        click.echo(f"updated {docs_file}")


@main.command()
@click.argument("scenarios", nargs=-1, required=True, type=click.Path(dir_okay=False), metavar="SCENARIO...")
@click.option("--methods", default=None, metavar="M1,M2",
              help="Methods to run (default: meshheal,agentnet,raps,autogen,symphony,sac_teams).")
@click.option("--seeds", default=None, metavar="SEEDS",
              help=f"Seeds per method, at most 50: {SEEDS_HELP} (default: the scenario's).")
@click.option("--out", "-o", type=click.Path(file_okay=False), default=None,
              help="Folder (default: runs/compare-<first scenario>); finished runs there are reused.")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", help="Override a scenario field (repeatable).")
@click.option("--workers", type=click.IntRange(1, 64), default=None, help="Processes (default: up to 2).")
@click.option("--smoke", is_flag=True, help="Apply each scenario's 'smoke' overrides: small, quick runs.")
def compare(scenarios: tuple[str, ...], methods: str | None, seeds: str | None, out: str | None,
            sets: tuple[str, ...], workers: int | None, smoke: bool = False) -> None:
    """Run every method of the MeshHeal paper's comparison on the same SCENARIO(s)
    and print the table (Tab. 2a / C1 / C2, or Tab. 3's self-healing metrics)."""
    from ..protocols import PROTOCOLS
    from ..paper.reproduce.compare import METHODS, run_comparison

    chosen = tuple(m.strip() for m in methods.split(",")) if methods else METHODS
    for m in chosen:
        if m not in PROTOCOLS:
            raise InputError(f"unknown method; choose from {list(METHODS)}", field="--methods", value=m)
    paths = []
    chosen_seeds = None if seeds is None else _seeds_capped(seeds, 0, 50, keep_count=True)
    n_runs = 0
    for sc in scenarios:
        p = Path(sc)
        if not p.is_file():
            raise InputError("file not found", file=sc)
        loaded = _load(sc, sets)  # a bad scenario fails here, in one line
        paths.append(str(p.resolve()))
        n_runs += len(chosen) * len(loaded.seed_list() if chosen_seeds is None else
                                    _seeds_capped(seeds, loaded.seed, 50))
    click.echo(f"compare: {len(chosen)} methods x {len(scenarios)} scenario{'s' if len(scenarios) != 1 else ''}: "
               f"{n_runs} runs", err=True)  # the plan's size before any work (issue 29)
    if smoke:
        from ..scenario.model import smoke_overrides

        sets = tuple(smoke_overrides(paths[0])) + tuple(sets)
    out_dir = Path(out) if out else Path("runs") / f"compare-{_safe(Path(scenarios[0]).stem)}"
    table = run_comparison(paths, out_dir, chosen, chosen_seeds, sets, workers or min(2, os.cpu_count() or 1),
                           progress=lambda d, t, dt: click.echo(f"  {d}/{t} runs ({dt:.0f} s)", err=True))
    click.echo((out_dir / "comparison.md").read_text())
    click.echo(f"wrote {out_dir / 'comparison.md'} and comparison.json ({table['wall']:.0f} s)")
