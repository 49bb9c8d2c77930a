"""Each pipeline step on its own: load, fingerprint, chunk, tokenize, BM25, search, prompt."""
from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest

from conftest import run_cli, user_env

import demo_rag as rag


# ---- load ------------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [
    ("---\ntitle: x\n---\n# Body", "# Body"),
    ("\ufeff---\r\ntags: [a]\r\n---\r\n# Body\r\nline", "# Body\nline"),       # BOM + CRLF
    ("---\nkey: v\n...\nBody", "Body"),                                       # YAML end marker
    ("# No front matter\n---\nnot yaml", "# No front matter\n---\nnot yaml"),  # rule mid-note
    ("", ""),
    ("---\nMeeting with the landlord\nThe deposit is 2400 euros.\n---\n", "---\nMeeting with the landlord\n"
     "The deposit is 2400 euros.\n---\n"),                                    # prose between rules stays
    ("---\ntags:\n  - a\n# c\n\n---\nBody", "Body"),                             # items, comments, blank lines
    ("---\n---\nBody", "---\n---\nBody"),                                        # no key: no metadata
])
def test_strip_front_matter(raw, expected):
    assert rag.strip_front_matter(raw) == expected


def test_decode_falls_back_to_gb18030_and_says_so():
    assert rag.decode_note("中文".encode("utf-8")) == ("中文", None)
    assert rag.decode_note("\ufeff中文".encode("utf-8")) == ("中文", None)
    text, warning = rag.decode_note("中文笔记".encode("gb18030"))
    assert text == "中文笔记" and "GB18030" in warning


