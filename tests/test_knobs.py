"""Each tuned constant decides something a user sees: on a small case built by hand, moving it
by a quarter either way changes which chunk ranks first, whether a question is answered, what
floor a calibration sets, which variant --tune recommends, which language a question is taken
for, or how many sources the chat model gets. (tests/mutate.py moves each one and checks that
the test named after it fails; bench/knobs.md has the table.)"""
from __future__ import annotations

import json

import numpy as np
import ollama
import pytest

import demo_rag as rag
from ollama_server import FakeOllama, hashed_vector


def index_of(texts: list[str]) -> rag.Index:
    """An index of one chunk per text, whose vectors are all the same: every chunk is as close
    to any question as every other, so the embedder says nothing and BM25 ranks alone (the
    question is still embedded, as in any run with Ollama up)."""
    vectors = np.tile(np.array(hashed_vector("same for all"), dtype=np.float32), (len(texts), 1))
    return rag.Index([rag.PlacedChunk(f"{i:02d}.md", "", text) for i, text in enumerate(texts)], vectors,
                     np.ones(len(texts), bool), rag.lexicon_from_texts(texts), {}, "", rag.EMBED_MODEL,
                     (rag.CHUNK_SIZE, rag.CHUNK_OVERLAP))


def search(server, index: rag.Index, question: str) -> rag.Retrieval:
    return rag.search(ollama.Client(host=server.url), index, question, rag.Settings(query_instruction=""))


def first(server, index: rag.Index, question: str) -> str:
    """The first word of the chunk that ranks first."""
    return search(server, index, question).hits[0].chunk.text.split()[0]


def filled(words: str, length: int, filler: str) -> str:
    """`words`, then filler words ("a0", "a1", ...: never a question's word) up to `length` words."""
    return " ".join(words.split() + [f"{filler}{i}" for i in range(length - len(words.split()))])


# ---- BM25 ----------------------------------------------------------------------------------

def test_bm25_k1_three_mentions_of_a_common_word_lose_to_one_of_a_rare_word_four_win(server):
    """BM25_K1: how fast repeats stop counting. "crust" is in 3 of 12 chunks, "levain" in 1; one
    chunk says "crust" three times, another "levain" once (every chunk is 6 words long, so length
    plays no part). The rare word once wins; but "oven" (also in 3 chunks) said four times beats
    the rare "proofing" once. A lower k1 lets four mentions lose, a higher one lets three win."""
    texts = [filled("crust crust crust", 6, "a"), filled("levain", 6, "b"), filled("crust", 6, "c"),
             filled("crust", 6, "d"), filled("oven oven oven oven", 6, "e"), filled("proofing", 6, "f"),
             filled("oven", 6, "g"), filled("oven", 6, "h")] + [filled("", 6, f"x{i}") for i in range(4)]
    index = index_of(texts)
    assert first(server, index, "crust levain") == "levain"
    assert first(server, index, "oven proofing") == "oven"


def test_bm25_b_a_long_chunk_saying_a_word_twice_beats_a_short_one_saying_it_once_unless_very_short(server):
    """BM25_B: how much long chunks are discounted. A 9-word chunk says "rye" twice, a 3-word one
    once: the short one wins. A 9-word chunk says "spelt" twice, a 4-word one once: the long one
    wins (the mean chunk is 5.6 words). Less discount lets the long one win both, more the short."""
    texts = [filled("rye", 3, "a"), filled("rye rye", 9, "b"), filled("spelt", 4, "c"),
             filled("spelt spelt", 9, "d")] + [filled("", 5, f"x{i}") for i in range(4)]
    index = index_of(texts)
    assert search(server, index, "rye").hits[0].chunk.source == "00.md"
    assert search(server, index, "spelt").hits[0].chunk.source == "03.md"


# ---- fusion --------------------------------------------------------------------------------

def ranked(order: list[int], n: int) -> np.ndarray:
    """Scores over n rows that rank `order` first to last (the other rows score 0)."""
    scores = np.zeros(n)
    scores[order] = np.arange(len(order), 0, -1)
    return scores


