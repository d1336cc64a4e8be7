"""Threads and copies leave the model's one-thread, one-copy predictions where they were: every
placement of four saved answers' pipelines, predicted from their saved profiles, gives exactly
the figures of the reference (`python tests/planner/tune/test_one_thread_predictions.py` with
the model on the path writes it).

The reference was written before threads and copies were simulated, and rewritten once since,
when the simulated stage threads took their work in the launcher's fair order
(`planner.fair_queue`) instead of first come first served: 7 of its 34 figures changed, all of
streaming pipelines at C=4 (throughput by at most 2.5%, p50 latency 2.6%, p99 latency 11%, time
to first audio p90 down by up to 93%); served open loop, that order's predictions of piper-joe's
TTFA p99 came within 12% of measured where first come first served had been 3-4x over
(docs/tune.md). Rewritten again when the percentiles became the bench's (`planner.stats`,
interpolated): 41 of 136 figures moved, none by more than 0.25%."""

import json
import tempfile
from pathlib import Path

from benchmarks.tune_eval.runs import RUNS, unpack

REFERENCE = Path(__file__).with_name("data") / "one_thread_predictions.json"
ANSWERS = ("2026-11-30/3-default/lock-bound.json", "2026-11-30/3-default/streaming.json",
           "2026-11-30/3-default/native-device.json", "2026-11-30/5-one-core/qwen3-tts.json")
LOADS = (1, 4)


# The fields the reference holds; fields added since (more percentiles) are not pinned here.
PINNED = ("throughput_rps", "latency_p50_ms", "latency_p99_ms", "ttfa_p90_ms", "utilization")


def _pinned(prediction) -> list:
    return [getattr(prediction, name) for name in PINNED]


def predictions(saved_root: Path) -> dict[str, list]:
    """`saved_root`: where the set 2026-11-30 is unpacked (`benchmarks.tune_eval.runs.unpack`)."""
    from benchmarks.tune_eval.replay import pipeline_for
    from planner.placements import feasible_placements
    from planner.tune.model import Workload, predict
    from planner.tune.profile import Profile

    out = {}
    for name in ANSWERS:
        saved = saved_root / "benchmarks" / "tune_runs" / name
        answer = json.loads(saved.read_text())
        pipeline = pipeline_for(answer["model"], Path(tempfile.mkdtemp()), saved)
        profile = Profile.from_dict(answer["profile"])
        out[name] = [[[list(g.stages) for g in f.plan.groups], c,
                      _pinned(predict(f.plan, profile, Workload(concurrency=c)))]
                     for f in feasible_placements(pipeline) for c in LOADS]
    return out


def test_one_thread_one_copy_plans_predict_as_before_threads_and_copies(tmp_path):
    unpack(RUNS / "2026-11-30", tmp_path)
    # through JSON, as the reference was: tuples become lists, floats round-trip exactly
    assert json.loads(json.dumps(predictions(tmp_path))) == json.loads(REFERENCE.read_text())


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as root:
        unpack(RUNS / "2026-11-30", Path(root))
        REFERENCE.write_text(json.dumps(predictions(Path(root)), indent=1) + "\n",
                             encoding="utf-8")
