"""--mcp: the notes as an MCP server over stdio, driven as a client would drive it.

Raw JSON lines over the script's real stdin and stdout (every fault of the list, the revisions,
the tools, the refresh, an interrupt), and the official SDK's client (`mcp` on PyPI, a test-only
dependency: those tests are skipped without it). stdout must carry protocol messages only.
"""
from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
import warnings

import pytest
from conftest import ROOT, SCRIPT, run_cli, user_env
from ollama_server import FakeOllama
from test_index import make_vault

import demo_rag as rag

HANDSHAKE = list(rag.McpServer.HANDSHAKE_REVISIONS)
STATELESS = list(rag.McpServer.STATELESS_REVISIONS)
VERSION_KEY, CAPABILITIES_KEY = rag.McpServer.VERSION_KEY, rag.McpServer.CAPABILITIES_KEY
ENVELOPE = {VERSION_KEY: "2026-07-28", CAPABILITIES_KEY: {}}


class Mcp:
    """`demo_rag.py --mcp` as a subprocess, spoken to in raw lines. Every line it writes to
    stdout is kept in `lines` (and must be a JSON-RPC message: see check_stdout)."""

    def __init__(self, args, host: str, env: dict | None = None, python_args=()):
        self.p = subprocess.Popen([sys.executable, *python_args, str(SCRIPT), "--mcp", *map(str, args)],
                                  env=user_env(host, env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.buffer, self.lines, self.next_id = b"", [], 0

    def send(self, message) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.p.stdin.write(data + b"\n")
        self.p.stdin.flush()

    def line(self, timeout: float = 30) -> dict:
        """The next message the server writes, parsed."""
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self.p.stdout, selectors.EVENT_READ)
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise TimeoutError(f"no message within {timeout}s; stderr so far: {self.stderr_now()}")
                data = os.read(self.p.stdout.fileno(), 65536)
                if not data:
                    raise EOFError(f"the server ended; stderr: {self.p.stderr.read().decode()}")
                self.buffer += data
        raw, self.buffer = self.buffer.split(b"\n", 1)
        self.lines.append(raw)
        return json.loads(raw)

    def stderr_now(self) -> str:
        os.set_blocking(self.p.stderr.fileno(), False)
        try:
            return (self.p.stderr.read() or b"").decode(errors="replace")
        finally:
            os.set_blocking(self.p.stderr.fileno(), True)

    def request(self, method: str, params: dict | None = None, notes: list | None = None) -> dict:
        """Send a request and return its reply; notifications that come before it go to `notes`."""
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                   **({} if params is None else {"params": params})})
        while "id" not in (m := self.line()):
            if notes is not None:
                notes.append(m)
        assert m["id"] == self.next_id, m
        return m

    def call(self, tool: str, notes: list | None = None, meta: dict | None = None, **arguments) -> dict:
        """tools/call's result (a JSON-RPC error fails the test), checked: its first text block is
        its structuredContent as JSON, when it has one."""
        reply = self.request("tools/call", {"name": tool, "arguments": arguments,
                                            **({"_meta": meta} if meta else {})}, notes)
        assert "result" in reply, reply
        result = reply["result"]
        if "structuredContent" in result:
            serialized, _ = result["content"]
            assert json.loads(serialized["text"]) == result["structuredContent"], result
        return result

    def initialize(self, revision: str = "2025-06-18") -> dict:
        reply = self.request("initialize", {"protocolVersion": revision, "capabilities": {},
                                            "clientInfo": {"name": "test", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def close(self, timeout: float = 30) -> tuple[int, str]:
        """Close stdin; the exit code and stderr. Checks that stdout held messages only."""
        rest, err = self.p.communicate(timeout=timeout)
        self.lines += [line for line in (self.buffer + rest).split(b"\n") if line]
        check_stdout(self.lines)
        return self.p.returncode, err.decode()


def said(result: dict) -> str:
    """A tool result's text for people and models: its last text block (after the JSON of its
    structuredContent, when it has one)."""
    assert all(block["type"] == "text" for block in result["content"]), result
    return result["content"][-1]["text"]


def check_stdout(lines: list[bytes]) -> None:
    for line in lines:
        message = json.loads(line)
        assert message.get("jsonrpc") == "2.0" and ("method" in message or "id" in message), line


@pytest.fixture
def mcp(server, notes, tmp_path):
    """Start servers on a copy of demo-data/ (extra args after the notes and cache); all are ended."""
    started = []

    def start(*args, notes_dir=notes, host=None, env=None):
        m = Mcp(["--notes", notes_dir, "--cache", tmp_path / "cache", *args], host or server.url, env)
        started.append(m)
        return m
    yield start
    for m in started:
        if m.p.poll() is None:
            m.p.kill()
        m.p.wait(timeout=30)
        for pipe in (m.p.stdin, m.p.stdout, m.p.stderr):
            with contextlib.suppress(OSError):
                pipe.close()


# ---- the handshake and the revisions ----------------------------------------------------

def test_initialize_answers_each_revision_it_serves_and_its_newest_for_any_other(mcp):
    m = mcp()
    for asked in HANDSHAKE:
        assert m.initialize(asked)["result"]["protocolVersion"] == asked
    for asked in ["2099-01-01", "2026-07-28", "draft"]:
        assert m.initialize(asked)["result"]["protocolVersion"] == "2025-11-25"
    result = m.initialize()["result"]
    assert result["capabilities"] == {"tools": {"listChanged": False}} and result["serverInfo"]["name"] == "demo_rag"
    assert result["serverInfo"]["version"] == rag.VERSION
    assert "resultType" not in result
    assert m.request("ping") == {"jsonrpc": "2.0", "id": m.next_id, "result": {}}
    assert m.close()[0] == 0


def test_the_stateless_revision_needs_no_handshake_and_says_its_version_in_every_request(mcp):
    m = mcp()
    discover = m.request("server/discover", {"_meta": ENVELOPE})["result"]
    assert discover["supportedVersions"][0] == "2026-07-28" and set(discover["supportedVersions"]) == set(
        HANDSHAKE + STATELESS)
    assert discover["resultType"] == "complete" and discover["_meta"][rag.McpServer.SERVER_INFO_KEY]["name"] == "demo_rag"
    assert discover["capabilities"]["tools"] == {"listChanged": False} and discover["ttlMs"] == 0
    tools = m.request("tools/list", {"_meta": ENVELOPE})["result"]
    assert [t["name"] for t in tools["tools"]] == ["search_notes", "read_note", "ask_notes"]
    assert tools["resultType"] == "complete" and tools["cacheScope"] == "private"
    found = m.request("tools/call", {"name": "search_notes", "arguments": {"query": "What is BM25?"},
                                     "_meta": ENVELOPE})["result"]
    assert found["resultType"] == "complete" and found["structuredContent"]["sources"][0]["path"] == "bm25.md"
    # a revision it does not serve is named, with those it does; a half envelope is refused
    wrong = m.request("tools/list", {"_meta": {**ENVELOPE, VERSION_KEY: "2027-01-01"}})["error"]
    assert wrong["code"] == -32022 and wrong["data"] == {"supported": STATELESS, "requested": "2027-01-01"}
    half = m.request("tools/list", {"_meta": {VERSION_KEY: "2026-07-28"}})["error"]
    assert half["code"] == -32602 and CAPABILITIES_KEY in half["message"]
    # handshake-era results carry none of the stateless revision's fields
    legacy = m.request("tools/list")["result"]
    assert set(legacy) == {"tools"}
    assert m.close()[0] == 0


# ---- faults and bad input ----------------------------------------------------------------

def test_every_fault_is_answered_and_the_server_goes_on(mcp):
    m = mcp()
    m.initialize()
    for raw, code in [(b"not json", -32700), (b'{"jsonrpc": "2.0", "id": 1, "method": ', -32700),
                      (b"\xff\xfe{}", -32700), (b"[1, 2]", -32600), (b'"ping"', -32600),
                      (b'{"jsonrpc": "1.0", "id": 7, "method": "ping"}', -32600),
                      (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', -32600),
                      (b'{"jsonrpc": "2.0", "id": 8, "method": 5}', -32600)]:
        m.send(raw)
        reply = m.line()
        assert reply["error"]["code"] == code, (raw, reply)
        assert reply["id"] == (7 if b'"id": 7' in raw else 8 if b'"id": 8' in raw else None), reply
    assert m.request("resources/list")["error"]["code"] == -32601
    assert m.request("tools/list", [1])["error"]["code"] == -32602
    # wrong arguments: a tool result with isError, for the model to read and call again
    bad_arguments = [("search_notes", {}, "missing argument 'query'"),
                     ("search_notes", {"query": 3}, "query must be a string"),
                     ("search_notes", {"query": "  "}, "query is blank"),
                     ("search_notes", {"query": "x", "top_k": 0}, "top_k must be 1 or more"),
                     ("search_notes", {"query": "x", "top_k": 999}, "top_k must be at most"),
                     ("search_notes", {"query": "x", "top_k": True}, "top_k must be an integer"),
                     ("search_notes", {"query": "x", "top_k": 2.5}, "top_k must be an integer, not 2.5"),
                     ("search_notes", {"query": "x", "top_k": 0.0}, "top_k must be 1 or more"),
                     ("search_notes", {"query": "x", "k": 3}, "unknown argument 'k'"),
                     ("read_note", {"path": "bm25.md", "start_line": "1"}, "start_line must be")]
    for tool, arguments, problem in bad_arguments:
        r = m.call(tool, **arguments)
        assert r["isError"] is True and problem in said(r), (arguments, r)
        assert said(r).startswith(f"{tool}: ") and "structuredContent" not in r
    for revision in HANDSHAKE:            # a result with isError is one in every revision
        m.initialize(revision)
        assert m.call("search_notes", query="x", top_k=0)["isError"] is True
    stateless = m.call("search_notes", meta=ENVELOPE, query="x", top_k=0)
    assert stateless["isError"] is True and stateless["resultType"] == "complete"
    # no such tool, or no arguments object: the request itself is wrong
    bad_calls = [({"name": "search_notes", "arguments": "x"}, "arguments must be an object"),
                 ({"name": "delete_notes", "arguments": {}}, "unknown tool 'delete_notes'"),
                 ({"name": ["search_notes"], "arguments": {}}, "unknown tool"),
                 ({"arguments": {}}, "tools/call needs the name of the tool to call (params.name: "
                                     "search_notes, read_note, ask_notes)")]
    for params, problem in bad_calls:
        error = m.request("tools/call", params)["error"]
        assert error["code"] == -32602 and problem in error["message"], (params, error)
    # a notification gets no reply, nor does a response or a blank line: the next line is the ping's
    m.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    m.send({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "search_notes"}})
    m.send({"jsonrpc": "2.0", "id": 99, "result": {}})
    m.send(b"")
    m.send(b'{"jsonrpc": "2.0", "id": "last", "method": "ping"}')
    assert m.line() == {"jsonrpc": "2.0", "id": "last", "result": {}}
    code, err = m.close()
    assert code == 0 and "Traceback" not in err


def test_a_message_too_big_is_refused_and_the_server_goes_on(mcp, monkeypatch):
    m = mcp()
    m.send(b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "' + b"a" * (17 << 20) + b'"}}')
    assert m.line()["error"]["code"] == -32600
    assert m.request("ping")["result"] == {}
    assert m.close()[0] == 0


def test_eof_before_anything_ends_the_server_with_exit_0(mcp):
    m = mcp()
    code, err = m.close()
    assert code == 0 and m.lines == [] and "serving the notes" in err


def test_mcp_takes_no_question_and_no_json(cli):
    out = cli("--mcp", "What is BM25?")
    assert out.returncode == 2 and "--mcp takes no question" in out.stderr
    out = cli("--mcp", "--json")
    assert out.returncode == 2 and "--mcp speaks JSON-RPC anyway" in out.stderr
    out = cli("--mcp", "--notes", "/nonexistent/notes", stdin="")
    assert out.returncode == 2 and "notes folder not found" in out.stderr and out.stdout == ""


# ---- the tools -------------------------------------------------------------------------------

def test_search_notes_gives_sources_with_their_place_and_the_floor_s_verdict(mcp):
    m = mcp()
    m.initialize()
    r = m.call("search_notes", query="What is BM25?", top_k=2)
    s = r["structuredContent"]
    assert m.call("search_notes", query="What is BM25?", top_k=2.0) == r     # JSON Schema's integer: 2.0 is 2
    assert len(m.call("search_notes", query="bm25 asyncio coffee tea", top_k=1.0)["structuredContent"]["sources"]) == 1
    assert r["isError"] is False and s["found"] is True and s["query"] == "What is BM25?"
    assert s["confidence"] >= s["floor"]["value"] and s["lexical_only"] is False and 1 <= len(s["sources"]) <= 2
    first = s["sources"][0]
    assert first["path"] == "bm25.md" and first["section"].startswith("# BM25")
    lines = (ROOT / "demo-data/bm25.md").read_text(encoding="utf-8").split("\n")
    assert first["start_line"] <= first["line"] <= first["end_line"] <= len(lines)
    assert first["text"].split("\n")[0] in lines[first["start_line"] - 1]   # the lines are the file's
    assert first["text"] in (ROOT / "demo-data/bm25.md").read_text(encoding="utf-8")
    assert f"[1] bm25.md:{first['line']} › # BM25" in said(r)
    # off-topic: declined, with the closest passages still given
    off = m.call("search_notes", query="What is the airspeed velocity of an unladen swallow?")["structuredContent"]
    assert off["found"] is False
    # the source filter, as --source
    only = m.call("search_notes", query="temperature", source="*茶*")["structuredContent"]
    assert only["sources"] and all("茶" in h["path"] for h in only["sources"])
    none = m.call("search_notes", query="temperature", source="recipes/*.md")
    assert none["isError"] is True and "no note matches source 'recipes/*.md'" in said(none)
    assert m.close()[0] == 0


def test_search_notes_gives_the_same_top_sources_as_the_command_line_for_every_eval_question(mcp, cli, notes):
    questions = [json.loads(line)["question"] for line in (ROOT / "demo-data/eval.jsonl").read_text(
        encoding="utf-8").splitlines() if line.strip()]
    m = mcp()
    m.initialize()
    served = []
    for q in questions:
        s = m.call("search_notes", query=q)["structuredContent"]
        served.append([(h["path"], h["line"], h["section"]) for h in s["sources"]])
    assert m.close()[0] == 0
    # --chat answers them all in one process; /clear makes each question a first one, as the CLI asks it
    out = cli("--notes", notes, "--chat", stdin="".join(f"{q}\n/clear\n" for q in questions), timeout=300)
    assert out.returncode == 0, out.stderr
    shown = [[line.split("]", 1)[1].strip().rsplit("  (", 1)[0] for line in block.splitlines()
              if line.startswith("  [")] for block in (b.split("Cited at")[0] for b in out.stdout.split("Top sources")[1:])]
    assert len(shown) == len(questions)
    assert [[" › ".join(filter(None, (f"{path}:{line}", section))) for path, line, section in hits]
            for hits in served] == shown
    for i in range(0, len(questions), 8):            # and one question run in eight, as a question is run
        run = json.loads(cli("--notes", notes, questions[i], "--json", "--retrieve-only").stdout)
        assert [(h["source"], h["line"], h["section"]) for h in run["sources"]] == served[i], questions[i]


def test_read_note_reads_a_note_by_its_lines_on_disk(mcp, notes):
    text = "---\ntitle: kites\n---\n# Kites\r\n\r\nA kite flies on a long string in the wind.\rLine seven.\n" + \
           "".join(f"line {i}\n" for i in range(8, 501))
    (notes / "kites.md").write_bytes(text.encode())
    m = mcp()
    r = m.call("read_note", path="kites.md", start_line=4, line_count=3)
    assert r["structuredContent"] == {"path": "kites.md", "start_line": 4, "end_line": 6, "total_lines": 500,
                                      "text": "# Kites\n\nA kite flies on a long string in the wind."}
    assert "read on with start_line 7" in said(r)
    whole = m.call("read_note", path="kites.md")["structuredContent"]
    assert (whole["start_line"], whole["end_line"]) == (1, rag.MCP_READ_LINES)
    assert m.call("read_note", path="kites.md", start_line=498)["structuredContent"]["text"] == \
        "line 498\nline 499\nline 500"
    past = m.call("read_note", path="kites.md", start_line=501)
    assert past["isError"] and "kites.md has 500 lines; start_line 501 is past its end" in said(past)
    assert m.call("read_note", path="中国茶冲泡.md")["structuredContent"]["text"].startswith("#")
    assert m.close()[0] == 0


def test_read_note_refuses_every_file_the_index_does_not_hold(mcp, notes, tmp_path):
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\n\nThe password of the outside world is swordfish, never to be read.")
    (notes / ".hidden").mkdir()
    (notes / ".hidden/secret.md").write_text(outside.read_text())
    (notes / "link-out.md").symlink_to(outside)
    (notes / "folder-out").symlink_to(tmp_path)
    (notes / "data.json").write_text('{"password": "swordfish, long enough to be a note if it were one"}')
    (notes / "stub.md").write_text("# too short")
    (notes / "big.md").write_text("# Big\n\n" + "swordfish " * 300)
    (notes / ".secret.md").write_text(outside.read_text())
    m = mcp("--max-note-mb", 0.002)
    assert m.call("read_note", path="bm25.md")["isError"] is False
    for path in ["../secret.md", str(outside), str(notes / "bm25.md"), "/etc/passwd", ".hidden/secret.md",
                 "link-out.md", "folder-out/secret.md", "data.json", "stub.md", "big.md", ".secret.md",
                 "./bm25.md", "bm25.md/../bm25.md", "", "nothing.md", "\x1b[2J.md"]:
        if not path:
            continue                      # a blank path is the schema's to refuse: below
        r = m.call("read_note", path=path)
        assert r["isError"] is True and "not a note of the index" in said(r), (path, r)
        assert "swordfish" not in json.dumps(r) and "\x1b" not in json.dumps(r, ensure_ascii=False)
    blank = m.call("read_note", path="")              # the schema's to refuse, before any look
    assert blank["isError"] is True and said(blank) == "read_note: path is blank"
    assert m.close()[0] == 0


def test_ask_notes_answers_with_its_sources_and_says_not_found(mcp):
    m = mcp()
    r = m.call("ask_notes", question="What is BM25?")
    s = r["structuredContent"]
    assert r["isError"] is False and s["status"] == "answered" and s["answer"]
    assert s["citations"]["summary"].startswith("checked: ") and s["citations"]["sentences"]
    assert f"({s['citations']['summary']})" in said(r)      # the check, for the agent too
    assert s["sources"][0]["path"] == "bm25.md" and "Sources:\n[1] bm25.md:" in said(r)
    off = m.call("ask_notes", question="What is the airspeed velocity of an unladen swallow?")
    assert off["isError"] is False and off["structuredContent"]["status"] == "declined"
    assert said(off).startswith(rag.NOT_FOUND)
    assert m.close()[0] == 0


SWALLOW = "What is the airspeed velocity of an unladen swallow?"


@pytest.mark.parametrize("how", ["kept", "--no-log", "env"])
def test_ask_notes_keeps_what_it_cannot_answer_in_the_gap_log_via_mcp_unless_told_not(mcp, cli, notes, how):
    m = mcp(*(["--no-log"] if how == "--no-log" else []), env={rag.NO_LOG_ENV: "1"} if how == "env" else None)
    instructions = m.initialize()["result"]["instructions"]
    assert "gap log" in instructions and "--no-log" in instructions and rag.NO_LOG_ENV in instructions
    assert m.call("search_notes", query=SWALLOW)["structuredContent"]["found"] is False      # a search: not kept
    assert m.call("ask_notes", question=SWALLOW)["structuredContent"]["status"] == "declined"
    assert m.close()[0] == 0
    log = cli.cache / rag.GAP_LOG
    if how != "kept":
        assert not log.exists()
        return
    (e,) = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert (e["question"], e["why"], e["via"]) == (SWALLOW, "floor", "mcp")
    assert cli("--notes", notes, SWALLOW).returncode == 0                 # the command line's: no "via"
    report = json.loads(cli("--notes", notes, "--gaps", "--json").stdout)
    ((asked,),) = [g["asked"] for g in report["groups"]]
    assert (report["via_mcp"], report["groups"][0]["via_mcp"], asked["via_mcp"], asked["times"]) == (1, 1, 1, 2)
    out = cli("--notes", notes, "--gaps")
    assert "; 1 asked by an agent (via MCP)" in out.stdout and "1. 2 question(s) (1 via MCP)," in out.stdout
    assert "unladen swallow?  (1× via MCP)" in out.stdout, out.stdout


CLIPBOARD = "\x1b]52;c;cHduZWQ=\x07"          # a terminal that obeys it puts "pwned" on the clipboard
CSI = "\x9b2J"                                # C1's CSI: clears the screen on some terminals


def test_every_tool_s_text_escapes_a_note_s_control_characters_and_its_json_keeps_them(mcp, server, notes):
    """The text blocks are shown to people (a client may print them): the control characters in them
    are escaped, as the command line's output escapes them; in the JSON block, as JSON's own escapes,
    which read back as the same characters (Mcp.call checks it). structuredContent is data: the exact
    text."""
    (notes / "kites.md").write_text(f"# Kites {CLIPBOARD}\n\nA kite flies on a long string in strong wind, "
                                    f"{CLIPBOARD} and {CSI} the kite string holds.\n", encoding="utf-8")
    (notes / f"clip{CLIPBOARD}.md").write_text(f"# Clip\n\nThe kite string {CSI} note about kites in wind.\n",
                                               encoding="utf-8")
    server.answer = f"A kite flies on a long string {CLIPBOARD}{CSI} [1]."
    m = mcp()
    found = m.call("search_notes", query="kite string in strong wind")
    read = m.call("read_note", path="kites.md")
    asked = m.call("ask_notes", question="How does a kite fly in strong wind?")
    for r in (found, read, asked):
        assert r["isError"] is False and len(r["content"]) == 2
        for block in r["content"]:        # the JSON, then the text for people and models
            text = block["text"]
            assert "\\u001b]52;c;cHduZWQ=\\u0007" in text, text
            assert not set(text) & set(map(chr, rag.CONTROL_ESCAPES)), text   # no ESC, BEL, CSI, ...
    assert "\\u009b2J" in found["content"][0]["text"] + asked["content"][0]["text"]
    assert "\\u009b2J" in said(found) + said(asked)
    assert any(s["path"] == "kites.md" and CLIPBOARD in s["text"] and CSI in s["text"]     # the exact text
               for s in found["structuredContent"]["sources"])
    assert read["structuredContent"]["text"] == (notes / "kites.md").read_text(encoding="utf-8").rstrip("\n")
    assert asked["structuredContent"]["answer"] == server.answer
    assert m.close()[0] == 0


def test_search_and_ask_take_the_command_line_s_tag_and_date_filters(mcp, tmp_path):
    vault = tmp_path / "vault"
    (vault / "daily").mkdir(parents=True)
    (vault / "work.md").write_text("---\ntags: [work/acme]\ndate: 2026-02-03\n---\n# Budget\n"
                                   "The budget for the launch is 4,000 euros, agreed with finance.\n", encoding="utf-8")
    (vault / "daily" / "2026-03-09.md").write_text("# Monday\nThe budget for the garden is 300 euros this "
                                                   "spring, for seeds and tools.\n", encoding="utf-8")
    m = mcp(notes_dir=vault)
    m.initialize()
    paths = lambda result: {h["path"] for h in result["structuredContent"]["sources"]}  # noqa: E731
    assert paths(m.call("search_notes", query="budget", tags=["work"])) == {"work.md"}       # a/b matches a
    assert paths(m.call("search_notes", query="budget", since="2026-03")) == {"daily/2026-03-09.md"}
    hit = m.call("search_notes", query="budget", until="2026-02")["structuredContent"]["sources"][0]
    assert hit["tags"] == ["work/acme"] and hit["date"] == "2026-02-03" and hit["dated_by"] == "date"
    assert paths(m.call("ask_notes", question="What is the budget?", tags=["#work"])) == {"work.md"}
    none = m.call("search_notes", query="budget", tags=["home"])
    assert none["isError"] is True and "no note matches" in said(none)
    bad = m.call("search_notes", query="budget", since="yesterday")
    assert bad["isError"] is True and "yesterday" in said(bad)
    backwards = m.call("search_notes", query="budget", since="2026-03", until="2026-01")
    assert backwards["isError"] is True and "after" in said(backwards)
    wrong = m.call("search_notes", query="budget", tags="work")
    assert wrong["isError"] is True and "tags must be an array" in said(wrong)
    blank = m.call("search_notes", query="budget", tags=[""])
    assert blank["isError"] is True and "tags[0] is blank" in said(blank)
    assert m.close()[0] == 0


def test_a_filter_that_is_wrong_or_matches_nothing_is_named_as_the_tool_s_argument_not_as_a_flag(mcp):
    m = mcp()
    for tool, asked in [("search_notes", {"query": "budget"}), ("ask_notes", {"question": "What is the budget?"})]:
        none = m.call(tool, **asked, tags=["nosuchtag"], since="2020")
        assert none["isError"] is True and said(none).startswith(
            'no note matches tags ["nosuchtag"], since "2020" (of '), said(none)
        for argument, value in [("since", "yesterday"), ("until", "soon"), ("tags", ["two words"])]:
            wrong = m.call(tool, **asked, **{argument: value})
            assert wrong["isError"] is True and said(wrong).startswith(f"{argument}: expected a "), said(wrong)
        assert "--" not in said(none) + said(wrong)
    assert m.close()[0] == 0


def test_every_tool_says_it_only_reads_and_what_its_result_holds(mcp):
    m = mcp()
    m.initialize("2025-03-26")            # annotations came in 2025-03-26, with their own title
    tools = {t["name"]: t for t in m.request("tools/list")["result"]["tools"]}
    for name, t in tools.items():
        hints = t["annotations"]
        assert (hints["readOnlyHint"], hints["destructiveHint"], hints["openWorldHint"]) == (True, False, False)
        assert hints["title"] == t["title"] and t["title"], name
        assert t["outputSchema"]["type"] == "object" and t["outputSchema"]["required"], name
    assert {name: t["annotations"]["idempotentHint"] for name, t in tools.items()} == {
        "search_notes": True, "read_note": True, "ask_notes": False}   # a chat model words each answer anew

    def types(schema) -> list:            # every "type" in a schema, however deep
        if isinstance(schema, dict):
            return [v for k, v in schema.items() if k == "type"] + [t for v in schema.values() for t in types(v)]
        return [t for v in schema for t in types(v)] if isinstance(schema, list) else []
    # One type each, nullable ones as anyOf: what the MCP Inspector CLI's --strict check asks, since a
    # client mapping schemas onto a one-type dialect (Gemini's function declarations) rejects a list.
    found = [t for tool in tools.values() for key in ("inputSchema", "outputSchema") for t in types(tool[key])]
    assert "null" in found and all(isinstance(t, str) for t in found), found
    assert m.close()[0] == 0


def output_checker(m: Mcp):
    """check(tool, **arguments): m.call's result, its structuredContent validated against the outputSchema
    the server lists for the tool (with the validator its $schema names, 2020-12 when none)."""
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema comes with the MCP SDK (.ci/run)")
    schemas = {t["name"]: t["outputSchema"] for t in m.request("tools/list")["result"]["tools"]}
    validators = {}
    for name, schema in schemas.items():
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validators[name] = cls(schema)

    def check(tool: str, **arguments) -> dict:
        r = m.call(tool, **arguments)
        assert "structuredContent" in r, r
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                  for e in validators[tool].iter_errors(r["structuredContent"])]
        assert not errors, (tool, arguments, errors)
        return r
    return check


def test_every_result_validates_against_its_tool_s_output_schema(mcp, server, notes, tmp_path, dead_host):
    (notes / "work.md").write_text("---\ntags: [work/acme]\ndate: 2026-02-03\nowner: Ann\naliases: [plan]\n---\n"
                                   "# Budget\nThe budget for the launch is 4,000 euros, agreed with finance.\n",
                                   encoding="utf-8")
    with_pdf = __import__("importlib").util.find_spec("pypdf") is not None
    if with_pdf:
        from pdfs import make_pdf
        make_pdf(notes / "manual.pdf", [["The zeppelin manual: a hangar holds the airship on its",
                                         "mooring mast between flights over the lake."]])
    m = mcp()
    m.initialize()
    check = output_checker(m)
    found = check("search_notes", query="What is BM25?")["structuredContent"]
    assert found["found"] is True and found["why"] is None
    off = check("search_notes", query=SWALLOW)["structuredContent"]
    assert off["found"] is False and off["why"].startswith("confidence ")
    dated = check("search_notes", query="budget for the launch", tags=["work"])["structuredContent"]["sources"][0]
    assert dated["properties"] == {"owner": "Ann"} and dated["aliases"] == ["plan"]
    if with_pdf:
        page = check("search_notes", query="zeppelin hangar mooring mast")["structuredContent"]["sources"][0]
        assert page["path"] == "manual.pdf" and page["page"] == 1 and page["line"] is None
        check("read_note", path="manual.pdf")
    check("read_note", path="bm25.md", start_line=2, line_count=3)
    answered = check("ask_notes", question="What is BM25?")["structuredContent"]
    assert answered["status"] == "answered" and answered["citations"]["sentences"]
    assert check("ask_notes", question=SWALLOW)["structuredContent"]["status"] == "declined"
    assert m.close()[0] == 0
    m = mcp("--chat-model", "nope:1b")    # a failed answer is an error, its structuredContent valid still
    failed = output_checker(m)("ask_notes", question="What is BM25?")
    assert failed["isError"] is True and failed["structuredContent"]["status"] == "failed"
    assert m.close()[0] == 0
    m = mcp(host=dead_host)               # Ollama away: by keywords, with the vectors cached above
    check = output_checker(m)
    keywords = check("search_notes", query="What is BM25?")["structuredContent"]
    assert keywords["lexical_only"] is True and keywords["keywords_only_because"]
    unanswered = check("ask_notes", question="What is BM25?")
    assert unanswered["isError"] is True and unanswered["structuredContent"]["status"] == "keywords only"
    nothing = check("search_notes", query="zzzqqq")["structuredContent"]
    assert (nothing["found"], nothing["sources"], nothing["lexical_only"]) == (False, [], True)
    assert check("ask_notes", question="zzzqqq")["structuredContent"]["status"] == "declined"
    assert m.close()[0] == 0


# ---- Ollama away, a model not pulled: what the command line would say -----------------------

def test_ollama_down_searches_by_keywords_and_ask_notes_fails_as_the_command_line_says(mcp, cli, notes, dead_host):
    cli("--notes", notes, "--retrieve-only", "warm the cache")            # embedded while Ollama ran
    m = mcp(host=dead_host)
    r = m.call("search_notes", query="What is BM25?")
    s = r["structuredContent"]
    run = json.loads(cli("--notes", notes, "What is BM25?", "--json", host=dead_host).stdout)
    assert r["isError"] is False and s["lexical_only"] is True and s["sources"][0]["path"] == "bm25.md"
    assert run["warnings"][0] == f"{s['keywords_only_because']}; searching by keywords (BM25) only"
    assert run["keywords_only_because"] == s["keywords_only_because"]      # one shape, both
    asked = m.call("ask_notes", question="What is BM25?")
    assert asked["isError"] is True and asked["structuredContent"]["status"] == "keywords only"
    assert s["keywords_only_because"] in said(asked)
    # no keyword matches: not found, with the reason (no error: there is only no match)
    nothing = m.call("search_notes", query="zzzqqq")
    why = f"no passage has any of its words, and it could not be searched by meaning: {s['keywords_only_because']}"
    assert nothing["isError"] is False and nothing["structuredContent"]["found"] is False
    assert nothing["structuredContent"]["why"] == why and nothing["structuredContent"]["sources"] == []
    assert said(nothing) == f"{rag.NOT_FOUND} ({why})."
    unanswered = m.call("ask_notes", question="zzzqqq")
    assert unanswered["isError"] is False and unanswered["structuredContent"]["status"] == "declined"
    assert unanswered["structuredContent"]["why"] == why and said(unanswered) == f"{rag.NOT_FOUND} ({why})"
    line = json.loads(cli("--notes", notes, "zzzqqq", "--retrieve-only", "--json", host=dead_host).stdout)
    assert (line["status"], line["sources"]) == ("declined", [])   # as the command line says it
    code, err = m.close()
    assert code == 0 and err.count("searching by keywords (BM25) only") == 1, err   # said once a session


def test_a_chat_model_not_pulled_is_a_tool_error_in_the_command_line_s_words(mcp, cli, notes):
    m = mcp("--chat-model", "nope:1b")
    r = m.call("ask_notes", question="What is BM25?")
    run = json.loads(cli("--notes", notes, "--chat-model", "nope:1b", "What is BM25?", "--json").stdout)
    assert r["isError"] is True and said(r).startswith(run["error"])   # "error: model ..." in both
    assert m.close()[0] == 0


# ---- the index: opened once, refreshed before every call --------------------------------------

def test_every_call_sees_the_notes_as_they_are_now_and_an_unchanged_folder_costs_no_reading(mcp, server,
                                                                                            notes, tmp_path):
    m = mcp("--fresh-seconds", 0)         # each call looks first: the edits below come right before calls
    assert m.call("search_notes", query="What is BM25?")["structuredContent"]["found"]
    for cache in (tmp_path / "cache").iterdir():      # held in memory: the cache is not read again
        cache.unlink()
    before = len(server.of("/api/embed"))
    assert m.call("search_notes", query="What is BM25?")["structuredContent"]["found"]
    (notes / "photo.png").write_bytes(b"\x89PNG")    # the folder changed, its notes did not: still held
    assert m.call("search_notes", query="What is BM25?")["structuredContent"]["found"]
    assert [len(b["input"]) for b in server.of("/api/embed")[before:]] == [1, 1]  # the questions only
    assert not m.call("search_notes", query="zeppelin hangar")["structuredContent"]["found"]
    (notes / "zeppelin.md").write_text("# Zeppelins\n\nA zeppelin hangar at Friedrichshafen held airships.")
    r = m.call("search_notes", query="zeppelin hangar")["structuredContent"]
    assert r["found"] and r["sources"][0]["path"] == "zeppelin.md"
    (notes / "zeppelin.md").write_text("# Zeppelins\n\nA zeppelin hangar at Lakehurst held the Hindenburg.")
    assert "Lakehurst" in m.call("read_note", path="zeppelin.md")["structuredContent"]["text"]
    assert "Lakehurst" in m.call("search_notes", query="zeppelin hangar")["structuredContent"]["sources"][0]["text"]
    (notes / "airship.md").write_text("# Airships\n\nAn airship floats on lifting gas, hydrogen or helium.")
    assert "lifting gas" in m.call("read_note", path="airship.md")["structuredContent"]["text"]   # before a search
    (notes / "zeppelin.md").unlink()
    gone = m.call("read_note", path="zeppelin.md")
    assert gone["isError"] and "not a note of the index" in said(gone)
    code, err = m.close()
    assert code == 0 and "zeppelin.md" in err                               # the refresh is logged


def test_no_change_goes_unseen_however_it_is_made(mcp, notes, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (notes / "empty").mkdir()
    m = mcp("--fresh-seconds", 0)
    m.call("search_notes", query="warm up")

    def top(query):
        return m.call("search_notes", query=query)["structuredContent"]["sources"][0]

    (notes / "empty/deeper").mkdir()                # a new note in a new folder of a folder without notes
    (notes / "empty/deeper/kelp.md").write_text("# Kelp\n\nKelp forests grow along cold rocky coasts quickly.")
    assert top("kelp forests")["path"] == "empty/deeper/kelp.md"
    path = notes / "empty/deeper/kelp.md"           # edited in place to the same size, the same second
    stat = path.stat()
    path.write_text(path.read_text().replace("quickly", "swiftly"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert "swiftly" in top("kelp forests")["text"]
    os.rename(path, notes / "empty/kelp-2.md")       # renamed into another folder
    assert top("kelp forests")["path"] == "empty/kelp-2.md"
    assert m.close()[0] == 0
    # a folder linked from outside (--follow-links): what changes in it is seen as well
    (notes / "linked").symlink_to(outside)
    m = mcp("--follow-links", "--fresh-seconds", 0)
    m.call("search_notes", query="warm up")
    (outside / "moss.md").write_text("# Moss\n\nMoss carpets shaded stones in damp northern woods.")
    assert m.call("search_notes", query="moss carpets")["structuredContent"]["sources"][0]["path"] == \
        "linked/moss.md"
    assert m.close()[0] == 0


def test_a_build_reports_progress_to_a_client_that_sent_a_token_and_only_to_it(tmp_path):
    vault = make_vault(tmp_path / "vault")
    with FakeOllama() as server:
        args = ["--notes", vault, "--cache", tmp_path / "cache", "--chunk-size", 300, "--chunk-overlap", 0]
        m = Mcp(args, server.url)
        notes: list = []
        assert m.call("search_notes", notes, meta={"progressToken": "t-1"}, query="kites")["isError"] is False
        assert notes and all(n["method"] == "notifications/progress" and n["params"]["progressToken"] == "t-1"
                              for n in notes)
        done = [n["params"]["progress"] for n in notes]
        assert done == sorted(done) and done[-1] == notes[-1]["params"]["total"] == 300
        (vault / "new.md").write_text("# New\n\n" + "A new kite note with enough words to be one. " * 3)
        quiet: list = []
        assert m.call("search_notes", quiet, query="kites")["isError"] is False and quiet == []
        assert m.close()[0] == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_refresh_keeps_what_was_embedded_as_a_run_does(tmp_path, sig):
    vault = make_vault(tmp_path / "vault")
    args = ["--notes", vault, "--cache", tmp_path / "cache", "--chunk-size", 300, "--chunk-overlap", 0,
            "--checkpoint-seconds", 1000]
    with FakeOllama(hold_at=5) as server:
        m = Mcp(args, server.url)
        m.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "search_notes", "arguments": {"query": "kites"}}})
        server.wait_for_embeds(5)
        m.p.send_signal(sig)
        reply = m.line()
        server.release()
        code, err = m.close()
    assert reply["id"] == 1 and reply["result"]["isError"] is True
    assert said(reply["result"]) == "kept 128 of 300 vectors; run again to continue"
    assert code == 130 and "kept 128 of 300 vectors" in err and "Traceback" not in err
    with FakeOllama() as server:
        out = run_cli("kites", *args, "--retrieve-only", host=server.url)
        assert out.returncode == 0
        assert sum("Query:" not in t for t in server.embedded_texts()) == 300 - 128


def test_a_sigterm_while_a_refresh_measures_the_floor_keeps_every_vector_embedded(tmp_path):
    vault = make_vault(tmp_path / "vault")
    args = ["--notes", vault, "--cache", tmp_path / "cache", "--chunk-size", 300, "--chunk-overlap", 0,
            "--checkpoint-seconds", 1000]
    with FakeOllama(hold_at=11) as server:          # the 11th embed request: the floor's probes
        m = Mcp(args, server.url)
        m.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "search_notes", "arguments": {"query": "kites"}}})
        server.wait_for_embeds(11)
        m.p.send_signal(signal.SIGTERM)
        reply = m.line()
        server.release()
        code, err = m.close()
    kept = "kept all 300 vectors; the next run measures the relevance floor"
    assert reply["result"]["isError"] is True and said(reply["result"]) == kept
    assert code == 130 and kept in err and "Traceback" not in err
    with FakeOllama() as server:
        assert run_cli("kites", *args, "--retrieve-only", host=server.url).returncode == 0
        assert sum("Query:" not in t for t in server.embedded_texts()) == 0