@pytest.mark.parametrize("both, alone, winner", [(6, 12, "both"), (9, 19, "alone")])
def test_rrf_k_a_chunk_both_rankers_place_well_beats_one_meaning_puts_first(both, alone, winner):
    """RRF_K (--fusion rrf, and Part I): row 0 is first by meaning and `alone`-th by words; row 1
    is `both`-th by both. With k = 60, 6th and 6th beat 1st and 12th, but 9th and 9th lose to 1st
    and 19th: a lower k makes ranks matter more (the first place wins), a higher one less."""
    n = 2 * alone
    fillers = list(range(2, both))                       # meaning's places 2 .. both-1, without the words
    rest = list(range(both, n))
    by_meaning = [0, *fillers, 1, *rest]
    words_only = rest[::-1][:alone - 2]                  # words' other places go to rows last by meaning,
    by_words = [*words_only[:both - 1], 1, *words_only[both - 1:], 0]   # so that neither row 0 nor 1 meets them
    assert by_meaning.index(1) == by_words.index(1) == both - 1 and by_words.index(0) == alone - 1
    dense, lexical = ranked(by_meaning, n) / n, ranked(by_words, n)
    fused, _ = rag.fuse(dense, lexical, 1.0, "rrf")
    expected = {"both": 1, "alone": 0}[winner]
    assert int(fused.argmax()) == expected
    assert int(rag.reciprocal_rank_fusion([np.array(by_meaning), np.array(by_words)], n).argmax()) == expected


# Row 0 is clearly first by meaning (its cosine moved 0.6 of the way to 1.0) and close behind row 1
# by words (BM25 `close` against 3.0); the words found 0.8 of the question.
MEANING_FIRST = np.array([0.6, 0.3, 0.0, 0.0, 0.0, 0.0])


def words_first(close: float) -> np.ndarray:
    return np.array([close, 3.0, 0.0, 0.0, 0.0, 0.0])


@pytest.mark.parametrize("close, winner", [(2.6, 1), (2.75, 0)])
def test_evidence_power_more_evidence_leads_and_the_other_ranker_breaks_only_near_ties(close, winner):
    """EVIDENCE_POWER: words found 0.8 of the question, meaning 0.6, so words lead; meaning may
    still break a near-tie. 2.6 against 3.0 is not near enough; 2.75 is. A lower power lets
    meaning break the wider gap too; a higher one keeps it from breaking even the narrow one."""
    fused, _ = rag.fuse(MEANING_FIRST, words_first(close), 0.8)
    assert int(fused.argmax()) == winner


@pytest.mark.parametrize("close, winner", [(2.72, 1), (2.78, 0)])
def test_probe_reach_meaning_a_little_above_the_off_topic_probes_counts_only_in_part(close, winner):
    """PROBE_REACH: on this index the off-topic probes found meaning 0.3 (typical) to 0.55 (the
    most). This question's 0.6 is only a little above the most, so its cosine counts a little
    less than in full: it breaks the near-tie 2.78 against 3.0, not 2.72. A smaller reach counts
    it in full (it breaks both); a larger one counts it less (it breaks neither)."""
    fused, _ = rag.fuse(MEANING_FIRST, words_first(close), 0.8, off_topic=(0.3, 0.55))
    assert int(fused.argmax()) == winner


# ---- the floor and the sources -------------------------------------------------------------

def test_min_score_a_question_needs_some_of_its_words_in_one_hit(server):
    """MIN_SCORE (the floor of an uncalibrated index, and Part I's): no help from the embedder
    here, so the confidence is the share of the question's words (by idf) that one hit holds.
    0.45 is answered, 0.36 declined; a floor a quarter higher declines both, lower answers both."""
    texts = ["sourdough starter notes", "starter kept cold", "flour types", "flour storage", "flour sifting",
             "oven heat", "crumb shots", "bench knife", "proof box", "dutch oven"]
    index = index_of(texts)
    held = search(server, index, "sourdough starter hydration flour")
    assert held.confidence == pytest.approx(0.45, abs=0.01) and held.found
    missed = search(server, index, "sourdough starter hydration levain")
    assert missed.confidence == pytest.approx(0.36, abs=0.01) and not missed.found


