"""The MeshHeal paper's experiments (arXiv 2609.29015) for ``meshsim reproduce meshheal``."""
from __future__ import annotations

import statistics

from ...core.dotted import get_path
from .core import TARGET, Cell, Experiment, Sensitivity, _pair, _seeds, _vals, seeds_of

__all__ = ["meshheal_experiments", "meshheal_sensitivities"]

MH = "scenarios/meshheal"
DATASETS = (("bbh", "BBH"), ("math", "MATH"), ("mmlu-pro", "MMLU-Pro"))


def meshheal_experiments(seeds: "int | list[int]" = 5, quick: bool = False) -> list[Experiment]:
    exps: list[Experiment] = []

    # Tab. 2a / C1 / C2: persistent degradation on three datasets ------------------------------
    runs = {ds: _seeds(f"{MH}/persistent-{ds}.yaml", seeds, ("output.trace=none",)) for ds, _ in DATASETS}

    def persistent(by: dict[str, list[dict]]) -> list[Cell]:
        cells = []
        h = {ds: _vals(by[ds], "accuracy.by_phase.healthy") for ds, _ in DATASETS}
        d = {ds: _vals(by[ds], "accuracy.by_phase.degraded") for ds, _ in DATASETS}
        for ds, name in DATASETS:
            paper_h, paper_d = ((0.821, 0.019), (0.802, 0.021)) if ds == "math" else ((None, None), (None, None))
            cells.append(Cell("Tab. C1", f"{name}: healthy-phase accuracy", paper_h[0], values=h[ds],
                              paper_sd=paper_h[1]))
            cells.append(Cell("Tab. C1", f"{name}: degraded-phase accuracy", paper_d[0], values=d[ds],
                              paper_sd=paper_d[1]))
            cells.append(Cell("Tab. C1", f"{name}: paired phase change", -0.019 if ds == "math" else ">= 0",
                              values=_pair(d[ds], h[ds], lambda a, b: a - b), fmt="{:+.3f}"))
        n = len(by["bbh"])
        mean = lambda vals: [statistics.fmean([vals[ds][k] for ds, _ in DATASETS])  # noqa: E731
                             if all(vals[ds][k] is not None for ds, _ in DATASETS) else None for k in range(n)]
        mh, md = mean(h), mean(d)
        cells += [Cell("Tab. 2a", "mean of datasets: healthy-phase accuracy", 0.831, values=mh, paper_sd=0.013),
                  Cell("Tab. 2a", "mean of datasets: degraded-phase accuracy", 0.839, values=md, paper_sd=0.012),
                  Cell("Tab. 2a", "mean of datasets: paired phase change", 0.007, values=_pair(md, mh, lambda a, b: a - b),
                       paper_sd=0.012, fmt="{:+.3f}")]
        for phase, paper, sd in (("healthy", 12.4, 0.2), ("degraded", 13.6, 0.3)):
            calls = [statistics.fmean(x) for x in zip(*[_vals(by[ds], f"calls_per_task_by_phase.{phase}")
                                                        for ds, _ in DATASETS])]
            cells.append(Cell("Tab. C2", f"model calls per task, {phase} phase", paper, values=calls, paper_sd=sd,
                              fmt="{:.1f}"))
        for phase, paper, sd in (("healthy", 51.0, 3.0), ("degraded", 51.0, 5.0)):
            tok = [statistics.fmean(x) for x in zip(*[_vals(by[ds], f"tokens_per_task_by_phase.{phase}", 1e-3)
                                                      for ds, _ in DATASETS])]
            cells.append(Cell("Tab. C2", f"tokens per task (k), {phase} phase", paper, values=tok, paper_sd=sd,
                              fmt="{:.1f}"))
        miss = [sum(x) for x in zip(*[_vals(by[ds], "missed") for ds, _ in DATASETS])]
        false = [sum(x) for x in zip(*[_vals(by[ds], "detection.false_isolations") for ds, _ in DATASETS])]
        cells.append(Cell("Sec. 6.1", "missed degraded agents (of 2 per dataset, summed)", None, values=miss,
                          fmt="{:.1f}", note="the paper does not report them for this setting"))
        cells.append(Cell("Sec. 6.1", "agents isolated while healthy (of 6 per dataset, summed)", None,
                          values=false, fmt="{:.1f}", note="the paper does not report them for this setting"))
        return cells

    exps.append(Experiment("persistent", "Persistent degradation (Sec. 6.1, Tab. 2a, C1, C2)", runs, persistent))

    # App. C.5: the audit the fake was calibrated to (persistent BBH) -----------------------------
    def audit(by: dict[str, list[dict]]) -> list[Cell]:
        from ..calibration import TARGETS, _pooled_takeover

        sums = by["bbh"]
        pooled = _pooled_takeover([s["audit"] for s in sums])
        cells = []
        for t in TARGETS:
            if t.key.startswith("takeover."):
                v = pooled.get(t.key.split(".", 1)[1])
                vals = [v]
                note = "pooled over seeds"
            else:
                vals = _vals(sums, "audit." + t.key)
                note = ""
            cells.append(Cell("App. C.5", t.label, t.paper, kind=TARGET, values=vals, paper_sd=t.spread, note=note))
        return cells

    exps.append(Experiment("audit", "Review and Takeover audit (App. C.5, Tab. C8): calibration targets",
                           {"bbh": runs["bbh"]}, audit))

    # Tab. 3: staggered degradation and recovery --------------------------------------------------
    st = {"staggered": _seeds(f"{MH}/staggered-math.yaml", seeds, ("output.trace=none",))}

    def staggered(by: dict[str, list[dict]]) -> list[Cell]:
        s = by["staggered"]
        cells = []
        for phase, paper in (("healthy", None), ("a5_degraded", None), ("both_degraded", 0.770),
                             ("a3_degraded", 0.841), ("restored", 0.857)):
            cells.append(Cell("Tab. 3a", f"accuracy, phase {phase}", paper, values=_vals(s, f"accuracy.by_phase.{phase}")))
        post = []
        for x in s:
            ph = x["accuracy"]["by_phase"]
            xs = [ph[k] for k in ("a5_degraded", "both_degraded", "a3_degraded", "restored") if k in ph]
            post.append(statistics.fmean(xs) if len(xs) == 4 else None)
        cells.append(Cell("Tab. 3a", "accuracy over the 504 tasks after the first degradation", 0.812, values=post))
        cells.append(Cell("Tab. 3a", "tokens per task (k)", 49.0, values=_vals(s, "tokens_per_task", 1e-3), fmt="{:.1f}"))
        for a, det, det_sd, rein, rein_sd in (("A5", 8.0, 5.2, 46.0, 11.7), ("A3", 12.4, 6.2, 45.0, 3.5)):
            cells.append(Cell("Tab. 3b", f"{a} detection delay (tasks)", det, paper_sd=det_sd,
                              values=_vals(s, f"agents.{a}.detection_delay"), fmt="{:.1f}"))
            cells.append(Cell("Tab. 3b", f"{a} closure (seeds)", f"5/{len(s)}" if len(s) == 5 else "all",
                              values=[1.0 if get_path(x, f"agents.{a}.closure", None) else 0.0 for x in s], fmt="{:.2f}",
                              note="fraction of seeds"))
            cells.append(Cell("Tab. 3b", f"{a} reintegration delay (tasks)", rein, paper_sd=rein_sd,
                              values=_vals(s, f"agents.{a}.reintegration_delay"), fmt="{:.1f}"))
        cells.append(Cell("Tab. 3b", "agents isolated while healthy (of 6)", 0.0,
                          values=_vals(s, "detection.false_isolations"), fmt="{:.1f}",
                          note="the paper reports none ('isolates degraded agents ... returns them to normal routing')"))
        return cells

    exps.append(Experiment("staggered", "Degradation and recovery (Sec. 6.2, Tab. 3)", st, staggered))

    # Tab. 2b: scaling -------------------------------------------------------------------------------
    sizes = (96, 288) if quick else (96, 288, 576)
    sc_runs = {f"{n}-{g}": _seeds(f"{MH}/scale-{n}-{g}.yaml", seeds if n < 576 else seeds_of(seeds)[:3])
               for n in sizes for g in ("complete", "sparse")}

    def scaling(by: dict[str, list[dict]]) -> list[Cell]:
        cells = []
        paper = {(576, "sparse"): 0.814}
        for n in sizes:
            for g in ("complete", "sparse"):
                s = by[f"{n}-{g}"]
                deg = [float(len(x.get("agents", {}))) for x in s]
                iso = [float(len(x.get("agents", {})) - x.get("missed", 0)) for x in s]
                cells.append(Cell("Tab. 2b", f"{n} agents, {g}: accuracy", paper.get((n, g),
                                  "0.808-0.827" if g == "complete" else "0.803-0.818"),
                                  values=_vals(s, "accuracy.overall")))
                cells.append(Cell("Tab. 2b", f"{n} agents, {g}: isolated / degraded", 1.0,
                                  values=[i / d if d else None for i, d in zip(iso, deg)], fmt="{:.3f}",
                                  note="every degraded agent isolated in the paper"))
                cells.append(Cell("Tab. 2b", f"{n} agents, {g}: falsely isolated healthy agents", None,
                                  values=_vals(s, "detection.false_isolations"), fmt="{:.1f}"))
            c, sp = _vals(by[f"{n}-complete"], "accuracy.overall"), _vals(by[f"{n}-sparse"], "accuracy.overall")
            cells.append(Cell("Tab. 2b", f"{n} agents: sparse - complete accuracy", "|d| <= 0.010",
                              values=_pair(sp, c, lambda a, b: a - b), fmt="{:+.3f}"))
        return cells

    exps.append(Experiment("scaling", "Scaling with local information (Sec. 6.3, Tab. 2b)"
                           + (" [--quick: 576 agents skipped]" if quick else ""), sc_runs, scaling))

    # Tab. C6: fast-timescale ablations on BBH -----------------------------------------------------
    ab = {"full": runs["bbh"],
          "single": _seeds(f"{MH}/persistent-bbh.yaml", seeds, ("output.trace=none", "protocol.params.committee=false")),
          "no_takeover": _seeds(f"{MH}/persistent-bbh.yaml", seeds, ("output.trace=none",
                                                                       "protocol.params.takeover=false"))}

    def ablations(by: dict[str, list[dict]]) -> list[Cell]:
        cells = []
        ph = {k: (_vals(v, "accuracy.by_phase.healthy"), _vals(v, "accuracy.by_phase.degraded")) for k, v in by.items()}
        for k, name, change, sd in (("full", "full", 0.001, 0.016), ("single", "single reviewer", -0.044, 0.024),
                                    ("no_takeover", "no Takeover", -0.035, 0.030)):
            h, d = ph[k]
            cells.append(Cell("Tab. C6", f"{name}: paired phase change", change, paper_sd=sd,
                              values=_pair(d, h, lambda a, b: a - b), fmt="{:+.3f}"))
            cells.append(Cell("Tab. C6", f"{name}: degraded-phase accuracy", None, values=d))
        for k, name, dd, dh in (("single", "single reviewer", -0.035, None), ("no_takeover", "no Takeover", -0.056, -0.020)):
            cells.append(Cell("Tab. C6", f"{name} - full: degraded-phase accuracy", dd,
                              values=_pair(ph[k][1], ph["full"][1], lambda a, b: a - b), fmt="{:+.3f}"))
            cells.append(Cell("Tab. C6", f"{name} - full: healthy-phase accuracy",
                              dh if dh is not None else "slightly higher",
                              values=_pair(ph[k][0], ph["full"][0], lambda a, b: a - b), fmt="{:+.3f}"))
        return cells

    exps.append(Experiment("ablations", "Fast-timescale ablations on BBH (Sec. 6.4, Tab. C6)", ab, ablations))

    # Tab. C7 (+ C3, C4): detectors under model pairs A and B ------------------------------------------
    det = {}
    for pair in ("a", "b"):
        for d in ("relative", "absolute", "cusum"):
            det[f"{pair}-{d}"] = _seeds(f"{MH}/persistent-bbh.yaml", seeds,
                                        ("output.trace=none", f"protocol.params.detector={d}"),
                                        profile=f"fake-pair-{pair}")

    def detectors(by: dict[str, list[dict]]) -> list[Cell]:
        paper = {("a", "relative"): (0, 0), ("b", "relative"): (0, 0), ("a", "absolute"): (0, 4),
                 ("b", "absolute"): (0, None), ("a", "cusum"): (None, 2), ("b", "cusum"): (1, None)}
        cells = []
        for pair in ("a", "b"):
            for d in ("relative", "absolute", "cusum"):
                s = by[f"{pair}-{d}"]
                pm, pf = paper[(pair, d)]
                cells.append(Cell("Tab. C7", f"pair {pair.upper()}, {d}: missed degraded agents (of 2)",
                                  pm if pm is not None else "n/r", values=_vals(s, "missed"), fmt="{:.1f}"))
                cells.append(Cell("Tab. C7", f"pair {pair.upper()}, {d}: agents isolated while healthy (paper: of the 4 never degraded)",
                                  pf if pf is not None else "n/r", values=_vals(s, "detection.false_isolations"), fmt="{:.1f}"))
        for pair, dacc, dsd, ch, chsd in (("a", 0.905, 0.016, None, None), ("b", 0.782, 0.023, -0.008, 0.015)):
            s = by[f"{pair}-relative"]
            h, dd = _vals(s, "accuracy.by_phase.healthy"), _vals(s, "accuracy.by_phase.degraded")
            cells.append(Cell("Tab. C3" if pair == "a" else "Tab. C4",
                              f"pair {pair.upper()}: degraded-phase accuracy (BBH)", dacc, paper_sd=dsd, values=dd,
                              note="the paper's value is the mean of three datasets"))
            cells.append(Cell("Tab. C3" if pair == "a" else "Tab. C4", f"pair {pair.upper()}: paired phase change (BBH)",
                              ch if ch is not None else "n/r", paper_sd=chsd, values=_pair(dd, h, lambda a, b: a - b),
                              fmt="{:+.3f}"))
        return cells

    exps.append(Experiment("detectors", "Detector comparison under model pairs A and B (Sec. 6.4, Tab. C7)",
                           det, detectors))
    return exps



