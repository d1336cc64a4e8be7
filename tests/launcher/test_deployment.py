"""End to end on CPU through the Python API: real worker processes, torn down after each test."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

from launcher import (
    LaunchError,
    RequestTimeout,
    StageFailed,
    Unavailable,
    WorkerDied,
    launch,
    standins,
)
from launcher.audio import SAMPLE_RATE

from tests.launcher import plans
from tests.launcher.conftest import DEVICE, TINY, pid_alive
from tests.waiting import wait_until

pytestmark = pytest.mark.slow
TEXT = "Placement must not change the audio."
F = "tests.launcher.factories:"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def synth(plan, text=TEXT, **kw):
    with launch(plan, device=DEVICE, factory_defaults=TINY, **kw) as d:
        return d.synthesize(text, voice="alice", timeout=30)


def test_declared_topology_and_every_safe_split_give_identical_audio():
    declared = synth(plans.qwen3())
    split = synth(plans.qwen3("vocoder"))
    assert declared.sample_rate == SAMPLE_RATE == 24_000
    assert declared.samples.numel() == standins.expected_samples(TEXT)
    assert torch.equal(declared.samples, split.samples)


def test_tensor_parallel_ranks_give_the_same_audio_as_one_process():
    if DEVICE == "cuda" and torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    one = synth(plans.higgs(tp=1))
    two = synth(plans.higgs(tp=2))
    assert one.samples.numel() == standins.expected_samples(TEXT)
    assert torch.equal(one.samples, two.samples)


def test_first_chunk_arrives_before_the_last_is_produced(tmp_path):
    log = tmp_path / "produced"
    plan = plans.qwen3("vocoder", generator_factory=F + "paced_generator",
                       generator_args=(("delay", 0.05),),
                       vocoder_factory=F + "logging_vocoder", vocoder_args=(("log", str(log)),))
    with launch(plan, device=DEVICE, factory_defaults=TINY) as d:
        request = d.submit(TEXT, stream=True)
        chunks = request.chunks(timeout=30)
        next(chunks)
        first_arrival = time.time()
        rest = list(chunks)
    produced = [float(x) for x in log.read_text().split()]
    assert len(rest) + 1 == len(produced) > 3
    assert first_arrival < produced[-1]


def test_killed_worker_fails_its_request_restarts_and_serves_again():
    plan = plans.qwen3("vocoder", generator_factory=F + "paced_generator",
                       generator_args=(("delay", 0.05),))
    with launch(plan, device=DEVICE, factory_defaults=TINY) as d:
        expected = d.synthesize(TEXT, timeout=30)
        victim = d.worker_pids()["vocoder"]
        request = d.submit(TEXT, stream=True)
        chunks = request.chunks(timeout=30)
        next(chunks)
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        with pytest.raises(WorkerDied, match=r"process 'vocoder' \(pid \d+, stages: vocoder\) "
                                             r"was killed by SIGKILL") as err:
            list(chunks)
        assert err.value.status == 503
        assert time.monotonic() - killed_at < 1.0
        assert d.health()["status"] in ("degraded", "ok")
        wait_until(lambda: d.health()["status"] == "ok", 20,
                   lambda: f"the deployment to be whole again: {d.health()}")
        assert d.worker_pids()["vocoder"] != victim
        assert not pid_alive(victim)
        again = d.synthesize(TEXT, timeout=30)
        assert torch.equal(again.samples, expected.samples)
        assert [p["restarts"] for p in d.health()["processes"]] == [0, 1]


def test_restart_limit_shuts_the_deployment_down():
    with launch(plans.qwen3("vocoder"), device=DEVICE, factory_defaults=TINY, max_restarts=0) as d:
        os.kill(d.worker_pids()["vocoder"], signal.SIGKILL)
        assert d.failed.wait(5)
        assert d.health()["status"] == "failed"
        with pytest.raises(Unavailable, match="restart"):
            d.submit(TEXT)


def test_factory_raising_at_build_is_a_clear_startup_error():
    plan = plans.qwen3("vocoder", vocoder_factory=F + "broken")
    with pytest.raises(LaunchError) as err:
        launch(plan, device=DEVICE, factory_defaults=TINY)
    message = str(err.value)
    assert "stage 'vocoder' (factory tests.launcher.factories:broken)" in message
    assert "in process 'vocoder'" in message
    assert "RuntimeError: weights file /models/vocoder.safetensors not found" in message
    # the fixture then checks that the other process was stopped and no segment is left


UNGUARDED = """\
import sys

import launcher
from tests.launcher import plans

try:  # at module level, as in a first script: no `if __name__ == "__main__":`
    launcher.launch(plans.qwen3(), device="cpu", factory_defaults={"size": "tiny"}).close()
