"""The front door: HTTP, metrics, admission, replicas behind one port, `serve()` until a signal.

Runs in the serving process; may import every other launcher wing and `planner`'s public API."""
