"""Inside one worker process: build its stages, run them, hand payloads on, join fan-ins.

Runs in each worker process; may import `launcher.wire`, the stand-in/real stage factories and `planner`'s public API."""
