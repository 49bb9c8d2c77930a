"""Drive demo_rag.py --mcp with LangChain's langchain-mcp-adapters: load the tools as LangChain
tools and call them as an agent would (ainvoke), including a bad argument and a search while an
answer streams. Usage: python drive_langchain.py <repo> <notes> <cache>"""
import asyncio, json, os, sys, time
from langchain_mcp_adapters.client import MultiServerMCPClient

repo, notes, cache = sys.argv[1:4]


async def main():
    client = MultiServerMCPClient({"notes": {
        "command": "python", "env": {k: v for k, v in os.environ.items()
                                     if k in ("PATH", "HOME", "OLLAMA_HOST")},
        "args": [f"{repo}/demo_rag.py", "--mcp", "--notes", notes, "--cache", cache],
        "transport": "stdio"}})
    out = {}
    async with client.session("notes") as session:
        from langchain_mcp_adapters.tools import load_mcp_tools
        tools = {t.name: t for t in await load_mcp_tools(session)}
        out["tools"] = sorted(tools)
        r = await tools["search_notes"].ainvoke({"query": "how long to proof sourdough"})
        out["search"] = str(r)[:120]
        try:
            r = await tools["search_notes"].ainvoke({"query": "x", "top_k": 0})
            out["bad_top_k"] = {"returned": str(r)[:120]}
        except Exception as e:
            out["bad_top_k"] = {"raised": f"{type(e).__name__}: {str(e)[:100]}"}
        t = time.perf_counter()
        ask = asyncio.create_task(tools["ask_notes"].ainvoke({"question": "how do I brew pour-over coffee"}))
        await asyncio.sleep(1.5)
        s = time.perf_counter()
        await tools["search_notes"].ainvoke({"query": "running heart rate zones"})
        out["search_during_answer_ms"] = round((time.perf_counter() - s) * 1000)
        ask.cancel()
        try:
            await ask
            out["ask"] = "answered"
        except asyncio.CancelledError:
            out["ask"] = f"cancelled after {round((time.perf_counter() - t) * 1000)} ms"
        s = time.perf_counter()
        await tools["search_notes"].ainvoke({"query": "git undo last commit"})
        out["search_after_cancel_ms"] = round((time.perf_counter() - s) * 1000)
    print(json.dumps(out, indent=1))

asyncio.run(main())
