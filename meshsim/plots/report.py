"""Tables (MeshHeal Tab. 2-3, App. C.5; SAC Tab. 1) and the one-file HTML report of a run folder.

Like :mod:`meshsim.plots`, everything here reads the run folder's records
only. ``meshsim report RUN_DIR`` writes ``RUN_DIR/report.html``: the scenario,
every table and every figure that applies, PNGs embedded as base64 so the
file can be mailed or attached as is. The tables are also written next to it
as CSV and Markdown (``phases.csv``, ``self-healing.csv``, ``tables.md``).
"""
from __future__ import annotations

import base64
import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from .canvas import _new_figure, _png_bytes
from .folder import open_run, RunSet
from .graph import topology
from .healing import detector_figure, heatmap_height, state_heatmap, timeline
from .page import escape, join, Markup, table, TEMPLATES
from .phases import phase_bars
from .sac import SAC_FIELDS, sac_figure, sac_runs
from .stats import choose_agents, healing_stats, phase_stats, Stat

__all__ = ["fold_list", "Table", "phase_table", "healing_table", "audit_table", "sac_table", "gray_table", "tables",
           "write_tables",
           "write_report", "print_tables"]


#: a table longer than this shows its first FOLDED_PREVIEW rows and folds the rest
MAX_ROWS = 15
FOLDED_PREVIEW = 8
#: a list longer than this in a cell (agent names) shows its first LIST_PREVIEW and folds the rest
MAX_LIST = 12
LIST_PREVIEW = 8


def fold_list(names: Sequence[str], empty: str = "none") -> Markup:
    """HTML of a list of names: whole when short, else the first few, "… and K more" and the
    whole list folded in a ``<details>`` (the 288-agent report's cell of ~150 names)."""
    names = [str(n) for n in names]
    if not names:
        return escape(empty)
    if len(names) <= MAX_LIST:
        return escape(", ".join(names))
    return TEMPLATES.render("fold-list.html", head=", ".join(names[:LIST_PREVIEW]), more=len(names) - LIST_PREVIEW,
                            total=len(names), names=", ".join(names))


@dataclass
class Table:
    """A small table with display strings (``rows``) and raw values (``data``)."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    data_columns: list[str] = field(default_factory=list)
    data: list[list[Any]] = field(default_factory=list)
    note: str = ""
    name: str = "table"

    def to_markdown(self) -> str:
        out = [f"### {self.title}", ""]
        out.append("| " + " | ".join(self.columns) + " |")
        out.append("| " + " | ".join("---" for _ in self.columns) + " |")
        for r in self.rows:
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
        if self.note:
            out += ["", self.note]
        return "\n".join(out) + "\n"

    def to_csv(self) -> str:
        """Raw numbers (mean, std, min, max, n as separate columns), one row per table row."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.data_columns or self.columns)
        for r in (self.data if self.data_columns else self.rows):
            w.writerow(["" if v is None else (f"{v:.6g}" if isinstance(v, float) else v) for v in r])
        return buf.getvalue()

    def to_html(self, max_rows: int = MAX_ROWS) -> Markup:
        """The table; past ``max_rows`` rows the rest is folded into a ``<details>`` (a 288-agent
        run's tables hold a row per degraded agent and per isolation: the page stays short)."""
        shown, rest = (self.rows, []) if len(self.rows) <= max_rows else \
            (self.rows[:FOLDED_PREVIEW], self.rows[FOLDED_PREVIEW:])
        parts = [TEMPLATES.render("table-section.html", title=self.title, table=table(self.columns, shown))]
        if rest:
            parts.append(TEMPLATES.render("folded-rows.html", more=len(rest), total=len(self.rows), name=self.name,
                                          table=table(self.columns, rest)))
        if self.note:
            parts.append(TEMPLATES.render("note.html", note=self.note))
        return join(parts)

    def to_rich(self):
        from rich.table import Table as RichTable

        t = RichTable(title=self.title, title_justify="left", caption=self.note or None, caption_justify="left")
        for i, c in enumerate(self.columns):
            t.add_column(c, justify="left" if i == 0 else "right")
        for r in self.rows:
            t.add_row(*r)
        return t


def _stat_cols(prefix: str, st: Stat, scale: float = 1.0) -> list[Any]:
    f = (lambda v: None if v is None else v * scale)
    return [f(st.mean), f(st.std), f(st.min), f(st.max), st.n]


