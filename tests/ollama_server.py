"""A small, deterministic stand-in for the parts of Ollama's HTTP API demo_rag uses.

The tests run the real `ollama` client against it, over real HTTP on 127.0.0.1:
  POST /api/embed   {"model", "input"}        -> {"embeddings": [[...], ...]}
  POST /api/chat    {"model", "messages", "stream", "options", "format"?, ...}
                                               -> NDJSON stream (or one object), the last part with
                                                  prompt_eval_count, eval_count and their durations (ns)
  POST /api/show    {"model"}                  -> {"model_info": {"general.architecture": arch,
                                                   "<arch>.context_length": N}, "details", ...}
  GET  /api/tags                               -> {"models": [{"name", "model", "digest"}, ...]}: the digest
                                                  Ollama lists is a hash of the model's manifest
                                                  (manifest/manifest.go); server.digest(model) gives it,
                                                  server.digests[model] = "..." changes it
  GET  /api/ps                                 -> {"models": [{"name", "context_length"}]}: loaded chat models
"opener" models refuse the `think` field and report a template that opens the think
block in the prompt: their replies hold only the closing </think>. show=False makes
/api/show answer 404, as an Ollama too old for it does.
Unknown models answer 404 {"error": "model \"x\" not found, try pulling it first"}; a path the
server lacks answers as Ollama's router (gin) does: 404 with the plain text "404 page not found".

The judge model "bespoke-minicheck" (a MiniCheck model: asked "Document: ...\nClaim: ...", it
answers Yes or No, as its model card in Ollama's library says) answers Yes when every word of
four letters or more of the claim is in the document, else No.

Embeddings are a hashed bag of words and CJK bigrams: texts that share words get
similar vectors, so rankings are predictable. Every request is recorded in
`server.requests` ({"path", "body", "done", "held", ...}); `server.wait_for(pred)`
waits, without sleeping, until what the server received makes `pred()` true.

Chat models are loaded as Ollama's scheduler decides (server/sched.go, needsReload, which
compares the runner options NumCtx among them): on first use, and again whenever a request's
num_ctx (capped at the model's own limit, as Ollama caps it) differs from the one the model was
loaded with. `server.loads` lists each load as {"model", "num_ctx", "reason"}. A chat request
with no messages only loads the model and answers done_reason "load", as Ollama's ChatHandler
does; it is recorded under the path "/api/chat#load", so "/api/chat" holds only real questions.

Like Ollama, a chat prompt longer than the context window loses its start: the
window is options.num_ctx (default DEFAULT_NUM_CTX), capped at the model's own
limit (`context_limits`), and tokens are counted roughly (prompt_tokens()). The
answer is made from what was kept, so a cut prompt gives a visibly worse answer.

Failure switches, all off by default (set them on a running server too):
  errors[path] = (status, message)   every request to path (a POST, or GET /api/tags) answers that status
  stream_error = "message"           a streamed chat sends a 200, one piece, then {"error": message}
  stream_junk = True                 a streamed chat sends a 200, one piece, then the line `<html>oops`
                                     (not JSON), then ends the response properly
  stream_close = True                a streamed chat sends a 200, one piece, then closes the connection
                                     without the final zero-length chunk (the body is cut short)
                                     (stream_error wins over stream_junk, which wins over stream_close;
                                     replies with "stream": false are not affected by the three)
  embed_fail_after = N               embed requests after the first N answer 500
  embed_sizes(256, 128)              the next embed requests answer vectors of these sizes in turn, not
                                     dim's: two servers of different models behind one address
  embed_mangle = "kind"              embed replies (200) that do not fit the request; after the first
  embed_mangle_after = N             N embed requests (default 0: all of them), kind is one of
                                       "half"      half as many vectors as inputs, rounded down (1 input: none)
                                       "one_short" one vector fewer than inputs (the last one missing)
                                       "double"    twice as many: each vector twice in a row
                                       "ragged"    every second vector (the 2nd, 4th...) one number short
                                                   (needs 2 inputs or more to show)
                                       "no_field"  no "embeddings" key at all: {"model": ...} only
                                       "nan"       the first vector's first number is NaN (the bare JSON
                                                   literal NaN, as Python's json.dumps writes it)
                                       "huge"      the first vector's numbers are all 1e308 (a number in
                                                   JSON, too big for float32)
                                     (errors and embed_fail_after win over it; a held reply is mangled too)
  embed_refuse = "text"              an embed request with an input containing it fails whole, as
  embed_refuse_reply = (status, msg) Ollama fails a batch one of whose vectors is not a number:
                                     400 "embedding contains NaN or Inf values" (server/routes.go,
                                     EmbedHandler's normalize()); older versions sent
                                     500 "failed to encode response: json: unsupported value: NaN"
  format_junk = True                 `format` requests get text that is not JSON
  load_error = (status, message)     chat requests with no messages (a preload) answer that status
  absent = {path, ...}               those paths are missing, as in an Ollama too old for them
                                     (show=False is absent={"/api/show"}): the plain-text 404
  redirects[path] = (status, url)    every request to path answers that status (a 3xx) with
                                     Location: url, and an empty body
  hold(path) -> Event                replies to path wait until the test sets the Event: an embed
                                     reply or a GET (/api/ps) entirely, a streamed chat before its last part
  answer = "text" or pieces          a streamed chat's answer is this text, one part per word, or these
                                     pieces, one part each, taken as they go out (so an endless iterator
                                     is an answer that never ends)
  ignore_num_predict = True          streamed answers run past options.num_predict (Ollama stops at it
                                     and says done_reason "length"), as a server that ignores it does
  endless_line = N                   a streamed chat sends one piece, then a line of N bytes (no line
                                     break until its end), 64 KB at a time
A streamed chat's record counts what went out: "sent_parts", "sent_bytes", and "gone" (True when the
client closed the connection before the reply's end: it stopped reading).
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

DIM = 256
DEFAULT_NUM_CTX = 4096                     # what Ollama uses when options.num_ctx is not given
HOLD_TIMEOUT = 60                          # a held reply goes out anyway after this (a test forgot)
STOPWORDS = {"the", "a", "an", "is", "are", "what", "how", "do", "i", "of", "to", "in", "and",
             "it", "my", "does", "which", "for", "with", "on", "at", "by", "why", "when", "much"}
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
MODELS = ("qwen3-embedding:0.6b", "qwen3:0.6b", "thinker:1b", "halfthink:1b", "plain:1b",
          "bespoke-minicheck")
# A model's own maximum context (Ollama's "<arch>.context_length"); num_ctx above it is capped.
CONTEXT_LIMITS = {"qwen3:0.6b": 40960, "qwen3-embedding:0.6b": 32768}
DEFAULT_CONTEXT_LIMIT = 32768
# The kinds of embed_mangle (see the module docstring).
EMBED_MANGLES = ("half", "one_short", "double", "ragged", "no_field", "nan", "huge")


def hashed_vector(text: str, dim: int = DIM, cjk: bool = True) -> list[float]:
    """Bag of words (Latin) and bigrams (CJK), each word hashed into one of `dim` slots.
    cjk=False reads no CJK at all, like an English-only embedder: a text without Latin words
    gets the same vector as every other (the cosine then says nothing)."""
    v = np.zeros(dim)
    lowered = text.lower()
    words = [w for w in re.findall(r"[a-z0-9]+", lowered) if w not in STOPWORDS]
    for run in re.findall(r"[\u4e00-\u9fff]+", lowered) if cjk else []:
        words.extend(run[i:i + 2] for i in range(len(run) - 1))
    for w in words:
        h = int(hashlib.md5(w.encode()).hexdigest(), 16)
        v[h % dim] += 1.0 if (h >> 64) & 1 else -1.0
    if not v.any():
        v[0] = 1.0
    return (v / np.linalg.norm(v)).tolist()


def crowded_vector(text: str, dim: int = DIM) -> list[float]:
    """hashed_vector() plus one direction every text shares, so that any two texts' cosine
    sits near 0.8, as multilingual-e5's do (MiniLM's sit near 0.1, the hashed ones near 0)."""
    v = np.array(hashed_vector(text, dim)) * 0.45
    v[-1] += 0.9
    return (v / np.linalg.norm(v)).tolist()


def random_vector(text: str, dim: int = DIM) -> list[float]:
    """A deterministic vector that carries no meaning at all: the weakest embedder."""
    seed = int(hashlib.md5(text.encode()).hexdigest()[:8], 16)
    return np.random.default_rng(seed).standard_normal(dim).tolist()


def text_tokens(text: str) -> int:
    """A rough token count: one per CJK character, one per 4 other characters."""
    cjk = len(CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


def prompt_tokens(messages: list[dict]) -> int:
    """The tokens a chat prompt takes: its text plus 4 per message (the template's markers)."""
    return sum(text_tokens(m.get("content") or "") + 4 for m in messages)


def cut_from_front(messages: list[dict], limit: int) -> tuple[list[dict], int]:
    """Drop the start of a prompt until it fits in `limit` tokens, as Ollama does.

    Returns the messages that are left (the first one possibly cut short) and their token count.
    """
    kept = [dict(m) for m in messages]
    while kept and prompt_tokens(kept) > limit:
        over = prompt_tokens(kept) - limit
        first = kept[0]["content"] or ""
        if text_tokens(first) + 4 <= over:
            kept.pop(0)                         # the whole message goes
            continue
        lo, hi = 0, len(first)                  # the shortest cut of the front that fits
        while lo < hi:
            mid = (lo + hi) // 2
            if text_tokens(first[mid:]) + 4 + prompt_tokens(kept[1:]) <= limit:
                hi = mid
            else:
                lo = mid + 1
        kept[0]["content"] = first[lo:]
    return kept, prompt_tokens(kept)


def template(model: str) -> str:
    """The chat template /api/show reports: an "opener" opens the think block in the prompt."""
    if model.startswith(("opener", "halfthink")):
        return "{{ .Prompt }}<think>\n"
    return "{{ if .Think }}<think>{{ end }}{{ .Prompt }}" if model.startswith("thinker") else "{{ .Prompt }}"


def capabilities(model: str) -> list[str]:
    if "embed" in model:
        return ["embedding"]
    return ["completion", "thinking"] if model.startswith("thinker") else ["completion"]


def architecture(model: str) -> str:
    """'qwen3:0.6b' -> 'qwen3', 'qwen3-embedding:0.6b' -> 'qwen3' (Ollama reports the base architecture)."""
    return re.sub(r"[^a-z0-9]", "", model.split(":")[0].split("-")[0].lower()) or "llama"


def sample(schema: dict, text: str):
    """A value that matches a JSON schema's type, made from `text` (deterministic)."""
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object" or "properties" in schema:
        return {k: sample(v, text) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [sample(schema.get("items", {"type": "string"}), text)]
    return {"integer": 1, "number": 1.0, "boolean": True, "null": None}.get(kind, text)


class FakeOllama:
    """Serve on 127.0.0.1 in a thread; use as a context manager."""

    def __init__(self, models=MODELS, embed="hash", dim=DIM, answer_repeat=1, context_limits=None,
                 thinkers=("thinker",), half_thinkers=("halfthink", "opener"), show=True,
                 format_reply="question", die_after_embeds=None, hold_at=None, fail_after=None,
                 embed_delay=0.0):
        self.models = set(models)
        self.embed = embed                 # "hash", "random", "latin" (blind to CJK, see hashed_vector) or
                                           # "crowded" (cosines near 0.8, see crowded_vector)
        self.dim = dim
        self.answer_repeat = answer_repeat  # >1: long answers, to fill a conversation's memory
        self.context_limits = {**CONTEXT_LIMITS, **(context_limits or {})}   # model -> its own maximum
        self.thinkers = thinkers            # model name prefixes whose replies hold <think>...</think>
        self.half_thinkers = half_thinkers  # ...whose template opened the block: replies hold only </think>
        self.absent: set[str] = set() if show else {"/api/show"}   # paths this "Ollama" lacks
        self.redirects: dict[str, tuple[int, str]] = {}
        self.show_parameters = "temperature 0.6"   # /api/show's "parameters": the Modelfile's PARAMETER lines
        # Replies to --make-eval's requests (a `format` asking for a question): "question" (valid
        # JSON: a question about the passage's longest word), "junk" (not JSON), or "mixed"
        # (valid, junk, an answer not in the passage, a copied question, in turn).
        self.format_reply = format_reply
        self.die_after_embeds = die_after_embeds   # after this many embed requests, drop every connection
        self.errors: dict[str, tuple[int, str]] = {}
        self.stream_error: str | None = None
        self.stream_junk = False
        self.stream_close = False
        self.answer: str | Iterable[str] | None = None
        self.ignore_num_predict = False
        self.endless_line: int | None = None
        self.embed_mangle: str | None = None   # see EMBED_MANGLES
        self.embed_dims: list[int] = []       # see embed_sizes()
        self.embed_dims_from = 0
        self.embed_mangle_after = 0
        self.embed_refuse: str | None = None
        self.embed_refuse_reply = (400, "embedding contains NaN or Inf values")
        self.format_junk = False
        self.load_error: tuple[int, str] | None = None
        self.loads: list[dict] = []
        self.loaded: dict[str, int] = {}      # chat model -> the num_ctx it is loaded with
        self.holds: dict[str, threading.Event] = {}
        self.hold_after: dict[str, int] = {}
        self.requests: list[dict] = []
        # Builds other than digest()'s: set one to play a re-pulled tag, or another machine's build
        # under the same name.
        self.digests: dict[str, str] = {}
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        # Shorthands for interrupting a build at a known point, without sleeping: the hold_at-th
        # embed request (counted from 1) and every later one wait until release(); after
        # fail_after embed requests, the rest answer 500.
        if hold_at is not None:
            self.hold("/api/embed", after=hold_at - 1)
        self.embed_fail_after = fail_after
        # Seconds each embed request takes, as a real embedder's would: for progress lines that
        # need time to pass and for builds that overlap. Never used to order a test's steps.
        self.embed_delay = embed_delay
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        for event in self.holds.values():   # never leave a handler thread waiting
            event.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def embed_sizes(self, *dims: int) -> None:
        """From the next embed request on, answer vectors of these sizes in turn (see the module docstring)."""
        self.embed_dims, self.embed_dims_from = list(dims), len(self.of("/api/embed"))

    def digest(self, model: str) -> str:
        """The build of a model, as /api/tags lists it: 64 hex digits, as Ollama's are."""
        return self.digests.get(model) or hashlib.sha256(model.encode()).hexdigest()

    # -- what was received ----------------------------------------------------
    def of(self, path: str) -> list[dict]:
        """The recorded request bodies sent to one endpoint."""
        with self.lock:
            return [r["body"] for r in self.requests if r["path"] == path]

    def records(self, path: str) -> list[dict]:
        """The full records for one endpoint: body, done (reply fully sent), held, prompt_eval_count..."""
        with self.lock:
            return [r for r in self.requests if r["path"] == path]

    def wait_for_embeds(self, n: int, timeout: float = 30) -> None:
        """Block until n embed requests have arrived."""
        self.wait_for(lambda: len(self.of("/api/embed")) >= n, timeout)

    def release(self) -> None:
        """Let held embed requests (hold_at) go on."""
        self.holds["/api/embed"].set()

    def embedded_texts(self) -> list[str]:
        return [t for body in self.of("/api/embed") for t in
                ([body["input"]] if isinstance(body["input"], str) else body["input"])]

    def wait_for(self, predicate, timeout: float = 30) -> None:
        """Block until predicate() is true; it is re-checked on every request and reply.

        Raises TimeoutError (with what was received) when it stays false for `timeout` seconds.
        """
        with self.changed:
            if not self.changed.wait_for(lambda: self._check(predicate), timeout):
                paths = [r["path"] for r in self.requests]
                raise TimeoutError(f"waited {timeout}s; the server received {paths}")

    def _check(self, predicate) -> bool:
        self.lock.release()                 # the predicate may call of() / records()
        try:
            return bool(predicate())
        finally:
            self.lock.acquire()

    def _note(self, record: dict, **changes) -> None:
        with self.changed:
            record.update(changes)
            self.changed.notify_all()

    def hold(self, path: str, after: int = 0) -> threading.Event:
        """Make replies to `path` wait until the returned Event is set (see the module docstring);
        the first `after` requests to it are answered as usual."""
        self.holds[path] = threading.Event()
        self.hold_after[path] = after
        return self.holds[path]

    def _wait_if_held(self, path: str, record: dict) -> None:
        event = self.holds.get(path)
        if event is not None and not event.is_set() and record["number"] > self.hold_after[path]:
            self._note(record, held=True)
            event.wait(HOLD_TIMEOUT)

    # -- replies ------------------------------------------------------------
    def embed_reply(self, body, number: int = 1):
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        dim = self.embed_dims[(number - 1 - self.embed_dims_from) % len(self.embed_dims)] if self.embed_dims \
            else self.dim
        if self.embed_delay:
            time.sleep(self.embed_delay)
        make = {"random": random_vector, "latin": lambda t, d: hashed_vector(t, d, cjk=False),
                "crowded": crowded_vector}.get(self.embed, hashed_vector)
        return {"model": body["model"], "embeddings": [make(t, dim) for t in texts],
                "prompt_eval_count": sum(text_tokens(t) for t in texts)}

    def mangle_embeddings(self, reply: dict) -> dict:
        """An embed reply spoilt the embed_mangle way (see the module docstring)."""
        kind, vectors = self.embed_mangle, reply["embeddings"]
        if kind not in EMBED_MANGLES:
            raise ValueError(f"embed_mangle must be one of {EMBED_MANGLES} or None, not {kind!r}")
        if kind == "no_field":
            return {"model": reply["model"]}
        if kind == "half":
            vectors = vectors[:len(vectors) // 2]
        elif kind == "one_short":
            vectors = vectors[:-1]
        elif kind == "double":
            vectors = [v for v in vectors for _ in (0, 1)]
        elif kind == "ragged":
            vectors = [v[:-1] if i % 2 else v for i, v in enumerate(vectors)]
        elif kind == "nan" and vectors:
            vectors = [[float("nan"), *vectors[0][1:]], *vectors[1:]]
        elif kind == "huge" and vectors:
            vectors = [[1e308] * len(vectors[0]), *vectors[1:]]
        return {**reply, "embeddings": vectors}

    def load(self, body) -> None:
        """Load the chat model if Ollama would (see the module docstring)."""
        model, window = body["model"], self.context_window(body)
        with self.lock:
            held = self.loaded.get(model)
            if held != window:
                self.loads.append({"model": model, "num_ctx": window,
                                   "reason": "first use" if held is None else f"num_ctx {held} -> {window}"})
                self.loaded[model] = window

    def context_window(self, body) -> int:
        """num_ctx asked for (or the default), capped at the model's own limit."""
        asked = (body.get("options") or {}).get("num_ctx") or DEFAULT_NUM_CTX
        return min(int(asked), self.context_limits.get(body["model"], DEFAULT_CONTEXT_LIMIT))

    def chat_text(self, body, messages) -> str:
        """The reply, made from the messages that fit in the window."""
        model = body["model"]
        last = messages[-1]["content"] if messages else ""
        if model.startswith("bespoke-minicheck"):
            document, _, claim = last.removeprefix("Document: ").rpartition("\nClaim: ")
            words = set(re.findall(r"\w{4,}", document.lower()))
            return "Yes" if set(re.findall(r"\w{4,}", claim.lower())) <= words else "No"
        if messages and messages[0]["content"].startswith("Rewrite"):
            # A standalone query: the previous question's topic words + the new question.
            prev = re.findall(r"^Q: (.*)$", last, re.MULTILINE)
            question = last.rsplit("Last question:", 1)[-1].strip()
            text = f"{prev[-1] if prev else ''} {question}".strip()
        else:
            source = re.search(r"^\[1\] .*\n(?:> )?(.+)$", last, re.MULTILINE)   # its text, unquoted
            first = source.group(1).strip() if source else "nothing"
            text = " ".join([f"According to the notes, {first} [1]"] * self.answer_repeat)
        if model.startswith(self.thinkers):
            text = "<think>let me think about the sources\nand then\nanswer</think>\n\n" + text
        elif model.startswith(self.half_thinkers):       # "<think>" was in the prompt's template
            text = "let me think about the sources\nand then answer</think>\n\n" + text
        return text

    def chat_reply(self, body) -> tuple[str, dict]:
        """(reply text, the statistics Ollama puts in its final part)."""
        kept, counted = cut_from_front(body["messages"], self.context_window(body))
        text = self.chat_text(body, kept)
        if body.get("format"):
            schema = body["format"] if isinstance(body["format"], dict) else {"type": "object",
                                                                              "properties": {"answer": {}}}
            if self.format_junk:
                text = "Sure! {not json"
            elif "question" in schema.get("properties", {}):
                text = self.format_text(body)
            else:
                text = json.dumps(sample(schema, text))
        evals = len(re.findall(r"\S+\s*|\s+", text)) or 1
        stats = {"total_duration": 1_000_000 * (counted + evals), "load_duration": 1_000_000,
                 "prompt_eval_count": counted, "prompt_eval_duration": 500_000 * counted,
                 "eval_count": evals, "eval_duration": 10_000_000 * evals}      # 100 tokens/s
        return text, stats

    def format_text(self, body) -> str:
        """A JSON question for a --make-eval request, built from the passage (the last message)."""
        passage = body["messages"][-1]["content"]
        words = re.findall(r"[A-Za-z][A-Za-z-]{3,}", passage) or re.findall(r"[\u4e00-\u9fff]{4}", passage)
        word = max(words, key=len) if words else passage[:4]
        good = {"question": f"Where did I write about {word.lower()}?", "answer": word}
        turn = len(self.of("/api/chat")) % 4 if self.format_reply == "mixed" else 0
        if self.format_reply == "junk" or turn == 1:
            return "Sure! Here is a question: what is it about"
        if turn == 2:
            return json.dumps({"question": good["question"], "answer": "words from nowhere"})
        if turn == 3:
            return json.dumps({"question": passage[:200], "answer": word}, ensure_ascii=False)
        return json.dumps(good, ensure_ascii=False)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def send_json(self, status, obj, ndjson=None):
                data = (json.dumps(obj) + "\n").encode() if ndjson is None else \
                    "".join(json.dumps(o) + "\n" for o in ndjson).encode()
                self.send_body(status, data, "application/x-ndjson" if ndjson else "application/json")

            def send_missing(self):
                """The reply of Ollama's router to a path it has no route for."""
                self.send_body(404, b"404 page not found", "text/plain")

            def send_redirect(self, status, location):
                self.send_body(status, b"", None, {"Location": location})

            def send_body(self, status, data, content_type, headers=None):
                self.send_response(status)
                for name, value in {**({"Content-Type": content_type} if content_type else {}), **(headers or {}),
                                    "Content-Length": str(len(data))}.items():
                    self.send_header(name, value)
                self.send_header("Connection", "close")   # so that stopping the server really stops it
                self.close_connection = True
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:                  # the client went away
                    pass

            def do_GET(self):
                record = {"path": self.path, "body": None, "done": False, "held": False}
                with server.changed:
                    server.requests.append(record)
                    record["number"] = sum(1 for r in server.requests if r["path"] == self.path)
                    server.changed.notify_all()
                server._wait_if_held(self.path, record)
                if self.path in server.redirects:
                    self.send_redirect(*server.redirects[self.path])
                elif self.path in server.absent:
                    self.send_missing()
                elif self.path in server.errors:
                    status, message = server.errors[self.path]
                    self.send_json(status, {"error": message})
                elif self.path == "/api/tags":
                    self.send_json(200, {"models": [{"name": m, "model": m, "digest": server.digest(m)}
                                                    for m in sorted(server.models)]})
                elif self.path == "/api/ps":              # the loaded chat models and their context
                    with server.lock:
                        loaded = dict(server.loaded)
                    self.send_json(200, {"models": [{"name": m, "model": m, "context_length": n}
                                                    for m, n in loaded.items()]})
                else:
                    self.send_missing()
                server._note(record, done=True)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path == "/api/chat" and not body.get("messages"):
                    self.path = "/api/chat#load"          # a preload: recorded apart from questions
                record = {"path": self.path, "body": body, "done": False, "held": False}
                with server.changed:
                    server.requests.append(record)
                    number = sum(1 for r in server.requests if r["path"] == self.path)
                    record["number"] = number
                    server.changed.notify_all()
                try:
                    self.reply(body, record, number)
                finally:
                    server._note(record, done=True)

            def reply(self, body, record, number):
                if server.die_after_embeds is not None and len(server.of("/api/embed")) > server.die_after_embeds:
                    self.close_connection = True        # Ollama has died: no answer at all
                    return
                model = body.get("model", "")
                route = self.path.split("#")[0]
                if route in server.redirects:
                    return self.send_redirect(*server.redirects[route])
                if route not in ("/api/embed", "/api/chat", "/api/show") or route in server.absent:
                    return self.send_missing()
                if self.path in server.errors:
                    status, message = server.errors[self.path]
                    return self.send_json(status, {"error": message})
                if model not in server.models:
                    return self.send_json(404, {"error": f'model "{model}" not found, try pulling it first'})
                if self.path == "/api/show":
                    arch = architecture(model)
                    limit = server.context_limits.get(model, DEFAULT_CONTEXT_LIMIT)
                    return self.send_json(200, {
                        "modelfile": f"FROM {model}\n", "parameters": server.show_parameters,
                        "details": {"format": "gguf", "family": arch, "families": [arch],
                                    "parameter_size": "0.6B", "quantization_level": "Q4_K_M"},
                        "model_info": {"general.architecture": arch, f"{arch}.context_length": limit,
                                       f"{arch}.embedding_length": server.dim},
                        "template": template(model), "capabilities": capabilities(model)})
                if self.path == "/api/embed":
                    if server.embed_fail_after is not None and number > server.embed_fail_after:
                        return self.send_json(500, {"error": "embedding failed: out of memory"})
                    server._wait_if_held(self.path, record)
                    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    if server.embed_refuse and any(server.embed_refuse in t for t in texts):
                        return self.send_json(server.embed_refuse_reply[0], {"error": server.embed_refuse_reply[1]})
                    reply = server.embed_reply(body, number)
                    if server.embed_mangle is not None and number > server.embed_mangle_after:
                        reply = server.mangle_embeddings(reply)
                    return self.send_json(200, reply)
                if self.path == "/api/chat#load":
                    server._wait_if_held(self.path, record)
                    if server.load_error:
                        return self.send_json(server.load_error[0], {"error": server.load_error[1]})
                    server.load(body)
                    return self.send_json(200, {"model": model, "message": {"role": "assistant", "content": ""},
                                                "done": True, "done_reason": "load"})
                if model.startswith(("plain", "opener")) and "think" in body:   # a model without thinking
                    return self.send_json(400, {"error": f'"{model}" does not support thinking'})
                server.load(body)
                text, stats = server.chat_reply(body)
                server._note(record, prompt_eval_count=stats["prompt_eval_count"], reply=text)
                if not body.get("stream", True):
                    server._wait_if_held(self.path, record)
                    return self.send_json(200, {"model": model, "message": {"role": "assistant", "content": text},
                                                "done": True, "done_reason": "stop", **stats})
                said = text if server.answer is None else server.answer
                words = iter(re.findall(r"\S+\s*|\s+", said) if isinstance(said, str) else said)
                limit = (body.get("options") or {}).get("num_predict") or -1
                if limit > 0 and not server.ignore_num_predict:       # Ollama stops at num_predict
                    words = itertools.islice(words, limit)
                reason = []                   # "length" once the limit has stopped the words

                def counted():
                    n = 0
                    for n, w in enumerate(words, 1):
                        yield w
                    if n == limit and not server.ignore_num_predict:
                        reason.append("length")
                parts = ({"model": model, "message": {"role": "assistant", "content": w}, "done": False}
                         for w in counted())
                if server.endless_line is not None:
                    return self.send_endless_line(next(parts), server.endless_line, record)
                if server.stream_error is not None:   # a 200, the first piece, then an error line
                    return self.send_chunked([next(parts), {"error": server.stream_error}], record)
                if server.stream_junk:                # a 200, the first piece, then a line that is not JSON
                    return self.send_chunked([next(parts), "<html>oops"], record)
                if server.stream_close:               # a 200, the first piece, then the body is cut short
                    return self.send_chunked([next(parts)], record, cut=True)

                def last():
                    yield {"model": model, "message": {"role": "assistant", "content": ""}, "done": True,
                           "done_reason": (reason or ["stop"])[0], **stats}
                self.send_chunked(itertools.chain(parts, last()), record)

            def send_chunked(self, parts, record, cut=False):
                """Stream the parts one by one (chunked), waiting before the last one if held.

                A part that is a str goes out as that line, verbatim (not JSON). cut=True: no
                terminating zero-length chunk, the connection just closes (a body cut short).
                `parts` may be an iterator: each part is taken as it goes out.
                """
                self.start_chunked(record)

                def send(part):
                    self.send_chunk(((part if isinstance(part, str) else json.dumps(part)) + "\n").encode(), record)
                    record["sent_parts"] += 1
                try:
                    previous = None
                    for part in parts:        # one part behind, so that the last one is known
                        if previous is not None:
                            send(previous)
                        previous = part
                    server._wait_if_held(self.path, record)
                    send(previous)
                    if cut:                      # close_connection is set: the socket closes after this
                        return
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:                  # the client went away mid-answer
                    server._note(record, gone=True)

            def start_chunked(self, record):
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.close_connection = True
                self.end_headers()
                record.update(sent_parts=0, sent_bytes=0, gone=False)

            def send_chunk(self, data, record):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                record["sent_bytes"] += len(data)

            def send_endless_line(self, first, size, record):
                """Stream `first` as a part, then one line of `size` bytes, 64 KB at a time."""
                self.start_chunked(record)
                try:
                    self.send_chunk((json.dumps(first) + "\n").encode(), record)
                    block = b"a" * 65536
                    while record["sent_bytes"] < size:
                        self.send_chunk(block[:size - record["sent_bytes"]], record)
                    self.send_chunk(b"\n", record)
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:                  # the client went away
                    server._note(record, gone=True)

        return Handler


if __name__ == "__main__":  # by hand: python tests/ollama_server.py [hash|random]
    import sys
    with FakeOllama(embed=sys.argv[1] if len(sys.argv) > 1 else "hash") as s:
        print(f"OLLAMA_HOST={s.url}", flush=True)
        threading.Event().wait()
