"""Which device a deployment runs on (`launcher.control.layout.resolve_device`)."""

from __future__ import annotations

import builtins

import pytest

from launcher.control.layout import resolve_device
from launcher.errors import LaunchError


def test_without_torch_auto_runs_on_cpu_and_cuda_says_what_is_missing(monkeypatch):
    """A real voice on onnxruntime needs no torch: `--device auto` must not fail importing it."""
    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch":
            raise ImportError("No module named 'torch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    assert resolve_device("auto") == ("cpu", None)
    with pytest.raises(LaunchError, match="torch is not installed"):
        resolve_device("cuda")
