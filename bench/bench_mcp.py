"""Benchmark --mcp: a search_notes call against a command-line run per question, same index.

Run from the project root (offline; the tests' stand-in server answers the question's vector):

    python bench/bench_mcp.py                         # 5,000 and 50,000 chunks
    python bench/bench_mcp.py --sizes 5000 --calls 50 # a quicker look

The notes are synthetic (notes of 10 sections of ~1,100 characters, one chunk each at the
default chunk size, drawn from a vocabulary of 20,000 made-up words) and their index is built
once, in this process, with the tests' hashed embedder at 1,024 dimensions (tests/ollama_server.py,
hashed_vector), then kept in --work for the next run. The server is `demo_rag.py --mcp` as a
subprocess, spoken to in raw JSON lines over its stdin and stdout; a call's time is the
client's, from writing the request to reading the reply. The questions are 4 words of one
section each, so that every one finds something. The command line is
`demo_rag.py --retrieve-only --json QUESTION`, start to exit, against the same stand-in server.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "tests"))
import demo_rag as rag  # noqa: E402
from ollama_server import FakeOllama, hashed_vector  # noqa: E402

DIM = 1024                                # qwen3-embedding:0.6b's vector size
VOCABULARY = 20_000


def words(rng: np.random.Generator) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "zu", "ba", "do", "fi", "gu", "ha", "je"]
    return sorted({"".join(rng.choice(syllables, rng.integers(2, 5))) for _ in range(VOCABULARY * 2)})[:VOCABULARY]


def write_vault(notes: Path, n: int) -> list[str]:
    """n chunks in notes of 10 sections; returns one question per 97th section (4 of its words)."""
    rng = np.random.default_rng(n)
    vocab = np.array(words(rng))
    weights = 1 / np.arange(1, len(vocab) + 1)            # Zipf-like: a few common words, many rare ones
    weights /= weights.sum()
    notes.mkdir(parents=True)
    questions = []
    for j in range((n + 9) // 10):
        sections = []
        for p in range(min(10, n - j * 10)):
            body = rng.choice(vocab, 160, p=weights)
            sections.append(f"## Part {p}\n\n" + " ".join(body))
            if (j * 10 + p) % 97 == 0:
                questions.append(" ".join(rng.choice(body, 4, replace=False)))
        (notes / f"note-{j:05d}.md").write_text(f"# Note {j}\n\n" + "\n\n".join(sections))
    return questions


class HashedEmbedder:
    """The tests' hashed embedder in this process, for the one build: no HTTP, so that a
    50,000-chunk build takes a minute, not an hour of JSON. It names the same model build
    (digest) as the stand-in server, which then answers the questions."""

    def __init__(self, digest: str):
        self.digest = digest

    def list(self):
        model = type("Model", (), {"model": rag.EMBED_MODEL, "name": rag.EMBED_MODEL, "digest": self.digest})
        return type("Listing", (), {"models": [model]})()

    def show(self, model):
        raise ConnectionError("no /api/show here")        # the build skips its context-length check

    def embed(self, model, input, **kw):
        return type("Reply", (), {"embeddings": [hashed_vector(t, DIM) for t in input]})()


def built(work: Path, n: int, server: FakeOllama) -> tuple[Path, Path, list[str]]:
    """The notes folder, cache folder and questions for n chunks: built once, then reused."""
    notes, cache, asked = work / f"notes-{n}", work / f"cache-{n}", work / f"questions-{n}.json"
    if not asked.exists():
        t0 = time.perf_counter()
        questions = write_vault(notes, n)
        index, _ = rag.open_index(rag.Settings(notes_dir=notes, cache_dir=cache), HashedEmbedder(
            server.digest(rag.EMBED_MODEL)))
        assert index.complete and len(index.chunks) == n, len(index.chunks)
        asked.write_text(json.dumps(questions))
        print(f"  built {n:,} chunks in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return notes, cache, json.loads(asked.read_text())


class Client:
    """A raw-lines MCP client of `demo_rag.py --mcp`."""

    def __init__(self, args: list, env: dict):
        self.p = subprocess.Popen([sys.executable, str(ROOT / "demo_rag.py"), "--mcp", *map(str, args)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.id = 0

    def request(self, method: str, params: dict) -> dict:
        self.id += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}).encode()
                           + b"\n")
        self.p.stdin.flush()
        while "id" not in (reply := json.loads(self.p.stdout.readline())):
            pass
        return reply

    def search(self, query: str) -> tuple[float, dict]:
        t0 = time.perf_counter()
        reply = self.request("tools/call", {"name": "search_notes", "arguments": {"query": query}})
        return time.perf_counter() - t0, reply["result"]

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=60)


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95))


def measure(n: int, work: Path, calls: int, runs: int) -> dict:
    with FakeOllama(dim=DIM) as server:
        notes, cache, questions = built(work, n, server)
        env = {**os.environ, "OLLAMA_HOST": server.url}
        env.pop("PYTHONUNBUFFERED", None)
        args = ["--notes", notes, "--cache", cache]
        c = Client(args, env)
        c.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "bench", "version": "1"}})
        first, result = c.search(questions[0])
        assert not result["isError"] and result["structuredContent"]["found"], result
        times, found = [], 0
        for i in range(calls):
            took, result = c.search(questions[1 + i % (len(questions) - 1)])
            times.append(took)
            found += result["structuredContent"]["found"]
        c.close()
        cli = []
        for q in questions[1:runs + 1]:
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, str(ROOT / "demo_rag.py"), *map(str, args), "--retrieve-only",
                                  "--json", q], capture_output=True, text=True, env=env)
            cli.append(time.perf_counter() - t0)
            assert out.returncode == 0 and json.loads(out.stdout)["found"], out.stderr
    return {"chunks": n, "first": first, "median": statistics.median(times), "p95": p95(times),
            "found": found / calls, "cli_median": statistics.median(cli), "cli_p95": p95(cli), "calls": calls,
            "runs": runs}


def in_process(work: Path, n: int, server: FakeOllama) -> tuple[rag.McpServer, list[str]]:
    """An MCP server in this process on the vault of `n` chunks, its index opened by a first
    search; and the vault's questions."""
    notes, cache, questions = built(work, n, server)
    os.environ["OLLAMA_HOST"] = server.url
    m = rag.McpServer(argparse.Namespace(rebuild=False, progress_seconds=10, timeout=300),
                      rag.Settings(notes_dir=notes, cache_dir=cache), rag.ollama_client(), open(os.devnull, "wb"))
    m.call_tool({"name": "search_notes", "arguments": {"query": questions[0]}})
    return m, questions


