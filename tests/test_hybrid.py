"""Hybrid retrieval, the relevance floor, the lexical fallback and the eval command."""
from __future__ import annotations

import json

import numpy as np
import ollama
import pytest

import demo_rag as rag
from conftest import ROOT, note_texts, run_cli
from ollama_server import FakeOllama

CREATURES = ["otter", "heron", "lynx", "walrus", "gecko", "ibis", "tapir", "marmot", "puffin", "okapi",
             "quokka", "narwhal", "axolotl", "pangolin", "kiwi", "yak", "vole", "stoat", "egret", "bison"]
HABITS = ["sleeps in burrows", "eats river fish", "climbs tall trees", "migrates every autumn",
          "hunts at dusk", "sings at dawn"]


def make_corpus(folder):
    """120 short notes; each creature+habit pair is one note, so a question has one answer."""
    folder.mkdir()
    items = []
    for i, creature in enumerate(CREATURES):
        for j, habit in enumerate(HABITS):
            code = f"ZX-{i * 10 + j:03d}"
            (folder / f"{creature}-{j}.md").write_text(
                f"# {creature.title()} field note {j}\n\nThe {creature} {habit}. "
                f"Field code {code}. Observed on a walk along the valley trail near the old mill.")
            items.append({"question": f"Which {creature} {habit}?", "answers": [code]})
    items.append({"question": "What is the capital of Australia?", "answers": []})
    (folder.parent / "eval.jsonl").write_text("\n".join(json.dumps(x) for x in items))
    return folder.parent / "eval.jsonl"


def run_eval(tmp_path, server, *extra):
    evalset = make_corpus(tmp_path / "corpus") if not (tmp_path / "eval.jsonl").exists() else tmp_path / "eval.jsonl"
    out = run_cli("--notes", tmp_path / "corpus", "--cache", tmp_path / "cache", "--eval", evalset, "--json",
                  *extra, host=server.url)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("embedder", ["random", "hash"])
def test_fusion_is_not_dragged_down_by_a_weak_ranker(tmp_path, embedder):
    with FakeOllama(embed=embedder) as server:
        result = run_eval(tmp_path, server)
    dense, bm25 = result["by_ranker"]["dense"]["hit@1"], result["by_ranker"]["bm25"]["hit@1"]
    fused = result["hit@1"]
    assert fused >= max(dense, bm25) - 0.02, result["by_ranker"]
    if embedder == "random":
        assert dense < 0.2 and bm25 > 0.9     # the weak ranker really is weak


def test_eval_json_has_the_documented_keys(tmp_path, server):
    result = run_eval(tmp_path, server)
    keys = {"hit@1", "hit@3", "hit@5", "mrr", "n"}
    assert keys <= set(result)
    assert set(result["by_ranker"]) == {"dense", "bm25", "fused"}
    assert all(keys == set(m) for m in result["by_ranker"].values())
    assert result["n"] == 120
    assert result["floor"]["unanswerable"] == 1
    assert isinstance(result["misses"], list)
    # the values agree with each other
    for m in [result, *result["by_ranker"].values()]:
        assert 0 <= m["hit@1"] <= m["hit@3"] <= m["hit@5"] <= 1 and m["hit@1"] <= m["mrr"] <= m["hit@5"] + 0.2
    assert {k: result[k] for k in keys} == result["by_ranker"]["fused"]
    assert result["hit@1"] >= 0.9                     # each question names its note's creature and habit
    assert len(result["misses"]) == round(120 * (1 - result["hit@1"]))
    assert all(m["rank"] != 1 for m in result["misses"])
    floor = result["floor"]
    assert floor["answerable"] == 120 and floor["unanswerable_refused"] == 1 and floor["answerable_found"] >= 110
    assert len(result["confidences"]) == 121 and result["confidences"][-1]["answerable"] is False
    assert result["confidences"][-1]["confidence"] < result["confidences"][-1]["floor"]
    assert result["embed_model"] == "qwen3-embedding:0.6b"


def test_eval_text_table_lists_rankers_and_misses(tmp_path, server):
    make_corpus(tmp_path / "corpus")
    with open(tmp_path / "eval.jsonl", "a") as f:
        f.write("\n" + json.dumps({"question": "Which otter sleeps in burrows?", "answers": ["no such text"]}))
    out = run_cli("--notes", tmp_path / "corpus", "--cache", tmp_path / "cache", "--eval", tmp_path / "eval.jsonl",
                  host=server.url)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("121 answerable questions, 1 unanswerable; embedder: qwen3-embedding:0.6b")
    assert lines[1].split() == ["ranker", "hit@1", "hit@3", "hit@5", "MRR"]
    assert [ln.split()[0] for ln in lines[2:5]] == ["dense", "bm25", "fused"]
    assert any(ln.startswith("miss (not found): Which otter sleeps in burrows?") for ln in lines)


