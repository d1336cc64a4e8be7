"""A rate question (`planner tune --rate R --ttfa-p99-ms X`): the cheapest plan whose band over
several draws meets the target is picked and the cheaper plan that misses is named; when none
meets, the closest plan and the replicas that would meet are; bad flags are one paragraph."""

import functools
import json

import pytest

import planner
from planner import Profile, StageProfile
from planner.tune import rate_question
from planner.tune.choose import choose
from planner.tune.rate_question import Target, answer, observed
from planner.flags import flag_words
from planner.tune.rate_report import rate_dict, replicas_command, unmet_paragraph
from planner.tune.workload import Prediction, Workload
from tests.cli import run_planner

# Two pure-Python stages of 30 ms each, streamed in 4 chunks: in one process (1 CPU) they share
# one interpreter lock, and at 12 req/s the lock is 72% busy and TTFA p99 goes to ~110 ms (a new
# request's first chunk goes first at each stage, or it would be ~650 ms); apart (2 CPUs) each
# lock is 36% busy and TTFA p99 stays near 50 ms.
PROFILE = Profile(model="qwen3-tts", variant="default", cores=2, cpu_model="test", stages=(
    StageProfile("preprocessing", 0.5, 0.0, 0.0),
    StageProfile("tts_engine", 30.0, 0.0, 0.0, chunks_out=4, out_bytes=1000),
    StageProfile("vocoder", 30.0, 0.0, 0.0, chunks_out=4)),
    frontend_ms=0.5, client_ms=0.5, process_rss_mib=100.0)
REQUESTS = 150  # the command's 300, halved to keep the tests fast


@functools.cache  # the same question, asked by several tests, is answered once
def ask(rate, targets, requests=REQUESTS):
    pipeline = planner.load(model_path="qwen3-tts")
    w = Workload(rate=rate, requests=requests)
    choice = choose(pipeline, PROFILE, (w,), "ttfa", compute=True)
    return choice, answer(choice.ranked, PROFILE, w, targets, choice.cores, seeds=3)


def test_the_cheapest_plan_that_meets_is_picked_and_the_cheaper_miss_named():
    _, a = ask(12, (Target("ttfa", 99, 80),))
    assert a.met and a.pick.cpus == 2 and a.pick.verdict == "meets"
    assert a.pick.band("ttfa", 99).high <= 80  # meets: the band's high end too
    runner = a.runner_up
    assert runner.cpus == 1 and runner.candidate.name == "declared"
    assert runner.verdict == "misses" and runner.band("ttfa", 99).median > 80
    target, by_ms = runner.worst
    assert target.label == "TTFA p99" and by_ms == pytest.approx(
        runner.band("ttfa", 99).median - 80)
    # among the plans of the pick's cost, the lowest predicted TTFA p99
    same = [e for e in a.finalists if e.cpus == 2 and e.verdict == "meets"]
    assert a.pick.band("ttfa", 99).median == min(e.band("ttfa", 99).median for e in same)


def test_nothing_meets_names_the_closest_and_the_replicas_that_would():
    # within every plan's capacity (~32 req/s apart), but first audio too slow: replicas for TTFA
    # (beyond it, test_rate_overload.py)
    _, a = ask(24, (Target("ttfa", 99, 50),))
    assert not a.met and a.pick is None and a.closest is not None
    assert a.closest.verdict == "misses" and not a.closest.overloaded
    k = a.replicas.count
    assert k is not None and 2 <= k <= rate_question.MAX_REPLICAS
    assert a.replicas.per_replica.band("ttfa", 99).high <= 50
    text = unmet_paragraph(a, ["qwen3-tts"])
    closest = a.closest.band("ttfa", 99)
    assert f"predicted TTFA p99 {closest.median:.0f} ms" in text
    assert f"`{a.closest.candidate.name}`" in text
    assert f"{k} whole replicas" in text and f"--replicas {k}" in text
    assert f"{k} nodes of this machine's size (2 CPUs each)" in text


def test_the_replicas_command_names_the_pipeline_as_tune_was_asked_about_it():
    # a variant or a user's YAML must reach `planner serve`, or the replicas serve another pipeline
    _, a = ask(24, (Target("ttfa", 99, 50),))
    flags = " ".join(flag_words(a.replicas.per_replica.candidate.requests))
    for words, spelled in ((["qwen3-tts", "--variant", "base"], "qwen3-tts --variant base"),
                           (["--config", "my pipe.yaml"], "--config 'my pipe.yaml'")):
        assert replicas_command(a, words) == (
            f"planner serve {spelled}{' ' + flags if flags else ''} --replicas "
            f"{a.replicas.count} --cluster FILE")
        assert f"`planner serve {spelled}" in unmet_paragraph(a, words)
        assert rate_dict(a, words)["unmet"] == unmet_paragraph(a, words)
    assert "planner serve" not in unmet_paragraph(a, None)  # the screen's paragraph: no command


def test_first_audio_percentiles_are_ordered_and_never_after_the_whole_response():
    choice, _ = ask(12, (Target("ttfa", 99, 80),))
    for c in choice.ranked:
        p = c.predicted[0]
        assert p.ttfa_p50_ms <= p.ttfa_p90_ms <= p.ttfa_p99_ms
        assert p.latency_p50_ms <= p.latency_p90_ms <= p.latency_p99_ms
        assert p.ttfa_p50_ms <= p.latency_p50_ms and p.ttfa_p99_ms <= p.latency_p99_ms


def test_a_whole_response_pipelines_first_audio_is_its_latency():
    whole = Prediction(5.0, 100.0, 300.0, None, (), latency_p90_ms=200.0)
    assert [observed(whole, "ttfa", q) for q in (50, 90, 99)] == [100.0, 200.0, 300.0]


