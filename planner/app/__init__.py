"""The application floor: the `planner` command, the bench and profiling.

The only part of `planner` that holds argparse and may import `launcher`; nothing imports it but `planner.__main__`."""
