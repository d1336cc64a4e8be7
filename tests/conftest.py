"""Settings for every test."""

from hypothesis import settings

from tests import lanes

# A loaded machine (2 cores shared with other work) stretches any one example past Hypothesis's
# default 200 ms deadline: none here. How many examples each test draws is set per test.
settings.register_profile("stage-planner", deadline=None)
settings.load_profile("stage-planner")


def pytest_configure(config):
    # `-m "not slow"`: the fast lane; property tests draw their smaller samples (tests/lanes.py).
    lanes.FAST = "not slow" in (config.getoption("markexpr") or "")