def _stat_names(prefix: str) -> list[str]:
    return [f"{prefix}_mean", f"{prefix}_std", f"{prefix}_min", f"{prefix}_max", f"{prefix}_n"]


def _seeds_note(rs: RunSet) -> str:
    if rs.multi and rs.note:  # a multi-seed folder without aggregate.json: its finished seeds
        if len(rs.runs) == 1:
            return f"one seed ({rs.first.seed}), from summary.json ({rs.note})"
        return f"mean ± sample std over {len(rs.runs)} seeds ({', '.join(map(str, rs.seeds))}; {rs.note})"
    if rs.multi:
        return f"mean ± sample std over {len(rs.runs)} seeds ({', '.join(map(str, rs.seeds))}), from aggregate.json"
    return f"one seed ({rs.first.seed}), from summary.json"


def phase_table(run: Any) -> Table:
    """Accuracy, tokens and model calls per task for each phase (Tab. 2a / 3a)."""
    rs = open_run(run)
    rows, data = [], []
    for r in phase_stats(rs):
        rows.append([r["phase"], r["tasks"], r["accuracy"].fmt(3), r["tokens"].fmt(1, 1e-3), r["calls"].fmt(1)])
        data.append([r["phase"], r["tasks"].replace("–", "-"), *_stat_cols("accuracy", r["accuracy"]),
                     *_stat_cols("tokens", r["tokens"]), *_stat_cols("calls", r["calls"])])
    return Table("Accuracy and cost per phase", ["phase", "tasks", "accuracy", "tokens/task (k)", "calls/task"],
                 rows, ["phase", "tasks", *_stat_names("accuracy"), *_stat_names("tokens_per_task"),
                        *_stat_names("calls_per_task")], data, _seeds_note(rs), name="phases")


def healing_table(run: Any) -> Optional[Table]:
    """Detection delay, closure and reintegration delay per degraded agent (Tab. 3b)."""
    rs = open_run(run)
    stats = healing_stats(rs)
    if not stats:
        return None
    rows, data = [], []
    multi_iv = any(s["interval"] > 1 for s in stats)
    for s in stats:
        det, rein = s["detection_delay"], s["reintegration_delay"]
        b, r = s["degraded_at"], s["recovered_at"]
        who = s["agent"] + (f" #{s['interval']}" if multi_iv else "")
        det_txt = det.fmt(1, spread=True) if det.mean is not None else "∞ (never isolated)"
        if det.missing and det.mean is not None:
            det_txt += f", {det.missing} missed"
        if r.mean is None:
            rein_txt = "– (no recovery)"
        elif rein.mean is None:
            rein_txt = "undefined"
        else:
            rein_txt = rein.fmt(1, spread=True)
            if rein.n < s["seeds"]:
                rein_txt += f" [{rein.n}/{s['seeds']} seeds]"
        rows.append([who, _int_fmt(b), _int_fmt(r), det_txt, f"{s['closure']}/{s['seeds']}", rein_txt])
        data.append([s["agent"], s["interval"], b.mean, r.mean, *_stat_cols("det", det), s["missed"],
                     s["closure"], s["seeds"], *_stat_cols("rein", rein)])
    false_iso = Stat.of(rs.stat("detection.false_isolations"))
    note = _seeds_note(rs) + "; delays in tasks: mean ± std (min–max)"
    if false_iso.mean is not None:
        note += f"; agents isolated while healthy, per seed: {false_iso.fmt(1)}"
    return Table("Self-healing: detection, closure, reintegration",
                 ["agent", "degraded at b", "recovered at r", "detection delay c−b", "closure",
                  "reintegration delay u−r"], rows,
                 ["agent", "interval", "degraded_at", "recovered_at", *_stat_names("detection_delay"), "missed",
                  "closure_seeds", "seeds", *_stat_names("reintegration_delay")], data, note, name="self-healing")


def _int_fmt(st: Stat) -> str:
    if st.mean is None:
        return "–"
    if st.n <= 1 or (st.min == st.max):
        return f"{st.mean:.0f}"
    return st.fmt(1)


