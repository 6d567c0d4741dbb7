"""The papers' experiments as held-out predictions, and sensitivity sweeps of
the fakes' assumptions (issue 10). Importable without matplotlib.

* :mod:`meshsim.paper.validation.sac` -- SAC / CP-WBFT: the settings of SAC Tab. 1,
  3, 7, 8 and the swaying comparison with the paper's values beside the
  simulated ones (:func:`~meshsim.paper.validation.sac.predict`), and
  :func:`~meshsim.paper.validation.sac.sensitivity`.
"""