except launcher.LaunchError as exc:
    print(exc)
    sys.exit(3)
"""


def test_a_launching_script_without_a_main_guard_is_told_to_add_one(tmp_path):
    script = tmp_path / "speak.py"
    script.write_text(UNGUARDED)
    path = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": path})
    assert out.returncode == 3, out.stderr
    message = " ".join(out.stdout.split())
    assert "process 'pipeline'" in message and "before it started building its stages" in message
    assert 'no `if __name__ == "__main__":` guard' in message
    assert "while building" not in message


def test_unsupported_process_local_split_fails_with_a_clear_error():
    with launch(plans.qwen3("preprocessing"), device=DEVICE, factory_defaults=TINY) as d:
        with pytest.raises(StageFailed) as err:
            d.synthesize(TEXT, timeout=30)
        message = str(err.value)
        assert "stage 'tts_engine' in process 'pipeline' failed" in message
        assert "process-local handoff broken" in message
        assert "published by process 'preprocessing'" in message
        # the worker survives a failing request
        assert d.health()["status"] == "ok"


def test_same_split_without_process_local_state_works():
    audio = synth(plans.qwen3("preprocessing", local_state=False))
    assert torch.equal(audio.samples, synth(plans.qwen3()).samples)


def test_health_and_metrics_describe_the_running_processes():
    with launch(plans.qwen3("vocoder"), device=DEVICE, factory_defaults=TINY) as d:
        d.synthesize(TEXT, timeout=30)
        d.synthesize("Second request.", timeout=30)
        # The workers report their stats every interval: wait for the report of both requests
        # (on a loaded machine it can come late), not for one interval.
        # Each process reports for itself: the vocoder's report (and its queue depth) may come
        # after the pipeline's.
        wait_until(lambda: reported(d, "tts_engine") == 2 and reported(d, "vocoder") >= 2,
                 timeout=60)
        health = d.health()
        assert health["device"] == DEVICE
        assert [(p["name"], p["stages"], p["state"]) for p in health["processes"]] == [
            ("pipeline", ["preprocessing", "tts_engine"], "ready"),
            ("vocoder", ["vocoder"], "ready"),
        ]
        text = d.metrics_text()
        assert 'stage_planner_stage_latency_seconds_count{stage="tts_engine"} 2' in text
        assert 'stage_planner_requests_total{outcome="ok"} 2' in text
        assert 'stage_planner_process_rss_bytes{process="vocoder"}' in text
        # prometheus_client writes labels in name order
        assert 'stage_planner_stage_queue_depth{process="vocoder",stage="vocoder"} 0' in text


def test_a_settled_sample_holds_every_timing_recorded_before_it():
    """What `planner bench` and tune's profiling read once a load is over: it waits on the
    workers' timing reports, so no stage timing is left behind in a worker, busy machine or not."""
    texts = (TEXT, "Second request.", "A third one.")
    with launch(plans.qwen3("vocoder"), device=DEVICE, factory_defaults=TINY) as d:
        for text in texts:
            d.synthesize(text, timeout=30)
        sample = d.settled_sample(timeout_s=60)
        text = d.metrics_text()
    for stage in ("preprocessing", "tts_engine"):
        assert sample.stage_latency[stage].n == len(texts), stage
    assert sample.stage_latency["vocoder"].n >= len(texts)  # streamed: a call per chunk
    assert all(p.reports >= 2 for p in sample.processes)
    assert 'stage_planner_process_timing_reports_total{process="vocoder"}' in text


def shm_blocks(d, process):
    """(lent, free) blocks of `process`'s pool, from the metrics."""
    text = d.metrics_text()
    return tuple(int(re.search(rf'stage_planner_shm_blocks{{process="{process}",state="{state}"}} '
                               r"(\d+)", text).group(1)) for state in ("lent", "free"))


def reported(d, stage):
    """How many calls of `stage` its worker has reported so far (the stats it sends)."""
    m = re.search(rf'stage_planner_stage_latency_seconds_count{{stage="{stage}"}} ([\d.]+)',
                  d.metrics_text())
    return int(float(m.group(1))) if m else 0


# The tiny stand-ins' payloads are small enough to travel inside their messages; these tests
# send them through shared memory instead (inline_bytes=0), which is what large payloads take.
def test_shared_blocks_are_given_back_and_reused_across_requests():
    with launch(plans.qwen3("vocoder"), device=DEVICE, factory_defaults=TINY,
                inline_bytes=0) as d:
        expected = d.synthesize(TEXT, timeout=30)
        for _ in range(2):
            d.synthesize(TEXT, timeout=30)
        _, warm = wait_until(lambda: (b := shm_blocks(d, "pipeline"))[0] == 0 and b[1] > 0 and b)
        for _ in range(4):
            assert torch.equal(d.synthesize(TEXT, timeout=30).samples, expected.samples)
        lent, free = wait_until(lambda: (b := shm_blocks(d, "pipeline"))[0] == 0 and b)
        assert free <= warm + 2  # reused, not one new block per handoff
        # The supervisor reads the audio and gives the vocoder's blocks back too.
        assert wait_until(lambda: (b := shm_blocks(d, "vocoder"))[0] == 0 and b[1] > 0)


