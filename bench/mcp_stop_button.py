"""The stop-button check the Python client scripts share (mcp_client_fastmcp.py,
mcp_client_openai_agents.py): a search sent while ask_notes streams, then the answer cancelled."""
from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable

QUESTION = "how do I brew pour-over coffee"   # the stand-in's scripted answer (script.json) streams


async def search_during_answer(call_tool: Callable[[str, dict], Awaitable]) -> None:
    """Ask, search 1.5 s into the answer, cancel the answer's task; print what each took."""
    t0 = time.perf_counter()
    ask = asyncio.create_task(call_tool("ask_notes", {"question": QUESTION}))
    await asyncio.sleep(1.5)
    s0 = time.perf_counter()
    await call_tool("search_notes", {"query": "bm25"})
    print(f"search 1.5 s into ask_notes: {(time.perf_counter() - s0) * 1000:.0f} ms; ask done: {ask.done()}")
    ask.cancel()
    try:
        await ask
        print("ask: answered")
    except asyncio.CancelledError:
        print(f"ask: cancelled at {time.perf_counter() - t0:.2f} s")
    s0 = time.perf_counter()
    await call_tool("search_notes", {"query": "bm25"})
    print(f"search after: {(time.perf_counter() - s0) * 1000:.0f} ms")
