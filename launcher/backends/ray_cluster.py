"""What a running Ray cluster offers, for `--cluster ray`: its live nodes as a planner Cluster.

Joining the cluster (`ray.init`) is the runtime's job, so it is here and not in the pure planner,
which only turns the node records Ray lists into a Cluster (`planner.cluster_from_ray_nodes`).
A cluster that cannot be read is a ConfigError naming `--cluster ray`, as a bad cluster file is.
"""

from __future__ import annotations

import planner
from planner import Cluster, ConfigError, ConfigIssue


def ray_auth_problem(address: str | None) -> str | None:
    """Why this process cannot join the running Ray cluster at `address` (None: Ray's "auto"),
    when the reason is Ray's token authentication; None otherwise (also when there is no cluster
    there: connecting says that). Asked before `ray.init`, which would retry for 20 s and more
    while Ray logs an authentication warning a second, then say only that it could not connect.

    A plain TCP connect first: only a listening head is asked, so no running cluster costs
    nothing here. Ray's client then answers at once: a token mismatch is an
    AuthenticationError."""
    import socket

    try:
        from ray._private.services import canonicalize_bootstrap_address
        from ray._raylet import GcsClient
        from ray.exceptions import AuthenticationError
    except ImportError:  # another Ray: ray.init says what it says
        return None
    try:
        resolved = canonicalize_bootstrap_address(address or "auto")
        host, _, port = (resolved or "").rpartition(":")
        with socket.create_connection((host, int(port)), timeout=2.0):
            pass
    except (OSError, ValueError, ConnectionError, RuntimeError):
        return None
    try:
        GcsClient(address=resolved, cluster_id=None)
    except AuthenticationError as exc:
        said = str(exc).split(".")[0].removeprefix("RPC error: ")
        return (f"the Ray cluster at {resolved} requires token authentication and this process "
                f"has no valid token (Ray: {said}); give it the cluster's token: set "
                "RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=<token> (or RAY_AUTH_TOKEN_PATH=<file>, "
                "or put it in ~/.ray/auth_token; `ray get-auth-token` on the head node prints it), "
                "then run again")
    except Exception:  # noqa: BLE001 - anything else is ray.init's to report
        return None
    return None


def cluster_from_ray(address: str | None = None) -> Cluster:
    """The live nodes of the Ray cluster at `address` (None: Ray's "auto"). Joins it for the
    reading only, unless this process had joined already."""
    try:
        import ray
    except ImportError:
        raise ConfigError(ConfigIssue("--cluster", "ray", "Ray is not installed",
                                      "pip install 'stage-planner[ray]', or describe the nodes in "
                                      "a YAML file")) from None
    started = False
    if not ray.is_initialized():
        problem = ray_auth_problem(address)
        if problem is not None:
            raise ConfigError(ConfigIssue("--cluster", "ray", problem))
        try:
            ray.init(address=address or "auto", logging_level="ERROR", log_to_driver=False)
            started = True
        except ray.exceptions.AuthenticationError as exc:
            raise ConfigError(ConfigIssue(
                "--cluster", "ray", f"Ray's token authentication refused this process ({exc})",
                "give it the cluster's token (RAY_AUTH_TOKEN or ~/.ray/auth_token) or pass a "
                "cluster file")) from None
        except (ConnectionError, RuntimeError) as exc:
            raise ConfigError(ConfigIssue("--cluster", "ray", f"no running Ray cluster ({exc})",
                                          "start one with `ray start --head`, or pass a cluster "
                                          "file")) from None
    try:
        return planner.cluster_from_ray_nodes(ray.nodes())
    finally:
        if started:
            ray.shutdown()
