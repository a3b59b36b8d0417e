"""Code nodes off the event loop: the project's function runs in a worker thread, under the node's `timeout_s`.

The server's event loop runs every series, REST call and SSE stream; a code node that computes or sleeps on it
would stall them all. A plain function runs in a thread of a pool kept for code nodes (so a stuck node cannot
starve the loop's default executor); an `async def` runs to completion on its own event loop in that thread, so
blocking calls inside it are harmless too. A node that is not done after `timeout_s` (time queued for a worker
included) fails with `CODE_TIMEOUT`, an infrastructure error. Python cannot kill a thread: the abandoned call
runs on in its worker until it returns, holding that worker; the pool is sized so a few stuck nodes leave room.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import os
from collections.abc import Callable
from typing import Any

from aqven.models import gate

WORKERS = max(8, 2 * (os.cpu_count() or 1))
_pool = concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="aqven-code")


class CodeTimeout(Exception):
    """The code node did not finish within its timeout."""


def _call(fn: Callable[..., Any], inputs: dict[str, Any]) -> Any:
    value = fn(**inputs)
    if inspect.isawaitable(value):
        # An async node runs on a loop of its own in this worker thread: never on the server's loop.
        async def wait() -> Any:
            return await value

        return asyncio.run(wait())
    return value


async def run_code(fn: Callable[..., Any], inputs: dict[str, Any], timeout_s: float) -> Any:
    """`fn(**inputs)` in a code worker; raises `CodeTimeout` after `timeout_s`, or what `fn` raised."""
    future = asyncio.get_running_loop().run_in_executor(_pool, _call, fn, inputs)
    try:
        async with gate.released():  # a series' other attempts run their CPU phases while this one waits
            return await asyncio.wait_for(future, timeout_s)
    except TimeoutError:
        raise CodeTimeout(f"did not finish within {timeout_s:g} s") from None
