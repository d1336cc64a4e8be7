"""The control plane: the supervisor, its request table, admission, restarts, metrics, the layout.

Runs in the serving process; imports `wire` and the launcher's basics, never a worker, backend or
serving module (tests/test_layering.py checks the wings' order)."""
