"""What runs the worker processes: the local (multiprocessing) and Ray backends, and their links.

Runs on both sides of the seam in `launcher.wire.backend`; may import `wire`, `control` and `worker`."""
