"""The answer's stream and the script's own: an answer that never ends is stopped and said to be
cut short, and the connection closed so that Ollama stops too; a stdout or stderr that cannot take
the text (another encoding, closed, full) still gets a result or one line and an exit code; a run
stopped mid-answer under --json still prints one object. Each runs the script as a subprocess,
with the real file descriptors."""
from __future__ import annotations

import itertools
import json

from conftest import run_cli

import demo_rag as rag

QUESTION = "What is asyncio?"


# ---- the answer: a limit the model is told, and a stop for a reply that does not keep to it ----

def test_the_answer_is_asked_for_max_answer_tokens_and_said_to_be_cut_when_it_reaches_them(cli, server, notes):
    out = cli(QUESTION, "--notes", notes)
    assert out.returncode == 0 and "cut short" not in out.stderr, out.stderr
    assert server.of("/api/chat")[0]["options"]["num_predict"] == rag.ANSWER_TOKENS
    out = cli(QUESTION, "--notes", notes, "--max-answer-tokens", "4")
    assert out.returncode == 0, out.stderr
    assert server.of("/api/chat")[1]["options"]["num_predict"] == 4
    assert "Answer:\nAccording to the notes, " in out.stdout
    assert "warning: the answer was cut short: it reached 4 tokens, the most asked for (--max-answer-tokens)" \
        in out.stderr
    data = json.loads(cli(QUESTION, "--notes", notes, "--max-answer-tokens", "4", "--json").stdout)
    assert data["status"] == "answered" and len(data["answer"].split()) == 4
    assert "reached 4 tokens" in data["cut_short"] and any("cut short" in w for w in data["warnings"])


def test_max_answer_tokens_must_leave_room_for_the_sources(cli):
    for value in ("0", str(rag.MAX_ANSWER_TOKENS + 1)):
        out = cli(QUESTION, "--max-answer-tokens", value)
        assert out.returncode == 2 and f"--max-answer-tokens must be from 1 to {rag.MAX_ANSWER_TOKENS}" in out.stderr


def test_a_reply_that_repeats_itself_is_stopped_and_its_stream_closed(cli, server, notes):
    # a model stuck in a loop, on a server that does not stop it at num_predict: without a stop,
    # 300,000 parts (9 MB of text) would stream in
    server.ignore_num_predict = True
    server.answer = itertools.chain(["According to the notes [1]. "],
                                    itertools.repeat("I keep saying the same thing. ", 300_000))
    out = cli(QUESTION, "--notes", notes, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["status"] == "answered" and "repeating the same text" in data["cut_short"]
    assert data["answer"].startswith("According to the notes [1]. I keep") and len(data["answer"]) < 2500
    (record,) = server.records("/api/chat")
    assert record["gone"] and record["sent_parts"] < 300_000     # the client hung up: Ollama stops generating


def test_a_long_answer_that_lists_similar_items_is_not_taken_for_a_loop(cli, server, notes):
    items = "".join(f"- Day {n}: feed the starter 50 g of flour and 50 g of water [1].\n" for n in range(1, 120))
    server.answer = "According to the notes:\n" + items
    out = cli(QUESTION, "--notes", notes, "--json", "--max-answer-tokens", "4000")    # room for its 1,700 words
    data = json.loads(out.stdout)
    assert data["status"] == "answered" and data["cut_short"] is None, data["warnings"]
    assert data["answer"] == server.answer                # all 8,000 characters of it


def test_a_server_that_ignores_num_predict_is_stopped_at_the_character_cap(cli, server, notes):
    server.ignore_num_predict = True
    server.answer = "".join(f"Fact {n} from the notes [1]. " for n in range(5000))     # no loop, just long
    out = cli(QUESTION, "--notes", notes, "--max-answer-tokens", "10")
    assert out.returncode == 0, out.stderr
    answer = out.stdout.split("Answer:\n", 1)[1].rstrip("\n")
    assert len(answer) == 10 * rag.ANSWER_CHARS_PER_TOKEN and server.answer.startswith(answer)
    assert f"cut short: it ran past {10 * rag.ANSWER_CHARS_PER_TOKEN} characters" in out.stderr
    assert server.records("/api/chat")[0]["gone"]


def test_one_endless_line_from_the_server_is_refused_before_it_fills_the_memory(cli, server, notes):
    server.endless_line = 64 << 20                        # 64 MB without a line break
    out = cli(QUESTION, "--notes", notes, "--json")
    assert out.returncode == rag.EXIT_OLLAMA and "Traceback" not in out.stderr, out.stderr
    data = json.loads(out.stdout)
    assert data["status"] == "failed" and data["answer"].startswith("According")
    assert f"a line of its reply ran past {rag.MAX_REPLY_LINE >> 20} MB" in data["error"]
    (record,) = server.records("/api/chat")
    assert record["gone"] and record["sent_bytes"] < 2 * rag.MAX_REPLY_LINE
