"""Every name the two packages publish in `__all__` imports, one by one and by `import *`.

`launcher` resolves its names lazily (`__getattr__`), so a name that points at a moved module only
fails when a user asks for it; this reads them all.
"""

from __future__ import annotations

import importlib

import pytest

PACKAGES = ("planner", "launcher")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_imports(package):
    module = importlib.import_module(package)
    missing = []
    for name in module.__all__:
        try:
            getattr(module, name)
        except Exception as exc:  # noqa: BLE001 - the report lists every broken name at once
            missing.append(f"{name}: {type(exc).__name__}: {exc}")
    assert not missing, missing
    assert len(set(module.__all__)) == len(module.__all__), "a name is listed twice"


@pytest.mark.parametrize("package", PACKAGES)
def test_star_import_gives_every_public_name(package):
    namespace: dict = {}
    exec(f"from {package} import *", namespace)  # noqa: S102 - the statement users write
    module = importlib.import_module(package)
    assert set(module.__all__) <= set(namespace)
    assert all(namespace[name] is getattr(module, name) for name in module.__all__)


def test_the_request_handle_is_the_one_a_deployment_returns():
    import launcher
    from launcher.control.request_table import SpeechRequest

    assert launcher.SpeechRequest is SpeechRequest
