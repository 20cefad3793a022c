"""The conversation's own event loop, in a dedicated thread: started by the first turn, given the
turns' coroutines (in a copy of the caller's context), stopped by ``close()`` / ``aclose()``.
A mixin of :class:`shortlist.runtime._conversation.Conversation`, whose ``_aclose`` releases its
resources on that loop before it stops.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["ConversationLoop"]

_T = TypeVar("_T")


class ConversationLoop:
    """Runs a conversation's turns on its own loop in a thread, one thread per conversation."""

    # set by Conversation.__init__
    _loop: asyncio.AbstractEventLoop | None
    _thread: threading.Thread | None
    _loop_lock: threading.Lock
    _closed: bool

    async def _aclose(self) -> None:
        """Release what the conversation holds (on its loop); see the conversation's own."""
        raise NotImplementedError

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            if self._closed:
                raise RuntimeError("the conversation is closed")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="shortlist-conversation", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        # run on the conversation's loop, in a copy of the caller's context (scoped event hooks apply)
        try:
            loop = self._ensure_loop()
        except RuntimeError:
            coro.close()  # never started: no "never awaited" warning
            raise
        return contextvars.copy_context().run(asyncio.run_coroutine_threadsafe, coro, loop)

    def _detach_loop(self) -> tuple[asyncio.AbstractEventLoop | None, threading.Thread | None, bool]:
        with self._loop_lock:
            was_closed, self._closed = self._closed, True
            loop, thread = self._loop, self._thread
            return loop, thread, was_closed

    @staticmethod
    def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread | None) -> None:
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join()
        loop.close()

    def close(self) -> None:
        """Close MCP connections and the model client, and stop the conversation's loop.

        The selectors are the pack's, shared with its other conversations: ``pack.close()``
        closes them.

        Raises:
            RuntimeError: when called from a running event loop (use ``await aclose()`` there).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("Conversation.close() called inside an event loop; use 'await conversation.aclose()'")
        loop, thread, was_closed = self._detach_loop()
        if was_closed:
            return
        if loop is None:
            asyncio.run(self._aclose())
            return
        try:
            asyncio.run_coroutine_threadsafe(self._aclose(), loop).result()
        finally:
            self._stop(loop, thread)

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        loop, thread, was_closed = self._detach_loop()
        if was_closed:
            return
        if loop is None or asyncio.get_running_loop() is loop:
            await self._aclose()
            if loop is not None:
                loop.call_soon(loop.stop)
            return
        try:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._aclose(), loop))
        finally:
            await asyncio.to_thread(self._stop, loop, thread)
