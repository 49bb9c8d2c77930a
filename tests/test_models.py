"""Real set-ups end to end: other embedders' prompts, context limits both ways, think
blocks opened in the prompt, warnings in --json, and previews that show the match."""
from __future__ import annotations

import json

import ollama
import pytest

from conftest import run_cli
from ollama_server import FakeOllama

NOMIC = "nomic-embed-text:v1.5"


@pytest.fixture
def fake(monkeypatch):
    """A stand-in Ollama that also has nomic-embed-text, a small-context embedder and an opener."""
    with FakeOllama(models=("qwen3-embedding:0.6b", "qwen3:0.6b", NOMIC, "mxbai-embed-large:335m",
                            "opener:1b", "small:1b"),
                    context_limits={"mxbai-embed-large:335m": 512, "small:1b": 512}) as s:
        monkeypatch.setenv("OLLAMA_HOST", s.url)
        yield s


def test_documents_and_queries_get_the_model_s_prefixes(fake, notes, tmp_path):
    out = run_cli("What is BM25?", "--notes", notes, "--cache", tmp_path / "c", "--embed-model", NOMIC,
                  "--retrieve-only", "--show-prompt", host=fake.url)
    assert out.returncode == 0, out.stderr
    texts = fake.embedded_texts()
    assert all(t.startswith("search_document: ") for t in texts[:-1]) and len(texts) > 2
    assert texts[-1] == "search_query: What is BM25?"
    assert "'search_query: {query}'" in out.stdout and "nomic-embed-text-v1.5" in out.stdout


def test_another_document_template_gets_a_cache_of_its_own_and_going_back_embeds_nothing(
        fake, notes, tmp_path):
    args = ("What is BM25?", "--notes", notes, "--cache", tmp_path / "c", "--embed-model", NOMIC, "--retrieve-only")
    assert run_cli(*args, host=fake.url).returncode == 0
    out = run_cli(*args, "--doc-instruction", "", host=fake.url)
    assert out.returncode == 0, out.stderr
    assert "(12 chunks embedded)" in out.stderr
    assert not any(t.startswith("search_document") for t in fake.embedded_texts()[-13:-1])
    assert len(list((tmp_path / "c").glob("*.v*.pkl"))) == 2         # the model's own is kept
    before = len(fake.embedded_texts())
    back = run_cli(*args, host=fake.url)                             # the model's template again
    assert back.returncode == 0, back.stderr
    assert fake.embedded_texts()[before:] == ["search_query: What is BM25?"]
    assert "rebuilding" not in back.stderr


def test_a_changed_default_document_template_re_embeds_with_the_reason(notes, tmp_path, monkeypatch):
    """A version whose table gives the model another template rebuilds the cache, saying why."""
    import demo_rag as rag
    with FakeOllama(models=("qwen3:0.6b", NOMIC)) as fake:
        s = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "c", embed_model=NOMIC)
        client = ollama.Client(host=fake.url)
        rag.open_index(s, client)
        monkeypatch.setattr(rag, "EMBED_PROMPTS", [(r"nomic", "q: {query}", "d: {text}", "")])
        index, report = rag.open_index(s, client)
    assert report.reason == "document template changed ('search_document: {text}' -> 'd: {text}')"
    assert index.doc_template == "d: {text}" and report.embedded == len(index.chunks)


def test_an_unknown_model_gets_no_prefix_and_explain_says_so(fake, notes, tmp_path):
    fake.models.add("my-embedder:latest")
    out = run_cli("--explain", "What is BM25?", "--notes", notes, "--cache", tmp_path / "c",
                  "--embed-model", "my-embedder:latest", host=fake.url)
    assert out.returncode == 0, out.stderr
    assert "none known for this model" in out.stdout and "none applied" in out.stdout
    assert fake.embedded_texts()[-1] == "What is BM25?"
    assert not [line for line in out.stderr.splitlines()        # (an old client's think notice aside)
                if line.startswith("warning") and "think" not in line]


def test_chunks_longer_than_the_embedder_reads_are_reported_with_a_size_that_fits(fake, notes, tmp_path):
    (notes / "长文.md").write_text("# 长文\n\n" + "这是一个很长的句子。" * 140, encoding="utf-8")   # 1,400 CJK
    out = run_cli("泡龙井用多少度的水？", "--notes", notes, "--cache", tmp_path / "c",
                  "--embed-model", "mxbai-embed-large:335m", "--retrieve-only", "--json", host=fake.url)
    assert out.returncode == 0, out.stderr
    (warning,) = [w for w in json.loads(out.stdout)["warnings"] if "context" in w]
    assert warning.startswith("1 of 13 chunks may be longer than mxbai-embed-large:335m's 512-token context")
    assert "--chunk-size 450" in warning
    assert warning in out.stderr                                        # stderr too
    assert len(fake.of("/api/show")) == 1                               # asked once