def test_the_json_answer_carries_pick_cost_bands_runner_up_and_unmet():
    _, met = ask(12, (Target("ttfa", 99, 80), Target("latency", 99, 2000)))
    d = rate_dict(met, ["qwen3-tts"])
    assert d["met"] and d["unmet"] is None and d["targets"] == {
        "ttfa_p99_ms": 80, "latency_p99_ms": 2000}
    assert d["pick"]["cost"]["cpus"] == 2 and d["pick"]["verdict"] == "meets"
    assert d["pick"]["cost"]["gpus"] == len(met.pick.candidate.plan.gpus)
    band = d["pick"]["predicted"]["ttfa_p99_ms"]
    assert band["low"] <= band["median"] <= band["high"] <= 80
    assert d["runner_up"]["flags"] == [] and d["runner_up"]["misses"]["by_ms"] > 0
    _, unmet = ask(40, (Target("ttfa", 99, 80),))
    d = rate_dict(unmet, ["qwen3-tts"])
    assert not d["met"] and d["pick"] is None and d["replicas"]["count"] >= 2
    assert d["unmet"].startswith("No plan is predicted to meet TTFA p99 <= 80 ms at 40 req/s")


@pytest.fixture
def profile_file(tmp_path, monkeypatch):
    monkeypatch.setattr(rate_question, "RATE_REQUESTS", REQUESTS)
    monkeypatch.setattr(rate_question, "SEEDS", 3)
    path = tmp_path / "profile.json"
    PROFILE.save(path)
    return str(path)


def test_the_command_prints_the_pick_the_cheaper_miss_and_how_to_serve_it(profile_file,
                                                                           tmp_path):
    out = run_planner("tune", "qwen3-tts", "--profile", profile_file, "--rate", "12",
                      "--ttfa-p99-ms", "80", "--output", str(tmp_path / "o"))
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "qwen3-tts at 12 req/s (open loop, Poisson arrivals), TTFA p99 <= 80 ms: run --" in text
    assert "(2 CPUs, 1 GPU)" in text and "it meets at the high end of its band" in text
    assert "the cheaper `declared` (1 CPU, 1 GPU): misses TTFA p99 80 ms by" in text
    assert "check it served (the pick and the cheaper plan, at the rate): planner tune" in text
    lines = out.stdout.splitlines()
    assert lines[-3].strip() == "planner serve qwen3-tts --isolate-stage vocoder"
    assert lines[-1].strip().startswith("planner serve qwen3-tts --config ")


def test_the_commands_json_makes_the_pick_what_to_run(profile_file, tmp_path):
    out = run_planner("tune", "qwen3-tts", "--profile", profile_file, "--rate", "12",
                      "--ttfa-p99-ms", "80", "--format", "json", "--output", str(tmp_path / "o"))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    pick = data["rate_question"]["pick"]
    assert data["persist"]["flags"] == pick["flags"] != []
    assert data["candidates"][data["best"]]["flags"] == pick["flags"]
    assert {"ttfa_p50_ms", "ttfa_p90_ms", "ttfa_p99_ms"} <= set(
        data["candidates"][0]["predicted"])
    # how fast this machine ran short bursts of work as it answered: a light load's tails
    # depend on it, and the model's CPUs run at full speed
    bursts = data["rate_question"]["cpu_bursts_now"]
    assert 0 < bursts["burst_speed_slow_tenth"] <= bursts["burst_speed_median"] <= 1
    slow = bursts["burst_speed_median"] < 0.85
    assert ("short bursts of CPU work run at" in out.stderr) == slow, out.stderr


def test_the_command_exits_1_when_nothing_meets(profile_file, tmp_path):
    out = run_planner("tune", "qwen3-tts", "--profile", profile_file, "--rate", "40",
                      "--ttfa-p99-ms", "80", "--output", str(tmp_path / "o"))
    assert out.returncode == 1, out.stderr
    assert "No plan is predicted to meet TTFA p99 <= 80 ms at 40 req/s" in out.stdout
    assert "--replicas" in out.stdout


@pytest.mark.parametrize("load, says", [
    ((), "add the open-loop rate"),
    (("--concurrency", "4"), "drop --concurrency"),
    (("--rate", "2", "--rate", "4"), "ask once per rate"),
])
def test_a_first_audio_target_without_one_rate_is_one_paragraph(load, says):
    # refused before profiling: no profile is given, and none is made
    out = run_planner("tune", "qwen3-tts", "--ttfa-p99-ms", "400", *load)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert says in " ".join(out.stderr.split())
    assert "planner tune qwen3-tts --rate 2 --ttfa-p99-ms 400" in " ".join(out.stderr.split())


def test_cpu_speed_predicts_for_a_shared_hosts_slower_cpus(profile_file, tmp_path):
    def declared_rps(*extra):
        out = run_planner("tune", "qwen3-tts", "--profile", profile_file, "--concurrency", "1",
                          "--placements-only", "--format", "json", "--output",
                          str(tmp_path / "o"), *extra)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        declared = next(c for c in data["candidates"] if not c["flags"])
        return data["cpu_speed"], declared["predicted"]["throughput_rps"]

    assert declared_rps()[0] == 1.0
    speed, slow = declared_rps("--cpu-speed", "0.5")
    assert speed == 0.5 and slow < 0.6 * declared_rps()[1]
    bad = run_planner("tune", "qwen3-tts", "--profile", profile_file, "--cpu-speed", "1.5")
    assert bad.returncode == 2 and "--cpu-speed" in bad.stderr and "0.05 to 1" in bad.stderr
