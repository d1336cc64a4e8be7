"""The README's Quickstart is what CI runs: `.ci/run` holds its two commands verbatim, so a newcomer
copying them gets exactly the steps the suite is proven with (no shim CI has and they lack)."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def quickstart_lines() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the Quickstart has no ```bash block"
    return block.group(1).strip().splitlines()


def test_ci_runs_the_two_quickstart_commands_verbatim_in_order():
    lines = quickstart_lines()
    assert len(lines) == 2
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert all(line in ci for line in lines), "a Quickstart line is not in .ci/run as written"
    assert ci.index(lines[0]) < ci.index(lines[1])
    # nothing in CI makes `sudo` (or anything else) mean what the README line does not say
    assert not any(re.match(r"\s*\w+\s*\(\)\s*\{", line) for line in ci)


def install_part() -> str:
    """The first command's espeak-ng step: everything before it makes the venv."""
    return quickstart_lines()[0].split(" && python3 -m venv", 1)[0]


def run_install(tmp_path: Path, uid: int, apt_exit: int, sudo: bool = True):
    """The step with espeak-ng hidden: PATH holds only a fake `id`, `apt-get` and `sudo`, each
    logging its call, so nothing is installed for real."""
    log = tmp_path / "calls"
    fakes = {"id": f'[ "$1" = -u ] && echo {uid}',
             "apt-get": f'echo "apt-get $*" >> {log}; exit {apt_exit}'}
    if sudo:
        fakes["sudo"] = f'echo "sudo $*" >> {log}; exec "$@"'
    for name, body in fakes.items():
        (tmp_path / name).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / name).chmod(0o755)
    proc = subprocess.run(["/bin/bash", "-c", install_part()], env={"PATH": str(tmp_path)},
                          capture_output=True, text=True, timeout=30)
    calls = log.read_text().splitlines() if log.exists() else []
    return proc, calls


def test_as_root_without_sudo_the_install_calls_apt_get_itself(tmp_path):
    proc, calls = run_install(tmp_path, uid=0, apt_exit=0, sudo=False)
    assert proc.returncode == 0, proc.stderr
    assert calls == ["apt-get update -qq", "apt-get install -y espeak-ng"]


def test_as_a_user_the_install_goes_through_sudo(tmp_path):
    proc, calls = run_install(tmp_path, uid=1000, apt_exit=0)
    assert proc.returncode == 0, proc.stderr
    assert calls[0] == "sudo apt-get update -qq" and "sudo apt-get install -y espeak-ng" in calls


def test_an_install_that_fails_says_why_and_stops(tmp_path):
    proc, calls = run_install(tmp_path, uid=0, apt_exit=100)
    assert calls == ["apt-get update -qq"]
    assert proc.returncode != 0
    assert "no espeak-ng" in proc.stderr and "apt-get install -y espeak-ng" in proc.stderr
