"""The serve console's worker lines, from health snapshots (no processes)."""

from __future__ import annotations

from launcher.serving.console import WorkerWatch


def health(state="ready", pid=100, restarts=0, death=None):
    return {"status": "ok", "processes": [
        {"name": "pipeline", "pid": 10, "state": "ready", "restarts": 0, "death": None},
        {"name": "vocoder", "pid": pid, "state": state, "restarts": restarts, "death": death}]}


def test_a_death_and_the_restart_after_it_are_one_line_each():
    watch = WorkerWatch()
    assert watch.lines(health()) == []  # the first snapshot is where things start
    assert watch.lines(health()) == []
    died = "process 'vocoder' (pid 100) was killed by SIGKILL"
    assert watch.lines(health("restarting", None, 1, died)) == [
        f"worker died: {died}; restarting it (restart 1)"]
    assert watch.lines(health("starting", 200, 1, died)) == []
    assert watch.lines(health("ready", 200, 1, died)) == [
        "worker restarted: vocoder is ready again (pid 200)"]
    assert watch.lines(health("ready", 200, 1, died)) == []


def test_a_death_and_restart_between_two_snapshots_still_print_both():
    watch = WorkerWatch()
    watch.lines(health())
    died = "process 'vocoder' (pid 100) exited with code 1"
    assert watch.lines(health("ready", 300, 1, died)) == [
        f"worker died: {died}; restarting it (restart 1)",
        "worker restarted: vocoder is ready again (pid 300)"]


def test_a_death_that_ends_the_deployment_says_it_is_not_restarted():
    watch = WorkerWatch()
    watch.lines(health())
    died = "process 'vocoder' (pid 100) was killed by SIGKILL"
    assert watch.lines(health("failed", None, 0, died)) == [
        f"worker died: {died}; not restarted: the deployment is shutting down"]


def test_replicas_are_named_by_their_index():
    watch = WorkerWatch()
    rs = {"replicas": [{"index": 0, **health()}, {"index": 1, **health()}]}
    watch.lines(rs)
    rs["replicas"][1] = {"index": 1, **health("restarting", None, 1, "x was killed")}
    assert watch.lines(rs) == ["worker died: x was killed; restarting it (restart 1)"]