def test_source_cut_only_the_sources_close_to_the_best_go_to_the_chat_model(server):
    """SOURCE_CUT: "crumb" is in 2 of 10 chunks, "crust" and "score" in 3 (each chunk is 4 words
    long). The chunk with all three words is best; "crumb crust" stands 0.59 as far above the
    average as it does, "crust score" 0.47, "score" alone 0.06: two sources go. A lower cut sends
    three, a higher one only the best."""
    texts = [filled(words, 4, f"x{i}") for i, words in enumerate(["crumb crust score", "crumb crust",
                                                                  "crust score", "score"] + [""] * 6)]
    r = search(server, index_of(texts), "crumb crust score")
    assert [h.chunk.source for h in r.candidates[:4]] == ["00.md", "01.md", "02.md", "03.md"]
    assert [h.chunk.source for h in r.hits] == ["00.md", "01.md"]


# ---- the calibrated floor ------------------------------------------------------------------

# Chinese notes for the "latin" stand-in embedder, which reads no Chinese: every note without a
# digit gets one and the same vector, and so does every Chinese question, whose best cosine is then
# a perfect 1.0 against a typical one near 0 (two thirds of the notes hold a year, which gives them
# vectors of their own). Every Chinese question, the off-topic probes too, thus finds "meaning" 1.0,
# and only its words tell it apart. The notes share no character with the probes (nor with the
# questions below, but for SEEN, in note 00 only), so a probe's confidence is 1.0 exactly.
NOTE_CHARS = "草叶根枝果实种田园村镇城街桥塔楼阁亭台殿庙寺院宫廷门窗墙瓦砖石玉金银铜铁锡铅钢针线布丝绸缎棉麻衣裳裙帽鞋袜"
SEEN, UNSEEN = "木", "川河湖江溪泉林森"


def blind_vault(folder, n: int):
    folder.mkdir()
    for i in range(n):
        text = (SEEN if i == 0 else "") + (NOTE_CHARS[i:] + NOTE_CHARS[:i])[:50]
        year = f"（{1990 + i}）" if i >= n // 3 else ""
        (folder / f"{i:02d}.md").write_text(text + year + "\n", encoding="utf-8")
    return folder


@pytest.fixture
def latin():
    with FakeOllama(embed="latin") as server:
        yield server


def blind_search(latin, tmp_path, n: int, *questions: str) -> list[rag.Retrieval]:
    settings = rag.Settings(notes_dir=blind_vault(tmp_path / f"notes{n}", n), cache_dir=tmp_path / "cache",
                            query_instruction="")
    client = ollama.Client(host=latin.url)
    index, _ = rag.open_index(settings, client)
    return [rag.search(client, index, q, settings) for q in questions]


def test_floor_margin_a_question_needs_a_little_more_than_the_off_topic_ones_typically_have(latin, tmp_path):
    """FLOOR_MARGIN: the 24 Chinese probes all score 1.0, so the floor sits the margin above it.
    A question holding SEEN and 15 terms the notes lack has 4.6% of its words (by idf) in note
    00, one with 13 such terms 5.2%: the first is declined, the second answered. A margin a
    quarter smaller answers both, a quarter larger declines both."""
    less, more = blind_search(latin, tmp_path, 24, f"{SEEN}，{UNSEEN}", f"{SEEN}，{UNSEEN[:7]}")
    assert less.floor > 1.0 and less.floor == more.floor               # calibrated: above any fixed floor
    assert less.confidence == pytest.approx(1.046, abs=0.001) and not less.found
    assert more.confidence == pytest.approx(1.052, abs=0.001) and more.found


