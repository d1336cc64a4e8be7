"""What a saved benchmark report says of the run: the command as typed in the repository's root,
never a path of the machine it ran on."""

from __future__ import annotations

from benchmarks.machine import ROOT, command_line


def test_a_benchmark_script_is_named_as_its_module_whatever_path_started_it():
    argv = [str(ROOT / "benchmarks" / "peer_hibari.py"), "--ours", "p2=--process-copies pipeline=2"]
    assert command_line(argv) == ("python -m benchmarks.peer_hibari --ours "
                                  "'p2=--process-copies pipeline=2'")
    assert str(ROOT) not in command_line(["/elsewhere/tool.py", "--quick"])
    assert command_line(["/elsewhere/tool.py", "--quick"]) == "python tool.py --quick"
