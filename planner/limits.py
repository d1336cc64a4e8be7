"""Size limits on what configs and cluster files may ask for. Each is far above any real
deployment, and low enough that the solver's model stays small: without them, `tp_size: 100000`
ran for more than 300 s and a node of 10^6 GPUs took 6.4 GB before any answer."""

MAX_TP_SIZE = 64  # ranks of one tensor-parallel stage
MAX_GPU_ID = 1023  # a GPU id in a config
MAX_GPUS_PER_NODE = 64  # a node in a cluster file
MAX_NODES = 256  # nodes in a cluster file
MAX_CLUSTER_GPUS = 2048  # GPUs of all its nodes together: about 2 s for --replicas max
MAX_CPUS_PER_NODE = 16384
MAX_THREADS = 1024  # CPU threads of one stage
MAX_COPIES = 256  # copies of one process group
# Load flags of `planner bench` and `planner tune`: finite, and within these (a rate of 1e-300
# waited for ever for its first arrival; inf and nan raised from deep inside).
MIN_RATE = 0.01  # requests/s: one every 100 s
MAX_RATE = 10_000.0
MAX_DURATION_S = 86_400.0  # a day
MAX_CONCURRENCY = 4096
MAX_COUNT = 1_000_000  # requests, warm-up, rounds and the like
MAX_MS = 3_600_000.0  # a latency bound: an hour
MAX_BURSTINESS = 1000.0
SOLVER_TIME_LIMIT_S = 10.0  # wall clock of one CP-SAT call on a placement model


def shown(value: object, limit: int = 40) -> str:
    """A number from a file, as short as a message needs (a 400-digit one is not echoed)."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        return "a number with thousands of digits"
    return text if len(text) <= limit else f"{text[:limit - 3]}... ({len(text)} characters)"
