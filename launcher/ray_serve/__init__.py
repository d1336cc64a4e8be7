"""A plan on Ray Serve: one deployment per process group, each replica hosting the launcher's own
worker (`launcher.worker.main.Worker`) for that group, and a front door that answers as
`planner serve` does (`launcher.serving.http.create_app`).

- `channel`: the `Channel` a worker hosted inside a replica talks through;
- `group`: a process group's replica, pulling its inputs from the deployments upstream;
- `door`: the front door's `Deployment` facade over the terminal group's deployment;
- `plan_args`: the plan, re-solved from the config file's `args`;
- `app`: the Ray Serve application (`import_path: launcher.ray_serve.app:build`), the only
  module here that imports Ray.
`planner solve ... --format ray-serve` writes the config file that runs it.
"""