@pytest.mark.parametrize("n, answered", [(17, True), (22, False)])
def test_min_calibration_chunks_an_index_of_20_chunks_declines_an_off_topic_question(latin, tmp_path, n, answered):
    """MIN_CALIBRATION_CHUNKS: a Chinese question the notes know nothing of (meaning 1.0, no
    word) is declined only by a calibrated floor, and an index calibrates from 20 chunks: with
    17 it is answered, with 22 declined. From 15 the 17 would calibrate, from 25 the 22 not."""
    off_topic, = blind_search(latin, tmp_path, n, UNSEEN)
    assert off_topic.confidence == pytest.approx(1.0) and off_topic.found is answered


# Notes that hold some of FLOOR_PROBES word for word (one a note, with some filler that shares no
# word with any probe), so that calibrate() leaves those out as not off-topic here.
ZH_FILL = "，草叶根枝果实种田园村镇城街桥塔楼阁亭台殿庙寺院宫廷门窗墙瓦砖石玉金银铜铁锡铅钢针线布丝绸缎棉"
EN_FILL = " Kept in this folder with the other pages, copied from a card in the kitchen drawer."
ZH_PROBES, EN_PROBES = rag.FLOOR_PROBES["zh"], rag.FLOOR_PROBES["en"]
# Probes no note holds (no note holds more than 6% of their words); "camping" is 露营一周要带哪些东西？
ZH_LEFT = [ZH_PROBES[i] for i in (3, 19, 20, 4, 13, 8, 0)]
EN_LEFT = [EN_PROBES[i] for i in (1, 3, 4, 5, 7, 8, 9)]
CAMPING, MOONS = ZH_PROBES[14], EN_PROBES[11]                   # and "Which planet has the most moons?"


def probe_vault(folder, left: list[str], extra: tuple[str, ...] = ()):
    """A note for each probe not in `left`, and one for each text of `extra`."""
    folder.mkdir()
    texts = [p for p in ZH_PROBES + EN_PROBES if p not in left] + list(extra)
    for i, text in enumerate(texts):
        (folder / f"{i:02d}.md").write_text(text + (ZH_FILL if rag.CJK_CHAR.search(text) else EN_FILL) + "\n",
                                            encoding="utf-8")
    return folder


def floor_sources(cli, notes) -> dict[str, str]:
    """Where the floor of a Chinese and of an English question comes from (--json's floor.source)."""
    out = {}
    for lang, question in (("zh", "书架上有什么？"), ("en", "What is on the shelf?")):
        run = cli(question, "--notes", notes, "--json", "--retrieve-only")
        assert run.returncode == 0, run.stderr
        out[lang] = json.loads(run.stdout)["floor"]["source"]
    return out


def test_min_calibration_probes_a_language_is_calibrated_with_eight_off_topic_questions_left(cli, tmp_path):
    """MIN_CALIBRATION_PROBES: the notes hold 16 of the 24 Chinese probes and 17 of the English
    ones, leaving 8 and 7 off-topic: Chinese questions get a calibrated floor, English ones the
    fixed one. Needing 6 would calibrate English too; needing 10, neither."""
    sources = floor_sources(cli, probe_vault(tmp_path / "notes", ZH_LEFT + [CAMPING] + EN_LEFT))
    assert sources["zh"].startswith("calibrated on this index: zh ") and "from 8 off-topic" in sources["zh"]
    assert sources["en"].startswith("not calibrated for en"), sources


def test_off_topic_coverage_a_probe_counts_unless_one_note_holds_half_its_words(cli, tmp_path):
    """OFF_TOPIC_COVERAGE: as above, but one note holds 44% of the camping probe's words (by idf)
    and one 60% of the moons probe's: camping is still off-topic (8 Chinese probes: calibrated),
    moons is not (7 English ones: the fixed floor). At 0.375 camping no longer counts and Chinese
    is not calibrated either; at 0.625 moons counts and English is calibrated."""
    notes = probe_vault(tmp_path / "notes", ZH_LEFT + [CAMPING] + EN_LEFT + [MOONS],
                        ("出门要带哪些东西", "Jupiter is a planet with many moons."))
    sources = floor_sources(cli, notes)
    assert sources["zh"].startswith("calibrated on this index: zh ") and "from 8 off-topic" in sources["zh"]
    assert sources["en"].startswith("not calibrated for en"), sources


