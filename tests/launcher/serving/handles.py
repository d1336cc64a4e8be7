"""The reads `create_app` makes of a request handle on its event loop (`result_async`,
`chunks_async`, and for captions `captioned_async`, `captioned_result_async`), for the front
door's in-process tests: derived from a fake handle's blocking reads, as `SpeechRequest` offers
both."""

from __future__ import annotations

import asyncio


class AwaitableReads:
    async def result_async(self, timeout=None):
        return self.result(timeout)

    async def chunks_async(self, timeout=None):
        for chunk in self.chunks(timeout):
            yield chunk
            await asyncio.sleep(0)  # the loop's turn between chunks, as a real stream gives it

    async def captioned_result_async(self, timeout=None):
        return self.captioned_result(timeout)

    async def captioned_async(self, timeout=None):
        for piece in self.captioned(timeout):
            yield piece
            await asyncio.sleep(0)
