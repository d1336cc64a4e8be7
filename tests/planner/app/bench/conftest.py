"""`planner bench`'s tests need its extra (the serving stack and charts): with only the core
installed (`pip install -e .`), the folder skips saying so."""

import importlib.util

import pytest

_missing = [m for m in ("torch", "httpx", "starlette", "matplotlib")
            if importlib.util.find_spec(m) is None]
if _missing:
    pytest.skip(f"needs the bench extra ({', '.join(_missing)} missing): "
                "pip install -e '.[bench]'", allow_module_level=True)
