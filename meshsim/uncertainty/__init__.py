"""``meshsim uncertainty``: Morris screening over every assumption range of a
scenario's backend profile, then a Latin-hypercube band over the top factors,
on the sweep engine (docs/uncertainty.md).

::

    from meshsim.uncertainty import plan_uncertainty, check_metrics, run_uncertainty
    study = plan_uncertainty("scenarios/meshheal/persistent-math.yaml",
                             metrics=["detection.false_isolations"], budget=2000)
    check_metrics(study)
    outcome = run_uncertainty(study, "runs/unc", workers=2)

Layout: :mod:`.design` (budget split, Morris and LHS designs), :mod:`.core`
(planning, the two stages, ranking.csv / bands.csv / samples.csv),
:mod:`.report` (tornado.png, report.html).
"""
from .core import (BANDS, DEFAULT_BUDGET, DEFAULT_TOP, RANKING, SAMPLES, STATE, TORNADO, Study,
                   UncertaintyOutcome, check_metrics, classify, plan_uncertainty, read_csv, read_state,
                   run_uncertainty)

__all__ = ["plan_uncertainty", "check_metrics", "run_uncertainty", "Study", "UncertaintyOutcome", "classify",
           "read_state", "read_csv", "STATE", "RANKING", "BANDS", "SAMPLES", "TORNADO", "DEFAULT_BUDGET",
           "DEFAULT_TOP", "is_uncertainty_folder"]


def is_uncertainty_folder(path) -> bool:
    from pathlib import Path

    return (Path(path) / STATE).is_file()
