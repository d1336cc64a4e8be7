"""`planner bench` input errors: one paragraph on stderr and exit 2, before anything starts."""

from __future__ import annotations

import pytest

from planner.cli import main


@pytest.mark.parametrize(("argv", "says"), [
    ([], "--model-path MODEL"),
    (["-m", "qwen3-tts", "--requests", "0"], "--requests must be at least 1"),
    (["-m", "qwen3-tts", "--concurrency", "0"], "--concurrency must be at least 1"),
    (["-m", "qwen3-tts", "--input-chars", "5000"], "--input-chars must be within 1..4096"),
    (["-m", "qwen3-tts", "--max", "3"], "--max only limits --all-feasible"),
    (["-m", "qwen3-tts", "--placement", "nosign"], "is not NAME='FLAGS'"),
    (["-m", "qwen3-tts", "--placement", "x=--gpu 1"], "is not a placement flag"),
    (["-m", "qwen3-tts", "--placement", "x=--isolate-stage preprocessing"],
     "cannot run on qwen3-tts: the request splits preprocessing -> tts_engine"),
    (["-m", "qwen3-tts", "--placement", "x=--isolate-stage nope"], "neither a stage nor a role"),
    (["-m", "no-such-model"], "no-such-model"),
])
def test_bad_input_is_one_paragraph_and_exit_2(argv, says, capsys, tmp_path):
    assert main(["bench", *argv, "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and says in " ".join(err.split())
    assert not (tmp_path / "out").exists()


def test_conflicting_options_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "-m", "qwen3-tts", "--requests", "4", "--duration", "2"])
    assert exc.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_help_lists_the_issue_options(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    out = capsys.readouterr().out
    for flag in ("--model-path", "--config", "--variant", "--placement", "--all-feasible",
                 "--max", "--requests", "--duration", "--concurrency", "--warmup",
                 "--input-chars", "--stream", "--output", "--device", "--seed"):
        assert flag in out
