"""`planner` ends a process that loaded torch without the module teardown (`quick_exit`): what a
normal exit guarantees before that point must still hold, or output and cleanup would be lost."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""
    import atexit, sys, threading, time
    from planner.app.quick_exit import exit_now

    out = sys.argv[1]
    atexit.register(lambda: open(out + ".atexit", "w").write("ran"))
    def late():
        time.sleep(0.3)
        open(out + ".thread", "w").write("done")
    threading.Thread(target=late).start()  # not a daemon: a normal exit waits for it
    sys.stdout.write("x" * 200_000)  # more than a pipe holds: buffered until the exit flushes it
    sys.stderr.write("said on stderr")
    exit_now(3)
""")


def test_the_exit_code_output_threads_and_atexit_handlers_all_survive(tmp_path):
    out = str(tmp_path / "marker")
    done = subprocess.run([sys.executable, "-c", PROGRAM, out], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 3
    assert done.stdout == "x" * 200_000 and done.stderr == "said on stderr"
    assert (tmp_path / "marker.thread").read_text() == "done"
    assert (tmp_path / "marker.atexit").read_text() == "ran"
