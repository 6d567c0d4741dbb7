"""The papers' experiments: calibration against mechanism-level targets, checks of fitted profiles,
validation and reproduction of the papers' tables."""