def test_bad_eval_file_is_a_clear_error(cli, notes, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answers": ["a"]}\nnot json\n')
    out = cli("--notes", notes, "--eval", bad)
    assert out.returncode == 2 and "bad.jsonl:2" in out.stderr and "Traceback" not in out.stderr


def test_empty_eval_set_reports_zero_questions(server, tmp_path):
    # From a notebook; the command line refuses an empty file (test_tuning.py).
    s, client, index = demo_index(server, tmp_path)
    result = rag.evaluate(client, index, [], s)
    assert result["n"] == 0 and result["misses"] == [] and result["embed_model"] is None


def test_bm25_finds_an_exact_code_that_dense_misses(tmp_path):
    make_corpus(tmp_path / "corpus")
    with FakeOllama(embed="random") as server:
        out = run_cli("ZX-123", "--notes", tmp_path / "corpus", "--cache", tmp_path / "cache", "--retrieve-only",
                      host=server.url)
    assert "[1] axolotl-3.md" in out.stdout, out.stdout      # creature 12, habit 3


def demo_index(server, tmp_path, **kw):
    s = rag.Settings(notes_dir=ROOT / "demo-data", cache_dir=tmp_path / "cache", **kw)
    client = ollama.Client(host=server.url)
    return s, client, rag.open_index(s, client)[0]


@pytest.mark.parametrize("question, found", [
    ("泡龙井用多少度的水？", True),
    ("How do I undo the last commit but keep the changes?", True),
    ("What is the capital of Australia?", False),
    ("红烧肉怎么做？", False),
])
def test_relevance_floor(server, tmp_path, question, found):
    s, client, index = demo_index(server, tmp_path)
    r = rag.rank(index, question, rag.embed_query(client, question, s), s)
    assert r.found is found, r.confidence


def test_min_score_zero_always_answers(cli, server, notes):
    out = cli("What is the capital of Australia?", "--notes", notes, "--min-score", "0")
    assert out.returncode == 0 and "Answer:" in out.stdout and len(server.of("/api/chat")) == 1


def test_source_filter_limits_retrieval(server, tmp_path):
    s, client, index = demo_index(server, tmp_path, source_filter="*.txt")
    q = "How often should I water?"
    r = rag.rank(index, q, rag.embed_query(client, q, s), s)
    assert {h.chunk.source for h in r.hits} == {"houseplants.txt"}
    r = rag.rank(index, "undo the last commit", None, rag.replace(s, source_filter="git"))
    assert {h.chunk.source for h in r.hits} == {"git-tips.md"}
    r = rag.rank(index, q, None, rag.replace(s, source_filter="git"))   # keywords only, none match
    assert r.hits == [] and not r.found


def test_lexical_only_retrieval_without_vectors(server, tmp_path):
    s, _, index = demo_index(server, tmp_path)
    r = rag.rank(index, "乌龙茶可以冲几泡？", None, s)
    assert r.lexical_only and r.dense is None
    assert r.hits[0].chunk.source == "中国茶冲泡.md"
    assert np.isnan(r.hits[0].dense)


def test_source_cli_flag(cli, notes):
    out = cli("water", "--notes", notes, "--source", "houseplants*", "--retrieve-only")
    assert out.returncode == 0
    assert "houseplants.txt" in out.stdout and "sourdough" not in out.stdout


@pytest.mark.parametrize("given", ["drafts/[draft] (v2) water.md", "[draft]", "drafts/[dr*"])
def test_source_takes_a_name_whose_brackets_a_glob_would_read_as_letters(cli, notes, given):
    (notes / "drafts").mkdir()
    (notes / "drafts" / "[draft] (v2) water.md").write_text(
        "# Watering draft\n\nWater the fern every third day, and the cactus once a month in winter.\n")
    out = cli("water", "--notes", notes, "--source", given, "--retrieve-only")
    assert out.returncode == 0, out.stderr
    assert "[draft] (v2) water.md" in out.stdout and "houseplants" not in out.stdout


BIRDS = {"kestrel": 1, "falcon": 2, "osprey": 4, "harrier": None}      # the rank the answer is put at


def make_ranked_corpus(folder):
    """Six notes per bird, naming it 6, 5, ... 1 times: both rankers order them by that count, so the
    note whose tag is a bird's answer sits at a known rank (None: no note has it)."""
    folder.mkdir()
    items = []
    for b, (bird, rank) in enumerate(BIRDS.items()):
        for i in range(6):
            (folder / f"{bird}-{i}.md").write_text(
                f"# Log {b}{i}\n\n" + f"{bird} " * (6 - i) + f"seen near the mill pond in spring. Tag T{b}{i}x. " + "They were. " * (i // 2))
        items.append({"question": bird, "answers": [f"T{b}{rank - 1}x" if rank else "no such tag"]})
    # no word of these is in a note; the second shares stopwords (dropped by BM25, not by the embedder)
    items += [{"question": "zebra quagga", "answers": []}, {"question": "Were they there?", "answers": []}]
    (folder.parent / "ranked.jsonl").write_text("\n".join(json.dumps(x) for x in items))
    return folder.parent / "ranked.jsonl"


def test_eval_numbers_on_a_corpus_with_known_ranks(tmp_path, server):
    evalset = make_ranked_corpus(tmp_path / "ranked")
    args = ("--notes", tmp_path / "ranked", "--cache", tmp_path / "cache", "--eval", evalset,
            "--query-instruction", "")          # the question alone is embedded: cosines follow the counts
    out = run_cli(*args, "--json", host=server.url)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    # ranks 1, 2, 4, none
    expected = {"hit@1": 0.25, "hit@3": 0.5, "hit@5": 0.75, "mrr": round((1 + 1 / 2 + 1 / 4) / 4, 4), "n": 4}
    assert {k: result[k] for k in expected} == expected
    assert result["by_ranker"] == {"dense": expected, "bm25": expected, "fused": expected}
    assert [(m["question"], m["rank"]) for m in result["misses"]] == [("falcon", 2), ("osprey", 4), ("harrier", None)]
    assert result["floor"] == {"min_score": None, "calibration": result["floor"]["calibration"],
                               "answerable_found": 4, "answerable": 4, "unanswerable_refused": 2, "unanswerable": 2}
    assert {c["floor"] for c in result["confidences"]} == {result["floor"]["calibration"]["floors"]["en"]}
    # confidence: each bird's word is in its top note (words 1.0), plus the meaning: how far the best
    # cosine moved from the median towards 1.0, as embedded by the server; the unanswerable questions
    # share no word with any note, so theirs is the meaning alone
    from ollama_server import hashed_vector
    texts = note_texts(server.embedded_texts())
    docs = np.array([hashed_vector(t) for t in texts[:24]])
    confidences = []
    for item, qtext in zip(json.loads("[" + ",".join(evalset.read_text().splitlines()) + "]"), texts[24:]):
        cos = docs @ np.array(hashed_vector(qtext))
        meaning = max(0.0, (cos.max() - np.median(cos)) / (1 - np.median(cos)))
        confidences.append((1.0 if item["answers"] else 0.0) + meaning)
    assert [(c["question"], c["answerable"]) for c in result["confidences"]] == \
        [(q, q in BIRDS) for q in [*BIRDS, "zebra quagga", "Were they there?"]]
    assert [c["confidence"] for c in result["confidences"]] == pytest.approx(confidences, abs=2e-3)
    assert confidences[-2] == pytest.approx(0) and 0.1 < confidences[-1] < rag.MIN_SCORE   # some meaning, declined
    # the text table shows the same numbers
    out = run_cli(*args, host=server.url)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:6] == [
        "4 answerable questions, 2 unanswerable; embedder: qwen3-embedding:0.6b",
        "ranker     hit@1   hit@3   hit@5     MRR",
        "dense      0.250   0.500   0.750   0.438",
        "bm25       0.250   0.500   0.750   0.438",
        "fused      0.250   0.500   0.750   0.438",
        "relevance floor calibrated on these notes (en 0.40): answered 4/4 answerable, declined 2/2 unanswerable"]


def test_eval_judges_the_floor_on_the_top_k_a_run_uses(server, notes, tmp_path):
    # --eval ranks 10 deep for hit@k and MRR, but a run's confidence looks at its --top-k sources only.
    s = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache")
    client = ollama.Client(host=server.url)
    index, _ = rag.open_index(s, client)
    items = rag.load_eval_set(ROOT / "demo-data" / "eval.jsonl")
    result = rag.evaluate(client, index, items, s)
    runs = [rag.search(client, index, it["question"], s) for it in items]
    assert [c["confidence"] for c in result["confidences"]] == [round(r.confidence, 3) for r in runs]
    deep = [rag.search(client, index, it["question"], rag.replace(s, top_k=rag.CANDIDATE_DEPTH)) for it in items]
    assert any(round(d.confidence, 3) != round(r.confidence, 3) for d, r in zip(deep, runs))   # it matters here
