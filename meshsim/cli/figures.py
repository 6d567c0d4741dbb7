"""``meshsim plot`` and ``meshsim report``: figures and report.html of a run, sweep or uncertainty folder
(meshsim.plots does the drawing)."""
from __future__ import annotations

import click

from ..core.errors import InputError
from .app import _need_plotting, main


@main.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(), metavar="RUN_DIR...")
@click.option("--kind", type=click.Choice(["timeline", "heatmap", "phases", "detector", "sac", "topology", "gray",
                                           "tradeoff", "sensitivity", "parallel"]),
              default=None, help="Figure (default: timeline for MeshHeal runs, sac for SAC runs, tradeoff for "
                                 "a MeshHeal sweep folder).")
@click.option("--agents", default=None, metavar="A3,A5", help="Agents to show (timeline, heatmap, detector).")
@click.option("--seed", type=int, default=None, help="Seed of a multi-seed folder (default: its first).")
@click.option("--x", "x", default=None, metavar="PARAM", help="Sweep folders: swept parameter on the x axis "
              "(heatmap, sensitivity; a unique last component such as 'alpha' will do).")
@click.option("--y", "y", default=None, metavar="PARAM", help="Sweep folders: swept parameter on the y axis (heatmap).")
@click.option("--metric", default=None, metavar="COLUMN", help="Sweep folders: a results.csv metric column "
              "(heatmap, sensitivity; default detection.delay_mean).")
@click.option("--by", default=None, metavar="PARAM", help="Sweep folders: one line per value of this parameter "
              "(sensitivity).")
@click.option("--where", "where", multiple=True, metavar="PATH=VALUE",
              help="Sweep folders: only the points at this value of a swept parameter (repeatable).")
@click.option("--facet", default=None, metavar="PARAM",
              help="Sweep folders: one panel per value of this swept parameter (tradeoff, heatmap, sensitivity).")
@click.option("--color", default=None, metavar="COLUMN", help="Sweep folders: the metric colouring the lines "
              "(parallel).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="Figure file: .png, .pdf or .svg (default: RUN_DIR/<kind>.png).")
@click.option("--rerun", is_flag=True, help="A run folder kept without records (a sweep's runs/<point>/): run the "
              "seed again and write its record tables into it first (docs/plots.md).")
def plot(run_dirs: tuple[str, ...], kind: str | None, agents: str | None, seed: int | None, x: str | None,
         y: str | None, metric: str | None, by: str | None, out: str | None, where: tuple[str, ...] = (),
         facet: str | None = None, color: str | None = None, rerun: bool = False) -> None:
    """Draw a figure of RUN_DIR (several RUN_DIRs for --kind sac) or of a sweep
    folder (--kind tradeoff, heatmap, sensitivity, parallel); see docs/plots.md and docs/sweeps.md."""
    from .. import plots
    from ..sweep import is_sweep_folder

    _need_plotting()
    if out is not None:
        plots.check_figure_path(out)
    if is_sweep_folder(run_dirs[0]) and kind != "gray":  # --kind gray: one line per point (docs/sac.md)
        from ..plots.sweeps import render_sweep

        if rerun:
            raise InputError("--rerun takes a run folder: one of the sweep's runs/<point>/", file=run_dirs[0])
        if len(run_dirs) > 1 or agents or seed is not None:
            raise InputError("a sweep folder takes one folder and no --agents / --seed", field="RUN_DIR",
                             value=list(run_dirs))
        path = render_sweep(run_dirs[0], kind, x=x, y=y, metric=metric, by=by, out=out, where=where, facet=facet,
                            color=color)
        click.echo(f"wrote {path}")
        return
    if kind in ("tradeoff", "sensitivity", "parallel") or x or y or metric or by or where or facet or color:
        raise InputError("--kind tradeoff / sensitivity / parallel and --x, --y, --metric, --by, --where, --facet, "
                         "--color take a sweep folder (meshsim sweep)", file=run_dirs[0])

    if rerun and kind not in ("phases", "sac", "gray", "topology"):  # those read summary.json only
        from ..plots.rerun import rerun_missing

        rs = plots.open_run(run_dirs[0])
        rerun_missing(rs, [seed if seed is not None else rs.seeds[0]], echo=click.echo)
    path = plots.render(list(run_dirs), kind=kind, agents=plots.parse_agents(agents), seed=seed, out=out)
    click.echo(f"wrote {path}")
    if kind == "phases":
        from ..plots.report import healing_table, phase_table, print_tables, write_tables

        tabs = [t for t in (phase_table(run_dirs[0]), healing_table(run_dirs[0])) if t is not None]
        print_tables(tabs)
        for p in write_tables(tabs, path.parent, md_name=f"{path.stem}.md", prefix=f"{path.stem}-"):
            click.echo(f"wrote {p}")


@main.command()
@click.argument("run_dir", type=click.Path())
@click.option("--seed", type=int, default=None, help="Seed for the per-seed figures (default: the first).")
@click.option("--where", "where", multiple=True, metavar="PATH=VALUE",
              help="Sweep folders: report only the points at this value of a swept parameter (repeatable).")
@click.option("--facet", default=None, metavar="PARAM",
              help="Sweep folders: one panel per value of this parameter in the trade-off, heat maps and curves.")
@click.option("--reference", "reference", multiple=True, metavar="PATH=VALUE,...",
              help="Sweep folders: the point the table's paired differences compare with (default: the "
                   "scenario's own values that are grid values).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="Sweep folders: the report file (default: SWEEP_DIR/report.html).")
@click.option("--rerun", is_flag=True, help="A run folder kept without records (a sweep's runs/<point>/): run its "
              "seeds again and write their record tables into it first (docs/plots.md).")
def report(run_dir: str, seed: int | None, where: tuple[str, ...] = (), facet: str | None = None,
           reference: tuple[str, ...] = (), out: str | None = None, rerun: bool = False) -> None:
    """Write RUN_DIR/report.html: scenario, tables and figures in one self-contained file
    (a sweep folder: trade-off, parallel coordinates, every parameter's effect, heat maps and the
    per-point table with intervals)."""
    from ..plots.report import write_report
    from ..sweep import is_sweep_folder

    _need_plotting()
    from ..uncertainty import is_uncertainty_folder

    if is_uncertainty_folder(run_dir):  # also a sweep folder: its own report
        from ..uncertainty.report import write_report as write_uncertainty_report

        click.echo(f"wrote {write_uncertainty_report(run_dir)[-1]}")
        return
    if is_sweep_folder(run_dir):
        from ..plots.sweeps import write_sweep_report

        if rerun:
            raise InputError("--rerun takes a run folder: one of the sweep's runs/<point>/", file=run_dir)
        path = write_sweep_report(run_dir, out, where=where, facet=facet, reference=list(reference) or None)
        click.echo(f"wrote {path}")
        return
    if where or facet or reference or out:
        raise InputError("--where, --facet, --reference and --out take a sweep folder (meshsim sweep)",
                         file=run_dir)
    if rerun:
        from ..plots import open_run
        from ..plots.rerun import rerun_missing

        rerun_missing(open_run(run_dir), echo=click.echo)
    click.echo(f"wrote {write_report(run_dir, seed=seed)}")
