"""A small, deterministic stand-in for the parts of Ollama's HTTP API demo_rag uses.

The tests run the real `ollama` client against it, over real HTTP on 127.0.0.1:
  POST /api/embed   {"model", "input"}        -> {"embeddings": [[...], ...]}
  POST /api/chat    {"model", "messages", "stream", ...} -> NDJSON stream (or one object)
  GET  /api/tags                               -> {"models": [...]}
Unknown models answer 404 {"error": "model \"x\" not found, try pulling it first"}.

Embeddings are a hashed bag of words and CJK bigrams: texts that share words get
similar vectors, so rankings are predictable. Every request is recorded in
`server.requests` for the tests to assert on.
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

DIM = 256
STOPWORDS = {"the", "a", "an", "is", "are", "what", "how", "do", "i", "of", "to", "in", "and",
             "it", "my", "does", "which", "for", "with", "on", "at", "by", "why", "when", "much"}


def hashed_vector(text: str, dim: int = DIM) -> list[float]:
    """Bag of words (Latin) and bigrams (CJK), each word hashed into one of `dim` slots."""
    v = np.zeros(dim)
    lowered = text.lower()
    words = [w for w in re.findall(r"[a-z0-9]+", lowered) if w not in STOPWORDS]
    for run in re.findall(r"[\u4e00-\u9fff]+", lowered):
        words.extend(run[i:i + 2] for i in range(len(run) - 1))
    for w in words:
        h = int(hashlib.md5(w.encode()).hexdigest(), 16)
        v[h % dim] += 1.0 if (h >> 64) & 1 else -1.0
    if not v.any():
        v[0] = 1.0
    return (v / np.linalg.norm(v)).tolist()


def random_vector(text: str, dim: int = DIM) -> list[float]:
    """A deterministic vector that carries no meaning at all: the weakest embedder."""
    seed = int(hashlib.md5(text.encode()).hexdigest()[:8], 16)
    return np.random.default_rng(seed).standard_normal(dim).tolist()


class FakeOllama:
    """Serve on 127.0.0.1 in a thread; use as a context manager."""

    def __init__(self, models=("qwen3-embedding:0.6b", "qwen3:0.6b", "thinker:1b", "plain:1b"), embed="hash",
                 embed_delay=0.0, dim=DIM, answer_repeat=1, chat_delay=0.0, hold_at=None, fail_after=None):
        self.models = set(models)
        self.embed = embed                 # "hash" or "random"
        self.embed_delay = embed_delay     # seconds per embed request (for Ctrl-C tests)
        self.dim = dim
        self.answer_repeat = answer_repeat  # >1: long answers, to fill a conversation's memory
        self.chat_delay = chat_delay        # seconds before a streamed answer's last part
        self.requests: list[dict] = []
        # Interrupting a build at a known point, without sleeping: the hold_at-th embed request
        # (counted from 1) and every later one wait until release(); wait_for_embeds(n) returns
        # once n embed requests have arrived. After fail_after embed requests, the rest fail (500).
        self.hold_at, self.fail_after = hold_at, fail_after
        self.embed_calls = 0
        self.embed_seen = threading.Condition()
        self.gate = threading.Event()
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def of(self, path: str) -> list[dict]:
        """The recorded request bodies sent to one endpoint."""
        return [r["body"] for r in self.requests if r["path"] == path]

    def wait_for_embeds(self, n: int, timeout: float = 30) -> None:
        """Block until n embed requests have arrived (AssertionError after `timeout` seconds)."""
        with self.embed_seen:
            assert self.embed_seen.wait_for(lambda: self.embed_calls >= n, timeout), \
                f"only {self.embed_calls} of {n} embed requests arrived"

    def release(self) -> None:
        """Let held embed requests (hold_at) go on."""
        self.gate.set()

    def count_embed(self) -> int:
        with self.embed_seen:
            self.embed_calls += 1
            self.embed_seen.notify_all()
            return self.embed_calls

    def embedded_texts(self) -> list[str]:
        return [t for body in self.of("/api/embed") for t in
                ([body["input"]] if isinstance(body["input"], str) else body["input"])]

    # -- replies ------------------------------------------------------------
    def embed_reply(self, body):
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        if self.embed_delay:
            time.sleep(self.embed_delay)
        make = random_vector if self.embed == "random" else hashed_vector
        return {"model": body["model"], "embeddings": [make(t, self.dim) for t in texts]}

    def chat_text(self, body) -> str:
        messages = body["messages"]
        last = messages[-1]["content"]
        if messages[0]["content"].startswith("Rewrite"):
            # A standalone query: the previous question's topic words + the new question.
            prev = re.findall(r"^Q: (.*)$", last, re.MULTILINE)
            question = last.rsplit("Last question:", 1)[-1].strip()
            return f"{prev[-1] if prev else ''} {question}".strip()
        source = re.search(r"^\[1\] .*\n(.+)$", last, re.MULTILINE)
        first = source.group(1).strip() if source else "nothing"
        text = " ".join([f"According to the notes, {first} [1]"] * self.answer_repeat)
        if body["model"].startswith("thinker"):
            text = "<think>let me think about the sources</think>\n\n" + text
        return text

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def send_json(self, status, obj, ndjson=None):
                data = (json.dumps(obj) + "\n").encode() if ndjson is None else \
                    "".join(json.dumps(o) + "\n" for o in ndjson).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-ndjson" if ndjson else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")   # so that stopping the server really stops it
                self.close_connection = True
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                with server.lock:
                    server.requests.append({"path": self.path, "body": None})
                if self.path == "/api/tags":
                    self.send_json(200, {"models": [{"name": m, "model": m} for m in sorted(server.models)]})
                else:
                    self.send_json(404, {"error": "not found"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server.lock:
                    server.requests.append({"path": self.path, "body": body})
                model = body.get("model", "")
                if self.path not in ("/api/embed", "/api/chat"):
                    return self.send_json(404, {"error": "not found"})
                if model not in server.models:
                    return self.send_json(404, {"error": f'model "{model}" not found, try pulling it first'})
                if self.path == "/api/embed":
                    n = server.count_embed()
                    if server.hold_at is not None and n >= server.hold_at:
                        server.gate.wait(60)
                    if server.fail_after is not None and n > server.fail_after:
                        return self.send_json(500, {"error": "llama runner process has terminated"})
                    return self.send_json(200, server.embed_reply(body))
                if model.startswith("plain") and "think" in body:      # a model without thinking
                    return self.send_json(400, {"error": f'"{model}" does not support thinking'})
                text = server.chat_text(body)
                if not body.get("stream", True):
                    return self.send_json(200, {"model": model, "message": {"role": "assistant", "content": text},
                                                "done": True})
                words = re.findall(r"\S+\s*|\s+", text)
                parts = [{"model": model, "message": {"role": "assistant", "content": w}, "done": False}
                         for w in words]
                parts.append({"model": model, "message": {"role": "assistant", "content": ""},
                              "done": True, "done_reason": "stop"})
                if server.chat_delay:              # stream slowly: all but the end, a pause, the end
                    return self.send_slowly(parts)
                self.send_json(200, None, ndjson=parts)

            def send_slowly(self, parts):
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.close_connection = True
                self.end_headers()
                for n, part in enumerate(parts):
                    if n == len(parts) - 1:
                        time.sleep(server.chat_delay)
                    data = (json.dumps(part) + "\n").encode()
                    try:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                    except OSError:                  # the client went away mid-answer
                        return
                self.wfile.write(b"0\r\n\r\n")

        return Handler


if __name__ == "__main__":  # by hand: python tests/ollama_server.py [hash|random]
    import sys
    with FakeOllama(embed=sys.argv[1] if len(sys.argv) > 1 else "hash") as s:
        print(f"OLLAMA_HOST={s.url}", flush=True)
        threading.Event().wait()
