"""The application's plan is the file's: `args` as `planner solve --format ray-serve` writes them
re-solve to the very plan the file was written from, for every card and the requests the file
tests use; args the planner refuses are one paragraph."""

from __future__ import annotations

import pytest
import yaml

import planner
from launcher.ray_serve.plan_args import solved
from planner.render.ray_serve import Asked, ray_serve_file
from tests.planner.test_ray_serve_file import CASES


@pytest.mark.parametrize(("model", "flags"), CASES)
def test_the_args_re_solve_to_the_plan_written(model, flags):
    requests = planner.parse_flags(flags)
    result = planner.solve(model, requests=requests, cpus=2)
    written = yaml.safe_load(ray_serve_file(result, Asked(model, None, None, requests)).text)
    plan, topology = solved(written["applications"][0]["args"])
    assert plan == result.plan
    assert topology == planner.result_dict(result)


def test_a_config_travels_in_the_args():
    overlay = {"model": "piper-joe", "stages": [{"name": "vocoder", "threads": 2}]}
    result = planner.solve(config=overlay, isolate_stages=["vocoder"], cpus=2)
    written = yaml.safe_load(ray_serve_file(
        result, Asked(None, overlay, None, (planner.Isolate("vocoder"),))).text)
    assert solved(written["applications"][0]["args"])[0] == result.plan


def test_dotted_stage_fields_travel_in_the_args():
    """`--vocoder.gpu_memory_fraction 0.15`: a stage field over the card, which the application
    must apply too, or it would run another plan than the file describes."""
    from planner.app.cli import main
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["solve", "fishaudio-s2-pro", "--isolate-stage", "vocoder",
                     "--vocoder.gpu_memory_fraction", "0.15", "--format", "ray-serve"])
    assert code == 0
    args = yaml.safe_load(out.getvalue())["applications"][0]["args"]
    assert args["overrides"] == {"stages": {"vocoder": {"gpu_memory_fraction": 0.15}}}
    plan, _ = solved(args)
    assert plan.stage("vocoder").fraction == 0.15
    assert plan == planner.solve_pipeline(
        planner.load("fishaudio-s2-pro", overrides=args["overrides"]),
        requests=(planner.Isolate("vocoder"),), cpus=args["cpus"], count_cpus=True).plan


@pytest.mark.parametrize(("args", "said"), [
    ({"model": "piper-joe", "replicas": 2}, "unknown args replicas"),
    ({"model": "piper-joe", "requests": [{"isolate": "nowhere"}]}, "the plan in args is error"),
    ({"model": "piper-joe", "requests": ["vocoder"]}, "args.requests"),
    ({"model": "no-such-model"}, "no-such-model"),
])
def test_args_the_planner_refuses_are_one_paragraph(args, said):
    with pytest.raises(ValueError, match=said):
        solved(args)
