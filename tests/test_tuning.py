"""Tuning on your own notes: --make-eval, --eval judged by source, --tune, --fusion,
end to end through the real client against the stand-in server."""
from __future__ import annotations

import json
import math
import signal
import subprocess

import numpy as np
import ollama
import pytest

import demo_rag as rag
from conftest import ROOT, SCRIPT_COMMAND, note_texts, run_cli
from ollama_server import FakeOllama


def lines(path):
    return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines()]


# -- --make-eval -----------------------------------------------------------------

def test_make_eval_writes_questions_that_know_their_source(cli, server, notes, tmp_path):
    out_file = tmp_path / "q.jsonl"
    out = cli("--notes", notes, "--make-eval", out_file, "--questions", 16)
    assert out.returncode == 0, out.stderr
    items = lines(out_file)
    assert len(items) == 16
    unanswerable = [it for it in items if not it["answers"]]
    assert len(unanswerable) == math.ceil(16 * rag.EVAL_UNANSWERABLE_SHARE)
    texts = {p.name: p.read_text(encoding="utf-8") for p in notes.iterdir()}
    for it in items:
        if it["answers"]:
            assert set(it) == {"question", "answers", "source", "heading", "passage"}
            assert it["answers"][0] in texts[it["source"]]
            assert it["heading"].split(" › ")[-1] in texts[it["source"]]
    # spread over the notes before a second question from any of them
    assert len({it["source"] for it in items if it["answers"]}) == 10
    assert "16 questions (14 answerable and 2 unanswerable written now, 0 from before)" in out.stdout
    chats = server.of("/api/chat")
    assert all(c["stream"] is False and c["think"] is False and c["options"]["temperature"] == 0
               and c["format"] == rag.EVAL_SCHEMA for c in chats)
    assert len(chats) == 14


def test_make_eval_drops_junk_and_says_why(notes, tmp_path):
    with FakeOllama(format_reply="mixed") as server:
        out = run_cli("--notes", notes, "--cache", tmp_path / "cache", "--make-eval", tmp_path / "q.jsonl",
                      "--questions", 10, "--json", host=server.url)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["dropped"] == {rag.DROP_REASONS["junk"]: 8, rag.DROP_REASONS["answer"]: 8,
                                  rag.DROP_REASONS["copied"]: 8}, summary
    assert summary["questions"] == 10 == len(lines(tmp_path / "q.jsonl"))


def test_make_eval_with_a_model_that_only_writes_junk_keeps_nothing_but_does_not_crash(notes, tmp_path):
    with FakeOllama(format_reply="junk") as server:
        out = run_cli("--notes", notes, "--cache", tmp_path / "cache", "--make-eval", tmp_path / "q.jsonl",
                      "--questions", 8, host=server.url)
    assert out.returncode == 0, out.stderr
    assert "dropped 37: 37 no JSON question and answer" in out.stdout
    assert all(not it["answers"] for it in lines(tmp_path / "q.jsonl"))    # only the built-in unanswerable
    assert "holds nothing to tune on yet" in out.stderr and "next:" not in out.stderr   # --tune would refuse it


