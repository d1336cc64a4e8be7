"""The rate question judged by serving it: piper-joe and two generated pipelines, each at three
rates (light, middle, near what the machine holds), `planner tune --rate R --ttfa-p99-ms X
--verify 1` (300 streamed requests per plan, Poisson arrivals, interleaved rounds), and whether
the pick met its target, the cheaper runner-up missed it, and the predicted p99 was within 25% of
the measured one.

    python -m benchmarks.tune_eval.rate_cases --decide DIR       # profile, fix rates and targets
    python -m benchmarks.tune_eval.rate_cases --serve DIR        # ask and serve every case decided
    python -m benchmarks.tune_eval.rate_cases --report DIR       # the table, from what DIR holds
    python -m benchmarks.tune_eval.rate_cases --report DIR DIR2  # each case on its first quiet run
    python -m benchmarks.tune_eval.rate_cases --ask DIR          # still recommends what DIR served?

Rates and targets are fixed from each pipeline's profile before anything is served, by one rule
(`decide`): the machine's hold is the most any plan is predicted to complete with four clients
(`planner tune --concurrency 4` on the same profile); the rates are 0.3, 0.6 and 0.85 of it; the
target, the same at every rate (as an application's would be), is 2.5 x the declared plan's
predicted first audio with one client (its p50; a pipeline that does not stream has its first
audio at its end). The profile is taken once (a first-audio question profiles streamed
requests) and every question reads it, so a case's answer and its serving see one machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import yaml

import planner
from planner.flags import parse
from planner.tune.model import predict
from planner.tune.profile import Profile
from planner.tune.rate_question import RATE_REQUESTS
from planner.tune.rate_report import STOLEN_NOTE_SHARE
from planner.tune.workload import Workload

from benchmarks.machine import described
from benchmarks.tune_eval.generated import run_planner
from benchmarks.tune_eval.generator import describe, generate

# The pipelines, chosen by a rule before any of them was asked a rate question: the real voice,
# the first streaming seed of the CPU-only judging set 41-46 (42), and the first seed of the
# device-time judging set 61-66 (61).
PIPELINES = (("piper-joe", None), ("generated-42", (42, False)), ("generated-61", (61, True)))
FRACTIONS = (("light", 0.3), ("middle", 0.6), ("near", 0.85))
TARGET_TIMES_IDLE = 2.5
MAX_PLACEMENTS = 5  # as generated.py draws them


def _source(name: str, drawn: tuple[int, bool] | None, out: Path) -> list[str]:
    if drawn is None:
        return [name]
    cfg = generate(drawn[0], MAX_PLACEMENTS, None, drawn[1])
    path = out / "pipeline.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    print(f"  {name}: {describe(cfg)}", flush=True)
    return ["--config", str(path)]


def _json(*args: str) -> dict:
    done = run_planner(*args, "--format", "json")
    if done.returncode not in (0, 1):  # 1: answered, nothing meets
        raise SystemExit(f"planner {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout)


def _first_audio_ms(predicted: dict) -> float:
    got = predicted.get("ttfa_p50_ms")
    return got if got is not None else predicted["latency_p50_ms"]


def decide(root: Path) -> None:
    print(f"deciding: {described()}", flush=True)
    cases = []
    for name, drawn in PIPELINES:
        out = root / name
        out.mkdir(parents=True, exist_ok=True)
        source = _source(name, drawn, out)
        # any first-audio question profiles streamed requests; its answer is not used
        _json("tune", *source, "--rate", "1", "--ttfa-p99-ms", "100000", "--output",
              str(out / "profile-run"))
        profile = out / "profile.json"
        profile.write_bytes((out / "profile-run" / "profile.json").read_bytes())
        closed = _json("tune", *source, "--profile", str(profile), "--concurrency", "1",
                       "--concurrency", "4", "--output", str(out / "closed"))
        hold = max(c["predicted_by_workload"][1]["throughput_rps"] for c in closed["candidates"])
        declared = next(c for c in closed["candidates"] if not c["flags"])
        idle = _first_audio_ms(declared["predicted_by_workload"][0])
        target = round(TARGET_TIMES_IDLE * idle, -1 if idle > 40 else 0)
        for label, f in FRACTIONS:
            rate = float(f"{f * hold:.2g}")
            cases.append({"pipeline": name, "source": source, "profile": str(profile),
                          "load": label, "rate": rate, "ttfa_p99_ms": target,
                          "hold_rps": hold, "idle_first_audio_ms": idle})
        print(f"  {name}: holds {hold:.2f} req/s (predicted, C=4), first audio {idle:.0f} ms "
              f"idle -> rates {[c['rate'] for c in cases[-3:]]}, TTFA p99 <= {target:g} ms",
              flush=True)
    (root / "decided.json").write_text(json.dumps({"machine": described(), "cases": cases},
                                                  indent=1), encoding="utf-8")


def cases_of(root: Path) -> list[tuple[str, dict]]:
    """The cases decided in `root`, each with its name (its directory there)."""
    cases = json.loads((root / "decided.json").read_text(encoding="utf-8"))["cases"]
    return [(f"{c['pipeline']}-{c['load']}", c) for c in cases]


def question(c: dict) -> list[str]:
    """The rate question a case asks, as `planner` arguments."""
    return ["tune", *c["source"], "--profile", c["profile"], "--rate", str(c["rate"]),
            "--ttfa-p99-ms", str(c["ttfa_p99_ms"])]


def serve(root: Path, only: str | None) -> None:
    for key, c in cases_of(root):
        if only and only not in key:
            continue
        out = root / key
        if (out / "tune.json").exists():
            print(f"{key}: already served", flush=True)
            continue
        print(f"{key}: {c['rate']} req/s, TTFA p99 <= {c['ttfa_p99_ms']:g} ms ({described()})",
              flush=True)
        answer = _json(*question(c), "--verify", "1", "--output", str(out))
        (out / "tune.json").write_text(json.dumps(answer, indent=1), encoding="utf-8")
        print("  " + row(c, answer, p99_at_served_speed(c, answer)), flush=True)


def recommended_flags(answer: dict) -> str:
    """What a rate answer recommends, in words: its pick (and cheaper runner-up), or how many
    replicas of which plan, or nothing."""
    rq = answer.get("rate_question") or {}
    if rq.get("pick"):
        runner = rq.get("runner_up")
        return (f"pick {' '.join(rq['pick']['flags']) or 'declared'}"
                + (f", cheaper {' '.join(runner['flags']) or 'declared'}" if runner else ""))
    if rq.get("replicas"):
        r = rq["replicas"]
        return f"{r['count']} replicas of {' '.join(r['flags']) or 'declared'}"
    return "nothing"


def ask(root: Path) -> int:
    """Ask every case served in `root` again, with the planner as it is now and the case's own
    profile (nothing is served), and say whether it recommends what was served. Returns how many
    changed: a changed case is no longer judged by its served run."""
    changed = 0
    for key, c in cases_of(root):
        served = root / key / "tune.json"
        if not served.exists():
            print(f"{key}: not served")
            continue
        now = _json(*question(c))
        then = recommended_flags(json.loads(served.read_text(encoding="utf-8")))
        same = recommended_flags(now) == then
        changed += not same
        print(f"{key}: {'the same' if same else 'CHANGED'}: served {then}"
              + ("" if same else f"; now {recommended_flags(now)}"), flush=True)
    return changed


def _served(answer: dict, role: str) -> dict | None:
    v = (answer.get("rate_question") or {}).get("verified") or {}
    return next((p for p in v.get("plans", []) if p["role"] == role), None)


def recommended(answer: dict) -> dict | None:
    """The plan the answer recommends, as served: the pick, or with none, one replica."""
    return _served(answer, "pick") or _served(answer, "replica")


def _p99(plan: dict | None) -> tuple[float, float | None] | None:
    if plan is None:
        return None
    t = next(t for t in plan["targets"] if t["target"] == "ttfa_p99_ms")
    return t["predicted"]["median"], t["measured_ms"]


def within_25(p99: tuple[float, float | None] | None) -> bool | None:
    """Predicted within 25% of measured (None: not measured)."""
    if p99 is None or p99[1] is None:
        return None
    return abs(p99[0] - p99[1]) / p99[1] <= 0.25


def _flags(plan: dict) -> str:
    return " ".join(plan["flags"]) or "declared"


def _ms(p99: tuple[float, float | None]) -> str:
    return f"{p99[0]:.0f} / {'-' if p99[1] is None else f'{p99[1]:.0f}'}"


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def stolen(answer: dict) -> float | None:
    """Of the CPUs' running time while the recommended plan was served, the share stolen."""
    pick = recommended(answer)
    return None if pick is None else pick.get("cpu_stolen_of_running")


