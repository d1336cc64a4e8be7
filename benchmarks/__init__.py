"""The project's benchmarks, run as modules from the repository root with the project's
environment: `python -m benchmarks.NAME` (README.md lists them; `tune_eval/` holds the
harness that judges `planner tune`)."""
