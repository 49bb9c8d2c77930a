"""The main job end to end: `python demo_rag.py "question"` as a subprocess, against
the stand-in Ollama server, and every row of the bad-input table."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys

import ollama
import pytest

import demo_rag as rag
from conftest import ROOT, SCRIPT, read_until, run_cli, user_env, write_long_chinese_note
from ollama_server import FakeOllama


def test_the_readme_s_commands_run_the_script_as_written(server, tmp_path):
    # The other tests start the script from its bytecode (conftest's SCRIPT_COMMAND); this one
    # runs it as the README says, the file compiled at start as a user's run compiles it.
    env = user_env(server.url, {"PYTHONDONTWRITEBYTECODE": "1"})
    for args in (["--help"], ["什么是 RAG？", "--cache", str(tmp_path / "cache")]):
        out = subprocess.run([sys.executable, "demo_rag.py", *args], cwd=ROOT, env=env,
                             capture_output=True, text=True, encoding="utf-8", timeout=120)
        assert out.returncode == 0, out.stderr
    assert "Top sources:" in out.stdout and "[1] rag-入门.md" in out.stdout and "Answer:" in out.stdout


def test_question_shows_index_sources_then_streamed_answer(cli, server, notes):
    out = cli("How often should I feed my sourdough starter?", "--notes", notes)
    assert out.returncode == 0, out.stderr
    assert "indexed 10 notes: 0 changed, 10 new, 0 deleted, 0 unchanged (12 chunks embedded)" in out.stderr
    assert "timings: index" in out.stderr
    sources_at, answer_at = out.stdout.index("Top sources"), out.stdout.index("Answer:")
    assert sources_at < answer_at
    assert "[1] sourdough.md:10 › # Sourdough bread › ## The starter" in out.stdout
    assert "[1]" in out.stdout[answer_at:]
    # the requests: batched document embeds, one query embed with the instruction, one chat
    embeds = server.of("/api/embed")
    assert {b["model"] for b in embeds} == {"qwen3-embedding:0.6b"}
    assert len(embeds[0]["input"]) > 1                       # many texts per request
    assert embeds[-1]["input"] == ["Instruct: Given a web search query, retrieve relevant passages "
                                   "that answer the query\nQuery:How often should I feed my sourdough starter?"]
    (chat,) = server.of("/api/chat")
    assert chat["model"] == "qwen3:0.6b" and chat["stream"] is True
    # thinking off; an ollama client too old to send `think` (the lower-bound CI run) asks without it
    assert chat.get("think") is (False if rag.client_knows_think(ollama.Client()) else None)
    assert chat["options"]["temperature"] == 0.3 and chat["options"]["num_ctx"] >= 4096
    assert chat["messages"][0]["role"] == "system"
    assert chat["messages"][1]["content"].startswith("Sources:\n\n[1] sourdough.md")


def test_chinese_question_finds_the_chinese_note(cli, notes):
    out = cli("泡龙井用多少度的水？", "--notes", notes, "--retrieve-only")
    assert out.returncode == 0, out.stderr
    assert "[1] 中国茶冲泡.md:5 › # 中国茶的冲泡 › ## 绿茶" in out.stdout
    assert "Answer:" not in out.stdout


def test_second_run_loads_the_cache_and_embeds_only_the_question(cli, server, notes):
    assert cli("what is BM25?", "--notes", notes, "--retrieve-only").returncode == 0
    before = len(server.of("/api/embed"))
    out = cli("what is BM25?", "--notes", notes, "--retrieve-only")
    assert out.returncode == 0
    assert len(server.of("/api/embed")) == before + 1
    assert "(0 chunks embedded)" in out.stderr and "(re)indexed" not in out.stderr
    (notes / "git-tips.md").write_text((notes / "git-tips.md").read_text() + "\nOne more tip: git stash.\n")
    out = cli("what is BM25?", "--notes", notes, "--retrieve-only")
    assert "1 changed, 0 new, 0 deleted, 9 unchanged (1 chunks embedded)" in out.stderr
    assert "  (re)indexed: git-tips.md\n" in out.stderr


def test_json_output(cli, notes):
    out = cli("Who published BM25?", "--notes", notes, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["question"] == "Who published BM25?" and data["version"] == rag.VERSION
    assert "[1]" in data["answer"]
    first = data["sources"][0]
    assert (first["rank"], first["source"]) == (1, "bm25.md")
    assert set(first) >= {"rank", "source", "heading", "score", "text"}
    assert set(data["timings"]) >= {"index", "embed_query", "search", "answer"}


def test_version_prints_the_one_version_string_and_exits(cli):
    out = cli("--version")
    assert (out.returncode, out.stdout) == (0, f"demo_rag {rag.VERSION}\n") and rag.VERSION[0].isdigit()


def test_show_prompt_prints_the_three_parts(cli, notes):
    out = cli("What is asyncio?", "--notes", notes, "--show-prompt", "--retrieve-only")
    assert "--- system ---" in out.stdout and "Use only the numbered sources" in out.stdout
    assert "--- user ---\nSources:\n\n[1] python-asyncio.md" in out.stdout
    assert "Question: What is asyncio?" in out.stdout and "num_ctx=" in out.stdout


def test_show_prompt_prints_exactly_what_is_sent(cli, server, notes):
    out = cli("What is asyncio?", "--notes", notes, "--show-prompt")
    assert out.returncode == 0, out.stderr
    shown = re.search(r"^Prompt:\n--- system ---\n(.*)\n--- user ---\n(.*)\n--- options: temperature=([\d.]+), "
                      r"num_ctx=(\d+), num_predict=(\d+) ---$", out.stdout, re.MULTILINE | re.DOTALL)
    assert shown, out.stdout
    (chat,) = server.of("/api/chat")
    assert chat["messages"] == [{"role": "system", "content": shown.group(1)},
                                {"role": "user", "content": shown.group(2)}]
    assert chat["options"] == {"temperature": float(shown.group(3)), "num_ctx": int(shown.group(4)),
                               "num_predict": int(shown.group(5))}


def test_thinking_model_output_is_stripped(cli, notes):
    out = cli("What is asyncio?", "--notes", notes, "--chat-model", "thinker:1b")
    assert out.returncode == 0
    assert "<think>" not in out.stdout and "let me think" not in out.stdout
    assert "Answer:\nAccording to the notes" in out.stdout


def test_a_model_that_refuses_the_think_field_is_asked_again_without_it(cli, server, notes):
    out = cli("What is asyncio?", "--notes", notes, "--chat-model", "plain:1b")
    assert out.returncode == 0, out.stderr
    assert "Answer:\nAccording to the notes" in out.stdout
    if not rag.client_knows_think(ollama.Client()):         # an old client never sends it
        (only,) = server.of("/api/chat")
        assert "think" not in only
        return
    first, second = server.of("/api/chat")
    assert first["think"] is False and "think" not in second


def test_unanswerable_question_does_not_call_the_chat_model(cli, server, notes):
    out = cli("Who won the 2018 football World Cup?", "--notes", notes)
    assert out.returncode == 0
    assert "Not found in your notes" in out.stdout
    assert server.of("/api/chat") == []


# ---- bad input -----------------------------------------------------------------

def test_no_question_prints_usage(cli):
    out = cli()
    assert out.returncode == 2
    assert "usage:" in out.stderr and "Traceback" not in out.stderr


def test_missing_notes_folder(cli, tmp_path):
    out = cli("q", "--notes", tmp_path / "nope")
    assert out.returncode == 2
    assert str(tmp_path / "nope") in out.stderr and "Traceback" not in out.stderr


def test_folder_without_usable_notes(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "stub.md").write_text("# tiny")
    out = cli("q", "--notes", tmp_path / "empty")
    assert out.returncode == 2
    assert "no usable notes" in out.stderr and ".md" in out.stderr
    assert "skipped stub.md: under 50 characters (12 besides headings)" in out.stderr
    assert not list(cli.cache.glob("*.pkl"))          # a cache of no notes would serve no run


@pytest.mark.parametrize("mode", [["Q"], ["Q", "--json"], ["--chat"], ["--explain", "Q"]])
def test_chat_model_not_pulled_ends_the_run_before_any_source(cli, server, notes, mode):
    ask = [a.replace("Q", "What is asyncio?") for a in mode]
    out = cli(*ask, "--notes", notes, "--chat-model", "llama9:70b", stdin="What is asyncio?\n")
    said = "error: model 'llama9:70b' is not pulled: run `ollama pull llama9:70b`"
    assert out.returncode == 3 and said in out.stderr and "Traceback" not in out.stderr
    alone = {"error": said, "exit_code": 3}       # --json: its one error object, nothing else
    assert (json.loads(out.stdout) == alone) if "--json" in mode else out.stdout == "", out.stdout
    assert server.of("/api/embed") == []          # nor were the notes indexed first


def test_embedding_model_not_pulled_falls_back_to_bm25(cli, notes):
    out = cli("What is asyncio?", "--notes", notes, "--embed-model", "nomic-embed-text")
    assert out.returncode == 0, out.stderr
    assert "ollama pull nomic-embed-text" in out.stderr
    assert "Top sources (keywords only):" in out.stdout and "[1] python-asyncio.md" in out.stdout
    assert not list(cli.cache.glob("*.pkl"))          # nor one without a vector: nothing to reuse
    out = cli("--explain", "What is asyncio?", "--notes", notes, "--embed-model", "nomic-embed-text",
              "--retrieve-only")                     # step 4 says why as the warning says it
    assert "model 'nomic-embed-text' is not pulled: run `ollama pull nomic-embed-text`; searching " \
           "by keywords (BM25) only" in " ".join(out.stdout.split()), out.stdout


@pytest.mark.parametrize("json_", [False, True], ids=["text", "json"])
def test_an_embedding_model_not_pulled_is_said_first_and_on_the_sources(cli, notes, json_):
    (notes / "stub.md").write_text("# tiny")         # a warning of the index's, said after it
    out = cli("What is asyncio?", "--notes", notes, "--embed-model", "nomic-embed-text",
              *["--json"] * json_)
    said = "model 'nomic-embed-text' is not pulled: run `ollama pull nomic-embed-text`"
    warning = f"{said}; searching by keywords (BM25) only"
    assert out.returncode == 0, out.stderr
    # the first warning, before the index's summary (and, under --json, its one line)
    assert out.stderr.split("warning: ", 1)[1].startswith(warning + "\n"), out.stderr
    assert out.stderr.index(warning) < out.stderr.index("warning: skipped stub.md")
    if json_:                                        # first among the warnings, and its own key
        run = json.loads(out.stdout)
        assert (run["warnings"][0], run["keywords_only_because"]) == (warning, said)
    else:                                            # and where the sources start
        assert out.stderr.index(warning) < out.stderr.index("indexed 10 notes")
        assert out.stdout.startswith(f"Not searched by meaning: {said}\n"
                                     "Top sources (keywords only):\n  [1] python-asyncio.md")


def test_an_embedding_model_not_pulled_on_a_terminal_starts_its_warning_on_a_line_of_its_own(
        server, notes, tmp_path):
    import os
    import pty
    from conftest import SCRIPT_COMMAND, read_terminal
    leader, follower = pty.openpty()
    p = subprocess.Popen([*SCRIPT_COMMAND, "What is asyncio?", "--notes", str(notes), "--cache",
                          str(tmp_path / "c"), "--embed-model", "nomic-embed-text"],
                         stdin=follower, stdout=follower, stderr=follower, env=user_env(server.url))
    os.close(follower)
    try:
        out = read_terminal(leader).decode("utf-8", "replace")
        p.wait(timeout=60)
    finally:
        p.kill()
        os.close(leader)
    assert p.returncode == 0, out
    # the line that waited for the first batch is cleared, not ended by the warning
    assert "waiting for the first batc" in out and "\r\x1b[Kwarning: model 'nomic-embed-text'" in out


def test_ollama_down_first_run_gives_lexical_passages(tmp_path, notes, dead_host):
    host = dead_host
    out = run_cli("How do I find the commit that broke something?", "--notes", notes,
                  "--cache", tmp_path / "c", host=host)
    assert out.returncode == 0, out.stderr
    assert f"Ollama is not reachable at {host}" in out.stderr and "ollama serve" in out.stderr
    assert "[1] git-tips.md" in out.stdout and "Keyword-only passages" in out.stdout
    assert "Traceback" not in out.stderr
    # Ollama comes back: the missing vectors are embedded on the next run.
    with FakeOllama() as s:
        out = run_cli("How do I find the commit that broke something?", "--notes", notes,
                      "--cache", tmp_path / "c", host=s.url)
        assert out.returncode == 0, out.stderr
        assert "(12 chunks embedded)" in out.stderr and "Answer:" in out.stdout


@pytest.mark.parametrize("how", [(), ("--retrieve-only",)], ids=["question", "retrieve-only"])
def test_ollama_down_and_no_matching_words_is_not_found_with_the_reason(tmp_path, notes, dead_host, how):
    # nothing matched, which is no failure: said as such, with why the meaning was not searched
    out = run_cli("Zebras?", *how, "--notes", notes, "--cache", tmp_path / "c", host=dead_host)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "Top sources (keywords only): none" in out.stdout and "closest sources" not in out.stdout
    assert f"{rag.NOT_FOUND} (no passage has any of its words, and it could not be searched by meaning: " \
           f"Ollama is not reachable at {dead_host}" in out.stdout and "ollama serve" in out.stdout
    run = json.loads(run_cli("Zebras?", *how, "--json", "--notes", notes, "--cache", tmp_path / "c",
                             host=dead_host).stdout)
    assert (run["status"], run["sources"], run["error"]) == ("declined", [], None)


def test_non_utf8_note_is_decoded_with_a_stated_fallback(cli, tmp_path):
    folder = tmp_path / "n"
    folder.mkdir()
    (folder / "gbk.md").write_bytes("# 旧笔记\n\n这是一篇用 GBK 编码保存的旧笔记，讲的是如何冲泡乌龙茶和保存茶叶。乌龙茶要用沸水，每泡十几秒出汤。".encode("gb18030"))
    (folder / "bad.md").write_bytes(b"\x81\x30\xff\xfe" * 40)
    (folder / "ok.md").write_text("# Fine\n\nA perfectly ordinary UTF-8 note about watering houseplants.")
    out = cli("乌龙茶", "--notes", folder, "--retrieve-only")
    assert out.returncode == 0, out.stderr
    assert "gbk.md: not UTF-8; read as GB18030" in out.stderr
    assert "skipped bad.md" in out.stderr
    assert "[1] gbk.md" in out.stdout


def test_ctrl_c_during_indexing_keeps_the_previous_cache(tmp_path, notes, spawn):
    with FakeOllama() as s:
        cache = tmp_path / "cache"
        assert run_cli("q", "--notes", notes, "--cache", cache, "--retrieve-only", host=s.url).returncode == 0
        (pkl,) = cache.glob("*.pkl")
        before = pkl.read_bytes()
        (notes / "new.md").write_text("# New\n\n" + "A brand new note about kites and wind. " * 50)
        s.hold("/api/embed")                  # the next embed request waits: indexing is under way
        p = spawn(["q", "--notes", notes, "--cache", cache, "--rebuild"], host=s.url, text=True)
        s.wait_for(lambda: any(r["held"] for r in s.records("/api/embed")))
        p.send_signal(signal.SIGINT)
        _, stderr = p.communicate(timeout=30)
    assert p.returncode == 130
    # a --rebuild that embedded nothing yet says its own count, and leaves the previous cache as it was
    assert "the cache is kept as it was; the rebuild kept none of its 14 vectors" in stderr
    assert "Traceback" not in stderr
    assert pkl.read_bytes() == before
    assert [f.name for f in cache.iterdir() if f.name != rag.GAP_LOG] == [pkl.name]   # no temp file left behind


def test_ollama_host_is_honoured(notes, tmp_path):
    with FakeOllama() as s:
        out = run_cli("what is RAG", "--notes", notes, "--cache", tmp_path / "c", "--retrieve-only", host=s.url)
        assert out.returncode == 0 and s.of("/api/embed")


@pytest.mark.parametrize("args", [["q", "--top-k", "0"], ["q", "--chunk-overlap", "5000"]])
def test_bad_numbers_are_usage_errors(cli, args):
    out = cli(*args)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "need --top-k >= 1, --chunk-size >= 50 and 0 <= --chunk-overlap < --chunk-size" in out.stderr


# ---- every flag shows its effect -------------------------------------------------

def test_help_exits_0_and_lists_the_flags(cli):
    out = cli("--help")
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout.startswith("usage: demo_rag.py")
    out = cli("--help-all")
    assert out.returncode == 0 and out.stderr == ""
    for flag in ["--top-k", "--query-instruction", "--max-note-mb", "--rebuild", "--notes", "--chat"]:
        assert flag in out.stdout


def test_top_k_flag_sets_how_many_sources(cli, server, notes):
    out = cli("What is asyncio?", "--notes", notes, "--top-k", 2)
    assert out.returncode == 0, out.stderr
    listed = re.findall(r"^  \[(\d+)\] ", out.stdout.split("\nAnswer:")[0], re.MULTILINE)
    assert listed == ["1", "2"]
    (chat,) = server.of("/api/chat")
    assert re.findall(r"^\[(\d+)\] ", chat["messages"][1]["content"], re.MULTILINE) == ["1", "2"]
    data = json.loads(cli("What is asyncio?", "--notes", notes, "--top-k", 1, "--json").stdout)
    assert len(data["sources"]) == 1


def test_empty_query_instruction_sends_the_raw_question(cli, server, notes):
    assert cli("What is asyncio?", "--notes", notes, "--query-instruction", "", "--retrieve-only").returncode == 0
    assert server.of("/api/embed")[-1]["input"] == ["What is asyncio?"]
    assert cli("What is asyncio?", "--notes", notes, "--query-instruction", "search: {query}!",
               "--retrieve-only").returncode == 0
    assert server.of("/api/embed")[-1]["input"] == ["search: What is asyncio?!"]


def test_max_note_mb_skips_bigger_notes(cli, server, tmp_path):
    folder = tmp_path / "n"
    folder.mkdir()
    (folder / "big.md").write_text("# Big\n\n" + "A long note about kites and the wind that lifts them. " * 60)
    (folder / "small.md").write_text("# Small\n\nA short note about kites, long enough to be kept.")
    out = cli("kites", "--notes", folder, "--max-note-mb", 0.002, "--retrieve-only")
    assert out.returncode == 0, out.stderr
    assert "warning: skipped big.md: 0.0 MB is over the 0.002 MB limit (--max-note-mb)" in out.stderr
    assert "indexed 1 notes" in out.stderr and "big.md" not in out.stdout
    assert not any("lifts them" in t for t in server.embedded_texts())


def test_rebuild_flag_re_embeds_every_chunk(cli, server, notes):
    assert cli("what is BM25?", "--notes", notes, "--retrieve-only").returncode == 0
    before = len(server.embedded_texts())
    out = cli("what is BM25?", "--notes", notes, "--retrieve-only", "--rebuild")
    assert out.returncode == 0, out.stderr
    assert "rebuilding index: --rebuild" in out.stderr and "(12 chunks embedded)" in out.stderr
    assert len(server.embedded_texts()) - before == 12 + 1          # every chunk, then the question


# ---- the answer: streamed, in a window that holds the prompt ---------------------

def test_the_answer_streams_before_its_last_part_is_sent(tmp_path, notes, spawn):
    with FakeOllama() as s:
        release = s.hold("/api/chat")        # the server sends all but the last part, then waits
        p = spawn(["What is asyncio?", "--notes", notes, "--cache", tmp_path / "c"], host=s.url)
        try:
            s.wait_for(lambda: any(r["held"] for r in s.records("/api/chat")))
            shown = read_until(p.stdout, "According to the notes", timeout=10)
            assert not s.records("/api/chat")[0]["done"]          # the last part is still unsent
        finally:
            release.set()
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert "Answer:\nAccording to the notes" in shown + out.decode()


def test_ctrl_c_mid_answer_exits_130_with_the_part_shown(tmp_path, notes, spawn):
    with FakeOllama() as s:
        s.hold("/api/chat")
        p = spawn(["What is asyncio?", "--notes", notes, "--cache", tmp_path / "c"], host=s.url)
        s.wait_for(lambda: any(r["held"] for r in s.records("/api/chat")))
        shown = read_until(p.stdout, "According to the notes", timeout=10)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    assert "interrupted" in err.decode() and "Traceback" not in err.decode()
    assert "Answer:\nAccording to the notes" in shown + out.decode()


def test_only_the_sources_close_to_the_best_are_sent_and_shown(cli, server, notes):
    # A question worded like one note: that note's chunk stands far above the rest, and the
    # others would only cost the chat model time. --json and the printed list show what was sent.
    out = cli("How do I cancel an asyncio task?", "--notes", notes, "--json")
    assert out.returncode == 0, out.stderr
    sources = json.loads(out.stdout)["sources"]
    prompt = server.of("/api/chat")[-1]["messages"][-1]["content"]
    headers = [line for line in prompt.splitlines() if line[:1] == "["]
    assert 1 <= len(sources) < rag.TOP_K and len(headers) == len(sources), (sources, headers)
    assert sources[0]["source"] == "python-asyncio.md"
    out = cli("How do I cancel an asyncio task?", "--notes", notes)
    assert out.stdout.split("\nAnswer:")[0].count("\n  [") == len(sources)


def test_a_long_prompt_gets_a_context_window_that_holds_it(cli, server, tmp_path):
    from ollama_server import prompt_tokens
    folder = tmp_path / "big"
    folder.mkdir()
    for i, topic in enumerate(["kites", "violins", "glaciers", "bees", "comets", "origami"]):
        (folder / f"{topic}.md").write_text(f"# {topic}\n\n" + f"Facts about {topic} and wind, number {i}. " * 120)
    out = cli("Facts about wind", "--notes", folder, "--chunk-size", 4000, "--chunk-overlap", 0,
              "--top-k", 8)                                   # every chunk is about wind: all are sent
    assert out.returncode == 0, out.stderr
    (record,) = server.records("/api/chat")
    sent = prompt_tokens(record["body"]["messages"])
    assert sent > 4096 and record["body"]["options"]["num_ctx"] >= sent
    assert record["prompt_eval_count"] == sent                    # nothing was cut from the front
    assert "According to the notes, # " in out.stdout           # the first source, its heading first


# ---- Ollama errors reported as what they are ------------------------------------

def test_a_500_from_the_chat_model_is_reported_with_its_message(cli, server, notes):
    server.errors["/api/chat"] = (500, "llama runner process has terminated: signal: killed")
    out = cli("What is asyncio?", "--notes", notes)
    assert out.returncode == 3
    assert ("error: Ollama could not run 'qwen3:0.6b': llama runner process has terminated: signal: killed"
            in out.stderr)
    assert "not reachable" not in out.stderr and "Traceback" not in out.stderr


def test_an_error_line_mid_stream_is_reported_after_the_part_shown(cli, server, notes):
    server.stream_error = "an error was encountered while running the model: unexpected EOF"
    out = cli("What is asyncio?", "--notes", notes)
    assert out.returncode == 3
    assert "Answer:\nAccording" in out.stdout
    assert ("error: Ollama could not run 'qwen3:0.6b': an error was encountered while running the model: "
            "unexpected EOF" in out.stderr)
    assert "not reachable" not in out.stderr and "Traceback" not in out.stderr


def test_a_500_from_the_embedder_falls_back_to_keywords_and_says_why(cli, server, notes):
    server.errors["/api/embed"] = (500, "embedding failed: out of memory")
    out = cli("How do I undo the last commit?", "--notes", notes)
    assert out.returncode == 0, out.stderr
    assert ("warning: Ollama could not run 'qwen3-embedding:0.6b': embedding failed: out of memory; "
            "searching by keywords (BM25) only") in out.stderr
    assert "not reachable" not in out.stderr
    assert "Top sources (keywords only):" in out.stdout and "[1] git-tips.md" in out.stdout


def test_questions_of_different_lengths_ask_for_the_same_context_size(cli, server, notes):
    # Each new num_ctx would make Ollama reload the chat model (needsReload in server/sched.go):
    # prompts of about 3,900 and 5,100 tokens both ask for 8,192, not for 5,120 and 6,144.
    write_long_chinese_note(notes, 4)
    for top_k in (3, 4):
        assert cli("--notes", notes, "龙井茶用多少度的水？", "--top-k", top_k).returncode == 0
    sizes = [body["options"]["num_ctx"] for body in server.of("/api/chat")]
    sent = [sum(rag.estimate_tokens(m["content"]) for m in body["messages"]) for body in server.of("/api/chat")]
    assert sent[0] + 1000 < sent[1] and sizes == [8192, 8192], (sent, sizes)


# The script run from source with a Ctrl-C sent to itself at a chosen moment of its start-up:
# while the heavy imports run with signals blocked (numpy looked for), or while the command line
# is read (parse_args), before run_mode's handlers are in place.
CTRL_C_AT = """
import os, runpy, signal, sys
moment, sys.argv = sys.argv[1], sys.argv[2:]      # the script, then its arguments
if moment == "imports":
    class Finder:
        def find_spec(self, name, path=None, target=None):
            if name == "numpy":
                os.kill(os.getpid(), signal.SIGINT)
    sys.meta_path.insert(0, Finder())
else:
    import argparse
    parse = argparse.ArgumentParser.parse_args
    def parse_args(self, *a, **kw):
        os.kill(os.getpid(), signal.SIGINT)
        return parse(self, *a, **kw)
    argparse.ArgumentParser.parse_args = parse_args
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize("moment", ["imports", "parsing"])
def test_ctrl_c_before_the_run_begins_exits_130_without_a_traceback(tmp_path, moment):
    out = subprocess.run([sys.executable, "-c", CTRL_C_AT, moment, str(SCRIPT), "q", "--notes",
                          tmp_path, "--cache", tmp_path / "cache"],
                         capture_output=True, text=True, env=user_env("http://127.0.0.1:9"), timeout=60)
    assert (out.returncode, out.stderr, out.stdout) == (130, "\ninterrupted\n", "")
    assert not (tmp_path / "cache").exists()
