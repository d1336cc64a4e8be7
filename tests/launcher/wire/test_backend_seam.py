"""The seam's ordering promise, kept in one place for both backends (`wire.backend.Deaths`): every
live process's bookkeeping is read before any death is reported, and a dead process's last words
come before its `Exited`."""

from __future__ import annotations

from launcher.wire.backend import Deaths, Exited, read_frames
from launcher.wire.protocol import HandedOver, Released, encode


class Reader:
    """A non-blocking connection holding some frames."""

    def __init__(self, *messages) -> None:
        self.frames = [encode((m,)) for m in messages]

    def read(self):
        if not self.frames:
            raise BlockingIOError
        frames, self.frames = self.frames, []
        return frames


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def _report(deaths: Deaths, dead: list[str], notes: dict[str, Reader], last: dict[str, Reader]):
    forgotten: list[str] = []
    out = deaths.report(
        [], dead, notes=[(name, 7, r) for name, r in notes.items()],
        last_words=lambda name, out: read_frames(name, 7, last[name], out, drain=True),
        exited=lambda name: Exited(name, 7, -9), forget=forgotten.append)
    return out, forgotten


def test_survivors_bookkeeping_comes_before_a_death_and_last_words_before_exited():
    deaths = Deaths(clock=Clock())
    notes = {"pipeline": Reader(HandedOver(1, "vocoder", 7))}
    last = {"vocoder": Reader(Released(1))}
    out, forgotten = _report(deaths, ["vocoder"], notes, last)
    kinds = [(type(e).__name__, getattr(e, "message", None).__class__.__name__) for e in out]
    assert kinds == [("Received", "HandedOver"), ("Received", "Released"), ("Exited", "NoneType")]
    assert forgotten == ["vocoder"]


def test_bookkeeping_is_read_every_interval_and_at_once_when_someone_dies():
    clock = Clock()
    deaths = Deaths(clock=clock)
    assert _report(deaths, [], {"a": Reader(Released(1))}, {})[0]  # first call: due
    assert _report(deaths, [], {"a": Reader(Released(2))}, {})[0] == []  # not due yet
    out, _ = _report(deaths, ["b"], {"a": Reader(Released(3))}, {"b": Reader()})
    assert [type(e).__name__ for e in out] == ["Received", "Exited"]  # a death makes it due
    clock.now += 1.0
    assert _report(deaths, [], {"a": Reader(Released(4))}, {})[0]  # the interval passed