def meshheal_sensitivities() -> list[Sensitivity]:
    return [
        # review.scores.weak.unverifiable: {sound: x, error: 0.14, unverified: rest}, so x stays <= 0.86
        Sensitivity("weak-uncritical", "review.scores.weak.unverifiable.sound", (0.0, 0.15, 0.3, 0.5, 0.7, 0.86),
                    f"{MH}/persistent-bbh.yaml", ("output.trace=none",),
                    (("detection.false_isolations", "falsely isolated healthy agents"),
                     ("accuracy.by_phase.degraded", "degraded-phase accuracy")),
                    "degraded reviewers' leniency: how often a 1B reviewer that cannot re-derive accepts anyway"),
        # P(error) of an unverifiable half, beside P(sound) = 0.3: 0.14 is the profile's value
        Sensitivity("weak-flag-error", "review.scores.weak.unverifiable.error", (0.0, 0.14, 0.28, 0.42),
                    f"{MH}/persistent-bbh.yaml", ("output.trace=none",),
                    (("detection.false_isolations", "falsely isolated healthy agents"),
                     ("accuracy.by_phase.degraded", "degraded-phase accuracy")),
                    "how often a degraded reviewer claims an error it did not find"),
        Sensitivity("type-spread", "type_spread", (0.0, 0.3, 0.6, 0.9),
                    f"{MH}/persistent-bbh.yaml", ("output.trace=none", "protocol.params.detector=absolute"),
                    (("detection.false_isolations", "falsely isolated healthy agents (absolute detector)"),
                     ("missed", "missed degraded agents (absolute detector)")),
                    "how much task types differ in difficulty: what a fixed threshold cannot adapt to",
                    profile="fake-pair-a"),
        Sensitivity("review-persist", "review.persist", (0.0, 0.25, 0.5, 0.75),
                    f"{MH}/staggered-math.yaml", ("output.trace=none",),
                    (("agents.A3.detection_delay", "A3 detection delay (tasks)"),
                     ("agents.A5.reintegration_delay", "A5 reintegration delay (tasks)")),
                    "how much of a reviewer's call-to-call variation is its lasting view"),
    ]


