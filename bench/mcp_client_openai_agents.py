"""Drive `demo_rag.py --mcp` with the OpenAI Agents SDK's MCP client (MCPServerStdio), and show
what its model would be given: MCPUtil.invoke_mcp_tool, the step that turns a tool's result into the
model's input, for a search, a bad argument and an unknown tool; then a search while ask_notes
streams, and the answer cancelled. No model is called.

    pip install openai-agents && python bench/mcp_client_openai_agents.py . demo-data /tmp/c

The server runs under `python` on PATH, with the requirements installed, against the Ollama (or
stand-in) at OLLAMA_HOST. Written against openai-agents 0.24.0 (mcp 2.3.0).
"""
from __future__ import annotations

import asyncio
import json
import os
import sys

from agents.mcp import MCPServerStdio, MCPUtil
from agents.run_context import RunContextWrapper
from mcp_stop_button import search_during_answer


def model_input(output) -> tuple[int, int]:
    """(text blocks, characters) of what invoke_mcp_tool hands the model."""
    items = output if isinstance(output, list) else [output]
    texts = [i["text"] if isinstance(i, dict) else str(i) for i in items]
    return len(texts), sum(map(len, texts))


async def main(root: str, notes: str, cache: str) -> None:
    params = {"command": "python", "args": [os.path.join(root, "demo_rag.py"), "--mcp", "--notes", notes,
                                            "--cache", cache], "env": dict(os.environ)}
    ctx = RunContextWrapper(context=None)
    for structured in (False, True):
        async with MCPServerStdio(params=params, use_structured_content=structured,
                                  client_session_timeout_seconds=60) as server:
            tools = {t.name: t for t in await server.list_tools()}
            out = await MCPUtil.invoke_mcp_tool(server, tools["search_notes"], ctx,
                                                json.dumps({"query": "sourdough starter"}))
            blocks, chars = model_input(out)
            print(f"use_structured_content={structured}: a search gives the model {blocks} text block(s), "
                  f"{chars:,} characters")
            if structured:
                continue
            out = await MCPUtil.invoke_mcp_tool(server, tools["search_notes"], ctx,
                                                json.dumps({"query": "x", "top_k": 0}))
            print("top_k 0 ->", out)
            try:
                print("unknown tool ->", await server.call_tool("no_such_tool", {}))
            except Exception as e:
                print("unknown tool ->", type(e).__name__, str(e)[:100])
            await search_during_answer(server.call_tool)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
