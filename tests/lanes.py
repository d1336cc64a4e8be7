"""Which lane this run is: the fast lane (`-m "not slow"`) or a run that includes the slow tests.

Property tests draw fewer examples in the fast lane and the full count otherwise: the same tests,
the same properties, a smaller sample where speed matters. Set by `tests/conftest.py` before any
test module is imported (their `@settings` read it as they are decorated)."""

FAST = False


def examples(full: int, fast: int) -> int:
    """How many Hypothesis examples to draw: `fast` in the fast lane, `full` otherwise."""
    return fast if FAST else full