def quiet(answer: dict) -> bool:
    """Served on a quiet machine: the host took under STOLEN_NOTE_SHARE of the CPUs' running time
    (runs from before the share was recorded are not counted as quiet)."""
    got = stolen(answer)
    return got is not None and got < STOLEN_NOTE_SHARE


def p99_at_served_speed(case: dict, answer: dict) -> float | None:
    """The recommended plan's TTFA p99 predicted again on CPUs at the speed its served run had
    (1 - the share of their running time stolen), the median over the answer's draws: the model
    told the machine's speed after the fact, to part its own error from the machine's. Not an
    answer tune could give beforehand."""
    pick, lost = recommended(answer), stolen(answer)
    if pick is None or lost is None:
        return None
    v = answer["rate_question"]["verified"]
    rate = v["replica_rate"] if pick["role"] == "replica" else v["rate"]
    profile = Profile.from_dict(answer["profile"]).at_cpu_speed(max(1.0 - lost, 0.05))
    src = case["source"]
    where = {"config": src[1]} if src[0] == "--config" else {"model_path": src[0]}
    plan = planner.solve(requests=parse([w for f in pick["flags"] for w in f.split()]),
                         **where).plan
    runs = [predict(plan, profile, Workload(rate=rate, requests=RATE_REQUESTS, seed=s))
            for s in range(answer["rate_question"]["seeds"])]
    return statistics.median(r.ttfa_p99_ms if r.ttfa_p99_ms is not None else r.latency_p99_ms
                             for r in runs)


