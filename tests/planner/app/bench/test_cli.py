"""`planner bench` input errors: one paragraph on stderr and exit 2 (1 for an infeasible placement,
as `planner solve`), before anything starts."""

from __future__ import annotations

import json
import warnings

import pytest

from planner.app.cli import main


@pytest.mark.parametrize(("argv", "says"), [
    ([], "--model-path MODEL"),
    # numbers out of range: their argparse types, before anything loads
    (["-m", "qwen3-tts", "--requests", "0"],
     "argument --requests: '0' is not a finite positive whole number; see `planner bench --help`"),
    (["-m", "qwen3-tts", "--concurrency", "0"],
     "argument --concurrency: '0' is not a finite positive whole number"),
    (["-m", "qwen3-tts", "--input-chars", "5000"],
     "argument --input-chars: 5000 is outside 1..4096 (the speech endpoint's limit)"),
    (["-m", "qwen3-tts", "--rate", "0"], "argument --rate: '0' is not a finite positive number"),
    (["-m", "qwen3-tts", "--rate", "2", "--arrivals", "gamma", "--burstiness", "0"],
     "argument --burstiness: '0' is not a finite positive number"),
    (["-m", "qwen3-tts", "--slo-p99-ms", "-1"],
     "argument --slo-p99-ms: '-1' is not a finite positive number"),
    (["-m", "qwen3-tts", "--rounds", "0"],
     "argument --rounds: '0' is not a finite positive whole number"),
    (["-m", "qwen3-tts", "--warmup", "-1"], "argument --warmup: -1 is outside 0..1000000"),
    (["-m", "qwen3-tts", "--max", "0", "--all-feasible"],
     "argument --max: '0' is not a finite positive whole number"),
    # what one option says of another, and the placements
    (["-m", "qwen3-tts", "--max", "3"], "--max only limits --all-feasible"),
    (["-m", "qwen3-tts", "--placement", "nosign"], "is not NAME='FLAGS'"),
    (["-m", "qwen3-tts", "--placement", "x=--gpu 1"], "is not a placement flag"),
    (["-m", "qwen3-tts", "--placement", "x=--isolate-stage nope"], "neither a stage nor a role"),
    (["-m", "no-such-model"], "no-such-model"),
    (["-m", "qwen3-tts", "--arrivals", "gamma"], "--arrivals shapes open-loop load"),
    (["-m", "qwen3-tts", "--rate", "2", "--burstiness", "0.5"],
     "--burstiness is the shape of gamma arrivals; add --arrivals gamma"),
    (["-m", "qwen3-tts", "--slo-ttfa-ms", "200"], "--slo-ttfa-ms needs --stream"),
    (["-m", "qwen3-tts", "--without-declared"],
     "--without-declared serves only the --placement plans; name at least one"),
    (["-m", "qwen3-tts", "--rounds", "5", "--requests", "3"],
     "--rounds 5 needs at least one request per round; give --requests 5 or more"),
])
def test_bad_input_is_one_paragraph_and_exit_2(argv, says, capsys, tmp_path):
    try:
        code = main(["bench", *argv, "--output", str(tmp_path / "out")])
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and len(err.strip().splitlines()) == 1
    assert says in " ".join(err.split())
    assert not (tmp_path / "out").exists()


def test_an_infeasible_placement_exits_1_as_solve_does(capsys, tmp_path):
    argv = ["-m", "qwen3-tts", "--placement", "x=--isolate-stage preprocessing"]
    assert main(["solve", "qwen3-tts", "--isolate-stage", "preprocessing"]) == 1
    capsys.readouterr()
    assert main(["bench", *argv, "--output", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error:") and "cannot run on qwen3-tts: the request splits " \
        "preprocessing -> tts_engine" in " ".join(err.split())
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [["--requests", "4", "--duration", "2"],
                                  ["--concurrency", "2", "--rate", "3"]])
def test_conflicting_options_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "-m", "qwen3-tts", *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "not allowed with" in err and err.startswith("error:")


def _one_paragraph_exit_2(argv, capsys) -> str:
    assert main(["bench", "-m", "qwen3-tts", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    return " ".join(err.split())


def test_output_that_is_a_file_is_a_clean_error(tmp_path, capsys):
    taken = tmp_path / "results.txt"
    taken.write_text("keep me")
    says = _one_paragraph_exit_2(["--output", str(taken)], capsys)
    assert f"--output {taken} is a file" in says
    assert taken.read_text() == "keep me"


def test_output_that_cannot_be_written_is_a_clean_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    says = _one_paragraph_exit_2(["--output", str(blocker / "sub")], capsys)
    assert f"--output {blocker / 'sub'}: cannot write results there (Not a directory)" in says


def test_every_request_failing_exits_1_with_the_first_error(tmp_path, capsys, monkeypatch):
    """Nothing is served: the runner is replaced by one whose every request failed."""
    from planner.app.bench import command
    from planner.app.bench.load_shapes import Open
    from tests.planner.app.bench import synthetic as S

    def failed_runs(settings, placements, progress):
        bench = S.all_failed(Open(2.0))
        return tuple(S.run(p, settings.loads[0], list(bench.runs[0].load.samples))
                     for p in placements)

    monkeypatch.setattr(command, "run_all", failed_runs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no matplotlib warning either
        code = main(["bench", "-m", "qwen3-tts", "--rate", "2", "--stream",
                     "--output", str(tmp_path)])
    assert code == 1
    err = " ".join(capsys.readouterr().err.split())
    assert ("error: every request to declared at 2/s failed (4 of 4); the first: HTTP 500: "
            '{"error": "RuntimeError: weights file not found"}') in err
    assert "error: every request to isolate vocoder at 2/s failed" in err
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["runs"][0]["load"]["errors_by_kind"] == {"http-500": 4}
    assert data["command"].startswith("planner bench --model-path qwen3-tts --requests 96 "
                                      "--rate 2 --arrivals poisson --warmup 4")


def test_help_lists_the_issue_options(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    out = capsys.readouterr().out
    for flag in ("--model-path", "--config", "--variant", "--placement", "--all-feasible",
                 "--max", "--requests", "--duration", "--concurrency", "--warmup",
                 "--input-chars", "--stream", "--output", "--device", "--seed", "--rate",
                 "--arrivals", "--burstiness", "--slo-ttfa-ms", "--slo-p99-ms"):
        assert flag in out
