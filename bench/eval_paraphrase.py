#!/usr/bin/env python3
"""Run demo_rag.py --eval on the paraphrase set (bench/paraphrase-eval.jsonl) for one embedder.

The set's questions are about the Ollama documentation, which is not part of this
project: pass the folder that holds it. The embedder is served by the shared
stand-in for Ollama (ollama_standin.py), started here on a free port and stopped
after; the index is cached in a private folder so the project's cache is untouched.

    python bench/eval_paraphrase.py ../shared/data/ollama-docs --embedder minilm
    python bench/eval_paraphrase.py ../shared/data/ollama-docs --embedder e5 -- --min-score 0.2

Arguments after "--" go to demo_rag.py unchanged. Numbers are for the stand-in's
embedder (all-MiniLM-L6-v2 or multilingual-e5-small), not for qwen3-embedding.
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
EVAL_SET = HERE / "paraphrase-eval.jsonl"
STANDIN = Path(os.environ.get("STANDIN", PROJECT.parent / "shared" / "tools" / "ollama_standin.py"))
# name served by the stand-in, and the flags demo_rag.py needs for it
EMBEDDERS = {
    "minilm": ("all-minilm", []),
    "e5": ("multilingual-e5-small", ["--query-instruction", "query: {query}"]),
    "hash": ("hashed", ["--query-instruction", ""]),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the stand-in exited early (code {proc.returncode})")
        try:
            urllib.request.urlopen(url + "/api/version", timeout=2).read()
            return
        except OSError:
            time.sleep(0.3)
    raise SystemExit("the stand-in did not answer within two minutes")


@contextmanager
def standin(embedder: str, model: str):
    """Run the shared stand-in on a free port, embedding with `embedder` (minilm, e5, hash)
    under the name `model` (and qwen3:0.6b for chat); yield its URL, stop it after."""
    port = free_port()
    env = dict(os.environ, STANDIN_PORT=str(port), STANDIN_EMBED=embedder, STANDIN_MODELS=f"{model},qwen3:0.6b")
    server = subprocess.Popen([sys.executable, str(STANDIN)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, server)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("corpus", type=Path, help="the Ollama documentation folder")
    p.add_argument("--embedder", choices=sorted(EMBEDDERS), default="minilm")
    p.add_argument("--eval-set", type=Path, default=EVAL_SET)
    p.add_argument("--cache", type=Path, help="cache folder (default: a new temporary one)")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, rest = p.parse_args(argv[:cut]), argv[cut + 1:]     # after "--": flags for demo_rag.py
    if not args.corpus.is_dir():
        p.error(f"corpus folder not found: {args.corpus}")
    if not STANDIN.is_file():
        p.error(f"stand-in not found: {STANDIN} (set STANDIN=path)")
    model, flags = EMBEDDERS[args.embedder]
    with tempfile.TemporaryDirectory(prefix="eval-paraphrase-") as tmp, standin(args.embedder, model) as url:
        cmd = [sys.executable, str(PROJECT / "demo_rag.py"), "--notes", str(args.corpus),
               "--cache", str(args.cache or Path(tmp)), "--embed-model", model, *flags,
               "--eval", str(args.eval_set), *rest]
        print(f"embedder: {args.embedder} (stand-in, served as {model!r}); corpus: {args.corpus}", flush=True)
        return subprocess.run(cmd, env=dict(os.environ, OLLAMA_HOST=url)).returncode


if __name__ == "__main__":
    sys.exit(main())