def row(case: dict, answer: dict, at: float | None) -> str:
    """One case's line of the table; `at`: its `p99_at_served_speed`."""
    v = answer["rate_question"].get("verified") or {}
    bursts = answer["rate_question"].get("cpu_bursts_now") or {}
    pick, cheaper = recommended(answer), _served(answer, "cheaper")
    p, within = _p99(pick), within_25(_p99(pick))
    if _served(answer, "pick"):
        role = "pick"
    elif pick:
        role = f"nothing meets; 1 of {v['replicas']} replicas at {v['replica_rate']:.3g} req/s"
    else:
        role = "nothing meets, no replica count"
    return " | ".join([
        f"{case['pipeline']} {case['load']} {case['rate']:g} req/s <= {case['ttfa_p99_ms']:g} ms",
        f"{role}: `{_flags(pick)}`" if pick else role,
        "-" if p is None else _ms(p),
        "-" if pick is None else ("met" if pick["meets"] else "missed"),
        "-" if within is None else ("yes" if within else "no"),
        "none cheaper" if cheaper is None else f"`{_flags(cheaper)}` {_ms(_p99(cheaper))} "
        f"{'met' if cheaper['meets'] else 'missed'}",
        f"{_share(bursts.get('burst_speed_median'))} / {_share(stolen(answer))}",
        "-" if at is None else
        f"{at:.0f}{'' if p is None or p[1] is None else f' ({at / p[1]:.2f}x)'}"])


