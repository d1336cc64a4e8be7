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


def test_each_quickstart_line_reads_at_a_glance():
    assert all(len(line) <= 120 for line in quickstart_lines())


def run_setup(tmp_path: Path, uid: int, apt_exit: int, sudo: bool = True):
    """./setup.sh with espeak-ng hidden: PATH holds only fakes of `id`, `apt-get`, `sudo` and
    `python3` (whose `-m venv` makes a fake `.venv/bin/pip`), each logging its call, run on a
    copy of the script so that nothing is installed for real."""
    log = tmp_path / "calls"
    bin_dir, checkout = tmp_path / "bin", tmp_path / "checkout"
    bin_dir.mkdir()
    checkout.mkdir()
    (checkout / "setup.sh").write_text((ROOT / "setup.sh").read_text(encoding="utf-8"))
    fake_pip = f'#!/bin/sh\necho "pip $*" >> {log}\n'
    fakes = {"id": f'[ "$1" = -u ] && echo {uid}',
             "apt-get": f'echo "apt-get $*" >> {log}; exit {apt_exit}',
             "python3": (f'echo "python3 $*" >> {log}; mkdir -p .venv/bin; '
                         f"printf '{fake_pip}' > .venv/bin/pip; chmod +x .venv/bin/pip"),
             "dirname": 'echo "${1%/*}"', "chmod": "/bin/chmod \"$@\"",
             "mkdir": "/bin/mkdir \"$@\""}
    if sudo:
        fakes["sudo"] = f'echo "sudo $*" >> {log}; exec "$@"'
    for name, body in fakes.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    proc = subprocess.run(["/bin/bash", str(checkout / "setup.sh")], env={"PATH": str(bin_dir)},
                          capture_output=True, text=True, timeout=30, cwd=checkout)
    calls = log.read_text().splitlines() if log.exists() else []
    return proc, calls


def test_as_root_without_sudo_setup_calls_apt_get_itself_then_installs(tmp_path):
    proc, calls = run_setup(tmp_path, uid=0, apt_exit=0, sudo=False)
    assert proc.returncode == 0, proc.stderr
    assert calls == ["apt-get update -qq", "apt-get install -y espeak-ng",
                     "python3 -m venv .venv",
                     "pip install -q -c constraints.txt -e .[bench,dev]"]


def test_as_a_user_setup_goes_through_sudo(tmp_path):
    proc, calls = run_setup(tmp_path, uid=1000, apt_exit=0)
    assert proc.returncode == 0, proc.stderr
    assert [c for c in calls if c.startswith("sudo")] == ["sudo apt-get update -qq",
                                                          "sudo apt-get install -y espeak-ng"]
    assert calls[-1] == "pip install -q -c constraints.txt -e .[bench,dev]"


def test_a_setup_that_cannot_install_espeak_ng_says_why_and_stops(tmp_path):
    proc, calls = run_setup(tmp_path, uid=0, apt_exit=100)
    assert calls == ["apt-get update -qq"]
    assert proc.returncode != 0
    assert "no espeak-ng" in proc.stderr and "apt-get install -y espeak-ng" in proc.stderr
