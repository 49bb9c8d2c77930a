"""--mcp while an answer streams, and while it idles: a cancelled call stops its work and is not
answered, a search is answered while ask_notes streams, and the notes are looked at between calls.

Through the official SDK's client where it can say it (cancelling a call, two calls at once), and
raw JSON lines where it cannot (that no response ever comes, a cancel for no call, stdin ending).
"""
from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time

import pytest
from conftest import SCRIPT, user_env
import test_mcp
from test_mcp import Mcp, said, sdk

import demo_rag as rag

mcp = test_mcp.mcp                        # its fixture: servers on a copy of demo-data/, all ended
PIECE_SECONDS = 0.02                      # a slow chat model: one piece of its answer this often


@pytest.fixture
def slow_answer(server):
    """The stand-in's answers stream a piece every PIECE_SECONDS until the model's limit (about
    20 s at --max-answer-tokens' default); `chat()` is the first chat request's record, once it came
    (its "done" is set when its answer ended, its "gone" when the client closed it before)."""
    stop = threading.Event()

    def pieces():
        yield "The answer [1] "
        for n in itertools.count():       # words that differ: not a loop, which would be cut short
            if stop.wait(PIECE_SECONDS):
                return
            yield f"then {n} "
    server.answer = pieces()

    def chat() -> dict:
        server.wait_for(lambda: [r for r in server.requests if r["path"] == "/api/chat"])
        return next(r for r in server.requests if r["path"] == "/api/chat")
    yield chat
    stop.set()


def cancel(m: Mcp, request_id) -> None:
    m.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "the user pressed stop"}})


def test_the_sdk_cancels_an_answer_mid_stream_which_stops_it_and_a_search_meanwhile_is_answered(
        server, notes, tmp_path, slow_answer):
    sdk()
    import anyio
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters
    params = StdioServerParameters(command=sys.executable, args=[str(SCRIPT), "--mcp", "--notes", str(notes),
                                                                 "--cache", str(tmp_path / "cache")],
                                   env=user_env(server.url))
    seen: dict = {}

    async def session():
        async with Client(params) as c:
            assert not (await c.call_tool("search_notes", {"query": "What is BM25?"})).is_error  # opened
            stop = anyio.CancelScope()

            async def ask():
                with stop:                # the user pressed stop: the SDK sends notifications/cancelled
                    seen["answer"] = await c.call_tool("ask_notes", {"question": "What is BM25?"})
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                chat = await anyio.to_thread.run_sync(slow_answer)
                found = await c.call_tool("search_notes", {"query": "What is BM25?"})
                seen["streaming while found"] = not chat["done"]
                seen["found"] = found.structured_content["sources"][0]["path"]
                stop.cancel()
            await anyio.to_thread.run_sync(lambda: server.wait_for(lambda: chat.get("gone"), timeout=10))
            seen["parts sent"] = chat["sent_parts"]
            assert (await c.call_tool("search_notes", {"query": "What is BM25?"})).structured_content["found"]
    anyio.run(session)
    assert seen["streaming while found"] and seen["found"] == "bm25.md"
    assert "answer" not in seen and seen["parts sent"] < 500        # stopped long before its 1,024


def test_a_cancelled_call_gets_no_answer_and_a_cancel_for_no_call_is_ignored(mcp, server, slow_answer):
    m = mcp()
    m.initialize()
    cancel(m, 4242)                       # never asked
    m.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}})       # no id at all
    assert m.call("search_notes", query="What is BM25?")["structuredContent"]["found"]
    cancel(m, m.next_id)                  # answered already
    m.send({"jsonrpc": "2.0", "id": "ask", "method": "tools/call",
            "params": {"name": "ask_notes", "arguments": {"question": "What is BM25?"}}})
    chat = slow_answer()
    cancel(m, "ask")
    server.wait_for(lambda: chat.get("gone"), timeout=10)               # its stream closed: Ollama stops
    assert m.request("ping")["result"] == {}          # the next line is the ping's: none for "ask"
    time.sleep(0.3)
    code, err = m.close()
    assert code == 0 and "Traceback" not in err
    assert not [line for line in m.lines if json.loads(line).get("id") == "ask"]


def test_a_piped_client_s_ask_notes_is_answered_though_stdin_ended_as_it_streamed(server, notes, tmp_path, slow_answer):
    """`echo '{... ask_notes ...}' | demo_rag.py --mcp`: stdin ends as the call is read, and the
    answer that streams after it is still given, then the server ends."""
    ask = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": "ask_notes", "arguments": {"question": "What is BM25?"}}}
    out = subprocess.run([sys.executable, str(SCRIPT), "--mcp", "--notes", str(notes), "--cache", str(tmp_path / "c"),
                          "--max-answer-tokens", "40"], input=json.dumps(ask) + "\n", capture_output=True,
                         text=True, env=user_env(server.url), timeout=60)
    (reply,) = [json.loads(line) for line in out.stdout.splitlines()]
    answer = reply["result"]["structuredContent"]
    assert out.returncode == 0 and reply["id"] == 1 and answer["status"] == "answered", out.stderr
    assert answer["answer"].startswith("The answer [1] then 0 then 1 ") and "then 37 " in answer["answer"]
    assert "Traceback" not in out.stderr and "Fatal" not in out.stderr


