"""Judge a version of `planner tune` on measurements already made: re-predict every placement of
saved `accuracy.py --save DIR` answers from their own profiles with the planner as it is now,
and report the throughput prediction error and, per load, how the placement tune would pick now
measured against the best measured.

    python -m benchmarks.tune_eval.replay benchmarks/tune_runs/2026-11-30/*/

A new run measures the machine anew, and here the same placement measures 5-15% apart from run to
run: two versions of the model compared on two runs mostly compare the runs. Replaying the same
measurements compares the models. (To replay with an older model: `git stash` or check out its
`planner/tune` first.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

import planner
from planner.flags import PIN, flags
from planner.tune.choose import choose
from planner.tune.model import Workload
from planner.tune.profile import Profile

from benchmarks.tune_eval.accuracy import EXTRA, SYNTHETIC, synthetic_config
from benchmarks.tune_eval.judge import WITHIN


@dataclass(frozen=True)
class Pick:
    source: str
    load: int
    placement: str
    of_best: float  # its measured throughput over the best measured at that load


def pipeline_for(model: str, workdir: Path, saved: Path | None = None) -> planner.Pipeline:
    """The pipeline an answer was about: the config saved beside it (`saved`: the answer's file;
    a `--config` pipeline), a synthetic one of accuracy.py, or a built-in card."""
    if saved is not None and saved.with_suffix(".yaml").is_file():
        return planner.load(config=str(saved.with_suffix(".yaml")))
    stages = {**SYNTHETIC, **EXTRA}.get(model)
    if stages is None:
        return planner.load(model_path=model)
    cfg = workdir / f"{model}.yaml"
    cfg.write_text(yaml.safe_dump(synthetic_config(model, stages)), encoding="utf-8")
    return planner.load(config=str(cfg))


def replay(answer: dict, source: str, workdir: Path,
           saved: Path | None = None) -> tuple[list[float], list[Pick]]:
    """Prediction errors (signed, over measured) and the pick at each load."""
    pl = pipeline_for(answer["model"], workdir, saved)
    profile = Profile.from_dict(answer["profile"])
    measured_by_flags = {tuple(c["flags"]): c.get("measured_by_workload") or []
                         for c in answer["candidates"]}
    errors, picks = [], []
    for k, w in enumerate(answer["workload"]):
        if w.get("loop") != "closed":
            continue
        # tune's own ranking of every accepted placement, predictions and all; pinned as the
        # run's plans were (runs saved before tune pinned were served without)
        pinned = any(f.startswith(PIN) for c in answer["candidates"] for f in c["flags"])
        choice = choose(pl, profile, (Workload(concurrency=w["concurrency"]),), pins=pinned)
        measured = {}
        for c in choice.ranked:
            runs = measured_by_flags.get(tuple(flags(c.requests))) or []
            got = runs[k].get("throughput_rps") if k < len(runs) and runs[k] else None
            if got:
                measured[c.name] = got
                errors.append(c.predicted[0].throughput_rps / got - 1)
        best = choice.best
        if measured and best.name in measured:
            picks.append(Pick(source, w["concurrency"], best.name,
                              measured[best.name] / max(measured.values())))
    return errors, picks


def answers(paths: list[Path]) -> list[tuple[str, Path, dict]]:
    """The tune answers among `paths` (files, or directories of them); other JSON beside them,
    such as a bare profile, is passed over."""
    files = []
    for p in paths:
        files += sorted(p.glob("*.json")) if p.is_dir() else [p]
    found = [(f"{f.parent.name}/{f.stem}", f, json.loads(f.read_text(encoding="utf-8")))
             for f in files]
    return [(source, f, data) for source, f, data in found
            if isinstance(data, dict) and "profile" in data and "candidates" in data]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path,
                    help="answers saved by accuracy.py --save (files or directories)")
    args = ap.parse_args()
    errors: list[float] = []
    picks: list[Pick] = []
    with tempfile.TemporaryDirectory() as tmp:
        for source, saved, answer in answers(args.paths):
            e, p = replay(answer, source, Path(tmp), saved)
            errors += e
            picks += p
    if not errors:
        raise SystemExit("no measured candidates in the answers given")
    for p in picks:
        mark = "" if p.of_best >= 1 - WITHIN else "   <- miss"
        print(f"{p.source:28} C={p.load:<3} {p.placement:50.50} x{p.of_best:.3f}{mark}")
    size = [abs(e) for e in errors]
    good = sum(p.of_best >= 1 - WITHIN for p in picks)
    print(f"throughput prediction error over {len(size)} measurements: median "
          f"{statistics.median(size):.1%}, mean {statistics.mean(size):.1%}, "
          f"worst {max(size):.1%}; picks within {WITHIN:.0%} of the best measured: "
          f"{good} of {len(picks)}")


if __name__ == "__main__":
    main()
