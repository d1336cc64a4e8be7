"""The espeak-ng program as a long-lived child process: one clause in, its IPA out.

espeak-ng is GPL-3.0; this project is Apache-2.0. It is run as a separate program (Debian's
`espeak-ng` package) and never loaded into a project process: no `piper`, no `libespeak-ng`.

Protocol: espeak-ng in line mode (`-q --ipa`, text on stdin) prints one line of phonemes per
input line, but may print more than one for a long line, or none. Each clause is therefore
followed by a sentinel line, and everything up to the sentinel's own phonemes is the clause's.
Its stdout is line-buffered with `stdbuf -oL` when coreutils has it (espeak-ng writes through
stdio, which buffers fully into a pipe).
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence

SENTINEL = "zqxjv"
REPLY_TIMEOUT_S = 30.0
# Lines written before their replies are read: few enough that neither pipe can fill meanwhile.
BATCH_LINES = 64

INSTALL_HINT = (
    "the piper-joe frontend needs the espeak-ng program (GPL-3.0, run as a separate process, "
    "never linked) to turn text into phonemes, and {why}; nothing was started. Install it: as "
    "root `apt-get update && apt-get install -y espeak-ng`, otherwise `sudo apt-get update && "
    "sudo apt-get install -y espeak-ng` (Debian/Ubuntu; `brew install espeak-ng` on macOS), or "
    "point $ESPEAK_NG at the program.")


class EspeakMissing(RuntimeError):
    """espeak-ng is not installed (or $ESPEAK_NG names nothing runnable)."""


def program() -> str:
    """The espeak-ng executable, or EspeakMissing with how to install it."""
    named = os.environ.get("ESPEAK_NG")
    if named:
        found = shutil.which(named)
        if found is None:
            raise EspeakMissing(INSTALL_HINT.format(
                why=f"$ESPEAK_NG={named!r} is not an executable program"))
        return found
    found = shutil.which("espeak-ng")
    if found is None:
        raise EspeakMissing(INSTALL_HINT.format(why="no `espeak-ng` is on the PATH"))
    return found


def version(executable: str | None = None) -> str:
    """espeak-ng's version string, e.g. '1.51' (ids are pinned to it in tests)."""
    out = subprocess.run([executable or program(), "--version"], capture_output=True,
                         text=True, timeout=30, check=False).stdout
    parts = out.split()
    return parts[parts.index("text-to-speech:") + 1] if "text-to-speech:" in parts else out


class _ChildGone(Exception):
    """The espeak-ng child is not running (any more)."""


class Espeak:
    """One espeak-ng child; thread-safe (one clause at a time)."""

    def __init__(self, voice: str = "en-us") -> None:
        argv = [program(), "-q", "--ipa", "-v", voice]
        stdbuf = shutil.which("stdbuf")
        self._argv = [stdbuf, "-oL", *argv] if stdbuf is not None else argv
        self._lock = threading.Lock()
        self.restarts = 0
        with self._lock:
            self._start()

    def _start(self) -> None:
        """(Re)start the child and learn the sentinel's phonemes, the end-of-reply mark."""
        self._proc = subprocess.Popen(
            self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, bufsize=0)
        self._buffer = b""  # read from the pipe, not yet returned as lines
        self._sentinel = ""
        self._write(SENTINEL)
        while not self._sentinel:
            self._sentinel = self._readline()

    def phonemes(self, clause: str) -> str:
        return self.phonemes_each([clause])[0]

    def phonemes_each(self, texts: Sequence[str]) -> list[str]:
        """The phonemes of each text said on its own, one line each (a text of no words says
        nothing and is not sent), in as few exchanges as the pipes allow: a request's clauses,
        and the words the word timings align with them (`word_spans`)."""
        lines = [" ".join(t.split()) for t in texts]  # one line, whatever the input held
        said = [line for line in lines if line]
        replies: list[str] = []
        for start in range(0, len(said), BATCH_LINES):
            replies += self._ask(said[start:start + BATCH_LINES])
        answers = iter(replies)
        return [next(answers) if line else "" for line in lines]

    def _ask(self, lines: list[str]) -> list[str]:
        with self._lock:
            try:
                return self._exchange(lines)
            except (OSError, _ChildGone):
                # The child died (killed, or crashed on some input): one fresh child, one retry.
                self._stop()
                self.restarts += 1
                self._start()
                return self._exchange(lines)

    def _exchange(self, lines: list[str]) -> list[str]:
        if self._proc.poll() is not None:
            raise _ChildGone()
        self._write("\n".join(f"{line}\n{SENTINEL}" for line in lines))
        replies = []
        for _ in lines:
            got = []
            while (line := self._readline()) != self._sentinel:
                got.append(line)
            replies.append(" ".join(x for x in got if x))
        return replies

    def _write(self, lines: str) -> None:
        data = memoryview(f"{lines}\n".encode())
        while data:
            data = data[self._proc.stdin.write(data):]

    def _readline(self) -> str:
        # Raw reads of the pipe and our own line splitting: a buffered reader could hold the
        # next line where select() cannot see it.
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                self._stop()  # out of step with its replies now: the next call starts afresh
                raise RuntimeError(f"espeak-ng gave no phonemes within {REPLY_TIMEOUT_S:g} s")
            data = os.read(fd, 65536)
            if not data:
                raise _ChildGone()
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "replace").strip()

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        proc = self._proc
        if proc.poll() is None:
            try:
                proc.stdin.close()
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
