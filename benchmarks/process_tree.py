"""A process and its descendants as /proc shows them (Linux): which they are, and the CPU time
and memory they hold together. Read while they run: a process that exits meanwhile is skipped."""

from __future__ import annotations

import os
from pathlib import Path


def stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (the parent's pid first), or None when
    the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def tree(root: int) -> list[int]:
    """`root` and every live descendant, parents before their children."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := stat_fields(int(entry))):
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        found.append(pid)
        todo += sorted(children.get(pid, []))
    return found


def tree_cpu_s(root: int) -> float:
    """CPU seconds of the tree so far: each live process's user+system time and its reaped
    children's, so a child that exits between two readings is still counted."""
    total = 0
    for pid in tree(root):
        if fields := stat_fields(pid):
            total += sum(int(x) for x in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def tree_memory(root: int) -> dict[str, float]:
    """PSS, RSS and peak RSS (MiB) summed over the tree, with its processes and threads."""
    kib = {"Pss:": 0, "Rss:": 0, "VmHWM:": 0, "Threads:": 0}
    pids = tree(root)
    for pid in pids:
        for name in ("smaps_rollup", "status"):
            try:
                for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
                    words = line.split()  # smaps_rollup pads with spaces, status with a tab
                    if len(words) > 1 and words[0] in kib:
                        kib[words[0]] += int(words[1])
            except (OSError, ValueError):
                pass  # a process that just exited
    return {"pss_mib": kib["Pss:"] / 1024, "rss_mib": kib["Rss:"] / 1024,
            "peak_rss_mib": kib["VmHWM:"] / 1024, "processes": len(pids),
            "threads": kib["Threads:"]}
