"""Measure a pipeline's profile for `planner tune`: each stage's own costs, on this machine.

The declared pipeline's stages are built with their factories, as a worker builds them, and the
bench's request texts are run through them one request at a time in one thread, so each stage's
costs are its own (no contention; that is what the model predicts). Per stage and request:
- wall time, the thread's CPU time (its own CPU clock) and the time it spent runnable but
  waiting for a core (Linux schedstat); what is none of these is device time (a GPU, a sleep, I/O).
  On a busy machine a stage waits for a core, and that wait is neither its CPU nor a device's: it
  is taken out, so a profile taken there has the shape of one taken on a quiet machine;
- the part of its CPU time that holds the interpreter lock: the same requests run again with a
  probe thread waking every 0.2 ms in the same process, and the time between wake-ups that
  found the lock held, over all the time, is the share of the stage's time that held it;
- how much native work it does per call, between two moments it needs the lock back: a few short
  requests run again beside a thread spinning pure Python, and each time the stage needs the lock
  back it waits for the spinner's switch interval;
- the chunks and payload bytes it hands on, and how much of its time passed before the first of
  several chunks came out (on the clocks of its wall time, less any wait for a core);
- the resident memory its construction added.
Plus the cost of a cross-process handoff (the CPU and time it adds to a request of a null pipeline
split in two, on the launcher's own path; the copy rate), and the serving process's
per-request work (encoding the audio).

One module per job: `stage_timing` runs and times the stages, `lock_sampling` holds the two
threads that see the interpreter lock, `crossing_costs` measures what serving adds around them,
and `measure_profile` puts the profile together.
"""

from __future__ import annotations

from planner.app.profiling.measure_profile import measure

__all__ = ["measure"]
