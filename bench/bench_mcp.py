"""Benchmark --mcp: a search_notes call against search() in this process, on the same index, side
by side in one run; a call while ask_notes streams an answer; and a command-line run per question.

Run from the project root (offline; the tests' stand-in server answers the question's vector):

    python bench/bench_mcp.py                         # 5,000 and 50,000 chunks
    python bench/bench_mcp.py --sizes 5000 --calls 50 # a quicker look
    python bench/bench_mcp.py --interleave ../before .  # two checkouts' servers, pairs in turn

The notes are synthetic (notes of 10 sections of ~1,100 characters, one chunk each at the
default chunk size, drawn from a vocabulary of 20,000 made-up words) and their index is built
once, in this process, with the tests' hashed embedder at 1,024 dimensions (tests/ollama_server.py,
hashed_vector), then kept in --work for the next run. The server is `demo_rag.py --mcp` as a
subprocess, spoken to in raw JSON lines over its stdin and stdout; a call's time is the
client's, from writing the request to reading the reply. Before each pair, as an agent thinks
between calls, the client waits --pause seconds, then times search() in this process on the same
index and question, then (APART seconds later) the call. The questions are 4 words of one section
each, so that every one finds something. Then ask_notes is asked, its answer streaming a piece
every --piece-ms (the stand-in's chat), and a quarter as many pairs are timed while it streams;
the answer is then cancelled. The command line is `demo_rag.py --retrieve-only --json QUESTION`,
start to exit, against the same stand-in server.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "tests"))
import demo_rag as rag  # noqa: E402
from ollama_server import FakeOllama, hashed_vector  # noqa: E402

DIM = 1024                                # qwen3-embedding:0.6b's vector size
VOCABULARY = 20_000
APART = 0.15                              # seconds between search() and the call of a pair


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

    def __init__(self, args: list, env: dict, run: list | None = None, stderr=subprocess.DEVNULL):
        """`run`: what starts the server, instead of this Python running demo_rag.py (--mcp and
        `args` follow it)."""
        self.p = subprocess.Popen([*(run or [sys.executable, str(ROOT / "demo_rag.py")]), "--mcp",
                                   *map(str, args)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=stderr, env=env)
        self.id = 0
        self.sent: list[float] = []       # when each search was sent (perf_counter)

    def send(self, message: dict) -> None:
        self.p.stdin.write(json.dumps(message).encode() + b"\n")
        self.p.stdin.flush()

    def request(self, method: str, params: dict) -> dict:
        self.id += 1
        self.send({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})
        while (reply := json.loads(self.p.stdout.readline())).get("id") != self.id:
            pass
        return reply

    def search(self, query: str) -> tuple[float, dict]:
        t0 = time.perf_counter()
        self.sent.append(t0)
        reply = self.request("tools/call", {"name": "search_notes", "arguments": {"query": query}})
        return time.perf_counter() - t0, reply["result"]

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=60)


def p90(values: list[float]) -> float:
    return float(np.percentile(values, 90))


def slow_answer(piece_ms: float, stop: threading.Event):
    """An answer that streams a piece every piece_ms until `stop` (words that differ, so that
    the loop check does not cut it short)."""
    yield "The answer [1] "
    for n in itertools.count():
        if stop.wait(piece_ms / 1000):
            return
        yield f"then {n} "


def side_by_side(c: Client, client, index, settings, questions: list[str], calls: int, pause: float
                 ) -> tuple[list[float], list[float], float]:
    """`calls` pairs: search() in this process, then the same question as a call; and the share
    of calls that found something. The two are APART seconds apart, so that neither shares the
    cores with the other's NumPy threads, which spin a while after their work before they sleep."""
    inside, over, found = [], [], 0
    for i in range(calls):
        q = questions[1 + i % (len(questions) - 1)]
        time.sleep(pause)
        t0 = time.perf_counter()
        rag.search(client, index, q, settings)
        inside.append(time.perf_counter() - t0)
        time.sleep(APART)
        took, result = c.search(q)
        over.append(took)
        found += result["structuredContent"]["found"]
    return inside, over, found / calls


