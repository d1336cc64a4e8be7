"""What the server side tells us: startup, processes and their peak memory, the stage profile
from the launcher's metrics, and the ideal throughput bound that profile implies."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from launcher.control import metric_names

STAGE_METRIC = metric_names.STAGE_LATENCY
REQUESTS_METRIC = metric_names.total(metric_names.REQUESTS)
CUDA_METRIC = metric_names.CUDA_ALLOCATED
REPORTS_METRIC = metric_names.total(metric_names.PROCESS_REPORTS)
# Workers report their stage timings every 0.5 s (launcher.worker.main.STATS_INTERVAL_S): two
# reports come within a second; a worker that stopped reporting (dead, restarting) is not waited
# for longer than this.
SETTLE_TIMEOUT_S = 5.0
POLL_S = 0.05

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse_metrics(text: str) -> Series:
    """Prometheus text exposition -> {(sample name, labels): value}, with prometheus_client's
    parser."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _by_label(series: Series, name: str, key: str) -> dict[str, float]:
    return {dict(labels)[key]: v for (n, labels), v in series.items()
            if n == name and key in dict(labels)}


def scrape(url: str) -> Series:
    r = httpx.get(f"{url}/metrics", timeout=10.0)
    r.raise_for_status()
    return parse_metrics(r.text)


def settled_metrics(url: str, timeout_s: float = SETTLE_TIMEOUT_S) -> Series:
    """Metrics once every worker's stage timings recorded before the call have reached the
    supervisor (`metric_names.settled`: on its reports, not on a fixed wait), or after
    `timeout_s`."""
    def read() -> tuple[Series, dict[frozenset[tuple[str, str]], float]]:
        series = scrape(url)
        return series, _reports(series)

    return metric_names.settled(read, timeout_s, POLL_S)


def _reports(series: Series) -> dict[frozenset[tuple[str, str]], float]:
    """Each process's report count, by its labels (a replica's processes share names)."""
    return {labels: v for (name, labels), v in series.items() if name == REPORTS_METRIC}


@dataclass(frozen=True)
class StageTime:
    stage: str
    process: str
    invocations: int  # a streaming stage runs once per chunk
    total_s: float
    per_request_s: float | None  # total over the requests that finished in the window


def stage_profile(before: Series, after: Series, stage_process: Mapping[str, str]
                  ) -> tuple[StageTime, ...]:
    """Time each stage spent per finished request between two scrapes (warm-up excluded)."""
    sums0 = _by_label(before, f"{STAGE_METRIC}_sum", "stage")
    sums1 = _by_label(after, f"{STAGE_METRIC}_sum", "stage")
    counts0 = _by_label(before, f"{STAGE_METRIC}_count", "stage")
    counts1 = _by_label(after, f"{STAGE_METRIC}_count", "stage")
    done = (_by_label(after, REQUESTS_METRIC, "outcome").get("ok", 0.0)
            - _by_label(before, REQUESTS_METRIC, "outcome").get("ok", 0.0))
    out = []
    for stage, process in stage_process.items():
        total = sums1.get(stage, 0.0) - sums0.get(stage, 0.0)
        calls = int(counts1.get(stage, 0.0) - counts0.get(stage, 0.0))
        out.append(StageTime(stage=stage, process=process, invocations=calls, total_s=total,
                             per_request_s=total / done if done > 0 else None))
    return tuple(out)


def ideal_throughput(per_request_s: Mapping[str, float | None],
                     resources: Mapping[str, tuple[str, ...]],
                     copies: Mapping[str, int] | None = None) -> float | None:
    """Requests/s if every process were a serial resource and different processes overlapped
    perfectly: 1 / the busiest process's time per request, a process of k copies (`copies`, by
    resource name; one where not given) taking a k-th of it. None when a stage was not profiled.

    It ignores the handoff cost between processes and the limit of CPU cores, so a placement can
    fall short of it for either reason; how far short is the achieved/ideal ratio.
    """
    busiest = 0.0
    for name, stages in resources.items():
        times = [per_request_s.get(s) for s in stages]
        if any(t is None for t in times):
            return None
        busiest = max(busiest, sum(times) / (copies or {}).get(name, 1))  # type: ignore[arg-type]
    return 1.0 / busiest if busiest > 0 else None


def peak_rss_bytes(pid: int) -> int | None:
    """The kernel's high-water mark of resident memory (VmHWM); None when the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass(frozen=True)
class ProcessPeak:
    name: str  # "(supervisor)" for the server process itself
    pid: int
    stages: tuple[str, ...]
    peak_rss_bytes: int | None
    peak_gpu_bytes: int | None  # sampled torch.cuda.memory_allocated; None off CUDA


class GpuSampler:
    """Polls the launcher's CUDA gauge during a load (it is a current value, not a peak)."""

    def __init__(self, url: str, every_s: float = 0.5) -> None:
        self.url, self.every_s = url, every_s
        self.peaks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()

    def sample(self) -> None:
        try:
            series = scrape(self.url)
        except httpx.HTTPError:
            return
        for process, value in _by_label(series, CUDA_METRIC, "process").items():
            self.peaks[process] = max(self.peaks.get(process, 0), int(value))

    def __enter__(self) -> GpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sample()


def process_peaks(health: Mapping, server_pid: int, gpu_peaks: Mapping[str, int]
                  ) -> tuple[ProcessPeak, ...]:
    """Peak memory of every worker named by /health, plus the supervisor (the server process)."""
    out = [ProcessPeak(name="(supervisor)", pid=server_pid, stages=(),
                       peak_rss_bytes=peak_rss_bytes(server_pid), peak_gpu_bytes=None)]
    for p in health.get("processes", []):
        pid = p.get("pid")
        if pid is None:
            continue
        out.append(ProcessPeak(name=p["name"], pid=pid, stages=tuple(p.get("stages", ())),
                               peak_rss_bytes=peak_rss_bytes(pid),
                               peak_gpu_bytes=gpu_peaks.get(p["name"])))
    return tuple(out)
