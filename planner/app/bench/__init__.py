"""`planner bench`: run the same load against several placements of one model and compare them.

One module per job: `options` (the command's flags, declared once), `placements` (which
placements), `texts` (seeded request texts), `server` (one placement served in a subprocess),
`loadgen` (the HTTP client load), `measure` (memory, stage profile, ideal bound), `compare`
(ratios, Pareto front), `runner` (the order of runs), `report` (tables, JSON, Markdown), `charts`
(PNGs) and `command` (the CLI's entry point).

The bench process is only a client: placements run behind `launcher.serving.serve` in a child process,
so the client's own work never competes with the server for one interpreter lock.
"""
