"""The real models' stage code, a package per model beside its card (`models/NAME.yaml`), and
what their stages share."""


def importable(module: str) -> bool:
    """Whether `module` can be imported here, without importing it: a stage's `preflight` asks
    before any process starts. A module set to None in sys.modules counts as missing."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:
        return False
