"""Closed forms over detectors and behaviour models (layer 5: numpy/scipy, may read backends).

:mod:`.scores` turns a behaviour model or a run folder into per-output score
distributions; :mod:`.detector` computes the detectors' operating
characteristics from them (docs/detector.md).
"""