def evidence_table(run: Any) -> Optional[Table]:
    """One row per isolation of a single-seed MeshHeal run: who scored the detector window that
    isolated the agent (meshsim.analysis.evidence; ``meshsim explain`` prints it whole)."""
    from ..core.errors import InputError
    from ..analysis.evidence import explain_folder

    rs = open_run(run)
    rf = rs.first
    if rs.multi or rf.protocol != "meshheal" or not rf.is_meshheal:
        return None
    try:
        ex = explain_folder(rf.path)
    except InputError:  # another detector: no window to rebuild
        return None
    if not ex.isolations:
        return None
    rows, data = [], []
    for iso in ex.isolations:
        def health(r) -> str:
            return "degraded" if r.degraded_entries == r.entries else \
                "healthy" if not r.degraded_entries else "partly degraded"

        who = "; ".join(f"{r.reviewer} ({health(r)}, {'/'.join(r.states)}) {r.entries}/{len(iso.window)}"
                        + (", pivotal" if r.pivotal else "") for r in iso.reviewers[:3])
        rows.append([iso.agent, str(iso.task), "yes" if iso.healthy else "no", f"{iso.z:.2f}",
                     f"{iso.degraded_only}/{len(iso.window)}", who])
        top = iso.reviewers[0] if iso.reviewers else None
        data.append([iso.agent, iso.task, iso.healthy, iso.z, iso.beta, len(iso.window), iso.degraded_only,
                     top.reviewer if top else None, top.entries if top else None,
                     top.pivotal if top else None, iso.exact])
    return Table("Isolation evidence", ["agent", "task", "healthy", "z", "window scores from degraded reviewers only",
                                        "reviewers (health, own state) outputs of the window"], rows,
                 ["agent", "task", "healthy", "z", "beta", "window", "degraded_only", "top_reviewer",
                  "top_reviewer_outputs", "top_reviewer_pivotal", "exact"], data,
                 "Each isolation's detector window rebuilt from reviews.jsonl and states.jsonl; pivotal: without that "
                 "reviewer's scores z stays below beta. meshsim explain RUN_DIR prints the window output by output.",
                 name="evidence")


def audit_table(run: Any) -> Optional[Table]:
    """Review and Takeover audit (App. C.5)."""
    rs = open_run(run)
    fields = [("audit.initial_score_healthy", "mean initial score, healthy outputs", 2),
              ("audit.initial_score_degraded", "mean initial score, degraded outputs", 2),
              ("audit.initial_recall", "initial recall (q0 ≤ τ on degraded)", 3),
              ("audit.initial_false_alarm", "initial false alarm (q0 ≤ τ on healthy)", 3),
              ("audit.committee_recall", "committee recall", 3),
              ("audit.committee_false_alarm", "committee false alarm", 3),
              ("audit.takeover.wrong_fixed", "Takeover: wrong finals fixed", 1),
              ("audit.takeover.wrong_entering", "Takeover: wrong finals entering", 1),
              ("audit.takeover.right_broken", "Takeover: right finals broken", 1),
              ("unanswered", "unanswered tasks", 1),
              ("detection.false_isolations", "agents isolated while healthy", 1),
              ("missed", "missed degraded intervals", 1)]
    rows, data = [], []
    for path, label, digits in fields:
        st = Stat.of(rs.stat(path))
        if st.mean is None:
            continue
        rows.append([label, st.fmt(digits)])
        data.append([path, *_stat_cols("", st)])
    if not rows:
        return None
    return Table("Review audit and failures", ["metric", "value"], rows,
                 ["field", "mean", "std", "min", "max", "n"], data, _seeds_note(rs), name="audit")


