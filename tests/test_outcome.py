"""One trip, one outcome: answer() decides once whether the chat model is called, and every
front end (a question, --json, --chat, --explain, --eval) prints what it returned."""
from __future__ import annotations

import json

import ollama
import pytest

from conftest import ROOT, run_cli
from ollama_server import MODELS, FakeOllama

import demo_rag as rag

ON_TOPIC = "How many grams of coffee for 240 g of water?"
OFF_TOPIC = "Who won the 1998 football World Cup?"


@pytest.fixture
def opened(server, tmp_path):
    s = rag.Settings(notes_dir=ROOT / "demo-data", cache_dir=tmp_path / "cache")
    client = ollama.Client(host=server.url)
    index, report = rag.open_index(s, client)
    return client, index, s


def test_an_answered_question_carries_its_sources_prompt_text_and_turn(server, opened):
    client, index, s = opened
    streamed, planned = [], []
    o = rag.answer(client, index, ON_TOPIC, s, on_plan=planned.append, on_token=streamed.append)
    assert o.status == rag.ANSWERED and o.why == "" and o.text == "".join(streamed) and o.text
    assert [p.status for p in planned] == [rag.ANSWERING] and planned[0].text is None
    assert o.retrieval.hits[0].chunk.source == "coffee-brewing.md" and o.usage.answer_tokens > 0
    sent = server.of("/api/chat")
    assert len(sent) == 1 and sent[0]["messages"] == o.messages and sent[0]["options"]["num_ctx"] == o.num_ctx
    assert o.conversation.turns == (rag.Turn(ON_TOPIC, o.text, ON_TOPIC),)
    assert set(o.timings) == {"embed_query", "search", "answer"}


@pytest.mark.parametrize("case, status", [("off topic", rag.DECLINED), ("retrieve only", rag.RETRIEVAL_ONLY),
                                          ("embedder away", rag.KEYWORDS_ONLY)])
def test_the_chat_model_is_not_called_unless_the_rule_says(server, opened, case, status):
    client, index, s = opened
    if case == "embedder away":
        server.errors["/api/embed"] = (500, "the embedder broke")
    o = rag.answer(client, index, OFF_TOPIC if case == "off topic" else ON_TOPIC, s,
                   retrieve_only=case == "retrieve only")
    assert o.status == status and o.text is None and o.why
    assert o.conversation == rag.Conversation()            # nothing answered: no turn remembered
    assert server.of("/api/chat") == []
    assert o.messages == rag.prompt_within(o.question, o.retrieval, rag.Conversation(),
                                           s.max_answer_tokens)[0]   # what would have been sent


def test_a_chat_model_failing_mid_answer_is_an_outcome_with_what_came(server, opened):
    client, index, s = opened
    server.stream_error = "the runner crashed"
    o = rag.answer(client, index, ON_TOPIC, s)
    assert o.status == rag.FAILED and "the runner crashed" in o.why and o.text is not None
    assert o.conversation == rag.Conversation()


def test_nothing_found_by_keywords_alone_is_not_found_with_the_reason(server, opened):
    client, index, s = opened
    server.errors["/api/embed"] = (500, "the embedder broke")
    o = rag.answer(client, index, "zzqx vvbn", s)
    assert o.status == rag.DECLINED and "the embedder broke" in o.why and o.retrieval.hits == []
    assert o.why.startswith("no passage has any of its words") and server.of("/api/chat") == []


def test_json_says_how_each_question_ended(server, notes, tmp_path):
    def run(*args):
        out = run_cli(*args, "--notes", notes, "--cache", tmp_path / "c", "--json", host=server.url)
        return out.returncode, json.loads(out.stdout)
    runs = [run(ON_TOPIC), run(OFF_TOPIC), run(ON_TOPIC, "--retrieve-only")]
    assert [(code, o["status"]) for code, o in runs] \
        == [(0, "answered"), (0, "declined"), (0, "retrieval only")]
    # a script learns why as a reader does: the declined one's reason is the line the terminal shows
    (_, answered), (_, declined), _ = runs
    assert answered["why"] is None and declined["why"].startswith("confidence 0.")
    shown = run_cli(OFF_TOPIC, "--notes", notes, "--cache", tmp_path / "c", host=server.url).stdout
    assert f"{rag.NOT_FOUND} ({declined['why']}" in shown


def test_chat_does_not_answer_from_a_keyword_only_search(notes, tmp_path):
    # The embedding model is not pulled, the chat model is: --chat decides as a single question does.
    with FakeOllama(models=[m for m in MODELS if "embed" not in m]) as server:
        out = run_cli("--chat", "--notes", notes, "--cache", tmp_path / "c", host=server.url,
                      stdin=ON_TOPIC + "\n")
        single = run_cli(ON_TOPIC, "--notes", notes, "--cache", tmp_path / "c", host=server.url)
    assert out.returncode == 0 and single.returncode == 0, out.stderr + single.stderr
    assert server.of("/api/chat") == []
    line = "Keyword-only passages above (model 'qwen3-embedding:0.6b' is not pulled"
    assert line in out.stdout and line in single.stdout


def test_explain_and_eval_take_the_same_decision(server, notes, tmp_path):
    out = run_cli("--explain", OFF_TOPIC, "--notes", notes, "--cache", tmp_path / "c", host=server.url)
    assert out.returncode == 0 and "not found in your notes: the chat model is not called" in out.stdout
    assert server.of("/api/chat") == []
    items = tmp_path / "set.jsonl"
    items.write_text(json.dumps({"question": OFF_TOPIC, "answers": []}) + "\n"
                     + json.dumps({"question": ON_TOPIC, "answers": ["15 g"]}) + "\n")
    out = run_cli("--eval", items, "--notes", notes, "--cache", tmp_path / "c", "--json", host=server.url)
    floor = json.loads(out.stdout)["floor"]
    assert (floor["unanswerable_refused"], floor["answerable_found"]) == (1, 1)
    assert server.of("/api/chat") == []                    # --eval measures retrieval: no answers asked
