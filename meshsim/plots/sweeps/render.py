"""``meshsim plot`` of a sweep folder (:func:`render_sweep`) and the redrawing of stale figures and
reports (:func:`redraw_stale`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ...core.errors import InputError
from ..canvas import save_figure
from .data import DELAY, SWEEP_KINDS, open_sweep
from .stamps import _plain, results_stamp, stale_figures, stamp_figure
from .tradeoff import _search_tradeoff, tradeoff
from .views import heatmap, parallel, sensitivity
from .report import write_sweep_report


def render_sweep(path: Path | str, kind: Optional[str] = None, x: Optional[str] = None, y: Optional[str] = None,
                 metric: Optional[str] = None, by: Optional[str] = None, out: Optional[Path | str] = None,
                 where: Any = None, facet: Optional[str] = None, color: Optional[str] = None) -> Path:
    """Draw ``kind`` of a sweep folder; default file ``SWEEP_DIR/<kind>.png``."""
    sd = open_sweep(path)
    kind = kind or ("tradeoff" if DELAY in sd.columns or _search_tradeoff(sd) else "heatmap" if len(sd.axes) > 1
                    else "sensitivity")
    if kind not in SWEEP_KINDS:
        raise InputError(f"a sweep folder takes --kind {', '.join(SWEEP_KINDS)}", field="--kind", value=kind)
    if kind != "heatmap" and y is not None:
        raise InputError("--y goes with --kind heatmap", field="--y", value=y)
    if kind != "sensitivity" and by is not None:
        raise InputError("--by goes with --kind sensitivity", field="--by", value=by)
    if kind != "parallel" and color is not None:
        raise InputError("--color goes with --kind parallel", field="--color", value=color)
    if kind in ("tradeoff", "parallel") and x is not None:
        raise InputError(f"--x goes with --kind heatmap and sensitivity, not {kind}", field="--x", value=x)
    if kind == "parallel" and facet is not None:
        raise InputError("--kind parallel draws every parameter at once (use --where to fix some)",
                         field="--facet", value=facet)
    if kind in ("heatmap", "sensitivity") and metric and "," in metric:
        raise InputError(f"--kind {kind} takes one metric", field="--metric", value=metric)
    sd = sd.where(where)
    if kind == "tradeoff":
        fig = tradeoff(sd, where=None, facet=facet, metrics=metric)
    elif kind == "heatmap":
        fig = heatmap(sd, x, y, metric, facet=facet)
    elif kind == "parallel":
        fig = parallel(sd, metric, color)
    else:
        fig = sensitivity(sd, x, metric, by, facet=facet)
    target = save_figure(fig, Path(out) if out is not None else sd.path / f"{kind}.png")
    stamp_figure(path, target, {"kind": kind, "x": x, "y": y, "metric": metric, "by": by, "where": _plain(where),
                                "facet": facet, "color": color})
    return target



def redraw_stale(folder: Path | str, echo=lambda s: None) -> list[Path]:
    """Redraw every stale figure and report of a sweep folder (:func:`stale_figures`) with the
    options it was drawn with; one that cannot be redrawn (no matplotlib, an option that no
    longer applies) is named as stale with the command that redraws it. Returns the files redrawn."""
    from ...core.errors import MeshsimError

    folder = Path(folder)
    now = results_stamp(folder)["runs"]
    done = []
    for rel, st in stale_figures(folder):
        args = dict(st.get("args") or {})
        why = f"drawn from {st.get('runs', '?')} finished runs, the folder now holds {now}"
        try:
            if st.get("what") == "report":
                p = write_sweep_report(folder, folder / rel, where=args.get("where"), facet=args.get("facet"),
                                       reference=args.get("reference"))
            else:
                p = render_sweep(folder, out=folder / rel, **{k: args.get(k) for k in (
                    "kind", "x", "y", "metric", "by", "facet", "color")}, where=args.get("where"))
        except (MeshsimError, ImportError) as exc:
            cmd = "meshsim report" if st.get("what") == "report" else "meshsim plot"
            echo(f"stale: {folder / rel} ({why}); not redrawn: {str(exc).splitlines()[0]} ({cmd} redraws it)")
            continue
        echo(f"redrew {p} ({why})")
        done.append(p)
    return done
