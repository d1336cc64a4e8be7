"""The control plane: the supervisor, its request table, restarts and the layout of units.

Runs in the serving process; may import `launcher.wire` and `planner`'s public API, never a worker module."""