def test_blocks_a_dead_reader_held_are_given_back_to_their_owner():
    plan = plans.qwen3("vocoder", vocoder_factory=F + "hoarding_vocoder")
    with launch(plan, device=DEVICE, factory_defaults=TINY, inline_bytes=0) as d:
        d.synthesize(TEXT, timeout=30)
        d.synthesize(TEXT, timeout=30)
        # The pipeline worker's report of both requests (its pool's blocks are in the same one).
        wait_until(lambda: reported(d, "tts_engine") == 2, timeout=30)
        lent, free = shm_blocks(d, "pipeline")
        assert lent > 0  # the reader keeps the tensors, so their blocks stay lent
        victim = d.worker_pids()["vocoder"]
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: d.health()["status"] == "ok" and d.worker_pids()["vocoder"] != victim,
                 timeout=20)
        assert wait_until(lambda: shm_blocks(d, "pipeline") == (0, lent + free))
        d.synthesize(TEXT, timeout=30)
        wait_until(lambda: reported(d, "tts_engine") == 3, timeout=30)
        again, rest = shm_blocks(d, "pipeline")
        assert again > 0 and again + rest == lent + free  # reused, none created


def test_cuda_request_without_cuda_is_refused_and_auto_says_cpu():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(LaunchError, match="no CUDA device"):
        launch(plans.qwen3(), device="cuda")
    with launch(plans.qwen3(), factory_defaults=TINY) as d:
        assert d.device == "cpu" and "running every stage on CPU" in d.note


def test_a_killed_tensor_parallel_rank_restarts_all_ranks_of_its_stage():
    if DEVICE == "cuda" and torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    with launch(plans.higgs(tp=2), device=DEVICE, factory_defaults=TINY) as d:
        expected = d.synthesize(TEXT, timeout=30)
        before = d.worker_pids()
        os.kill(before["pipeline_tp1"], signal.SIGKILL)
        wait_until(lambda: d.worker_pids().get("pipeline_tp0") != before["pipeline_tp0"]
                   and d.health()["status"] == "ok", 20,
                   lambda: f"both ranks restarted: {d.health()}")
        after = d.worker_pids()
        assert after["tts_frontend"] == before["tts_frontend"]
        assert not pid_alive(before["pipeline_tp0"])
        assert torch.equal(d.synthesize(TEXT, timeout=30).samples, expected.samples)


LONG = "A long request that nobody waits for any more. " * 80  # ~4,000 characters


@pytest.mark.parametrize("how", ["stream closed", "result timed out"])
@pytest.mark.parametrize("split", [None, "vocoder"], ids=["one-process", "split"])
def test_an_abandoned_request_frees_its_generator_within_one_chunk(tmp_path, how, split):
    log = tmp_path / "generator"
    # Chunks long enough that the Cancel's trip (a few ms quiet, 100 ms and more with the cores
    # shared by other work) fits within one: the test is about chunk boundaries, not speed.
    delay = 0.2
    plan = plans.qwen3(split, generator_factory=F + "tracked_generator",
                       generator_args=(("delay", delay), ("log", str(log))))
    with launch(plan, device=DEVICE, factory_defaults=TINY) as d:
        if how == "stream closed":
            request = d.submit(LONG, stream=True)
            next(request.chunks(timeout=30))
            request.cancel()
        else:
            request = d.submit(LONG)
            wait_until(lambda: log.exists() and "chunk" in log.read_text(), timeout=30)
            with pytest.raises(RequestTimeout):
                request.result(timeout=0.01)  # the caller stops waiting while audio is made
        abandoned = time.time()
        wait_until(lambda: "closed" in log.read_text(), 30, "the generator to be closed")
        text = log.read_text()
        late = [float(t) for kind, t in (line.split() for line in text.splitlines())
                if kind == "chunk" and float(t) > abandoned]
        assert len(late) <= 1  # the chunk in progress at most
        # The next request does not wait behind the abandoned one (whose remaining chunks would
        # take minutes at this pace): it is served within a bound generous for a busy machine.
        d.synthesize("Short.", timeout=20)
        assert 'stage_planner_requests_total{outcome="cancelled"} 1' in d.metrics_text()