def test_an_ollama_without_api_show_is_checked_no_further(notes, tmp_path):
    with FakeOllama(show=False) as fake:
        out = run_cli("What is BM25?", "--notes", notes, "--cache", tmp_path / "c", host=fake.url)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("did not say qwen3-embedding:0.6b's context length") == 1
    assert "Answer:" in out.stdout and "Traceback" not in out.stderr


def test_a_cut_prompt_is_reported_in_stderr_and_json(fake, notes, tmp_path):
    (notes / "tasks.md").write_text("# Tasks\n\n" + "To cancel an asyncio task, call task.cancel() and await it. " * 60)
    out = run_cli("How do I cancel an asyncio task?", "--notes", notes, "--cache", tmp_path / "c",
                  "--chat-model", "small:1b", "--json", host=fake.url)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    (cut,) = [w for w in data["warnings"] if "did not fit" in w]
    assert "Ollama read 512 tokens" in cut and cut in out.stderr
    assert data["tokens"]["prompt"] == 512 and data["tokens"]["answer"] > 0
    assert data["tokens"]["per_second"] == 100.0


def test_timings_line_has_token_counts_and_speed(cli, notes):
    out = cli("What is asyncio?", "--notes", notes)
    assert out.returncode == 0, out.stderr
    assert "prompt tokens · " in out.stderr and "answer tokens (100.0 tokens/s)" in out.stderr
    assert "did not fit" not in out.stderr


def test_chat_warns_about_a_cut_prompt_once_and_keeps_going(fake, notes, tmp_path):
    out = run_cli("--chat", "--notes", notes, "--cache", tmp_path / "c", "--chat-model", "small:1b",
                  host=fake.url, stdin="What is asyncio?\nHow do I undo the last commit?\n")
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("did not fit the chat model's context") == 1
    assert out.stdout.count("According to the notes") == 2


def test_a_reply_holding_only_the_closing_think_tag_is_stripped(fake, notes, tmp_path):
    out = run_cli("What is asyncio?", "--notes", notes, "--cache", tmp_path / "c",
                  "--chat-model", "opener:1b", "--json", host=fake.url)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)["answer"]
    assert answer.startswith("According to the notes") and "think" not in answer


def test_json_lists_skipped_notes_and_the_keyword_fallback(cli, notes):
    (notes / "broken.md").write_bytes(b"\0\1binary")
    out = cli("What is BM25?", "--notes", notes, "--json", "--embed-model", "missing-model")
    assert out.returncode == 0, out.stderr
    warnings = json.loads(out.stdout)["warnings"]
    assert any(w.startswith("skipped broken.md: looks binary") for w in warnings)
    assert any("missing-model" in w and "keywords (BM25) only" in w for w in warnings)
    assert all(f"warning: {w}" in out.stderr for w in warnings)
    assert json.loads(out.stdout)["embedding_prompts"]["source"] == "none known for this model"


def test_preview_shows_where_the_rarest_question_terms_are(fake, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "news.md").write_text("# 新闻\n\n" + "今天天气晴朗，市场上人来人往，大家都在谈论节日的安排。" * 8
                                   + "印控克什米尔地区一座寺庙发生踩踏事故，死亡人数升至十二人。\n", encoding="utf-8")
    out = run_cli("印控克什米尔地区寺庙踩踏事故死亡人数", "--notes", notes, "--cache", tmp_path / "c",
                  "--retrieve-only", host=fake.url)
    assert out.returncode == 0, out.stderr
    preview = out.stdout.splitlines()[2]
    assert "踩踏" in preview or "克什米尔" in preview, preview
    assert "今天天气晴朗" not in preview
    data = json.loads(run_cli("印控克什米尔地区寺庙踩踏事故死亡人数", "--notes", notes, "--cache", tmp_path / "c",
                              "--retrieve-only", "--json", host=fake.url).stdout)
    assert data["sources"][0]["text"].startswith("# 新闻\n\n今天天气晴朗")   # full text stays in --json
