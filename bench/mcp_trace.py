"""Where a search_notes call's time goes over stdio: the server's own steps, timed inside it, and
the trip between the two processes, against search() in the client's process on the same index.

Run from the project root, after bench/bench_mcp.py has built its vaults (offline):

    python bench/mcp_trace.py                 # 5,000 chunks, 100 calls
    python bench/mcp_trace.py --chunks 50000

The server is `demo_rag.py --mcp` started through a small wrapper that times its functions (the
search, the result's building, the whole tools/call, the reply's writing) and stamps when a line
is read, when its handling starts and when its reply is written; the stamps are perf_counter(), which on Linux is the system's
monotonic clock, so the client's and the server's can be subtracted. The pairs are timed by
bench_mcp.py's own side_by_side(): --pause seconds of "thinking", search() here, APART seconds, the
call.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(1, str(ROOT / "tests"))
import bench_mcp as bench  # noqa: E402
import demo_rag as rag  # noqa: E402
from ollama_server import FakeOllama  # noqa: E402

# The server, wrapped: each step's time goes to stderr as "T step ms", each event as "A event t".
WRAPPER = r'''
import sys, time
sys.path.insert(0, sys.argv.pop(1))
import demo_rag as rag

def say(line):
    sys.stderr.write(line + "\n")
    sys.stderr.flush()

def timed(owner, name):
    original = getattr(owner, name)
    def step(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            say(f"T {name} {(time.perf_counter() - t0) * 1000:.3f}")
    setattr(owner, name, step)
    return step

for name in ("search", "search_tool", "readable", "tool_result"):
    timed(rag, name)
timed(rag.McpServer, "call_tool")         # McpServer() takes its methods as they are then
send = timed(rag.JsonRpcLines, "send")
def sent(self, message):
    send(self, message)
    say(f"A written {time.perf_counter():.6f}")
rag.JsonRpcLines.send = sent
lines = rag.message_lines
def read_lines(stream, limit):
    for line in lines(stream, limit):
        say(f"A read {time.perf_counter():.6f}")
        yield line
rag.message_lines = read_lines
handle = rag.JsonRpcLines.handle
def handled(self, line):
    say(f"A handle {time.perf_counter():.6f}")
    handle(self, line)
rag.JsonRpcLines.handle = handled
sys.exit(rag.main(sys.argv[1:]))
'''


def trace(n: int, work: Path, calls: int, pause: float) -> dict[str, list[float]]:
    """Each step's time in each of `calls` pairs at n chunks, in ms."""
    with FakeOllama(dim=bench.DIM) as fake, tempfile.TemporaryDirectory() as tmp:
        notes, cache, questions = bench.built(work, n, fake)
        os.environ["OLLAMA_HOST"] = fake.url
        settings = rag.Settings(notes_dir=notes, cache_dir=cache)
        client = rag.ollama_client()
        index, _ = rag.open_index(settings, client)
        log = Path(tmp) / "server.log"
        with open(log, "w") as err:
            c = bench.Client(["--notes", notes, "--cache", cache], {**os.environ, "OLLAMA_HOST": fake.url},
                             run=[sys.executable, "-c", WRAPPER, str(ROOT)], stderr=err)
            c.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": "trace", "version": "1"}})
            c.search(questions[0])
            inside, over, _ = bench.side_by_side(c, client, index, settings, questions, calls, pause)
            c.close()
        sent = c.sent[-calls:]
        steps: dict[str, list[float]] = {}
        events: dict[str, list[float]] = {}
        for line in log.read_text().splitlines():
            kind, name, value = (line.split() + ["", "", ""])[:3]
            if kind == "T":
                steps.setdefault(name, []).append(float(value))
            elif kind == "A":
                events.setdefault(name, []).append(float(value))
    last = {k: v[-calls:] for k, v in {**steps, **events}.items()}   # the timed calls' own
    ms = lambda seconds: [x * 1000 for x in seconds]  # noqa: E731
    return {"search() here": ms(inside), "call": ms(over),
            "client to server": ms(r - s for s, r in zip(sent, last["read"])),
            "read to handled": ms(h - r for r, h in zip(last["read"], last["handle"])),
            "search in the server": last["search"],
            "the result built": [t - s + r + j for t, s, r, j in zip(
                last["search_tool"], last["search"], last["readable"], last["tool_result"])],
            "tools/call in all": last["call_tool"], "reply written": last["send"],
            "reply read by the client": ms(s + o - w for s, o, w in zip(sent, over, last["written"]))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chunks", type=int, default=5000)
    p.add_argument("--calls", type=int, default=100)
    p.add_argument("--pause", type=float, default=0.2)
    p.add_argument("--work", type=Path, default=Path("/tmp/demo_rag-bench-mcp"))
    a = p.parse_args()
    t = trace(a.chunks, a.work, a.calls, a.pause)
    print(f"{a.chunks:,} chunks, {a.calls} calls (load average {os.getloadavg()[0]:.1f}):")
    print("| | " + " | ".join(t) + " |\n|---|" + "---:|" * len(t))
    for name, q in (("median", 50), ("p75", 75), ("p90", 90)):
        print(f"| {name} | " + " | ".join(f"{np.percentile(v, q):.2f} ms" for v in t.values()) + " |")


if __name__ == "__main__":
    main()
