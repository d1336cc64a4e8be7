"""The harness that judges `planner tune`: its predictions against served measurements
(`accuracy`, `generated` with its `generator` and `judge`, `rate_cases`), replays of saved runs
with the planner as it is (`replay`), how fast it answers (`latency`), what the machine does where
the model misses (`cores_busy`, `cpu_idle_trace`, `stolen_share`), and the saved judging sets
(`runs`). Its evidence log is ../EVIDENCE.md."""
