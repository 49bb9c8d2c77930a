"""The chat model is loaded once and early: every request of a run, a conversation and a
--make-eval run asks for the same context size, and the model is asked to load while the
question is still being searched. The stand-in counts loads as Ollama's scheduler decides
them (first use, a changed num_ctx: see tests/ollama_server.py)."""
from __future__ import annotations

import json

from conftest import write_long_chinese_note
from test_chat import chat

import demo_rag as rag

QUESTIONS = ["What is asyncio?", "泡龙井用多少度的水？", "How do I undo the last commit?"]


def test_three_questions_in_a_row_load_the_chat_model_once(cli, server, notes):
    # English and Chinese prompts differ in length; each once asked for its own size (4096 / 8192).
    for q in QUESTIONS:
        out = cli(q, "--notes", notes)
        assert out.returncode == 0 and "According to the notes" in out.stdout, out.stderr
    assert len(server.of("/api/chat")) == 3
    assert server.loads == [{"model": "qwen3:0.6b", "num_ctx": rag.NUM_CTX, "reason": "first use"}], server.loads


def test_a_four_turn_conversation_with_rewrites_loads_the_chat_model_once(cli, server, notes):
    out = chat(cli, notes, ["What is asyncio?", "How is it different from threads?", "泡龙井用多少度的水？",
                            "And what about it for green tea?"])
    assert out.returncode == 0, out.stderr
    rewrites = [b for b in server.of("/api/chat") if not b["stream"]]
    assert len(rewrites) >= 2 and len(server.of("/api/chat")) == 4 + len(rewrites)
    assert len(server.loads) == 1, server.loads


def test_a_make_eval_run_loads_the_chat_model_once(cli, server, notes, tmp_path):
    assert cli("--notes", notes, "--make-eval", tmp_path / "gen.jsonl", "--questions", 6).returncode == 0
    assert len(server.of("/api/chat")) >= 3 and len(server.loads) == 1, server.loads
    assert cli("What is asyncio?", "--notes", notes).returncode == 0      # and a question after it
    assert len(server.loads) == 1, server.loads


def test_the_chat_model_is_asked_to_load_while_the_question_is_embedded(cli, server, notes, spawn):
    assert cli("--notes", notes, "--retrieve-only", "What is asyncio?").returncode == 0   # the index is built
    assert server.of("/api/chat#load") == []                    # --retrieve-only never needs the chat model
    release = server.hold("/api/embed")                         # the question's embedding waits...
    p = spawn(["What is asyncio?", "--notes", notes, "--cache", cli.cache], host=server.url)
    server.wait_for(lambda: server.of("/api/chat#load") and server.records("/api/embed")[-1]["held"])
    assert not server.records("/api/embed")[-1]["done"]         # ...and the preload arrived meanwhile
    assert server.loads == [{"model": "qwen3:0.6b", "num_ctx": rag.NUM_CTX,
                                                   "reason": "first use"}]
    release.set()
    out, errors = p.communicate(timeout=60)
    assert p.returncode == 0 and b"According to the notes" in out, errors
    (preload,) = server.of("/api/chat#load")
    assert preload["messages"] == [] and preload["options"]["num_ctx"] == server.of("/api/chat")[0]["options"]["num_ctx"]
    assert len(server.loads) == 1                               # the answer found the model loaded


def test_a_failing_or_hanging_preload_changes_nothing_but_the_time(cli, server, notes):
    normal = cli("What is asyncio?", "--notes", notes, "--json")
    server.loaded.clear()                                       # each run finds the model unloaded
    server.load_error = (500, "llama runner process has terminated")
    failed = cli("What is asyncio?", "--notes", notes, "--json")
    server.load_error = None
    server.loaded.clear()
    server.hold("/api/chat#load")                               # never answered while the run lasts
    hanging = cli("What is asyncio?", "--notes", notes, "--json")
    assert len(server.of("/api/chat#load")) == 3
    for out in (normal, failed, hanging):
        assert out.returncode == 0 and "runner" not in out.stderr, out.stderr
        data = json.loads(out.stdout)
        assert data["answer"].startswith("According to the notes") and data["warnings"] == [] and not data["error"]
    assert json.loads(failed.stdout)["sources"] == json.loads(normal.stdout)["sources"]


