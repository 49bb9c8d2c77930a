// Drive `demo_rag.py --mcp` with the Vercel AI SDK's MCP client (@ai-sdk/mcp 2.0.99, ai 7.0.173):
// the tools as the SDK makes them for a model, each executed as generateText would execute it
// (tool.execute), a bad argument, an unknown tool, then a search while ask_notes streams and the
// answer aborted. No model is called.
//
//   npm install ai@7.0.173 @ai-sdk/mcp@2.0.99 && node bench/mcp_client_ai_sdk.mjs . demo-data /tmp/c
//
// The server runs under `python` on PATH, against the Ollama (or stand-in) at OLLAMA_HOST.
import path from "node:path";
import { createMCPClient } from "@ai-sdk/mcp";
import { Experimental_StdioMCPTransport as StdioMCPTransport } from "@ai-sdk/mcp/mcp-stdio";

const [root, notes, cache] = process.argv.slice(2);
const client = await createMCPClient({
  transport: new StdioMCPTransport({
    command: "python", args: [path.join(root, "demo_rag.py"), "--mcp", "--notes", notes, "--cache", cache],
    env: process.env, stderr: "ignore",
  }),
});
const tools = await client.tools();
console.log("tools:", Object.keys(tools).join(", "));
const run = (name, args, signal) => tools[name].execute(args, { toolCallId: "1", messages: [], abortSignal: signal });
const show = (r) => JSON.stringify({ isError: r.isError, blocks: r.content?.length,
  structured: r.structuredContent ? Object.keys(r.structuredContent).length + " keys" : undefined,
  last: r.content?.at(-1)?.text?.slice(0, 70) });
console.log("search_notes:", show(await run("search_notes", { query: "sourdough starter" })));
console.log("read_note:", show(await run("read_note", { path: "sourdough.md", line_count: 3 })));
for (const args of [{ query: "x", top_k: 0 }, { query: "x", top_k: 2.0 }]) {
  try { console.log(JSON.stringify(args), "->", show(await run("search_notes", args))); }
  catch (e) { console.log(JSON.stringify(args), "-> throws", e.name, String(e.message).slice(0, 90)); }
}
try { console.log("unknown tool ->", await client.callTool?.({ name: "no_such_tool", args: {} })); }
catch (e) { console.log("unknown tool -> throws", e.name, String(e.message).slice(0, 90)); }
const stop = new AbortController();
const t0 = performance.now();
const ask = run("ask_notes", { question: "how do I brew pour-over coffee" }, stop.signal)
  .then(() => "answered", (e) => `rejected at ${((performance.now() - t0) / 1000).toFixed(2)} s (${e.name})`);
await new Promise((ok) => setTimeout(ok, 1500));
let s0 = performance.now();
await run("search_notes", { query: "bm25" });
console.log(`search 1.5 s into ask_notes: ${(performance.now() - s0).toFixed(0)} ms`);
stop.abort("user pressed stop");
console.log("ask:", await ask);
s0 = performance.now();
await run("search_notes", { query: "bm25" });
console.log(`search after: ${(performance.now() - s0).toFixed(0)} ms`);
await client.close();