def test_scan_skips_hidden_cache_and_other_suffixes(tmp_path):
    for rel in ["a.md", "b.markdown", "c.txt", "sub/d.MD", ".obsidian/x.md", ".git/y.md",
                "cache/z.md", "image.png", ".hidden.md"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    files, warnings = rag.scan_notes(tmp_path, skip=[tmp_path / "cache"])
    assert [f.rel for f in files] == ["a.md", "b.markdown", "c.txt", "sub/d.MD"]
    assert warnings == []


def test_scan_reports_symlink_loop_and_broken_link(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "n.md").write_text("x")
    os.symlink(tmp_path, tmp_path / "sub" / "loop")
    os.symlink(tmp_path / "missing.md", tmp_path / "broken.md")
    files, warnings = rag.scan_notes(tmp_path)
    assert [f.rel for f in files] == ["sub/n.md"]
    assert any("symlink loop" in w for w in warnings)
    assert any("broken.md" in w for w in warnings)


# ---- fingerprint -----------------------------------------------------------

def test_fingerprint_changes_with_name_size_and_mtime(tmp_path):
    note = tmp_path / "a.md"
    note.write_text("hello")
    fp = lambda: rag.fingerprint(rag.scan_notes(tmp_path)[0])  # noqa: E731
    first = fp()
    assert fp() == first
    os.utime(note, ns=(1, 1))
    assert fp() != first
    second = fp()
    note.rename(tmp_path / "b.md")
    assert fp() != second


# ---- chunk -----------------------------------------------------------------

def test_heading_paths_follow_the_outline():
    text = "# Guide\nintro\n## Install\npip\n### Linux\napt\n## Use\nrun it\n"
    outline = rag.heading_outline(text)
    assert [(lv, t) for _, lv, t in outline] == [(1, "Guide"), (2, "Install"), (3, "Linux"), (2, "Use")]
    assert rag.heading_paths(outline, [text.index("apt"), text.index("run it"), 0]) == [
        "# Guide › ## Install › ### Linux", "# Guide › ## Use", "# Guide"]


@pytest.mark.parametrize("text, titles", [
    ("# A\n```\n# not a heading\n```\n## B\n", ["A", "B"]),
    ("# A\n```sh\n# a comment, and the fence never closes\n## not B either\n", ["A"]),   # CommonMark
    ("# A\n- step:\n  ```\n  # in a list\n  ```\n## B\n", ["A", "B"]),
    ("# A\n> ~~~\n> # quoted code\n> ~~~\n## B\n", ["A", "B"]),
])
def test_a_heading_in_code_is_none(text, titles):
    assert [t for _, _, t in rag.heading_outline(text)] == titles


def lines_run(fn, *args):
    """fn(*args), and how many lines of demo_rag.py it ran: a cost no machine's load changes."""
    count = [0]

    def trace(frame, event, arg):
        if frame.f_code.co_filename != rag.__file__:
            return None
        count[0] += event == "line"
        return trace
    before = sys.gettrace()
    sys.settrace(trace)
    try:
        return fn(*args), count[0]
    finally:
        sys.settrace(before)


def test_a_heading_over_the_bound_is_text_and_heads_no_chunk():
    bound = "t" * rag.HEADING_MAX_CHARS
    assert [t for _, _, t in rag.heading_outline(f"# {bound}\n# {bound}t\n")] == [bound]
    chunks = rag.chunk_note("n.md", "# " + "coffee " * 3000 + "\nbody\n", rag.make_splitter())
    assert {c.heading for c in chunks} == {""} and "coffee coffee" in chunks[0].text
    assert max(len(c.embed_text) for c in chunks) <= rag.CHUNK_SIZE


def test_an_outline_costs_a_few_lines_a_heading_however_many_code_blocks():
    n = 500                                                  # each heading after its code block
    outline, lines = lines_run(rag.heading_outline, "```\n# x\n```\n# h\n" * n)
    assert [t for _, _, t in outline] == ["h"] * n
    assert lines < 10 * n, lines                             # not a look at every block a heading


def test_heading_trails_cost_a_few_lines_a_heading_however_many_chunks():
    n = 1000                                                 # sections of two headings each
    text = "".join(f"# h{i}\n## s{i}\nwords\n" for i in range(n))
    chunks, lines = lines_run(rag.chunk_note, "n.md", text, rag.make_splitter(100, 0))
    assert len(chunks) > 200 and chunks[0].heading == "# h0 › ## s0"
    assert all(re.fullmatch(r"# h(\d+) › ## s\1", c.heading) for c in chunks)
    assert lines < 15 * 2 * n, lines                         # not a walk of the outline a chunk


def test_chunks_split_at_headings_and_know_their_heading():
    body = "# Title\n\n" + "".join(f"## Part {i}\n\n" + f"Sentence {i} is here. " * 12 + "\n\n" for i in range(4))
    chunks = rag.chunk_note("n.md", body, rag.make_splitter(300, 0))
    assert len(chunks) >= 4
    for c in chunks:
        assert c.source == "n.md" and c.heading.startswith("# Title › ## Part ")
        assert len(c.text) <= 300
    assert chunks[0].citation == "n.md › # Title › ## Part 0"


def test_chinese_text_splits_at_sentence_ends():
    text = "。".join(f"第{i}句话讲的是一个很长的中文句子，用来测试切分" for i in range(40)) + "。"
    chunks = rag.chunk_note("zh.md", text, rag.make_splitter(120, 0))
    assert len(chunks) > 5
    assert all(c.text.endswith("。") for c in chunks[:-1]), [c.text[-5:] for c in chunks]


def headings_only(chunk) -> bool:
    return all(re.fullmatch(r"#{1,6} .*", line) for line in chunk.text.split("\n") if line.strip())


LONG_EN = "Pour the water slowly in circles, wait for the bloom and keep the kettle moving. " * 8
LONG_ZH = "把水慢慢地绕圈倒进去，等咖啡粉膨胀，再一边移动水壶一边继续注水。" * 20


@pytest.mark.parametrize("title, section, body", [("# Coffee", "## Pour over", LONG_EN),
                                                   ("# 咖啡", "## 手冲", LONG_ZH)], ids=["English", "Chinese"])
def test_a_heading_whose_section_is_longer_than_a_chunk_joins_the_text_after_it(title, section, body):
    # The title's section starts with a subsection longer than a chunk, which starts with one
    # paragraph longer than a chunk: the splitter leaves "# T" and "## S" alone, one chunk each.
    text = f"{title}\n\n{section}\n\n{body}\n\n## Notes\n\nshort.\n"
    assert len(body) > 600
    chunks = rag.chunk_sections("n.md", [rag.Section(text, line=3)], rag.make_splitter(300, 0))
    assert not [c for c in chunks if headings_only(c)], chunks
    first = chunks[0]
    assert first.text.startswith(f"{title}\n\n{section}\n\n{body[:20]}")
    assert first.line == 3 and first.citation == f"n.md › {title} › {section}"
    assert len(first.text) <= 300 + len(f"{title}\n\n{section}\n\n")   # the headings pass the size
    assert chunks[-1].text == "## Notes\n\nshort." and chunks[-1].line == 3 + text[:text.index("## Notes")].count("\n")
    joined = "".join(c.text for c in chunks)
    assert all(word in joined for word in body.split()[:5])


def test_a_note_of_headings_only_keeps_them_and_an_outline_keeps_its_size():
    # Headings and nothing after: nothing to join, and the note would say nothing without them.
    chunks = rag.chunk_sections("t.md", [rag.Section("# Trip\n## Ideas\n", line=1)], rag.make_splitter(300, 0))
    assert [(c.text, c.line, c.citation) for c in chunks] == [("# Trip\n## Ideas", 1, "t.md › # Trip › ## Ideas")]
    # An outline: a chunk's worth of headings is a text of its own, not joined to the next.
    outline = "".join(f"## Chapter {i} of the long outline\n" for i in range(40))
    chunks = rag.chunk_note("o.md", outline, rag.make_splitter(300, 0))
    assert len(chunks) > 3 and all(len(c.text) <= 300 for c in chunks)
    # A heading at the very end, after a full chunk, stays: it is the note's text as written.
    text = "# Log\n\n" + "Ran the backup job again and it finished. " * 7 + "\n\n## Next"
    chunks = rag.chunk_note("l.md", text, rag.make_splitter(300, 0))
    assert chunks[-1].text == "## Next" and chunks[0].text.startswith("# Log\n\nRan")


# ---- tokenize & BM25 ----------------------------------------------------------

@pytest.mark.parametrize("text, tokens", [
    ("Hello, World!", ["hello", "world"]),
    ("version 3.11 and XK-2291", ["version", "3", "11", "xk", "2291"]),
    ("What is the BM25 of it?", ["bm25"]),
    ("This note has notes, queries and classes", ["note", "note", "query", "class"]),
    ("boxes, watches, wishes, glasses; brewing brewed brews", ["box", "watch", "wish", "glass",
                                                               "brewing", "brewed", "brew"]),
    ("什么是检索", ["检", "索", "么是", "是检", "检索"]),   # 什么 (what) is a stopword, as "what" is
    ("向量检索", ["向", "量", "检", "索", "向量", "量检", "检索"]),
    ("用RAG检索", ["用", "rag", "检", "索", "检索"]),
    ("", []),
    ("🙂 emoji_only", ["emoji", "only"]),
])
def test_tokenize(text, tokens):
    assert rag.tokenize(text) == tokens


def lexicon(texts):
    return rag.lexicon_from_texts(texts)


def bm25(lex, query):
    return rag.bm25_scores(lex, rag.query_postings(lex, query))


def test_bm25_by_hand():
    lex = lexicon(["cat sat", "dog sat"])
    scores = bm25(lex, "cat")
    # idf = ln(1 + (2 - 1 + 0.5) / (1 + 0.5)) = ln 2; f = 1 and dl = avgdl, so tf part = 1
    assert scores == pytest.approx([np.log(2), 0.0])
    assert bm25(lex, "sat") == pytest.approx([np.log(1 + 0.5 / 2.5)] * 2)
    assert bm25(lex, "unknown").tolist() == [0.0, 0.0]


def test_bm25_finds_chinese_terms_inside_sentences():
    lex = lexicon(["我们用向量检索笔记", "今天天气很好", "Python asyncio event loop"])
    assert bm25(lex, "向量").argmax() == 0
    assert bm25(lex, "天气").argmax() == 1
    assert bm25(lex, "ASYNCIO").argmax() == 2


def test_incremental_lexicon_equals_a_fresh_one():
    texts = ["alpha beta", "beta gamma 向量", "delta", "epsilon alpha"]
    old = lexicon(texts)
    # new order: row 3, a new chunk, row 1 twice (a copied note); row 0 and 2 deleted
    new = rag.build_lexicon(old, np.array([3, -1, 1, 1]), ["zeta alpha"])
    fresh = lexicon([texts[3], "zeta alpha", texts[1], texts[1]])
    for q in ["alpha", "beta", "向量", "zeta", "delta"]:
        assert bm25(new, q) == pytest.approx(bm25(fresh, q))
    assert new.vocab == fresh.vocab


def test_coverage_weighs_rare_words():
    lex = lexicon(["cat sat", "dog sat"])
    cov = lambda q, row: rag.coverage(rag.query_postings(lex, q), row)  # noqa: E731
    assert cov("cat", 0) == 1.0
    assert cov("cat", 1) == 0.0
    assert 0 < cov("cat zebra", 0) < 0.5                # the unseen word weighs more
    assert cov("cat dog", 0) == pytest.approx(np.log(2) / (np.log(2) + np.log(2)))


# ---- search ------------------------------------------------------------------

def test_top_k_is_exact_and_breaks_ties_by_row():
    scores = np.array([0.5, 0.9, 0.1, 0.9, 0.5, 0.5])
    assert rag.top_rows(scores, 3).tolist() == [1, 3, 0]
    assert rag.top_rows(scores, 4).tolist() == [1, 3, 0, 4]
    assert rag.top_rows(scores, 10).tolist() == [1, 3, 0, 4, 5, 2]
    assert rag.top_rows(np.array([]), 3).tolist() == []
    rng = np.random.default_rng(0)
    big = rng.standard_normal(5000)
    assert rag.top_rows(big, 7).tolist() == np.argsort(-big, kind="stable")[:7].tolist()


def test_normalize_makes_dot_products_cosines():
    m = rag.normalize(np.array([[3.0, 4.0], [0.0, 0.0], [1.0, 1.0]]))
    assert np.linalg.norm(m, axis=1) == pytest.approx([1, 0, 1])


def test_fusion_ignores_a_ranker_that_is_noise():
    rng = np.random.default_rng(1)
    lexical = np.zeros(200)
    lexical[17] = 8.0
    lexical[[3, 50]] = 1.0
    noise = rng.standard_normal(200) * 0.05
    assert rag.standout(noise) <= 0 < rag.standout(lexical)
    # the default: even with only half the question's words in BM25's best chunk, noise
    # counts for less than the words, and the words' best chunk stays first
    fused, weights = rag.fuse(noise, lexical, 0.5)
    assert rag.top_rows(fused, 3).tolist()[0] == 17 and weights["dense"] < weights["bm25"]
    fused, weights = rag.fuse(noise, lexical, 0.5, "zscore")     # the earlier default drops it
    assert rag.top_rows(fused, 3).tolist()[0] == 17 and weights["dense"] == 0


def test_a_weak_embedder_does_not_flip_a_close_keyword_call_on_a_small_folder():
    """12 chunks, half the question's words in BM25's best chunk, a near-tie for second,
    and an embedder whose best match is barely above the typical chunk (hashed or random
    vectors): the first `evidence` fusion let it reorder the two; BM25's order must hold."""
    lexical = np.zeros(12)
    lexical[[0, 1]] = [2.31, 2.16]
    dense = np.array([0.0, 0.12, 0.02, -0.01, 0.03, 0.0, 0.01, -0.02, 0.02, 0.0, -0.01, 0.01])
    fused, shares = rag.fuse(dense, lexical, 0.5)
    assert rag.top_rows(fused, 2).tolist() == [0, 1] and shares["bm25"] > 0.99


def test_fusion_follows_meaning_when_the_words_are_not_there():
    """A paraphrase: BM25's best chunk holds few of the question's words, and the
    embedder's best clearly stands out, so meaning decides."""
    dense = np.full(200, 0.1)
    dense[42] = 0.9
    lexical = np.zeros(200)
    lexical[7] = 2.0
    fused, weights = rag.fuse(dense, lexical, 0.1)
    assert rag.top_rows(fused, 1).tolist() == [42] and weights["dense"] > 0.5 > weights["bm25"]
    fused, _ = rag.fuse(dense, lexical, 0.9)                       # worded like the note: words decide
    assert rag.top_rows(fused, 1).tolist() == [7]


def test_query_instruction_only_for_known_models():
    s = rag.Settings()
    assert rag.query_text("hi", s) == ("Instruct: Given a web search query, retrieve relevant "
                                       "passages that answer the query\nQuery:hi")
    assert rag.query_text("hi", rag.Settings(embed_model="my-embedder:latest")) == "hi"
    assert rag.query_text("hi", rag.Settings(query_instruction="")) == "hi"
    assert rag.query_text("hi", rag.Settings(query_instruction="q: {query}")) == "q: hi"


@pytest.mark.parametrize("model, query, document", [
    ("nomic-embed-text:v1.5", "search_query: q", "search_document: d"),
    ("hf.co/nomic-ai/nomic-embed-text-v1.5-GGUF:Q4_K_M", "search_query: q", "search_document: d"),
    ("me/nomic-embed-text:mine", "search_query: q", "search_document: d"),
    ("mxbai-embed-large:335m", "Represent this sentence for searching relevant passages: q", "d"),
    ("snowflake-arctic-embed:22m", "Represent this sentence for searching relevant passages: q", "d"),
    ("snowflake-arctic-embed2:568m", "query: q", "d"),
    ("hf.co/Snowflake/snowflake-arctic-embed-l-v2.0-GGUF", "query: q", "d"),
    ("embeddinggemma:300m", "task: search result | query: q", "title: none | text: d"),
    ("bge-m3:567m", "q", "d"),
    ("all-minilm:l6-v2", "q", "d"),
    ("hf.co/intfloat/multilingual-e5-small-GGUF", "query: q", "passage: d"),
    ("multilingual-e5-large-instruct", "q", "d"),          # another prompt format: not in the table
    ("my-own-embedder", "q", "d"),
])
def test_embedding_prompts_per_model_family(model, query, document):
    s = rag.Settings(embed_model=model)
    assert rag.query_text("q", s) == query
    assert rag.document_text(rag.Chunk("a.md", "", "d"), s) == document


def test_doc_instruction_overrides_the_table():
    s = rag.Settings(embed_model="nomic-embed-text", doc_instruction="doc: ")
    assert rag.document_text(rag.Chunk("a.md", "# H", "d"), s) == "doc: # H\n\nd"
    assert rag.query_text("q", s) == "search_query: q"
    assert "--doc-instruction" in rag.embed_templates(s).source


# ---- prompt & answer -----------------------------------------------------------

def test_prompt_has_rules_numbered_sources_and_question():
    hits = [rag.Hit(1, 0, rag.Chunk("a.md", "# A", "alpha text"), 1.0, 0.9, 1.0),
            rag.Hit(2, 1, rag.PlacedChunk("b.pdf", "", "beta text", page=3), 0.5, 0.4, 0.0)]
    system, user = rag.build_messages("问题？", hits)
    assert system["role"] == "system" and "[1]" in system["content"] and "same language" in system["content"]
    assert user["content"] == ("Sources:\n\n[1] a.md › # A\n> alpha text\n\n[2] b.pdf › p.3\n> beta text"
                               "\n\nQuestion: 问题？")


@pytest.mark.parametrize("pieces, text", [
    (["Hello", " [1]"], "Hello [1]"),
    (["<think>", "reasoning", "</think>", "\n\nAnswer"], "Answer"),
    (["<thi", "nk>a</th", "ink>B"], "B"),
    (["a < b and <thinking> is text"], "a < b and <thinking> is text"),
    (["x<think>y</think>z"], "x<think>y</think>z"),          # only a block the reply opens with
    (["A model wraps reasoning in a <think>", " block [1]."], "A model wraps reasoning in a <think> block [1]."),
    (["  </think>\n\nAnswer"], "Answer"),                    # an empty block opened in the prompt
    ([], ""),
])
def test_strip_think(pieces, text):
    assert "".join(rag.strip_think(pieces)) == text


@pytest.mark.parametrize("pieces, text", [
    (["reasoning about", " the sources\n</thi", "nk>\n\nAnswer [1]"], "Answer [1]"),
    (["An answer without any", " reasoning [1]"], "An answer without any reasoning [1]"),
    (["<think>r</think>A"], "A"),
])
def test_strip_think_when_the_template_opened_the_block(pieces, text):
    assert "".join(rag.strip_think(pieces, opened_in_prompt=True)) == text


def test_context_size_counts_cjk_and_leaves_room_for_the_answer():
    assert rag.estimate_tokens("abcd" * 10) == 10
    assert rag.estimate_tokens("检索" * 10) == 16                # 4 tokens to 5 CJK characters
    assert rag.estimate_tokens("Привет мир") == 5 and rag.estimate_tokens("a" + " " * 40 + "b") == 1
    small = [{"role": "user", "content": "hi"}]
    assert rag.context_size(small) == rag.NUM_CTX
    big = [{"role": "user", "content": "中" * 9000}]
    assert rag.context_size(big) >= 9000 + rag.ANSWER_TOKENS
    assert rag.context_size(big) in rag.NUM_CTX_LADDER


def test_importing_has_no_side_effects(tmp_path):
    import shutil
    import subprocess
    import sys
    shutil.copy(rag.HERE / "demo_rag.py", tmp_path)          # a fresh copy: nothing beside it yet
    code = "import sys, demo_rag; print('langchain_text_splitters' in sys.modules, 'pypdf' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env=user_env("http://127.0.0.1:9"))
    assert (out.stdout, out.stderr) == ("False False\n", "")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == ["demo_rag.py"]


def test_confidence_adds_the_words_found_and_the_meaning_on_the_embedders_scale(tmp_path, server):
    import ollama
    for name, text in [("a.md", "cat sat on the mat"), ("b.md", "dog sat by the door"), ("c.md", "emu ran far away")]:
        (tmp_path / "n").mkdir(exist_ok=True)
        (tmp_path / "n" / name).write_text(f"{text}. " * 5)
    index, _ = rag.open_index(rag.Settings(notes_dir=tmp_path / "n", cache_dir=tmp_path / "c"),
                               ollama.Client(host=server.url))
    assert [c.source for c in index.chunks] == ["a.md", "b.md", "c.md"]
    rows = np.arange(3)
    dense = np.array([0.2, 0.9, 0.1])

    def conf(question, hit_rows, dense, rows):
        return rag.confidence(rag.query_postings(index.lexicon, question), hit_rows, dense, rows)
    # no query word in the notes: only meaning counts, the best hit's cosine 0.9 moved from the
    # median 0.2 towards 1.0: (0.9 - 0.2) / (1 - 0.2) = 0.875
    assert conf("zebra", [1], dense, rows) == pytest.approx(0.875)
    assert conf("zebra", [0, 1], dense, rows) == pytest.approx(0.875)
    assert conf("zebra", [1], dense, np.array([0, 1])) == pytest.approx((0.9 - 0.55) / (1 - 0.55))
    # the query word is in chunk 0 (words 1.0), whose cosine is the median (meaning 0)
    assert conf("cat", [0], dense, rows) == pytest.approx(1.0)
    assert conf("cat", [0, 1], dense, rows) == pytest.approx(1.875)      # both kinds of evidence add
    # keywords only: coverage alone
    assert conf("zebra", [1], None, rows) == 0.0
    assert 0 < conf("cat zebra", [0], None, rows) < 1


def test_metrics_by_hand():
    # first-hit ranks 1, 2, 4, 7, none, 12 (beyond MRR@10)
    m = rag.metrics([1, 2, 4, 7, None, 12])
    assert m == {"hit@1": round(1 / 6, 4), "hit@3": round(2 / 6, 4), "hit@5": round(3 / 6, 4),
                 "mrr": round((1 + 1 / 2 + 1 / 4 + 1 / 7) / 6, 4), "n": 6}
    assert rag.metrics([]) == {"hit@1": 0.0, "hit@3": 0.0, "hit@5": 0.0, "mrr": 0.0, "n": 0}


@pytest.mark.parametrize("raw, first_line", [
    ("# Title\nbody text here, long enough to be kept as a note of its own.\n", 1),
    ("---\ntags: [a]\ndate: 2026-01-01\n---\n# Title\nbody text here, long enough to be kept as a note.\n", 5),
    ("\ufeff---\r\ntags: [a]\r\n---\r\n\r\n# Title\r\nbody text here, long enough to be kept as a note.\r\n", 4),
    ("---\rtitle: x\r---\rbody text here, long enough to be kept as a note of its own, yes.\r", 4),
])
def test_a_text_note_s_section_knows_the_file_line_it_starts_on(tmp_path, raw, first_line):
    # Line numbers count the file as it is on disk: front matter, CRLF, CR and a BOM included.
    path = tmp_path / "note.md"
    path.write_bytes(raw.encode("utf-8"))
    (section,), _ = rag.NOTE_TYPES[".md"].read(path)
    assert section.line == first_line
    on_disk = path.read_bytes().decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    assert on_disk[first_line - 1:][:len(section.text.split("\n"))] == section.text.split("\n")


def test_the_note_types_table_is_what_the_scanner_and_messages_go_by(tmp_path, server):
    for name in ["a.md", "b.markdown", "c.txt", "d.pdf", "e.rst", "f.html"]:
        (tmp_path / name).write_text("x")
    files, _ = rag.scan_notes(tmp_path)
    assert {f.rel.rsplit(".", 1)[1] for f in files} <= {s.lstrip(".") for s in rag.NOTE_TYPES}
    assert set(rag.NOTE_SUFFIXES) <= set(rag.NOTE_TYPES)                 # Part I's suffixes are among them
    out = run_cli("q", "--notes", tmp_path, "--cache", tmp_path / ".c", host=server.url)
    assert out.returncode == 2 and f"looked for {', '.join(rag.NOTE_TYPES)}" in out.stderr
