"""Bad input on the command line, row by row, run in this process: each row is one paragraph
and exit 2. One row of each table also runs as the real `python -m planner` command (the slow
lane), which is what the other rows share with it: the entry point, the exit code, stderr."""

from __future__ import annotations

import os

import pytest

from tests.cli import run_planner

ENV = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1"}


def run(*args, cwd=None, in_process=True):
    return run_planner(*args, env=ENV, cwd=cwd, in_process=in_process, timeout=60)


@pytest.mark.parametrize("args,needle", [
    (["solve", "qwen3-tts", "--stage-process", "vocoder"], "invalid-assignment"),
    (["solve", "qwen3-tts", "--isolate-stage", "vocodr"], "unknown-stage"),
    (["solve", "qwen3-tts", "--isolate-stage", "vocoder", "--stage-process", "vocoder=x"],
     "duplicate-assignment"),
    (["solve", "nope"], "no built-in model card matches 'nope'"),
    (["solve", "qwen3-tts", "--variant", "tp9"], "has no variant 'tp9'"),
    (["show", "nope"], "no built-in model card matches 'nope'"),
])
def test_bad_input_exit_2_without_traceback(args, needle, in_process=True):
    out = run(*args, in_process=in_process)
    assert out.returncode == 2
    assert needle in out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr



@pytest.mark.parametrize("content,needle", [
    (b"model: qwen3-tts\nstages:\n  - {name: vocoder, args: {1: a, b: c}}\n",
     "stages[name=vocoder].args: has the key 1"),
    (b"model: qwen3-tts\nname: [x]\n", "cfg.yaml: name: got a list"),
    (b"model: qwen3-tts\nroles: {v: [a, b]}\n", "roles.v: got a list"),
    (b"model: qwen3-tts\nname: \xff\n", "cfg.yaml: is not UTF-8 text"),
    (b"model: '[/x]'\n", "cfg.yaml: model: no built-in model card matches '[/x]'"),
])
def test_malformed_config_is_one_paragraph_exit_2(tmp_path, content, needle, in_process=True):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_bytes(content)
    for cmd in ("show", "solve"):
        out = run(cmd, "--config", str(cfg), in_process=in_process)
        text = out.stdout + out.stderr
        assert out.returncode == 2 and "Traceback" not in text, text
        assert needle in " ".join(text.split()), text
    err = run("show", "--config", str(cfg), in_process=in_process).stderr
    assert err.startswith("error: ") and err.count("\n") == 1, err  # one paragraph, one line


@pytest.mark.slow
def test_the_real_command_says_bad_input_in_one_paragraph_with_exit_2(tmp_path):
    test_bad_input_exit_2_without_traceback(["solve", "qwen3-tts", "--isolate-stage", "vocodr"],
                                            "unknown-stage", in_process=False)
    test_malformed_config_is_one_paragraph_exit_2(
        tmp_path, b"model: qwen3-tts\nname: [x]\n", "cfg.yaml: name: got a list",
        in_process=False)


@pytest.mark.parametrize("args,needle", [
    # a prefix is not the option: it is refused, naming the option it would have been
    (["solve", "qwen3-tts", "--isolat", "vocoder"],
     "`planner solve` does not take --isolat (did you mean --isolate-stage? options are not "
     "abbreviated)"),
    (["bench", "qwen3-tts", "--concurr", "2"], "did you mean --concurrency?"),
    (["solve", "qwen3-tts", "--bogus"], "`planner solve` does not take --bogus; see "
     "`planner solve --help`"),
])
def test_an_abbreviated_or_unknown_option_is_refused_in_one_paragraph(args, needle):
    out = run(*args)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert needle in " ".join(out.stderr.split()) and out.stdout == ""
