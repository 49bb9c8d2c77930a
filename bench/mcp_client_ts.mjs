// Drive demo_rag.py --mcp with the official TypeScript SDK: tools, errors, a search during a
// streaming ask_notes, and a cancelled ask_notes. Set-up and run: see bench/mcp.md, "Clients".
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [repo, notes, cache] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: "python", args: [`${repo}/demo_rag.py`, "--mcp", "--notes", notes, "--cache", cache],
  env: { ...process.env }, stderr: "pipe",
});
let stderr = "";
transport.stderr?.on("data", (d) => { stderr += d; });
const client = new Client({ name: "ts-sdk-driver", version: "1.0" });
const t0 = () => performance.now();
const ms = (a) => Math.round(performance.now() - a);
const out = {};
await client.connect(transport);
out.server = client.getServerVersion();
out.protocol = transport._protocolVersion ?? "(negotiated)";
const { tools } = await client.listTools();
out.tools = tools.map((t) => ({ name: t.name, annotations: t.annotations, outputSchema: !!t.outputSchema }));
let a = t0();
let r = await client.callTool({ name: "search_notes", arguments: { query: "how long to proof sourdough" } });
out.search_first = { ms: ms(a), isError: !!r.isError, structured: !!r.structuredContent, blocks: r.content.length };
const quiet = [];
for (let i = 0; i < 9; i++) {
  a = t0();
  await client.callTool({ name: "search_notes", arguments: { query: `coffee grind ratio ${i}` } });
  quiet.push(ms(a));
}
out.search_idle_ms = quiet.sort((x, y) => x - y);
try {
  r = await client.callTool({ name: "search_notes", arguments: { query: "x", top_k: 0 } });
  out.bad_top_k = { isError: !!r.isError, text: r.content[0]?.text?.slice(0, 80) };
} catch (e) { out.bad_top_k = { threw: String(e).slice(0, 120) }; }
// A search while an answer streams, then the answer cancelled.
const ctl = new AbortController();
a = t0();
const asking = client.callTool({ name: "ask_notes", arguments: { question: "how do I brew pour-over coffee" } },
  undefined, { signal: ctl.signal, timeout: 120000 })
  .then((v) => ({ answered: true, ms: ms(a), isError: !!v.isError }))
  .catch((e) => ({ answered: false, ms: ms(a), error: String(e).slice(0, 100) }));
await new Promise((res) => setTimeout(res, 1500));
const b = t0();
await client.callTool({ name: "search_notes", arguments: { query: "running heart rate zones" } });
out.search_during_answer_ms = ms(b);
ctl.abort("user pressed stop");
out.ask = await asking;
// Is the server still serving, and how soon?
const c = t0();
await client.callTool({ name: "search_notes", arguments: { query: "git undo last commit" } });
out.search_after_cancel_ms = ms(c);
await client.close();
out.stderr_tail = stderr.split("\n").filter(Boolean).slice(-3);
console.log(JSON.stringify(out, null, 1));