def test_make_eval_continues_after_ctrl_c_without_repeating_itself(notes, tmp_path):
    out_file = tmp_path / "q.jsonl"
    with FakeOllama() as server:
        release = server.hold("/api/chat", after=3)        # the fourth question waits: stop it there
        env = {**__import__("os").environ, "OLLAMA_HOST": server.url}
        proc = subprocess.Popen([*SCRIPT_COMMAND, "--notes", str(notes), "--cache", str(tmp_path / "c"),
                                 "--make-eval", str(out_file), "--questions", "12"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            server.wait_for(lambda: any(r.get("held") for r in server.records("/api/chat")))
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=30)
        finally:
            release.set()
            proc.kill()
        assert proc.returncode == 130, stderr
        assert "run the same command to continue" in stderr and "Traceback" not in stderr
        first = lines(out_file)
        assert 3 <= len(first) < 12
    with FakeOllama() as server:
        out = run_cli("--notes", notes, "--cache", tmp_path / "c", "--make-eval", out_file, "--questions", 12,
                      host=server.url)
        assert out.returncode == 0, out.stderr
        asked = len(server.of("/api/chat"))
    items = lines(out_file)
    assert items[:len(first)] == first and len(items) == 12
    assert len({it["question"] for it in items}) == 12
    assert asked == sum(1 for it in items if it["answers"]) - sum(1 for it in first if it["answers"])
    assert f"{len(first)} from before" in out.stdout


@pytest.mark.parametrize("how", ["ollama away", "chat model missing"])
def test_make_eval_without_a_chat_model_exits_3_and_writes_nothing(cli, notes, tmp_path, how, dead_host):
    out_file = tmp_path / "q.jsonl"
    if how == "ollama away":
        out = run_cli("--notes", notes, "--cache", tmp_path / "c", "--make-eval", out_file, host=dead_host)
    else:
        out = cli("--notes", notes, "--make-eval", out_file, "--chat-model", "nope:1b")
    assert out.returncode == 3, out.stderr
    assert ("not reachable" if how == "ollama away" else "ollama pull nope:1b") in out.stderr
    assert "nothing was written" in out.stderr and "Traceback" not in out.stderr
    assert not out_file.exists()


def test_make_eval_refuses_to_append_to_a_file_that_is_not_an_eval_set(cli, notes, tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("my shopping list\n")
    out = cli("--notes", notes, "--make-eval", other)
    assert out.returncode == 2 and "is not an evaluation set" in out.stderr
    assert other.read_text() == "my shopping list\n"


@pytest.mark.parametrize("reply, why", [
    ("", "junk"), ("[]", "junk"), ('{"question": 3, "answer": "x"}', "junk"),
    ('{"question": "Q?", "answer": "  "}', "junk"), ('{"question": "Q?"}', "junk"),
    ('{"question": "何时喂?", "answer": "九十"}', "answer"),
    ('{"question": "酵种每天喂两次吗？", "answer": "两次"}', "copied"),
    ('{"question": "酵种多久喂一次？", "answer": "两次"}', ""),
])
def test_judge_question(reply, why):
    passage = rag.Chunk("酵种.md", "# 酵种", "酵种每天喂两次。温度高时喂得更勤。" * 3)
    item, reason = rag.judge_question(reply, passage)
    assert reason == why and (item is not None) == (why == "")


# -- --eval judged by source; bad evaluation files ------------------------------

def test_eval_judges_by_source_when_the_item_has_one(cli, notes, tmp_path):
    # "water" occurs in the sourdough, coffee, tea and houseplant notes: by string the
    # top chunk is a hit whichever it is; by source only the houseplant note counts.
    q = {"question": "How often should I feed my sourdough starter?", "answers": ["water"]}
    by_text, by_source = tmp_path / "text.jsonl", tmp_path / "source.jsonl"
    by_text.write_text(json.dumps(q))
    by_source.write_text(json.dumps({**q, "source": "houseplants.txt"}))
    a = json.loads(cli("--notes", notes, "--eval", by_text, "--json").stdout)
    b = json.loads(cli("--notes", notes, "--eval", by_source, "--json").stdout)
    assert a["hit@1"] == 1.0 and b["hit@1"] == 0.0


def test_eval_judges_by_heading_when_the_item_has_one(cli, notes, tmp_path):
    q = {"question": "How long is the bulk fermentation of sourdough?", "answers": ["x"], "source": "sourdough.md"}
    right, wrong = tmp_path / "right.jsonl", tmp_path / "wrong.jsonl"
    right.write_text(json.dumps({**q, "heading": "# Sourdough bread › ## Troubleshooting"}))
    wrong.write_text(json.dumps({**q, "heading": "# Sourdough bread › ## No such section"}))
    assert json.loads(cli("--notes", notes, "--eval", right, "--json").stdout)["hit@5"] == 1.0
    assert json.loads(cli("--notes", notes, "--eval", wrong, "--json").stdout)["hit@5"] == 0.0


@pytest.mark.parametrize("answers", ['[15]', '[null]', '[""]', '["ok", "  "]'])
def test_eval_answers_must_be_non_empty_strings(cli, notes, tmp_path, answers):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "What is BM25?", "answers": ["BM25"]}\n'
                   f'{{"question": "What is RAG?", "answers": {answers}}}\n')
    for mode in ("--eval", "--tune"):
        out = cli("--notes", notes, mode, bad)
        assert out.returncode == 2, out.stdout
        assert "bad.jsonl:2" in out.stderr and "non-empty strings" in out.stderr and "Traceback" not in out.stderr