def test_keep_alive_goes_with_every_chat_request_only_when_asked(cli, server, notes):
    assert cli("What is asyncio?", "--notes", notes).returncode == 0
    assert all("keep_alive" not in b for b in server.of("/api/chat") + server.of("/api/chat#load"))
    server.loaded.clear()                                       # unloaded since: each run preloads
    assert cli("What is asyncio?", "--notes", notes, "--keep-alive", "30m").returncode == 0
    server.loaded.clear()
    out = cli("--chat", "--notes", notes, "--keep-alive", "-1", stdin="What is asyncio?\nAnd it?\n")
    assert out.returncode == 0, out.stderr
    sent = [b.get("keep_alive") for b in server.of("/api/chat") + server.of("/api/chat#load")]
    assert sent.count("30m") == 2 and sent.count(-1.0) == 4, sent     # preload, answer; preload, 2 answers, rewrite
    bad = cli("What is asyncio?", "--notes", notes, "--keep-alive", "soon")
    assert bad.returncode == 2 and "expected a duration like 10m, 1h, 0 or -1 (at most 2,562,047h), not 'soon'" in bad.stderr


def test_a_model_loaded_with_a_larger_context_is_not_shrunk_by_the_next_run(cli, server, notes):
    # Eight long Chinese sources need 16,384: the first run loads twice (the preload cannot know);
    # later runs find it loaded with 16,384 (/api/ps), send no preload and ask for that size again.
    write_long_chinese_note(notes)
    for q in ["龙井茶用多少度的水？", "龙井茶用多少度的水？", "What is asyncio?"]:
        assert cli(q, "--notes", notes, "--top-k", 8).returncode == 0
    assert [b["options"]["num_ctx"] for b in server.of("/api/chat")] == [16384] * 3
    assert len(server.of("/api/chat#load")) == 1 and len(server.loads) == 2, server.loads


def test_keep_alive_zero_sends_no_preload_and_odd_durations_are_refused(cli, server, notes):
    # Ollama takes a load request with keep_alive 0 as "unload now" (ChatHandler in server/routes.go).
    assert cli("What is asyncio?", "--notes", notes, "--keep-alive", "0").returncode == 0
    assert server.of("/api/chat#load") == [] and server.of("/api/chat")[0]["keep_alive"] == 0
    for bad in ("1e10", "3000000h", "nan", "10 m"):                 # Go's Duration overflows, or not a duration
        out = cli("What is asyncio?", "--notes", notes, "--keep-alive", bad)
        assert out.returncode == 2 and "expected a duration like 10m" in out.stderr, (bad, out.stderr)
    assert cli("What is asyncio?", "--notes", notes, "--keep-alive", ".5s").returncode == 0   # Go reads it


def test_an_ollama_stuck_on_api_ps_holds_the_question_up_seconds_not_the_whole_timeout(cli, server, notes):
    # /api/ps is answered at once by a healthy Ollama; one that never answers costs at most
    # OLLAMA_CONNECT_TIMEOUT before the search begins, not --timeout (here longer than the hold).
    assert cli("What is asyncio?", "--notes", notes, "--retrieve-only").returncode == 0    # the index is built
    server.hold("/api/ps")                                      # held for HOLD_TIMEOUT (60 s), then answered
    out = cli("What is asyncio?", "--notes", notes, "--timeout", 120, timeout=45)
    assert out.returncode == 0 and "According to the notes" in out.stdout, out.stderr


def test_explain_asks_for_the_size_the_chat_model_is_loaded_with(cli, server, notes):
    # A Chinese question with eight long sources loads the model at 16,384; --explain then
    # narrates and answers with that size rather than loading it again at 8,192.
    write_long_chinese_note(notes)
    assert cli("龙井茶用多少度的水？", "--notes", notes, "--top-k", 8).returncode == 0
    loads = len(server.loads)
    out = cli("--explain", "What is asyncio?", "--notes", notes)
    assert out.returncode == 0, out.stderr
    assert "num_ctx 16384" in out.stdout and "no less than 16384, the size" in out.stdout.replace("\n    ", " ")
    assert server.of("/api/chat")[-1]["options"]["num_ctx"] == 16384
    assert len(server.loads) == loads, server.loads


def test_explain_asks_for_the_chat_model_to_load_while_it_searches(cli, server, notes):
    out = cli("--explain", "What is asyncio?", "--notes", notes)
    assert out.returncode == 0, out.stderr
    assert len(server.of("/api/chat#load")) == 1 and len(server.loads) == 1, server.loads
    out = cli("--explain", "What is asyncio?", "--notes", notes, "--retrieve-only")    # as a question's run
    assert out.returncode == 0 and "--retrieve-only: the chat model is not called" in out.stdout, out.stderr
    assert len(server.of("/api/chat#load")) == 1 and len(server.of("/api/chat")) == 1


def test_explain_says_when_the_prompt_needs_more_than_the_loaded_size(cli, server, notes):
    assert cli("What is asyncio?", "--notes", notes).returncode == 0              # loaded with 8,192
    write_long_chinese_note(notes)
    out = cli("--explain", "龙井茶用多少度的水？", "--notes", notes, "--top-k", 8)
    assert out.returncode == 0, out.stderr
    assert "more than the 8192 this run started from: Ollama loads the model again" in out.stdout.replace("\n    ", " ")
    assert len(server.loads) == 2, server.loads
