"""`planner tune --rate R --ttfa-p99-ms X --verify K` end to end on a cheap stand-in pipeline: the
pick and the cheaper plan are served open loop at R with streamed requests by `planner bench`,
and the answer shows each one's measured TTFA beside its predicted band, met or missed."""

from __future__ import annotations

import json

import pytest
import yaml

from planner import Profile, StageProfile
from tests.cli import run_planner

pytestmark = pytest.mark.slow

# Two pure-Python stages of 30 ms, the first streaming 4 chunks to the second: in one process
# they share one interpreter lock (at 12 req/s TTFA p99 is predicted near 110 ms), apart each has
# its own (near 50 ms).
CARD = {"name": "rated", "stages": [
    {"name": "gen", "process": "pipeline", "next": "voc", "stream_to": ["voc"],
     "factory": "launcher.synthetic:stage",
     "args": {"gil_ms": 30, "chunks": 4, "out_bytes": 1000}},
    {"name": "voc", "process": "pipeline", "terminal": True, "factory": "launcher.synthetic:stage",
     "args": {"gil_ms": 30, "audio_ms": 200}}],
    "process_safe_edges": [["gen", "voc"]]}
PROFILE = Profile(model="rated", variant="default", cores=2, cpu_model="test", stages=(
    StageProfile("gen", 30.0, 0.0, 0.0, chunks_out=4, out_bytes=1000),
    StageProfile("voc", 30.0, 0.0, 0.0)), frontend_ms=0.5, client_ms=0.5, stream=True)


def test_the_pick_and_the_cheaper_plan_are_served_at_the_rate_and_judged(tmp_path):
    card, profile, out = tmp_path / "rated.yaml", tmp_path / "profile.json", tmp_path / "o"
    card.write_text(yaml.safe_dump(CARD))
    PROFILE.save(profile)
    done = run_planner("tune", "--config", str(card), "--profile", str(profile), "--rate", "12",
                       "--ttfa-p99-ms", "80", "--placements-only", "--verify", "1",
                       "--requests", "12", "--rounds", "1", "--output", str(out), timeout=300)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "served at 12 req/s (open loop, Poisson arrivals; 12 streamed requests each)" in text
    assert "verified: the pick" in text and "the cheaper `declared`" in text
    verified = json.loads((out / "tune.json").read_text())["rate_question"]["verified"]
    assert verified["stream"] is True and verified["requests"] == 12
    pick, cheaper = verified["plans"]
    assert (pick["role"], pick["flags"]) == ("pick", ["--isolate-stage voc"])
    assert (cheaper["role"], cheaper["flags"]) == ("cheaper", [])
    for plan in (pick, cheaper):
        assert plan["requests"] == 12
        (target,) = plan["targets"]
        assert target["target"] == "ttfa_p99_ms" and target["measured_ms"] > 0
        assert target["met"] is (target["measured_ms"] <= 80)
        assert plan["meets"] is (target["met"] and plan["errors"] == 0)
        assert ("met" if target["met"] else "missed") in done.stdout
    assert verified["pick_meets"] is pick["meets"]
    assert verified["cheaper_misses"] is (not cheaper["meets"])
    bench = json.loads((out / "verify" / "results.json").read_text())
    assert {r["load"]["rate"] for r in bench["runs"]} == {12.0}
    assert all(r["load"]["stream"] for r in bench["runs"])
