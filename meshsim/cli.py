"""``meshsim`` command line: a thin layer over the Python API.

Exit codes: 0 ok, 2 bad input (one line on stderr naming file, field and
value), 1 internal error.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from .errors import InputError, MeshsimError


def _fail(exc: BaseException, code: int) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(code)


class _Group(click.Group):
    def main(self, args=None, prog_name=None, **kwargs):  # type: ignore[override]
        try:
            rv = super().main(args=args, prog_name=prog_name, standalone_mode=False, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(1)
        except click.ClickException as exc:
            # one line, not click's three-line usage block
            ctx_hint = ""
            if isinstance(exc, click.UsageError) and exc.ctx is not None:
                ctx_hint = f" (see '{exc.ctx.command_path} --help')"
            click.echo(f"error: {exc.format_message()}{ctx_hint}", err=True)
            sys.exit(2)
        except MeshsimError as exc:
            _fail(exc, exc.exit_code)
        except KeyboardInterrupt:
            click.echo("error: interrupted", err=True)
            sys.exit(130)
        except Exception as exc:  # a bug: say so in one line, traceback on request
            if os.environ.get("MESHSIM_DEBUG"):
                raise
            click.echo(f"error: internal error: {type(exc).__name__}: {exc} "
                       "(set MESHSIM_DEBUG=1 for the traceback)", err=True)
            sys.exit(1)
        if isinstance(rv, int) and rv:
            sys.exit(rv)
        sys.exit(0)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="meshsim")
def main() -> None:
    """Simulate decentralized LLM agent networks under gray failures and Byzantine faults."""


def _load(path: str, sets: tuple[str, ...], smoke: bool = False):
    from .scenario import load_scenario

    return load_scenario(path, list(sets), smoke=smoke)


@main.command()
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--seed", type=int, default=None, help="Run this one seed (default: the scenario's seeds).")
@click.option("--out", "-o", type=click.Path(file_okay=False), default=None,
              help="Run folder (default: runs/<scenario name>).")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE",
              help="Override a scenario field, e.g. --set network.links.loss=0.1 (repeatable).")
@click.option("--force", is_flag=True, help="Re-run even if the folder holds a completed run.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no summary on stdout.")
@click.option("--smoke", is_flag=True, help="Apply the scenario's 'smoke' overrides: a small, quick run.")
@click.option("--plot", "make_report", is_flag=True, help="Write OUT/report.html (tables and figures) after the run.")
def run(scenario: str, seed: int | None, out: str | None, sets: tuple[str, ...], force: bool,
        quiet: bool, smoke: bool, make_report: bool = False) -> None:
    """Run SCENARIO and write its run folder."""
    from .runner import run as run_api

    sc = _load(scenario, sets, smoke)
    out_dir = Path(out) if out else Path("runs") / _safe(sc.name)
    show = not quiet and sys.stderr.isatty()
    if show:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                      TextColumn("{task.percentage:>5.1f}%"), TimeElapsedColumn(),
                      transient=True) as bar:
            task = bar.add_task(sc.name, total=1.0)

            def progress(kind: str, done: float, total: float) -> None:
                bar.update(task, completed=(done / total) if total else 0)

            result = run_api(sc, seed=seed, out=out_dir, progress=progress, force=force)
    else:
        result = run_api(sc, seed=seed, out=out_dir, force=force)
    if not quiet:
        _print_result(result, out_dir)
    if make_report:
        from .report import write_report

        path = write_report(out_dir)
        if not quiet:
            click.echo(f"report -> {path}")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)


def _print_result(result: Any, out_dir: Path) -> None:
    from .runner import MultiRunResult

    if isinstance(result, MultiRunResult):
        click.echo(f"{len(result.runs)} seeds -> {out_dir}/ (aggregate.json)")
        for r in result.runs:
            click.echo(f"  seed {r.seed}: {_headline(r.summary)}" + (" (resumed)" if r.resumed else ""))
    else:
        click.echo(f"seed {result.seed} -> {out_dir}/" + (" (resumed)" if result.resumed else ""))
        click.echo(f"  {_headline(result.summary)}")


def _headline(s: dict) -> str:
    parts = [f"sim_time={s.get('sim_time', 0):.1f}s",
             f"messages={s.get('messages', {}).get('total', {}).get('sent', 0)}"]
    acc = s.get("accuracy", {})
    if isinstance(acc, dict) and "overall" in acc:
        parts.append(f"accuracy={acc['overall']:.3f}")
    if "routing" in s:
        parts.append(f"tables_correct_at_end={s['routing']['tables_correct_at_end']}")
    agents = s.get("agents")
    if isinstance(agents, dict) and 0 < len(agents) <= 4:
        for name, a in agents.items():
            if isinstance(a, dict) and "detection_delay" in a:
                parts.append(f"{name}: detected+{a['detection_delay']} closure={a['closure']} "
                             f"reintegrated+{a.get('reintegration_delay')}")
    elif isinstance(agents, dict) and agents:
        parts.append(f"isolated {sum(1 for a in agents.values() if a.get('isolated_at') is not None)}/{len(agents)}"
                     f" degraded, false_isolations={s.get('false_isolations')}")
    return " ".join(parts)


@main.command()
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", help="Override a field first.")
def validate(scenario: str, sets: tuple[str, ...]) -> None:
    """Check SCENARIO (schema, graph, events) without running it; exit 0 or 2."""
    from .scenario import build_graph, check_semantics

    sc = _load(scenario, sets)
    G = build_graph(sc)
    check_semantics(sc, G)
    click.echo(f"ok: {scenario}: '{sc.name}', {G.number_of_nodes()} agents, {G.number_of_edges()} links, "
               f"{len(sc.events)} events, protocol {sc.protocol.name}")


@main.command()
@click.argument("source", type=click.Path())
@click.option("--seed", type=int, default=None, help="Seed for a random topology (default: the scenario's).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", help="Override a scenario field first.")
def topology(source: str, seed: int | None, as_json: bool, sets: tuple[str, ...]) -> None:
    """Describe the graph of a scenario file or a topology file (GraphML / edge list)."""
    from . import topology as topo
    from .scenario import build_graph

    path = Path(source)
    if path.suffix.lower() in (".yaml", ".yml"):
        G = build_graph(_load(source, sets), seed)
    else:
        if not path.exists():
            raise InputError("file not found", file=source)
        G = topo.from_file(path)
    info = topo.describe(G)
    try:
        from . import robustness

        if G.number_of_nodes() <= 60:
            info["r_robustness"] = robustness.robustness(G)
    except ImportError:  # pragma: no cover
        pass
    if as_json:
        click.echo(json.dumps(info, indent=2, sort_keys=True))
    else:
        width = max(len(k) for k in info)
        for k, v in info.items():
            click.echo(f"{k:<{width}}  {v:.4g}" if isinstance(v, float) else f"{k:<{width}}  {v}")


@main.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(), metavar="RUN_DIR...")
@click.option("--kind", type=click.Choice(["timeline", "heatmap", "phases", "detector", "sac", "topology"]),
              default=None, help="Figure (default: timeline for MeshHeal runs, sac for SAC runs).")
@click.option("--agents", default=None, metavar="A3,A5", help="Agents to show (timeline, heatmap, detector).")
@click.option("--seed", type=int, default=None, help="Seed of a multi-seed folder (default: its first).")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="PNG file (default: RUN_DIR/<kind>.png).")
def plot(run_dirs: tuple[str, ...], kind: str | None, agents: str | None, seed: int | None,
         out: str | None) -> None:
    """Draw a figure of RUN_DIR (several RUN_DIRs for --kind sac); see docs/plots.md."""
    from . import plots

    path = plots.render(list(run_dirs), kind=kind, agents=plots.parse_agents(agents), seed=seed, out=out)
    click.echo(f"wrote {path}")
    if kind == "phases":
        from .report import healing_table, phase_table, print_tables, write_tables

        tabs = [t for t in (phase_table(run_dirs[0]), healing_table(run_dirs[0])) if t is not None]
        print_tables(tabs)
        for p in write_tables(tabs, path.parent, md_name=f"{path.stem}.md", prefix=f"{path.stem}-"):
            click.echo(f"wrote {p}")


@main.command()
@click.argument("run_dir", type=click.Path())
@click.option("--seed", type=int, default=None, help="Seed for the per-seed figures (default: the first).")
def report(run_dir: str, seed: int | None) -> None:
    """Write RUN_DIR/report.html: scenario, tables and figures in one self-contained file."""
    from .report import write_report

    click.echo(f"wrote {write_report(run_dir, seed=seed)}")


@main.group()
def backends() -> None:
    """LLM backends: fit a fake profile from recorded calls (docs/backends.md)."""


@backends.command("fit")
@click.argument("source", type=click.Path(), metavar="CASSETTE_OR_RUN")
@click.option("--out", "-o", type=click.Path(dir_okay=False), required=True, help="Profile YAML to write.")
@click.option("--name", default=None, help="Profile name (default: the output file's stem).")
@click.option("--base", default=None, help="Profile supplying what the calls cannot (default: fake-default).")
def backends_fit(source: str, out: str, name: str | None, base: str | None) -> None:
    """Estimate a fake profile from a cassette or a recorded run folder."""
    from .backends.fit import find_cassettes, fit_profile, load_entries, write_profile

    entries = load_entries(find_cassettes(source))
    prof, notes = fit_profile(entries, name=name or Path(out).stem, base=base)
    path = write_profile(prof, notes, out)
    for n in notes:
        click.echo(f"  {n}")
    click.echo(f"wrote {path}")


if __name__ == "__main__":  # pragma: no cover
    main()
