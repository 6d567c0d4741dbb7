"""Observe: the run's metrics as an outside observer computes them (never visible to agents).

By what they observe: ``routing`` (table convergence, where tasks were lost), ``detection``
(self-healing: detection delay, closure, reintegration, the review audit), ``execution`` (the
execution layer's and MeshHeal's summary), ``adversarial`` (Byzantine agents), ``consensus``
(SAC / CP-WBFT), ``collapse`` (the detector's reference made of degraded agents),
``attribution`` (what an attack caused), ``aggregate`` (over seeds) and ``summary`` (the
protocol's fields assembled at the run's end). The running counts the protocols feed are
:mod:`meshsim.protocols.ledger`.
"""
