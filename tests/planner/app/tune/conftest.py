"""Fixtures the tune command's tests share with the tune model's."""

from tests.planner.tune.conftest import qwen3_profile  # noqa: F401 - a fixture