def sac_table(runs: Any) -> Optional[Table]:
    """IAA, FAA, BFTI, RA and H-Majority per method and topology (SAC Tab. 1)."""
    data_runs = sac_runs(runs)
    cols = [f for f in SAC_FIELDS if any(f in s.metrics for s in data_runs)]
    labels = {"iaa": "IAA (%)", "faa": "FAA (%)", "bfti": "BFTI (pp)", "ra": "RA (%)", "h_majority": "H-Majority (%)"}
    rows, data = [], []
    for s in data_runs:
        row = [s.method, s.topology]
        raw: list[Any] = [s.method, s.topology, s.seeds]
        for f in cols:
            st = s.metrics.get(f)
            if st is None or st.mean is None:
                row.append("–")
                raw += [None, None]
                continue
            scale = 100.0 if abs(st.mean) <= 1.0 else 1.0
            txt = st.fmt(1, scale)
            row.append(("+" + txt) if f == "bfti" and st.mean > 0 else txt)
            raw += [st.mean * scale, (st.std or 0.0) * scale]
        w0, w1 = _first_last(s.weak)
        s0, s1 = _first_last(s.strong)
        row.append(f"{w0:.0f}→{w1:.0f}" if w0 is not None else "–")
        row.append(f"{s0:.0f}→{s1:.0f}" if s0 is not None else "–")
        raw += [w0, w1, s0, s1]
        rows.append(row)
        data.append(raw)
    data_cols = ["method", "topology", "seeds"] + [x for f in cols for x in (f"{f}_mean", f"{f}_std")] + \
        ["weak_first", "weak_last", "strong_first", "strong_last"]
    return Table("SAC vs CP-WBFT", ["method", "topology", *[labels[f] for f in cols], "W first→last (%)",
                                    "S first→last (%)"], rows, data_cols, data,
                 "mean ± sample std over seeds where a folder holds several", name="sac")


def gray_table(runs: Any) -> Optional[Table]:
    """Gray failures beside Byzantine agents (docs/sac.md): per run folder and phase,
    IAA, FAA and BFTI(t) = Acc_all(t) − Acc_all(0) for every round t ≥ 1."""
    from .sac import gray_runs

    data_runs = gray_runs(runs)
    T = max((len(g.rounds.get(ph, {}).get("bfti", [])) - 1 for g in data_runs for ph in g.rounds), default=0)
    rows, data = [], []
    for g in data_runs:
        for ph in ("before", "degraded", "after"):
            per = g.rounds.get(ph)
            if not per:
                continue
            cells, raw = [], []
            for f, t in [("all", 0), ("all", T)] + [("bfti", t) for t in range(1, T + 1)]:
                col = per.get(f, [])
                st = Stat.from_values(col[t] if t < len(col) else [])
                txt = st.fmt(1) if st.mean is not None else "–"
                cells.append(("+" + txt) if f == "bfti" and st.mean is not None and st.mean > 0 else txt)
                raw += [st.mean, st.std]
            q = g.queries.get(ph, [])
            rows.append([g.label, ph, str(q[0]) if q and len(set(q)) == 1 else "–", *cells])
            data.append([g.method, g.F, ph, g.seeds, q[0] if q else None, *raw])
    if not rows:
        return None
    heads = ["IAA (%)", "FAA (%)"] + [f"BFTI({t}) (pp)" for t in range(1, T + 1)]
    keys = ["iaa", "faa"] + [f"bfti_{t}" for t in range(1, T + 1)]
    return Table("Gray failures: BFTI per round and phase", ["method", "phase", "queries", *heads], rows,
                 ["method", "F", "phase", "seeds", "queries"] + [x for k in keys for x in (f"{k}_mean", f"{k}_std")],
                 data, "mean ± sample std over seeds; BFTI(T) is the phase's BFTI = FAA − IAA", name="gray")


def _first_last(vals: Sequence[Optional[float]]):
    xs = [v for v in vals if v is not None]
    return (xs[0], xs[-1]) if xs else (None, None)


def tables(run: Any) -> list[Table]:
    """Every table that applies to the run folder."""
    rs = open_run(run)
    rf = rs.first
    out: list[Table] = []
    if rf.is_sac:
        t = sac_table([rs])
        if t:
            out.append(t)
        if isinstance(rf.summary.get("gray"), dict):
            out.append(gray_table([rs]))
    if isinstance(rf.summary.get("accuracy"), dict):
        out.append(phase_table(rs))
    for fn in (healing_table, audit_table, evidence_table):
        t = fn(rs)
        if t is not None:
            out.append(t)
    return out


def write_tables(tabs: Sequence[Table], folder: Path, md_name: str = "tables.md",
                 prefix: str = "") -> list[Path]:
    """``<prefix><table>.csv`` per table and one Markdown file holding them all."""
    from ..io.records import write_atomic

    folder = Path(folder)
    paths = []
    for t in tabs:
        p = folder / f"{prefix}{t.name}.csv"
        write_atomic(p, t.to_csv())
        paths.append(p)
    md = folder / md_name
    write_atomic(md, "\n".join(t.to_markdown() for t in tabs))
    paths.append(md)
    return paths


