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


def pytest_collection_modifyitems(session, config, items):
    """Files with end-to-end (slow) tests run first: run in two workers a file at a time
    (`--dist loadfile`), the long ones then overlap each other instead of one of them running
    alone at the end while the other worker idles, and the last minutes are the quick files,
    whose progress shows."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: order kept within each
