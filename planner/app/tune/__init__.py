"""`planner tune`'s side that runs things: profile (or read a profile), ask the pure model
(`planner.tune`), print, and verify by serving with `planner bench`.

One module per job: `options` (the command's flags), `command` (the CLI's entry point: profile,
choose, write tune.json, print), `rate` (the command's side of a rate question: which flags ask
it, what is refused, what it prints), `verify` (serving the top K placements), `rate_verify`
(serving a rate question's plans at its rate) and `bench_run` (a `planner bench` child process
and the names it gives plans).
"""