def print_tables(tabs: Sequence[Table], file=None) -> None:
    from rich.console import Console

    console = Console(file=file, width=120)
    for t in tabs:
        console.print(t.to_rich())


# ---------------------------------------------------------------------------
# HTML report

#: the reports' stylesheet (templates/report.css; the run, sweep and uncertainty reports share it)
_CSS = Markup("\n" + TEMPLATES.text("report.css"))


def _img(fig) -> Markup:
    data = base64.b64encode(_png_bytes(fig)).decode("ascii")
    return Markup(f'<img alt="figure" src="data:image/png;base64,{data}">')


def figure_html(title: str, caption: str, build: Callable[[], Any], img: Optional[Callable[[Any], str]] = None
                ) -> Markup:
    """A figure of a report with its title and caption, or why it was not drawn (a figure that does
    not apply after all: the report goes on). ``img``: the figure's ``<img>`` tag (default :func:`_img`)."""
    from ..core.errors import MeshsimError

    try:
        fig = build()
    except MeshsimError as exc:
        return TEMPLATES.render("not-drawn.html", title=title, reason=str(exc))
    image = Markup((img or _img)(fig))  # an <img> tag built here, base64 inside
    return TEMPLATES.render("figure.html", title=title, image=image, caption=caption)


def _figures(rs: RunSet, seed: Optional[int]) -> list[tuple[str, str, Callable[[], Any]]]:
    """(title, caption, builder) for every figure that applies."""
    rf = rs.run(seed)
    out: list[tuple[str, str, Callable[[], Any]]] = []
    if isinstance(rf.summary.get("accuracy"), dict) and rf.phases():
        out.append(("Accuracy and cost per phase",
                    "Bars: mean over seeds, error bars: sample std; pink phases had a degraded agent.",
                    lambda: phase_bars(rs)))
    if rf.is_meshheal:
        n_agents = len(rf.agents())
        chosen, note = choose_agents(rf)
        if n_agents > 12:
            out.append(("Inferred state of every agent",
                        f"Seed {rf.seed}. Rows: agents (degraded first); colour: inferred routing state; "
                        "black outline: injected degradation.",
                        lambda: _heatmap(rf)))
        if chosen:
            out.append(("Detection and reintegration timeline (Fig. C1)",
                        f"Seed {rf.seed}. Pink: injected degradation; markers: reviewed outputs coloured by the "
                        "state after the update, hollow: recovery probes; black: rolling mean review score; "
                        "blue: 10th–90th percentile of normal agents' mean score; bottom strip: inferred "
                        "state; dashed: detection c and reintegration u with their delays; orange: link and topology "
                        "events (solid: the agent's own links or every agent's; dotted: other agents').",
                        lambda: timeline(rf, agents=chosen, note=note)))
            if str(rf.params.get("detector", "relative")) != "none" and rf.params.get("review", True):
                out.append(("Detector statistic",
                            f"Seed {rf.seed}. One point per matched detector update; dotted lines: watch and "
                            "isolate thresholds from protocol.params.",
                            lambda: detector_figure(rf, agents=chosen, note=note)))
    if rf.is_sac:
        out.append(("SAC: per-round accuracy and BFTI", "Strong (solid) and weak (dashed) honest agents' "
                    "accuracy per round; BFTI = FAA − IAA.", lambda: sac_figure([rs])))
        if isinstance(rf.summary.get("gray"), dict):
            from .sac import gray_figure

            out.append(("SAC: gray failures", "BFTI(t) = Acc(t) − Acc(0) per round before and while honest "
                        "agents are degraded (band: ± sample std over seeds), and accuracy by group.",
                        lambda: gray_figure([rs])))
    out.append(("Topology", "Initial graph rebuilt from scenario.resolved.yaml; colour: final inferred state "
                "(or role); black ring: agents degraded at some point.", lambda: topology(rf)))
    return out


def _heatmap(rf):
    fig = _new_figure(heatmap_height(len(rf.agents())))
    state_heatmap(rf, ax=fig.add_subplot(1, 1, 1))
    return fig


def _check_records(rs: RunSet) -> None:
    """A MeshHeal run must hold its three tables, each readable: a partial folder is an error."""
    for rf in rs.runs.values():
        if rf.protocol == "meshheal":
            rf.need_records("report" if len(rs.runs) == 1 else f"report (seed {rf.seed})")
            rf.agents(), rf.states()  # reads every row of the three tables once


