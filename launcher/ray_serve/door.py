"""The front door on Ray Serve: the `Deployment` facade that `launcher.serving.http.create_app`
serves, over the deployment of the terminal process group.

`create_app` is `planner serve`'s own front door: the same request validation, model and voice
lists, audio encodings and streaming. What it asks of a deployment is answered here: `submit`
starts the request's call to the terminal group (one task on the replica's event loop) and
returns the `SpeechRequest` handle `planner serve` returns, fed with the audio as it arrives;
`health` and `metrics` say what this front door knows (Ray Serve reports each deployment's
replicas: `serve status`).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from launcher.control import metrics
from launcher.control.outputs import terminal_output
from launcher.control.request_table import OUTCOMES, SpeechRequest
from launcher.control.states import DeploymentState
from launcher.errors import RequestFailed, StageFailed
from launcher.ray_serve.group import request_failure
from launcher.wire import ipc
from launcher.wire.protocol import Result
from launcher.words import WordTiming

if TYPE_CHECKING:
    from planner import Plan


def _no_blocks(segment: str, lease: int) -> None:
    raise AssertionError("a payload on Ray Serve never travels in a shared-memory block")


def samples_of(message: Result, receiver: ipc.Receiver) -> tuple[Any, tuple[WordTiming, ...]]:
    """The terminal stage's audio in one `Result`, as 1-D float32 samples, and its word timings,
    read as `planner serve`'s supervisor reads them (`launcher.control.outputs`)."""
    return terminal_output(receiver.unpack(message.packed), message.stage, shared=False)


class FrontDoor:
    """What `create_app` serves on Ray Serve. `terminal`: the handle of the terminal group's
    deployment; `deployments`: every deployment of the application, for /health."""

    state = DeploymentState.RUNNING  # while this replica serves; Ray Serve replaces one that is not
    note = None
    device = "ray-serve"

    def __init__(self, plan: Plan, terminal: Any, deployments: tuple[str, ...] = ()) -> None:
        self.plan = plan
        self._terminal = terminal
        self._deployments = deployments
        self._receiver = ipc.Receiver(_no_blocks)
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._live: dict[int, tuple[SpeechRequest, asyncio.Task, asyncio.AbstractEventLoop]] = {}
        self._latency = metrics.Histogram()
        self._outcomes = dict.fromkeys(OUTCOMES, 0)

    # -- what create_app calls -------------------------------------------------------------------
    def submit(self, text: str, voice: str | None = None, stream: bool = False,
               options: Mapping[str, Any] | None = None) -> SpeechRequest:
        """Start synthesising `text`; called on the event loop (create_app's handler)."""
        request_id = next(self._ids)
        handle = SpeechRequest(request_id, stream, self._cancel, self.plan.sample_rate)
        # The entry stages' payload, as `planner serve`'s supervisor gives it.
        payload = {"text": text, "voice": voice, **(options or {}), "stream": stream}
        loop = asyncio.get_running_loop()
        task = loop.create_task(self._pump(handle, payload))
        with self._lock:
            self._live[request_id] = (handle, task, loop)
        return handle

    @property
    def in_flight(self) -> int:
        return len(self._live)

    def retry_after(self) -> int:
        return 1  # a refused request is Ray Serve's backpressure: worth a retry at once

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "model": self.plan.model, "variant": self.plan.variant,
                "backend": "ray-serve", "in_flight": self.in_flight,
                "deployments": list(self._deployments)}

    def metrics(self, accept: str | None = None) -> tuple[str, str]:
        """Requests as this front door saw them; stage timings live in the group replicas
        (Ray Serve's own metrics have each deployment's)."""
        with self._lock:
            sample = metrics.Sample(
                model=self.plan.model, stage_latency={}, request_latency=self._latency.copy(),
                outcomes=dict(self._outcomes), in_flight=len(self._live), processes=())
        return metrics.render(sample, accept)

    # -- a request's life ------------------------------------------------------------------------
    async def _pump(self, handle: SpeechRequest, payload: dict[str, Any]) -> None:
        started, ended = time.monotonic(), False
        try:
            async for message in self._terminal.options(stream=True).run.remote(payload):
                handle._chunk(*samples_of(message, self._receiver))
                ended = message.last
            if not ended:
                raise StageFailed("the pipeline stopped before its last audio chunk")
        except asyncio.CancelledError:
            raise  # `_cancel` has failed the handle already
        except Exception as exc:  # noqa: BLE001 - every failure is the request's, with a status
            self._finish(handle.id, request_failure(exc, "the pipeline"), "error")
            return
        if self._finish(handle.id, None, "ok"):
            with self._lock:
                self._latency.observe(time.monotonic() - started)

    def _cancel(self, request_id: int, error: RequestFailed, outcome: str) -> None:
        """The caller stopped waiting (any thread): stop its call, which Ray Serve cancels in
        every group it reached."""
        with self._lock:
            live = self._live.get(request_id)
        if live is not None and self._finish(request_id, error, outcome):
            _, task, loop = live
            loop.call_soon_threadsafe(task.cancel)

    def _finish(self, request_id: int, error: RequestFailed | None, outcome: str) -> bool:
        """End the request once: True if this call ended it."""
        with self._lock:
            live = self._live.pop(request_id, None)
            if live is None:
                return False
            self._outcomes[outcome] += 1
        handle = live[0]
        if error is None:
            handle._end()
        else:
            handle._fail(error)
        return True
