"""Drive `demo_rag.py --mcp` with FastMCP's client: list the tools, call each, a bad argument, an
unknown tool; then a search while ask_notes streams, and the answer cancelled.

    pip install fastmcp && python bench/mcp_client_fastmcp.py . demo-data /tmp/c

The server runs under `python` on PATH, with the requirements installed, against the Ollama (or
stand-in) at OLLAMA_HOST. The answer is cancelled by cancelling its task, which FastMCP's client
turns into notifications/cancelled. Written against fastmcp 4.2.3 (mcp 2.3.0).
"""
from __future__ import annotations

import asyncio
import os
import sys

from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp.exceptions import ToolError
from mcp_stop_button import search_during_answer


async def main(root: str, notes: str, cache: str) -> None:
    transport = StdioTransport("python", [os.path.join(root, "demo_rag.py"), "--mcp", "--notes", notes,
                                                "--cache", cache], env=dict(os.environ))
    async with Client(transport) as client:
        tools = await client.list_tools()
        print("tools:", [(t.name, t.annotations.read_only_hint, bool(t.output_schema)) for t in tools])
        r = await client.call_tool("search_notes", {"query": "sourdough starter"})
        print("search_notes: data", type(r.data).__name__, "| found", r.structured_content["found"],
              "| sources", len(r.structured_content["sources"]), "| blocks", len(r.content))
        r = await client.call_tool("read_note", {"path": "sourdough.md", "line_count": 3})
        print("read_note:", r.structured_content["start_line"], "-", r.structured_content["end_line"])
        for arguments in ({"query": "x", "top_k": 0}, {"query": "x", "top_k": 2.0}):
            try:
                r = await client.call_tool("search_notes", arguments)
                print(arguments, "-> result, isError", r.is_error, len(r.structured_content["sources"]), "sources")
            except ToolError as e:
                print(arguments, "-> ToolError:", e)
            r = await client.call_tool("search_notes", arguments, raise_on_error=False)
            print(arguments, "raise_on_error=False -> isError", r.is_error, r.content[0].text[:80])
        try:
            await client.call_tool("no_such_tool", {})
        except Exception as e:
            print("unknown tool ->", type(e).__name__, str(e)[:100])
        await search_during_answer(client.call_tool)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