# Runs `demo_rag.py ARGS` with a stray print() and a write to file descriptor 1 when it first
# opens a note (as it serves a call), as a library that forgets where it runs might.
STRAY_MAIN = r"""
import os, runpy, sys
done = []
def hook(event, args):
    if event == "open" and not done and isinstance(args[0], str) and args[0].endswith(".md"):
        done.append(1)
        print("a stray print")
        sys.stdout.flush()
        os.write(1, b"a stray write\n")
sys.addaudithook(hook)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_stray_print_or_write_to_stdout_goes_to_stderr(server, notes, tmp_path):
    m = Mcp(["--notes", notes, "--cache", tmp_path / "cache"], server.url, python_args=["-c", STRAY_MAIN])
    assert m.call("search_notes", query="What is BM25?")["isError"] is False
    code, err = m.close()                 # check_stdout: every line a JSON-RPC message
    assert code == 0 and "a stray print" in err and "a stray write" in err


def test_nothing_but_protocol_messages_reaches_stdout_whatever_is_warned(mcp, server, notes, tmp_path):
    # a guessed encoding, a link out of the folder, a stub, a note too big, progress lines: all on stderr
    (notes / "latin.md").write_bytes("# Grüße\n\nMüller schreibt über Käse und Brötchen, sehr lecker.".encode("cp1252"))
    (notes / "out.md").symlink_to(ROOT / "README.md")
    (notes / "stub.md").write_text("# stub")
    (notes / "big.md").write_text("# Big\n\n" + "word " * 1000)
    m = mcp("--max-note-mb", 0.004, "--progress-seconds", 0, env={"PYTHONWARNINGS": "always"})
    m.initialize()
    notes_seen: list = []
    m.call("search_notes", notes_seen, meta={"progressToken": 5}, query="Käse")
    m.call("ask_notes", question="What does Müller write about?")
    m.call("read_note", path="latin.md")
    code, err = m.close()                 # check_stdout: every line a JSON-RPC message
    assert code == 0
    for warned in ["Windows-1252", "symlink(s) to outside the notes folder", "over the 0.004 MB limit",
                   "embedding ", "embedded "]:
        assert warned in err, (warned, err)
    assert not [line for line in m.lines for warned in (b"Windows-1252", b"symlink(s)", b"MB limit", b"embedded ")
                if warned in line]
    assert notes_seen and all(n["method"] == "notifications/progress" for n in notes_seen)


# ---- the official SDK's client ------------------------------------------------------------------

def sdk():
    return pytest.importorskip("mcp", reason="the MCP SDK is a test-only dependency: pip install mcp "
                                             "(.ci/run installs it)")


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["handshake", "stateless"])
def test_the_official_sdk_client_lists_and_calls_every_tool(server, notes, tmp_path, mode):
    sdk()
    import anyio
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.shared.exceptions import MCPError
    params = StdioServerParameters(command=sys.executable, args=[str(SCRIPT), "--mcp", "--notes", str(notes),
                                                                 "--cache", str(tmp_path / "cache")],
                                   env=user_env(server.url))
    progress: list = []

    async def session():
        async with Client(params, mode=mode) as c:
            assert c.session.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert list(tools) == ["search_notes", "read_note", "ask_notes"]
            assert tools["search_notes"].input_schema["required"] == ["query"]
            for tool in tools.values():
                hints = tool.annotations
                assert hints.read_only_hint and not hints.destructive_hint and not hints.open_world_hint
                assert hints.idempotent_hint is (tool.name != "ask_notes") and tool.output_schema

            async def on_progress(done, total, message):
                progress.append((done, total))
            found = await c.call_tool("search_notes", {"query": "What is BM25?"}, progress_callback=on_progress)
            # the SDK checks each result against its tool's outputSchema: one that broke it would raise
            assert not found.is_error and found.structured_content["sources"][0]["path"] == "bm25.md"
            assert json.loads(found.content[0].text) == found.structured_content
            two = await c.call_tool("search_notes", {"query": "What is BM25?", "top_k": 2.0})   # an integer
            assert not two.is_error and 1 <= len(two.structured_content["sources"]) <= 2
            read = await c.call_tool("read_note", {"path": "bm25.md", "line_count": 1})
            assert read.structured_content["text"] == "# BM25 in plain words"
            refused = await c.call_tool("read_note", {"path": "../../etc/passwd"})
            assert refused.is_error and "not a note of the index" in refused.content[0].text
            answered = await c.call_tool("ask_notes", {"question": "What is BM25?"})
            assert answered.structured_content["status"] == "answered"
            wrong = await c.call_tool("search_notes", {"query": "What is BM25?", "top_k": 0})
            assert wrong.is_error and wrong.content[0].text == "search_notes: top_k must be 1 or more, not 0"
            with pytest.raises(MCPError, match="unknown tool 'delete_notes'"):
                await c.call_tool("delete_notes", {})
            if mode == "legacy":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")      # the SDK warns that 2026-07-28 has no ping
                    await c.send_ping()
    anyio.run(session)
    assert progress and progress[-1][0] == progress[-1][1]     # the first call built the index: progress came


def test_a_folder_nested_deeper_than_python_can_recurse_leaves_every_call_answered(mcp, notes):
    levels = [os.open(notes, os.O_RDONLY)]    # made and taken down a level at a time: both recurse
    try:
        for _ in range(1_100):
            os.mkdir("d", dir_fd=levels[-1])
            levels.append(os.open("d", os.O_RDONLY, dir_fd=levels[-1]))
        m = mcp("--fresh-seconds", 0)     # each call looks at the folders first
        m.initialize()
        for _ in range(2):
            r = m.call("search_notes", query="What is BM25?")
            assert r.get("isError") is not True and r["structuredContent"]["sources"], r
        assert m.close()[0] == 0
    finally:
        for parent in reversed(levels[:-1]):
            os.close(levels.pop())
            os.rmdir("d", dir_fd=parent)
        os.close(levels.pop())