class StandIn:
    """The shared Ollama stand-in (a script, --standin) as a process on a free port: hashed
    vectors of DIM numbers, and ask_notes' answer a scripted text of ~3,500 characters streamed
    8 characters a piece, a piece every piece_ms. Its vectors are not the tests' hashed ones, so
    its questions find by keywords, but the work of a search is the same."""

    def __init__(self, script: Path, piece_ms: float, question: str, work: Path):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        answers = work / "standin-answers.json"
        answers.write_text(json.dumps({question: "".join(f"step {i}, " for i in range(400))}))
        env = {**os.environ, "STANDIN_PORT": str(port), "STANDIN_EMBED": "hash", "STANDIN_DIM": str(DIM),
               "STANDIN_PIECE_MS": str(piece_ms), "STANDIN_SCRIPT": str(answers)}
        self.p = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(self.url + "/api/tags", timeout=1).read()
                return
            time.sleep(0.1)
        raise RuntimeError(f"the stand-in {script} did not start")

    def close(self) -> None:
        self.p.terminate()
        self.p.wait(timeout=30)


def measure(n: int, work: Path, calls: int, runs: int, pause: float, piece_ms: float,
            standin: Path | None = None) -> dict:
    """Side by side at n chunks: search() in this process and the call; the same while ask_notes
    streams; a first call and command-line runs. Against the tests' stand-in (FakeOllama), or
    the shared one when `standin` names its script."""
    with FakeOllama(dim=DIM) as fake:
        notes, cache, questions = built(work, n, fake)
        server = StandIn(standin, piece_ms, questions[0], work) if standin else None
        url = server.url if server else fake.url
        env = {**os.environ, "OLLAMA_HOST": url}
        env.pop("PYTHONUNBUFFERED", None)
        os.environ["OLLAMA_HOST"] = url
        args = ["--notes", notes, "--cache", cache]
        settings = rag.Settings(notes_dir=notes, cache_dir=cache)
        client = rag.ollama_client()
        index, _ = rag.open_index(settings, client)
        assert index.complete and len(index.chunks) == n
        c = Client(args, env)
        c.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "bench", "version": "1"}})
        first, result = c.search(questions[0])
        assert not result["isError"] and (standin or result["structuredContent"]["found"]), result
        inside, over, found = side_by_side(c, client, index, settings, questions, calls, pause)
        stop = threading.Event()
        fake.answer = slow_answer(piece_ms, stop)
        c.send({"jsonrpc": "2.0", "id": "ask", "method": "tools/call",
                "params": {"name": "ask_notes", "arguments": {"question": questions[0]}}})
        if server:
            time.sleep(1)                 # the answer starts streaming (its ~440 pieces take longer)
        else:
            fake.wait_for(lambda: any(r["path"] == "/api/chat" for r in fake.requests))
        chat = next((r for r in fake.requests if r["path"] == "/api/chat"), {})
        asking_inside, asking, _ = side_by_side(c, client, index, settings, questions, calls // 4, pause)
        streamed = not chat.get("done", True)
        c.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "ask"}})
        if chat:
            fake.wait_for(lambda: chat["done"])
        stop.set()
        c.close()
        cli = []
        for q in questions[1:runs + 1]:
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, str(ROOT / "demo_rag.py"), *map(str, args), "--retrieve-only",
                                  "--json", q], capture_output=True, text=True, env=env)
            cli.append(time.perf_counter() - t0)
            assert out.returncode == 0 and (standin or json.loads(out.stdout)["found"]), out.stderr
        if server:
            server.close()
    med = statistics.median
    return {"chunks": n, "first": first, "search": med(inside), "search_p90": p90(inside),
            "call": med(over), "call_p90": p90(over), "found": found, "asking": med(asking),
            "asking_p90": p90(asking), "asking_search": med(asking_inside),
            "streamed": streamed if chat else "not seen (the shared stand-in)",
            "gone": chat.get("gone", "not seen"), "cli": med(cli), "calls": calls, "runs": runs}


