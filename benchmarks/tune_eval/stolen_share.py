"""How much of the CPUs' running time the host stole while a saved benchmark run was served.

    python -m benchmarks.tune_eval.stolen_share DIR [--write FILE]

Reads every `results.json` of `planner bench` under DIR (tune's --verify runs and the head to
heads of generated.py write them too) and prints, per placement and load, the share bench
recorded (`cpu_stolen_of_running`), then the share over all of them weighted by requests: the
figure a judging rule's "quiet" (at most 10%, benchmarks/EVIDENCE.md) is read from. With
--write, the same as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def runs(root: Path) -> list[dict]:
    found = []
    for path in sorted(root.rglob("results.json")):
        data = json.loads(path.read_text())
        for run in data.get("runs", []):
            load = run.get("load", {})
            found.append({"results": str(path.relative_to(root)), "placement": run.get("placement"),
                          "concurrency": load.get("concurrency"), "rate": load.get("rate"),
                          "requests": load.get("requests", 0),
                          "cpu_stolen_of_running": load.get("cpu_stolen_of_running")})
    return found


def weighted(found: list[dict]) -> float | None:
    known = [r for r in found if r["cpu_stolen_of_running"] is not None and r["requests"]]
    total = sum(r["requests"] for r in known)
    if not total:
        return None
    return sum(r["cpu_stolen_of_running"] * r["requests"] for r in known) / total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", type=Path)
    p.add_argument("--write", type=Path, metavar="FILE")
    args = p.parse_args(argv)
    found = runs(args.dir)
    if not found:
        print(f"stolen_share: no results.json with runs under {args.dir}", file=sys.stderr)
        return 2
    for r in found:
        share = r["cpu_stolen_of_running"]
        load = f"C={r['concurrency']}" if r["concurrency"] else f"{r['rate']} req/s"
        print(f"{r['results']}  {r['placement']}  {load}  {r['requests']} requests  "
              f"{'-' if share is None else f'{share:.1%}'}")
    share = weighted(found)
    print(f"weighted by requests: {'-' if share is None else f'{share:.1%}'}")
    if args.write:
        args.write.write_text(json.dumps({"weighted_by_requests": share, "runs": found},
                                         indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
