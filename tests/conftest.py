from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow],
                          derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")


import pytest


@pytest.fixture(autouse=True)
def _forget_registered_keys():
    """A test that builds a real backend registers its fake API key for scrubbing
    (meshsim.core.redact); forget it afterwards, or its digits would go on masking
    numbers in later tests' run folders (runs do the same: redact.scope)."""
    from meshsim.core import redact

    with redact.scope():
        yield


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/data/golden/ from the runs the determinism test pins "
                          "(tests/golden_diff.py), instead of comparing with them")


@pytest.fixture
def update_golden(request) -> bool:
    """True under ``pytest --update-golden``: golden files are rewritten, not compared."""
    return bool(request.config.getoption("--update-golden"))