# ---- the question's language ---------------------------------------------------------------

@pytest.mark.parametrize("question, language", [("What is 检索增强生成 in English?", "en"),   # 21% CJK
                                                ("BM25 的 k1 和 b 怎么调？", "zh")])           # 28% CJK
def test_zh_cjk_share_a_question_quoting_chinese_is_english_one_naming_english_terms_is_chinese(question, language):
    """ZH_CJK_SHARE: which language's calibrated floor a mixed question is judged by. An English
    question quoting a Chinese term stays English, a Chinese one naming English terms is Chinese;
    a share of 0.1875 would take the first for Chinese, 0.3125 the second for English."""
    assert rag.question_language(question) == language


# ---- --tune --------------------------------------------------------------------------------

def test_tune_answered_the_recommended_floor_gives_up_one_weak_answerable_question_in_twenty():
    """TUNE_ANSWERED: 18 answerable questions score 0.78 to 0.95, two only 0.6 and 0.35; the
    unanswerable ones 0.5. The floor --tune recommends, 0.6, answers 19 of the 20 and declines
    every unanswerable one. Asking for 71% answered would set it above 0.8 (15 answered);
    asking for more than all of them (119%) leaves no floor to give."""
    answerable = [(95 - i) / 100 for i in range(18)] + [0.6, 0.35]
    rows = [({"answers": ["a"]}, 1, [c] * 10) for c in answerable] + [({"answers": []}, None, [0.5] * 10)] * 4
    floor = rag.recommend_floor(rows, 5)
    assert floor == {"min_score": 0.6, "answered": 19, "answerable": 20, "declined": 4, "unanswerable": 4}


TOPICS = ["lantern", "harbor", "violin", "glacier", "saddle", "pepper", "compass", "meadow", "anchor", "thimble",
          "falcon", "quarry", "marble", "walnut", "barrel", "canyon", "ribbon", "copper", "tundra", "pillow",
          "kettle", "parrot", "ladder", "tunnel", "cactus", "sleigh", "magnet", "orchard", "velvet"]


@pytest.mark.parametrize("n, recommended", [(22, True), (30, False)])
def test_tune_min_gain_one_question_moved_from_rank_2_to_1_is_a_gain_only_in_a_small_set(cli, tmp_path, n, recommended):
    """TUNE_MIN_GAIN: with --fusion dense, every question but one finds its note first; that one
    ("Which herbs go with oregano?") finds a topic note, each of which has "a word on herbs",
    before the one with oregano, which BM25 puts first. Any other fusion gains 0.5/n in MRR: 0.023 over
    22 questions is recommended, 0.017 over 30 is not (the defaults are kept). A gain of 0.015
    would recommend it over 30 too, one of 0.025 over 22 neither."""
    notes = tmp_path / "notes"
    notes.mkdir()
    for t in TOPICS:
        (notes / f"{t}.md").write_text(f"# {t.title()}\n\nAbout the {t}: {t}, {t} and more {t}. A word on herbs.\n")
    (notes / "pesto.md").write_text("# Pesto\n\nPound basil with oregano, garlic, pine nuts, salt and good oil.\n")
    items = [{"question": f"Where did I write about {t}?", "answers": [t], "source": f"{t}.md"} for t in TOPICS[:n - 1]]
    items.append({"question": "Which herbs go with oregano?", "answers": ["oregano"], "source": "pesto.md"})
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    run = cli("--notes", notes, "--tune", tmp_path / "q.jsonl", "--fusion", "dense", "--query-instruction", "",
              "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    dense = next(v for v in result["variants"] if (v["fusion"], v["query_instruction"]) == ("dense", "off"))
    assert dense["hit@1"] == round((n - 1) / n, 4) and max(v["mrr"] for v in result["variants"]) == 1.0
    assert (result["winner"] != result["defaults"]) is recommended