def call(m: rag.McpServer, query: str) -> dict:
    """A search_notes call to an in-process server, as its main thread serves one."""
    return m.call_tool({"name": "search_notes", "arguments": {"query": query}}, threading.Event())


def in_process(work: Path, n: int, server: FakeOllama) -> tuple[rag.McpServer, list[str]]:
    """An MCP server in this process on the vault of `n` chunks, its index opened by a first
    search; and the vault's questions."""
    notes, cache, questions = built(work, n, server)
    os.environ["OLLAMA_HOST"] = server.url
    m = rag.McpServer(argparse.Namespace(rebuild=False, progress_seconds=10, timeout=300, fresh_seconds=None),
                      rag.Settings(notes_dir=notes, cache_dir=cache), rag.ollama_client(), open(os.devnull, "wb"))
    call(m, questions[0])
    return m, questions


def parts(n: int, work: Path, calls: int) -> dict:
    """Where a call's time goes, by the server's own steps, timed in this process (the stand-in
    server runs here too): the look that finds nothing changed (a stat per note and folder, and
    Ollama asked for the model's build), which a call no longer waits for but the server makes
    while idle; the question's vector (an HTTP round trip), the ranking (search()'s rank over
    every chunk) and the whole call."""
    with FakeOllama(dim=DIM) as server:
        m, questions = in_process(work, n, server)
        s, client, held = m.settings, m.client, m.held
        took: dict[str, list[float]] = {k: [] for k in ("look", "build", "embed_query", "rank", "call")}
        for i in range(calls):
            q = questions[1 + i % (len(questions) - 1)]
            t0 = time.perf_counter()
            assert held.still_current()
            t1 = time.perf_counter()
            rag.model_digest(client, s.embed_model)
            t2 = time.perf_counter()
            qvec = rag.embed_query(client, q, s)
            t3 = time.perf_counter()
            rag.rank(held.index, q, qvec, s)
            t4 = time.perf_counter()
            held.looked = time.monotonic()          # as a look made while idle leaves it
            call(m, q)
            t5 = time.perf_counter()
            for k, v in zip(took, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                took[k].append(v)
    return {"notes": len(held.watched[1]), **{k: statistics.median(v) for k, v in took.items()}}


def interleaved(n: int, work: Path, calls: int, pause: float, checkouts: list[Path]) -> list[dict]:
    """The servers of several checkouts (a path each: a `git worktree` of another commit, say), on
    the same index, their pairs taken in turn: --pause, search() here, APART, the call to the
    first; the same for the second; and so on. On a machine shared with other work, whose load
    moves from minute to minute, this compares them under the same load, which runs one after
    the other do not."""
    with FakeOllama(dim=DIM) as fake:
        notes, cache, questions = built(work, n, fake)
        env = {**os.environ, "OLLAMA_HOST": fake.url}
        env.pop("PYTHONUNBUFFERED", None)
        os.environ["OLLAMA_HOST"] = fake.url
        settings = rag.Settings(notes_dir=notes, cache_dir=cache)
        client = rag.ollama_client()
        index, _ = rag.open_index(settings, client)
        servers = [Client(["--notes", notes, "--cache", cache], env,
                          run=[sys.executable, str(c / "demo_rag.py")]) for c in checkouts]
        inside: list[list[float]] = [[] for _ in servers]
        over: list[list[float]] = [[] for _ in servers]
        for c in servers:
            c.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": "bench", "version": "1"}})
            c.search(questions[0])
        for i in range(calls):
            for c, here, there in zip(servers, inside, over):
                one, two, _ = side_by_side(c, client, index, settings, questions[i % (len(questions) - 1):], 1,
                                           pause)
                here += one
                there += two
        for c in servers:
            c.close()
    med = statistics.median
    return [{"checkout": str(c), "search": med(a), "search_p90": p90(a), "call": med(b), "call_p90": p90(b)}
            for c, a, b in zip(checkouts, inside, over)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[5000, 50000])
    p.add_argument("--calls", type=int, default=200, help="search_notes calls after the first")
    p.add_argument("--runs", type=int, default=10, help="command-line runs")
    p.add_argument("--pause", type=float, default=0.2, help="seconds the client thinks before each pair")
    p.add_argument("--piece-ms", type=float, default=20, help="ms between the pieces of a streamed answer")
    p.add_argument("--standin", type=Path, help="the shared Ollama stand-in's script (ollama_standin.py) to "
                   "measure against, instead of the tests' FakeOllama")
    p.add_argument("--work", type=Path, default=Path("/tmp/demo_rag-bench-mcp"), help="where the vaults are kept")
    p.add_argument("--interleave", type=Path, nargs="+", metavar="CHECKOUT", help="only compare the servers of "
                   "these checkouts (folders holding a demo_rag.py), their pairs taken in turn (see interleaved())")
    a = p.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} cores ({platform.processor() or platform.machine()}), Python "
          f"{platform.python_version()}, NumPy {np.__version__}; embedder: the tests' hashed one, {DIM} dims, "
          f"behind {a.standin or 'tests/ollama_server.py'}; chat: a stand-in answer, a piece every "
          f"{a.piece_ms:g} ms; "
          f"{a.pause:g} s between calls")
    if a.interleave:
        print("| chunks | checkout | search() median | p90 | call median | p90 | call / search() |\n"
              "|---:|---|---:|---:|---:|---:|---:|")
        for n in a.sizes:
            load = os.getloadavg()[0]
            for r in interleaved(n, a.work, a.calls, a.pause, a.interleave):
                print(f"| {n:,} | {r['checkout']} | {r['search'] * 1000:.1f} ms | {r['search_p90'] * 1000:.1f} ms "
                      f"| {r['call'] * 1000:.1f} ms | {r['call_p90'] * 1000:.1f} ms | {r['call'] / r['search']:.2f}× |")
            print(f"  ({a.calls} pairs each; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after)",
                  flush=True)
        return
    print("| chunks | search() median | p90 | call median | p90 | call / search() | call while ask_notes "
          "streams: median | p90 | first call | CLI run median |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in a.sizes:
        load = os.getloadavg()[0]
        r = measure(n, a.work, a.calls, a.runs, a.pause, a.piece_ms, a.standin)
        ms = {k: v * 1000 for k, v in r.items() if isinstance(v, float)}
        print(f"| {n:,} | {ms['search']:.1f} ms | {ms['search_p90']:.1f} ms | {ms['call']:.1f} ms "
              f"| {ms['call_p90']:.1f} ms | {r['call'] / r['search']:.2f}× | {ms['asking']:.1f} ms "
              f"| {ms['asking_p90']:.1f} ms | {ms['first']:.0f} ms | {ms['cli']:.0f} ms |", flush=True)
        print(f"  ({r['calls']} calls, {r['found']:.0%} found; {r['calls'] // 4} during the answer, "
              f"search() {ms['asking_search']:.1f} ms then; the answer streamed throughout: {r['streamed']}, "
              f"its stream closed by the cancel: {r['gone']}; {r['runs']} command-line runs; load average "
              f"{load:.1f} before, {os.getloadavg()[0]:.1f} after)", flush=True)
    print("\nwhere a call goes, medians of as many calls, in-process (see parts()):")
    print("| chunks | notes | look, nothing changed (idle) | of it: the model's build asked | the question's "
          "vector | ranking | whole call |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in a.sizes:
        t = parts(n, a.work, min(a.calls, 50))
        ms = {k: v * 1000 for k, v in t.items() if k != "notes"}
        print(f"| {n:,} | {t['notes']:,} | {ms['look']:.1f} ms | {ms['build']:.1f} ms | {ms['embed_query']:.1f} ms "
              f"| {ms['rank']:.1f} ms | {ms['call']:.1f} ms |", flush=True)


if __name__ == "__main__":
    main()