def test_stdin_ending_gives_an_answer_that_streams_until_timeout_then_stops_it_and_ends(mcp, server, slow_answer):
    m = mcp("--timeout", 1.5)             # the answer would stream for ~20 s
    m.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "ask_notes", "arguments": {"question": "What is BM25?"}}})
    chat = slow_answer()
    t0 = time.monotonic()
    code, err = m.close()
    took = time.monotonic() - t0
    assert code == 0 and 1.4 < took < 8 and "Traceback" not in err and "Fatal" not in err, (took, err)
    assert "stdin ended: stopped 1 answer(s) not finished within 1.5 s (--timeout)" in err, err
    server.wait_for(lambda: chat.get("gone"), timeout=10)               # it did not answer on
    assert m.lines == []


def test_ctrl_c_while_an_answer_streams_says_so_to_its_caller_and_ends(mcp, server, slow_answer):
    import signal
    m = mcp()
    m.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "ask_notes", "arguments": {"question": "What is BM25?"}}})
    slow_answer()
    m.p.send_signal(signal.SIGINT)
    reply = m.line(timeout=10)
    code, err = m.close()
    assert reply["id"] == 1 and reply["result"]["isError"] is True and said(reply["result"]) == "interrupted"
    assert code == 130 and "Traceback" not in err and "Fatal" not in err, err


def test_a_note_edited_while_the_server_idles_is_seen_by_the_next_call_which_looks_no_more(mcp, server, notes):
    m = mcp()
    assert not m.call("search_notes", query="zeppelin hangar")["structuredContent"]["found"]
    (notes / "zeppelin.md").write_text("# Zeppelins\n\nA zeppelin hangar at Friedrichshafen held airships.")
    # no call comes: the server looks by itself (within a second), and brings the index up to date
    deadline = time.monotonic() + 20
    seen = ""
    while "zeppelin.md" not in seen and time.monotonic() < deadline:
        time.sleep(0.1)
        seen += m.stderr_now()
    assert "zeppelin.md" in seen, seen
    asked = len(server.requests)
    r = m.call("search_notes", query="zeppelin hangar")["structuredContent"]
    assert r["found"] and r["sources"][0]["path"] == "zeppelin.md"
    # the call asked Ollama for the question's vector only (a look would ask for the model's build too),
    # unless a look fell due just as it came
    paths = [q["path"] for q in server.requests[asked:]]
    assert paths in (["/api/embed"], ["/api/tags", "/api/embed"]), paths
    assert m.close()[0] == 0


def test_the_held_index_serves_a_call_without_looking_while_its_last_look_is_fresh(server, notes, tmp_path):
    settings = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache")
    held = rag.HeldIndex(settings, rag.ollama_client(), fresh_seconds=2000)
    index, _ = held.current()             # opened: looked just now
    assert held.idle_for() > 900
    tags = len(server.of("/api/tags"))
    assert held.current()[0] is index     # served, not looked: a look is due a tenth of 2000 s on,
    assert 190 < held.idle_for() <= 200   # not at once, while the client reads the answer
    held.look()
    assert held.idle_looks == 0 and len(server.of("/api/tags")) == tags
    held.used, held.looked = held.used - 200, held.looked - 200       # 200 s on
    held.look()
    assert held.idle_looks == 1 and len(server.of("/api/tags")) == tags + 1 and held.idle_for() > 900
    held.look()                           # not due: nothing asked
    assert held.idle_looks == 1 and len(server.of("/api/tags")) == tags + 1
    (notes / "zeppelin.md").write_text("# Zeppelins\n\nA zeppelin hangar at Friedrichshafen held airships.")
    assert held.current()[0] is index     # within the bound: served as it was, nothing asked
    assert len(server.of("/api/tags")) == tags + 1
    held.looked -= 2000                   # long after: the next call looks first, and sees the note
    assert "zeppelin.md" in held.current()[0].files
    assert rag.HeldIndex(settings, rag.ollama_client(), fresh_seconds=0).idle_for() is None


def test_a_search_cancelled_while_the_index_is_built_is_not_answered_and_its_progress_stops(tmp_path):
    from ollama_server import FakeOllama
    from test_index import make_vault
    vault = make_vault(tmp_path / "vault")
    args = ["--notes", vault, "--cache", tmp_path / "cache", "--chunk-size", 300, "--chunk-overlap", 0,
            "--progress-seconds", 0]
    with FakeOllama(hold_at=5) as server:
        m = Mcp(args, server.url)
        m.send({"jsonrpc": "2.0", "id": "s", "method": "tools/call",
                "params": {"name": "search_notes", "arguments": {"query": "kites"}, "_meta": {"progressToken": 1}}})
        server.wait_for_embeds(5)
        with pytest.raises(TimeoutError):   # the progress of the embeds before it: all written already
            while True:
                assert m.line(timeout=0.3)["method"] == "notifications/progress"
        cancel(m, "s")
        time.sleep(0.3)                   # the cancellation read while the build waits for Ollama
        server.release()
        after: list = []
        assert m.request("ping", notes=after)["result"] == {}     # once built: nothing for the search
        code, err = m.close()
    assert code == 0 and "Traceback" not in err and after == []
    assert not [line for line in m.lines if json.loads(line).get("id") == "s"]


def test_a_client_that_stops_reading_ends_the_server_cleanly_while_its_stdin_stays_open(mcp):
    m = mcp()
    m.p.stdout.close()                    # the reader of the server's messages goes away
    m.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    code = m.p.wait(timeout=30)           # its stdin still open: the reader thread waits on it
    err = m.p.stderr.read().decode()
    assert code == 0 and "Fatal" not in err and "Traceback" not in err, err
