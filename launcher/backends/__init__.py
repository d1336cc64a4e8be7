"""What runs the worker processes: the local (multiprocessing) and Ray backends, and their links.

Runs on both sides of the seam in `wire.backend` (supervisor side and worker side); imports
`wire`, `control` and `worker`, never `serving`."""
