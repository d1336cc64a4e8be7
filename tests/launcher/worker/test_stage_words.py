"""Word timings that came in with an input go on once: a terminal stage streaming several pieces
of audio from one input hands the input's `words` on with its first piece only, and a stage's own
`words` with the piece it yields them on. In-process: one stage thread, events, no sleeps."""

from __future__ import annotations

import threading

import numpy as np

from launcher.wire import ipc
from launcher.wire.protocol import Result
from launcher.wire.specs import CLIENT, StageSpec, WorkerSpec
from launcher.worker.join import Envelope
from launcher.worker.stages import StageRunner
from launcher.words import WORDS, WordTiming

from tests.launcher.worker.runner_fakes import STOP, RecordingChannel, StoppableQueue

BOUND_S = 30.0
HELLO, LATER = WordTiming("hello", 0.0, 0.1), WordTiming("later", 0.0, 0.1)


def vocoder(payload):
    for k in range(3):  # three pieces of audio from one input
        piece = {"audio": np.full(4, k, np.float32)}
        if k == 2:
            piece[WORDS] = (LATER,)
        yield piece


def test_an_inputs_words_go_on_with_the_first_piece_made_from_it():
    out = StageSpec("vocoder", "vocoder", (), (), (CLIENT,), (), "cpu")
    channel, gone = RecordingChannel(), threading.Event()
    pool = ipc.SegmentPool("stageplanner-wordtest-", "vocoder")
    receiver = ipc.Receiver(pool.release)
    r = StageRunner(WorkerSpec("voc", (out,), None, None, "wordtest"), {"vocoder": vocoder},
                    channel, pool, receiver, lambda *_: None, gone.set)
    r.inboxes["vocoder"].raw = StoppableQueue()
    thread = threading.Thread(target=r._loop, args=(out,), daemon=True)
    thread.start()
    try:
        r.put("vocoder", Envelope(3, CLIENT, None, True, {"z": 1, WORDS: (HELLO,)}))
        results = []
        while len(results) < 3:
            results += [m for m in channel.sent.get(timeout=BOUND_S) if isinstance(m, Result)]
        words = [receiver.unpack(m.packed).get(WORDS) for m in results]
        assert words == [(HELLO,), None, (LATER,)]
    finally:
        r.inboxes["vocoder"].put(STOP)
        thread.join(BOUND_S)
        receiver.close()
        pool.close()
    assert gone.is_set() and not thread.is_alive()
