"""``meshsim verdict``: candidate detector thresholds judged on held-out seeds
and over the assumption ranges, at one or several network sizes, with PASS /
FAIL against stated constraints (docs/verdict.md).

::

    from meshsim.verdict import plan_verdict, run_verdict
    plan = plan_verdict(["scenarios/meshheal/persistent-math.yaml"], seeds="70001-70010",
                        sets=["protocol.params.beta=4.239"], constraints=["P(collapse)<=0.01"])
    outcome = run_verdict(plan, "runs/verdict", workers=2)
    outcome.verdict["result"]             # PASS | FAIL

Layout: :mod:`.measures` (what is measured, intervals), :mod:`.constraints`
(the grammar and how each form is judged), :mod:`.core` (planning, the runs on
the sweep engine), :mod:`.judge` (verdict.json), :mod:`.report` (console
table, verdict.md).
"""
from .constraints import DEFAULT_CONSTRAINTS, GRAMMAR, Constraint, parse_constraint
from .core import (DEFAULT_BAND_SEEDS, DEFAULT_SAMPLES, PLAN, REPORT, VERDICT, VerdictOutcome, VerdictPlan,
                   folder_status, plan_verdict, run_verdict, seeds_text)
from .measures import COLLAPSE_RULE, EVENTS, MEASURES, clopper_pearson
from .report import console_lines

__all__ = ["plan_verdict", "run_verdict", "VerdictPlan", "VerdictOutcome", "parse_constraint", "Constraint",
           "DEFAULT_CONSTRAINTS", "GRAMMAR", "MEASURES", "EVENTS", "COLLAPSE_RULE", "clopper_pearson",
           "console_lines", "folder_status", "seeds_text", "VERDICT", "REPORT", "PLAN", "DEFAULT_SAMPLES",
           "DEFAULT_BAND_SEEDS"]