def parts(n: int, work: Path, calls: int) -> dict:
    """Where a call's time goes, by the server's own steps, timed in this process (the stand-in
    server runs here too): the refresh that finds nothing changed (a stat per note and folder,
    and Ollama asked for the model's build), the question's vector (an HTTP round trip), the
    ranking (search()'s rank over every chunk) and the whole call."""
    with FakeOllama(dim=DIM) as server:
        m, questions = in_process(work, n, server)
        s, client = m.settings, m.client
        took: dict[str, list[float]] = {k: [] for k in ("refresh", "build", "embed_query", "rank", "call")}
        for i in range(calls):
            q = questions[1 + i % (len(questions) - 1)]
            t0 = time.perf_counter()
            m.refresh(None)
            t1 = time.perf_counter()
            rag.model_digest(client, s.embed_model)
            t2 = time.perf_counter()
            qvec = rag.embed_query(client, q, s)
            t3 = time.perf_counter()
            rag.rank(m.index, q, qvec, s)
            t4 = time.perf_counter()
            m.call_tool({"name": "search_notes", "arguments": {"query": q}})
            t5 = time.perf_counter()
            for k, v in zip(took, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                took[k].append(v)
    return {k: statistics.median(v) for k, v in took.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[5000, 50000])
    p.add_argument("--calls", type=int, default=200, help="search_notes calls after the first")
    p.add_argument("--runs", type=int, default=10, help="command-line runs")
    p.add_argument("--work", type=Path, default=Path("/tmp/demo_rag-bench-mcp"), help="where the vaults are kept")
    a = p.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} cores ({platform.processor() or platform.machine()}), Python "
          f"{platform.python_version()}, NumPy {np.__version__}; embedder: the tests' hashed one, {DIM} dims, "
          "behind tests/ollama_server.py")
    print("| chunks | first call | search_notes median | p95 | CLI run median | p95 | median speed-up |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in a.sizes:
        load = os.getloadavg()[0]
        r = measure(n, a.work, a.calls, a.runs)
        print(f"| {n:,} | {r['first'] * 1000:.0f} ms | {r['median'] * 1000:.1f} ms | {r['p95'] * 1000:.1f} ms "
              f"| {r['cli_median'] * 1000:.0f} ms | {r['cli_p95'] * 1000:.0f} ms "
              f"| {r['cli_median'] / r['median']:.0f}× |", flush=True)
        print(f"  ({r['calls']} calls, {r['found']:.0%} found; {r['runs']} command-line runs; load average "
              f"{load:.1f} before, {os.getloadavg()[0]:.1f} after)", flush=True)
    print("\nwhere a call goes, medians of as many calls, in-process (see parts()):")
    print("| chunks | refresh, nothing changed | of it: the model's build asked | the question's vector | "
          "ranking | whole call |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in a.sizes:
        t = {k: v * 1000 for k, v in parts(n, a.work, min(a.calls, 50)).items()}
        print(f"| {n:,} | {t['refresh']:.1f} ms | {t['build']:.1f} ms | {t['embed_query']:.1f} ms "
              f"| {t['rank']:.1f} ms | {t['call']:.1f} ms |", flush=True)


if __name__ == "__main__":
    main()