def report(root: Path) -> None:
    print("| case | recommended plan | TTFA p99 predicted / measured, ms | served | within 25% "
          "| cheaper plan: predicted / measured, served | bursts' speed at tune / CPU stolen "
          "while served | p99 predicted at the served CPU speed (/ measured) |")
    print("|---|---|---|---|---|---|---|---|")
    met = within = cheaper_ok = n = 0
    calm = [0, 0, 0]  # quiet cases: served, met, within 25%
    at_speed = [0, 0]  # cases with the served CPU speed known: of them, within 25% at it
    for key, c in cases_of(root):
        path = root / key / "tune.json"
        if not path.exists():
            continue
        answer = json.loads(path.read_text(encoding="utf-8"))
        at = p99_at_served_speed(c, answer)
        print("| " + row(c, answer, at) + " |")
        n += 1
        pick, cheaper = recommended(answer), _served(answer, "cheaper")
        met += bool(pick and pick["meets"])
        within += bool(within_25(_p99(pick)))
        cheaper_ok += cheaper is None or not cheaper["meets"]
        if at is not None and _p99(pick)[1]:
            at_speed[0] += 1
            at_speed[1] += abs(at - _p99(pick)[1]) / _p99(pick)[1] <= 0.25
        if quiet(answer):
            calm[0] += 1
            calm[1] += bool(pick and pick["meets"])
            calm[2] += bool(within_25(_p99(pick)))
    print(f"\n{n} cases served: the recommended plan met its target in {met}, predicted p99 "
          f"within 25% of measured in {within}, the cheaper plan missed (or none was cheaper) "
          f"in {cheaper_ok}; on a quiet machine (CPU stolen under {STOLEN_NOTE_SHARE:.0%} while "
          f"the recommended plan was served): {calm[0]} cases, met in {calm[1]}, within 25% in "
          f"{calm[2]}; predicted again at the CPU speed each run had: within 25% in "
          f"{at_speed[1]} of {at_speed[0]}")


def judge_quiet(roots: list[Path]) -> None:
    """Each case judged on its first quiet run over `roots` (in the order given: a case served
    again after a disturbed run is judged on the later run only if it was quiet), every case
    named with the run it was judged on."""
    cases = cases_of(roots[0])
    met = within = cheaper_ok = judged = 0
    print("\n| case | judged on | stolen | TTFA p99 predicted / measured, ms | met | within 25% |")
    print("|---|---|---|---|---|---|")
    for key, c in cases:
        runs = [(r, json.loads((r / key / "tune.json").read_text(encoding="utf-8")))
                for r in roots if (r / key / "tune.json").exists()]
        first = next(((r, a) for r, a in runs if quiet(a)), None)
        if first is None:
            print(f"| {key} | no quiet run ({len(runs)} served) | - | - | - | - |")
            continue
        root, answer = first
        pick, cheaper = recommended(answer), _served(answer, "cheaper")
        ok, close = bool(pick and pick["meets"]), bool(within_25(_p99(pick)))
        judged += 1
        met += ok
        within += close
        cheaper_ok += cheaper is None or not cheaper["meets"]
        print(f"| {key} | {root.name} | {_share(stolen(answer))} | {_ms(_p99(pick))} | "
              f"{'met' if ok else 'missed'} | {'yes' if close else 'no'} |")
    print(f"\nJudged on each case's first quiet run: {judged} of {len(cases)} cases; the "
          f"recommended plan met its target in {met}, predicted p99 within 25% of measured in "
          f"{within}, the cheaper plan missed (or none was cheaper) in {cheaper_ok}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--decide", type=Path, metavar="DIR")
    what.add_argument("--serve", type=Path, metavar="DIR")
    what.add_argument("--ask", type=Path, metavar="DIR",
                      help="ask DIR's served cases again (nothing served); exit 1 if one changed")
    what.add_argument("--report", type=Path, nargs="+", metavar="DIR",
                      help="one table per DIR; with several, each case judged on its first run "
                           "served on a quiet machine, in the order given")
    ap.add_argument("--only", help="serve the cases whose name contains this (e.g. piper-joe)")
    args = ap.parse_args()
    if args.decide:
        decide(args.decide)
    elif args.serve:
        serve(args.serve, args.only)
    elif args.ask:
        raise SystemExit(1 if ask(args.ask) else 0)
    else:
        for root in args.report:
            report(root)
        if len(args.report) > 1:
            judge_quiet(args.report)


if __name__ == "__main__":
    main()