def build_report(run: Any, seed: Optional[int] = None) -> str:
    """The report's HTML text (templates/run-report.html)."""
    import yaml

    rs = open_run(run)
    rf = rs.run(seed)
    _check_records(rs)
    sc = rf.scenario
    seeds = f"{len(rs.runs)} seeds ({', '.join(map(str, rs.seeds))}); per-seed figures: seed {rf.seed}" \
        if rs.multi and len(rs.runs) > 1 else f"seed {rf.seed}"
    if rs.note:
        seeds += f" ({rs.note})"
    description = join([TEMPLATES.render("paragraph.html", text=str(sc["description"])), "\n"]) \
        if sc.get("description") else ""
    # figures first (what a reader looks at), then the tables, long ones folded
    figures = join((figure_html(*f) for f in _figures(rs, seed)), "\n")
    tabs = tables(rs)
    tables_html = join([Markup("<h2>Tables</h2>"), *(t.to_html() for t in tabs), "\n"]) if tabs else ""
    page = TEMPLATES.render("run-report.html", name=sc.get("name", rf.path.name), css=_CSS, description=description,
                            folder=str(rs.path), protocol=rf.protocol, seeds=seeds, summary=_headline_html(rs),
                            figures=figures, tables=tables_html, seed=f" (seed {rf.seed})" if rs.multi else "",
                            scenario=yaml.safe_dump(sc, sort_keys=False, allow_unicode=True), version=_version())
    return page + "\n"


def _version() -> str:
    from ..core.version import __version__

    return __version__


def _headline_html(rs: RunSet) -> Markup:
    rf = rs.first
    items: list[tuple[str, str]] = []  # (label, text or Markup)
    for path, label, digits, scale in (("accuracy.overall", "accuracy", 3, 1.0),
                                       ("tokens_per_task", "tokens per task (k)", 1, 1e-3),
                                       ("calls_per_task", "model calls per task", 1, 1.0),
                                       ("tasks", "tasks", 0, 1.0), ("agents", "agents", 0, 1.0),
                                       ("sim_time", "simulated time (s)", 0, 1.0),
                                       ("messages.total.sent", "messages sent", 0, 1.0),
                                       ("queries", "queries", 0, 1.0),
                                       ("tokens.per_query", "tokens per query (k)", 1, 1e-3),
                                       ("iaa", "IAA", 3, 1.0), ("faa", "FAA", 3, 1.0), ("bfti", "BFTI", 3, 1.0),
                                       ("ra", "RA", 3, 1.0), ("h_majority", "H-Majority", 3, 1.0)):
        st = Stat.of(rs.stat(path))
        if st.mean is not None:
            if st.min is not None and st.min == st.max:  # the same in every seed
                st = Stat(st.mean, n=1)
            items.append((label, st.fmt(digits, scale)))
    if not rs.multi:
        iso = rf.summary.get("isolated_at_end")
        if isinstance(iso, list):
            items.append(("isolated at end", fold_list(iso)))
        from ..observe.collapse import collapse_clause

        clause = collapse_clause(rf.summary)
        if clause:
            items.append(("collapse", clause.split(": ", 1)[1]))
    else:
        col = rs.stat("collapse.occurred")
        if isinstance(col, dict) and col.get("true"):
            items.append(("collapse (every healthy holder of an ability isolated)",
                          f"in {col['true']} of {col['n']} seeds"))
    rows = join(TEMPLATES.render("headline-row.html", label=k, value=v) for k, v in items)
    return TEMPLATES.render("headline.html", rows=rows, note=_seeds_note(rs))


def write_report(run: Any, seed: Optional[int] = None, out: Optional[Path | str] = None,
                 with_tables: bool = True) -> Path:
    """Write ``RUN_DIR/report.html`` (and the tables as CSV + Markdown); returns its path."""
    from ..io.records import write_atomic
    from ..io.runfolder import claim_report

    rs = open_run(run)
    text = build_report(rs, seed)
    path = Path(out) if out is not None else rs.path / "report.html"
    if out is None:
        claim_report(path.parent, path.name)  # a run folder's own file: a rerun may replace it
    write_atomic(path, text)
    if with_tables:
        tabs = tables(rs)
        if tabs:
            write_tables(tabs, path.parent)
    return path