def test_eval_names_sources_that_are_not_in_the_index(cli, notes, tmp_path):
    f = tmp_path / "other.jsonl"
    f.write_text("\n".join(json.dumps({"question": "q?", "answers": ["a"], "source": s})
                           for s in ["bm25.md", "gone.md", "elsewhere/x.md"]))
    for mode in ("--eval", "--tune"):
        out = cli("--notes", notes, mode, f)
        assert out.returncode == 2 and "2 source(s) are not among the 10 indexed notes: elsewhere/x.md, gone.md" \
            in out.stderr, out.stderr


def test_eval_and_tune_refuse_a_file_without_questions(cli, notes, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    for mode in ("--eval", "--tune"):
        out = cli("--notes", notes, mode, empty)
        assert out.returncode == 2 and "holds no questions" in out.stderr


def test_eval_says_when_ollama_died_part_way(notes, tmp_path):
    evalset = ROOT / "demo-data" / "eval.jsonl"
    with FakeOllama() as server:      # index first, while Ollama is alive
        assert run_cli("--notes", notes, "--cache", tmp_path / "c", "x", "--retrieve-only",
                       host=server.url).returncode == 0
    runs = []
    for extra in (["--json"], []):    # each run against an Ollama that dies after 5 questions
        with FakeOllama(die_after_embeds=5) as server:
            runs.append(run_cli("--notes", notes, "--cache", tmp_path / "c", "--eval", evalset, *extra,
                                host=server.url))
    result = json.loads(runs[0].stdout)
    assert result["dense_coverage"]["questions"] == result["by_ranker"]["dense"]["n"] == 5
    assert result["dense_coverage"]["of"] == 40 and "not reachable" in result["dense_coverage"]["missing_because"]
    header, *table = runs[1].stdout.splitlines()
    assert "embedder: qwen3-embedding:0.6b (partial: dense scores for 5 of 40 answerable questions, then " \
           "Ollama is not reachable" in header
    assert table[1].startswith("dense") and table[1].endswith("(over 5 of 40)")


# -- --fusion -----------------------------------------------------------------------

def test_fusion_methods_rank_as_named(server, tmp_path):
    s = rag.Settings(notes_dir=ROOT / "demo-data", cache_dir=tmp_path / "cache")
    client = ollama.Client(host=server.url)
    index = rag.open_index(s, client)[0]
    q = "How do I cancel an asyncio task?"
    qvec = rag.embed_query(client, q, s)
    dense = index.vectors @ qvec
    lexical = rag.rank(index, q, qvec, s).lexical
    for method, scores in (("dense", dense), ("bm25", lexical)):
        r = rag.rank(index, q, qvec, rag.replace(s, fusion=method))
        assert [h.row for h in r.candidates] == rag.top_rows(scores, s.top_k).tolist()
        assert r.weights == {method: 1.0}
    r = rag.rank(index, q, qvec, rag.replace(s, fusion="rrf"))
    assert r.hits[0].chunk.heading.endswith("## Tasks and cancellation") and r.weights == {"dense": 1.0, "bm25": 1.0}
    # without vectors, every method ranks by BM25
    assert [h.row for h in rag.rank(index, q, None, rag.replace(s, fusion="dense")).hits] == \
        [h.row for h in rag.rank(index, q, None, s).hits]


def test_fusion_flag_reaches_the_ranking(cli, notes):
    q = ("How do I cancel an asyncio task?", "--notes", notes, "--retrieve-only", "--json")
    default, bm25 = (json.loads(cli(*q, *extra).stdout)["sources"] for extra in ([], ["--fusion", "bm25"]))
    assert [s["score"] for s in bm25] != [s["score"] for s in default]
    assert bm25[0]["score"] > 5          # a raw BM25 score, not a z-score
    out = cli("q", "--fusion", "magic")
    assert out.returncode == 2 and "invalid choice: 'magic'" in out.stderr


# -- --tune ----------------------------------------------------------------------------

@pytest.fixture
def generated(cli, notes, tmp_path):
    path = tmp_path / "gen.jsonl"
    assert cli("--notes", notes, "--make-eval", path).returncode == 0
    return path


def test_tune_prints_every_variant_and_flags_that_eval_confirms(cli, notes, generated):
    out = cli("--notes", notes, "--tune", generated)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "embedder: qwen3-embedding:0.6b" in text
    rows = [ln.split() for ln in text.splitlines() if ln.strip().startswith("1500 ")]
    assert {(r[1], r[2]) for r in rows} == {(t, f) for t in ("on", "off") for f in rag.FUSION_METHODS}
    assert sum("default" in ln for ln in text.splitlines()) == 1
    assert "top-k: hit@3" in text and "floor: --min-score" in text
    flags = text.split("recommended: python demo_rag.py ")[1].split()
    data = json.loads(cli("--notes", notes, "--tune", generated, "--json").stdout)
    assert " ".join(flags) == data["flags"]
    winner = next(v for v in data["variants"] if {k: v[k] for k in data["winner"]} == data["winner"])
    # following the recommendation reproduces the winner's numbers with --eval
    flags = [f.strip("'") for f in flags]
    checked = json.loads(cli("--notes", notes, "--eval", generated, "--json", *flags).stdout)
    assert (checked["hit@1"], checked["mrr"]) == (winner["hit@1"], winner["mrr"])
    floor = data["floor"]
    assert checked["floor"]["answerable_found"] == floor["answered"] >= math.ceil(0.95 * floor["answerable"])
    assert checked["floor"]["unanswerable_refused"] == floor["declined"]


def test_tune_without_vectors_tunes_bm25_and_says_why(cli, notes, generated):
    out = cli("--notes", notes, "--tune", generated, "--embed-model", "nope:1b")
    assert out.returncode == 0, out.stderr
    assert "tuned BM25, --top-k and the floor only" in out.stdout and "ollama pull nope:1b" in out.stdout
    rows = [ln.split() for ln in out.stdout.splitlines() if ln.strip().startswith("1500 ")]
    assert [(r[1], r[2]) for r in rows] == [("off", "bm25")]
    assert "recommended: python demo_rag.py --fusion bm25" in out.stdout


def test_tune_chunk_sizes_estimates_first_and_keeps_each_cache(cli, server, notes, generated):
    main_cache = next(cli.cache.glob("*.pkl"))
    before = main_cache.read_bytes()
    out = cli("--notes", notes, "--tune", generated, "--tune-chunk-sizes", "300,1500")
    assert out.returncode == 0, out.stderr
    estimate = out.stderr.index("chunk size 300: about")
    assert "indexed 10 notes" in out.stderr[:estimate] and "indexed 10 notes" in out.stderr[estimate:]
    assert {ln.split()[0] for ln in out.stdout.splitlines() if ln.strip()[:4] in ("300 ", "1500")} == {"300", "1500"}
    assert main_cache.read_bytes() == before                  # the main cache is untouched
    assert list((cli.cache / "chunk-300").glob("*.pkl"))
    embeds = len(server.embedded_texts())
    out = cli("--notes", notes, "--tune", generated, "--tune-chunk-sizes", "300")
    assert "its cache in" in out.stderr and "is reused" in out.stderr
    questions = len(lines(generated))
    # only the questions, with and without template (and the floor's probes without it), no note again
    assert len(note_texts(server.embedded_texts()[embeds:])) == 2 * questions


def test_bad_chunk_sizes_are_usage_errors(cli, notes, tmp_path):
    # a valid evaluation set, so only the sizes can make the run a usage error
    eval_set = tmp_path / "q.jsonl"
    eval_set.write_text(json.dumps({"question": "What is asyncio?", "answers": ["asyncio"]}) + "\n")
    for sizes, why in [("800,abc", "expected sizes like 800,1500, not '800,abc'"),
                       ("40", "every --tune-chunk-sizes value >= 50"),            # too small
                       ("80", "every --tune-chunk-sizes value >= 50 and above --chunk-overlap")]:  # = overlap
        out = cli("--notes", notes, "--tune", eval_set, "--tune-chunk-sizes", sizes)
        assert out.returncode == 2 and "Traceback" not in out.stderr, (sizes, out.stderr)
        assert out.stderr.startswith("usage:") and why in out.stderr, (sizes, out.stderr)


def test_recommend_floor_answers_95_percent():
    answerable = [({"answers": ["a"]}, 1, [c / 100] * 10) for c in range(60, 100)]   # 0.60 .. 0.99
    unanswerable = [({"answers": []}, None, [c] * 10) for c in (0.1, 0.59, 0.61)]
    f = rag.recommend_floor(answerable + unanswerable, 5)
    assert f == {"min_score": 0.62, "answered": 38, "answerable": 40, "declined": 3, "unanswerable": 3}
    assert np.isclose(f["answered"] / f["answerable"], 0.95)
