"""Where the search (meshsim.sweep.search) depends on more of Optuna than its everyday API (issue 31 item 4).

The search reaches trials through Optuna's public API only: a trial's id from the storage it opened itself
(``BaseStorage.get_trial_id_from_study_id_trial_number``), never the study's or the trial's private attributes.
What remains beyond the documented surface is gathered here, each guarded by tests/unit/test_optuna_seam.py, which
fails naming the change if an Optuna release moves it:

- the journal file's format: the operation codes of a study's and a trial's creation (Optuna keeps them in a
  private enum) and the name of the lock file ``JournalFileOpenLock`` leaves beside the journal;
- a live ``optuna.trial.Trial`` for a trial already asked (its constructor takes the study and the trial id:
  public, though not meant for everyday use), to finish the ask of a trial cut short by ``kill -9``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["CREATE_STUDY", "CREATE_TRIAL", "LOCK_SUFFIX", "lock_path", "Trials"]

#: Optuna's journal operation codes for creating a study and a trial (optuna.storages.journal's JournalOperation)
CREATE_STUDY, CREATE_TRIAL = 0, 4
#: what ``JournalFileOpenLock(path)`` appends to the journal's path for its lock file
LOCK_SUFFIX = ".lock"


def lock_path(journal: Path) -> Path:
    """The lock file ``JournalFileOpenLock`` makes beside ``journal`` (one left behind by ``kill -9`` is stale)."""
    return Path(str(journal) + LOCK_SUFFIX)


class Trials:
    """A study's trials by number, through the storage the search opened (Optuna's public storage API)."""

    def __init__(self, study: Any, storage: Any):
        self.study, self.storage = study, storage
        self.study_id = storage.get_study_id_from_name(study.study_name)

    def trial_id(self, number: int) -> int:
        return int(self.storage.get_trial_id_from_study_id_trial_number(self.study_id, number))

    def set_user_attr(self, trial: Any, key: str, value: Any) -> None:
        """``trial.set_user_attr(key, value)`` for a trial of the study (asked or frozen, by its number)."""
        self.storage.set_trial_user_attr(self.trial_id(trial.number), key, value)

    def live(self, trial: Any) -> Any:
        """An ``optuna.trial.Trial`` for an asked trial, to suggest the parameters it does not hold yet."""
        import optuna

        return optuna.trial.Trial(self.study, self.trial_id(trial.number))
