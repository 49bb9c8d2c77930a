"""The relevance floor, calibrated on each index with off-topic questions (FLOOR_PROBES): an
embedder that cannot read the notes' language no longer lets every question through, and a
question whose words the notes hold is never declined for it."""
from __future__ import annotations

import json
import os
from dataclasses import replace

import ollama
import pytest
from conftest import note_texts, read_cache, run_cli
from ollama_server import FakeOllama

import demo_rag as rag

# 24 notes, one chunk each. The "latin" stand-in embedder reads no Chinese: every note without
# a Latin word or digit gets one and the same vector, and so does every Chinese question, whose
# best cosine is then a perfect 1.0 while the typical note's is far lower (two thirds of the
# notes hold a year, which gives them vectors of their own). Today's confidence takes that for
# meaning, so any Chinese question looks answerable at the fixed floor. Questions are embedded
# without a template (--query-instruction ''), whose English words the embedder would read.
TOPICS = ["长江大桥通车", "春节铁路运输", "小麦丰收", "新建图书馆", "地铁二号线", "冬季长跑比赛", "水库蓄水",
          "茶叶出口", "古城墙修复", "渔业休渔期", "电网改造", "中学英语竞赛", "森林防火", "棉花收购",
          "港口吞吐量", "乡村公路", "机场扩建", "博物馆开放", "钢铁减产", "邮政储蓄", "民航新航线",
          "中药材种植", "城市绿化", "海水淡化"]
OFF_TOPIC = "红烧肉要炖多久才会软烂？"
ON_TOPIC = "古城墙修复工程进展如何？"


def write_vault(folder, n=len(TOPICS)):
    folder.mkdir()
    for i, topic in enumerate(TOPICS[:n]):
        year = f"（{1990 + i}）" if i % 3 else ""
        (folder / f"{i:02d}.md").write_text(f"# {topic}\n\n本地{topic}的消息{year}：{topic}工作进展顺利，"
                                            f"有关部门介绍了{topic}的具体情况和下一步安排。\n", encoding="utf-8")
    return folder


@pytest.fixture
def latin():
    with FakeOllama(embed="latin") as server:
        yield server


def ask(server, notes, cache, question, *flags):
    out = run_cli(question, "--notes", notes, "--cache", cache, "--json", "--query-instruction", "", *flags,
                  host=server.url)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_an_off_topic_question_is_declined_only_thanks_to_the_calibration(latin, tmp_path):
    notes, cache = write_vault(tmp_path / "notes"), tmp_path / "cache"
    fixed = ask(latin, notes, cache, OFF_TOPIC, "--min-score", rag.MIN_SCORE)
    assert fixed["found"] and fixed["confidence"] >= 1.0 and fixed["floor"]["source"] == "--min-score"
    asked = len(latin.of("/api/chat"))
    calibrated = ask(latin, notes, cache, OFF_TOPIC)
    assert not calibrated["found"] and calibrated["answer"] is None
    assert calibrated["confidence"] == fixed["confidence"]        # the same evidence, a floor that knows it
    assert calibrated["floor"]["value"] > calibrated["confidence"]
    assert calibrated["floor"]["source"].startswith("calibrated on this index: zh ")
    assert len(latin.of("/api/chat")) == asked                     # the chat model was asked nothing


def test_the_calibration_never_declines_a_question_whose_words_the_notes_hold(latin, server, tmp_path):
    notes = write_vault(tmp_path / "notes")
    for host, cache in ((latin, tmp_path / "c1"), (server, tmp_path / "c2")):   # blind and seeing embedders
        data = ask(host, notes, cache, ON_TOPIC)
        assert data["found"] and data["sources"][0]["source"] == f"{TOPICS.index('古城墙修复'):02d}.md"
        assert data["floor"]["source"].startswith("calibrated"), data["floor"]
    with FakeOllama(embed="random") as noise:                      # and an embedder that is pure noise
        assert ask(noise, notes, tmp_path / "c3", ON_TOPIC)["found"]


def test_the_probes_are_embedded_once_per_build_never_per_question(latin, tmp_path):
    notes, cache = write_vault(tmp_path / "notes"), tmp_path / "cache"
    for _ in range(3):
        ask(latin, notes, cache, ON_TOPIC)
    texts = latin.embedded_texts()
    assert len(texts) - len(note_texts(texts)) == len(rag.FLOOR_PROBES["zh"])   # Chinese notes: Chinese probes
    assert len(note_texts(texts)) == len(TOPICS) + 3                # the notes once, then each question


def test_a_small_index_keeps_the_fixed_floor_and_says_why(latin, tmp_path):
    notes, cache = write_vault(tmp_path / "notes", n=10), tmp_path / "cache"
    data = ask(latin, notes, cache, OFF_TOPIC)
    assert data["floor"] == {"value": rag.MIN_SCORE, "source": "not calibrated: 10 chunks are too few to calibrate on"}
    out = run_cli("--explain", OFF_TOPIC, "--notes", notes, "--cache", cache, "--query-instruction", "",
                  host=latin.url)
    assert "against the floor 0.40 (not calibrated: 10 chunks are too few to calibrate on)" in out.stdout.replace("\n    ", " ")


def test_ollama_failing_on_the_probes_keeps_the_fixed_floor_until_a_run_can_embed_them(latin, tmp_path):
    notes, cache = write_vault(tmp_path / "notes"), tmp_path / "cache"
    latin.embed_fail_after = 1                                     # the notes' one batch, then nothing
    data = ask(latin, notes, cache, ON_TOPIC)                      # found by its words alone
    assert data["floor"]["value"] == rag.MIN_SCORE and "not calibrated yet" in data["floor"]["source"]
    latin.embed_fail_after = None
    embedded = len(latin.embedded_texts())
    data = ask(latin, notes, cache, OFF_TOPIC)
    assert not data["found"] and data["floor"]["source"].startswith("calibrated")
    assert note_texts(latin.embedded_texts()[embedded:]) == [OFF_TOPIC]   # no note again


def test_a_cache_from_before_the_calibration_gets_one_without_re_embedding(latin, tmp_path):
    notes, cache = write_vault(tmp_path / "notes"), tmp_path / "cache"
    s = rag.Settings(notes_dir=notes, cache_dir=cache, query_instruction="")
    index, _ = rag.open_index(s, ollama.Client(host=latin.url))
    rag.save_index(replace(index, calibration=None), rag.cache_path(s))   # as an older version wrote it
    assert rag.load_index(rag.cache_path(s))[0].calibration is None
    embedded = len(latin.embedded_texts())
    data = ask(latin, notes, cache, OFF_TOPIC)
    assert not data["found"] and data["floor"]["source"].startswith("calibrated")
    assert note_texts(latin.embedded_texts()[embedded:]) == [OFF_TOPIC]   # no note again
    assert rag.load_index(rag.cache_path(s))[0].calibration["floors"]["zh"] == data["floor"]["value"]


def test_min_score_overrides_the_calibration_everywhere(latin, tmp_path):
    notes, cache = write_vault(tmp_path / "notes"), tmp_path / "cache"
    out = run_cli("--notes", notes, "--cache", cache, "--explain", OFF_TOPIC, "--min-score", "0.3",
                  "--query-instruction", "", host=latin.url)
    assert "against the floor 0.30 (--min-score)" in out.stdout
    evalset = tmp_path / "eval.jsonl"
    evalset.write_text(json.dumps({"question": OFF_TOPIC, "answers": []}, ensure_ascii=False) + "\n"
                       + json.dumps({"question": ON_TOPIC, "answers": ["古城墙"]}, ensure_ascii=False) + "\n")
    flags = ("--notes", notes, "--cache", cache, "--eval", evalset, "--json", "--query-instruction", "")
    default = json.loads(run_cli(*flags, host=latin.url).stdout)
    assert default["floor"]["min_score"] is None and default["floor"]["unanswerable_refused"] == 1
    forced = json.loads(run_cli(*flags, "--min-score", "0.4", host=latin.url).stdout)
    assert forced["floor"]["min_score"] == 0.4 and forced["floor"]["unanswerable_refused"] == 0


def test_probes_whose_words_the_notes_hold_are_left_out_of_the_calibration(server, tmp_path):
    # Notes about cheese and spaghetti: those two probes are not off-topic here.
    from test_index import make_vault
    notes = make_vault(tmp_path / "notes", 8)
    (notes / "cheese.md").write_text("# Cheese\n\nHow cheese is made: milk, rennet, curds, whey, pressing and ageing.\n")
    (notes / "pasta.md").write_text("# Pasta\n\nCook spaghetti for nine minutes in salted boiling water.\n")
    s = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache", chunk_size=300, chunk_overlap=0)
    index, _ = rag.open_index(s, ollama.Client(host=server.url))
    assert len(index.chunks) >= rag.MIN_CALIBRATION_CHUNKS
    assert f"from {len(rag.FLOOR_PROBES['en']) - 2} off-topic questions" in index.calibration["note"]


def test_chinese_notes_after_many_english_ones_are_calibrated_too(server, tmp_path):
    # Notes are read in file-name order, and Chinese names sort after Latin ones.
    from test_index import make_vault
    notes = make_vault(tmp_path / "notes", 80)                    # 240 English chunks first
    for i, topic in enumerate(TOPICS[:6]):
        (notes / f"新闻{i}.md").write_text(f"# {topic}\n\n" + f"{topic}的消息：工作进展顺利，有关部门介绍了具体情况。" * 3,
                                         encoding="utf-8")
    s = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache", chunk_size=300, chunk_overlap=0)
    index, _ = rag.open_index(s, ollama.Client(host=server.url))
    assert set(index.calibration["floors"]) == {"en", "zh"}, index.calibration


def test_a_calibration_that_does_not_hold_together_is_measured_again_not_the_notes(latin, tmp_path):
    notes, cache = write_vault(tmp_path / "notes"), tmp_path / "cache"
    s = rag.Settings(notes_dir=notes, cache_dir=cache, query_instruction="")
    index, _ = rag.open_index(s, ollama.Client(host=latin.url))
    good = index.calibration
    for bad in ({**good, "floors": {"zh": 5.0}}, {**good, "meaning": {"zh": [0.1]}}, {**good, "key": None}, "junk"):
        rag.save_index(replace(index, calibration=bad), rag.cache_path(s))
        embedded = len(latin.embedded_texts())
        assert not ask(latin, notes, cache, OFF_TOPIC)["found"]
        assert note_texts(latin.embedded_texts()[embedded:]) == [OFF_TOPIC]      # probes and the question only
        assert rag.load_index(rag.cache_path(s))[0].calibration == good


def test_tune_judges_each_query_template_by_a_floor_calibrated_with_it(latin, tmp_path):
    notes, cache = write_vault(tmp_path / "notes"), tmp_path / "cache"
    evalset = tmp_path / "eval.jsonl"
    evalset.write_text("".join(json.dumps(it, ensure_ascii=False) + "\n" for it in
                               [{"question": OFF_TOPIC, "answers": []}, {"question": ON_TOPIC, "answers": ["古城墙"]}]))
    out = run_cli("--notes", notes, "--cache", cache, "--tune", evalset, "--json", host=latin.url)
    assert out.returncode == 0, out.stderr
    off = [v for v in json.loads(out.stdout)["variants"] if v["query_instruction"] == "off"]
    # without the template the blind embedder finds "meaning" everywhere: only its own floor declines
    assert off and all(v["declined"] == 1 for v in off), off


def test_a_usage_error_under_json_is_one_json_object_too(latin, tmp_path):
    for flags in (["--keep-alive", "soon"], ["--min-score", "nan"], []):
        out = run_cli(*flags, "--json", host=latin.url)
        assert out.returncode == 2 and "usage:" in out.stderr
        data = json.loads(out.stdout)
        assert data["exit_code"] == 2 and data["error"].startswith("demo_rag.py: error: "), data


def test_notes_in_no_probe_language_keep_the_fixed_floor(server, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(24):
        (notes / f"{i:02d}.md").write_text(f"# Заметка {i}\n\n" + f"Это заметка номер {i} о погоде, реках и горах. " * 4,
                                          encoding="utf-8")
    out = run_cli("Какая погода в горах?", "--notes", notes, "--cache", tmp_path / "cache", "--json", host=server.url)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["floor"] == {
        "value": rag.MIN_SCORE, "source": "not calibrated: the notes are in none of the languages of its off-topic questions"}


def test_touched_or_renamed_notes_keep_their_calibration_and_an_edit_measures_it_again_from_kept_probes(
        latin, tmp_path):
    notes, cache = write_vault(tmp_path / "notes"), tmp_path / "cache"
    first = ask(latin, notes, cache, OFF_TOPIC)
    probes = len(rag.FLOOR_PROBES["zh"])
    embedded = len(latin.embedded_texts())
    for f in notes.iterdir():                                      # the fingerprint changes, the bytes do not
        os.utime(f, ns=(f.stat().st_mtime_ns + 10**9,) * 2)
    (notes / "00.md").rename(notes / "00-renamed.md")
    again = ask(latin, notes, cache, OFF_TOPIC)
    assert latin.embedded_texts()[embedded:] == [OFF_TOPIC] and again["floor"] == first["floor"]
    # An edit that puts a probe's own words in the notes: measured again, that probe is left out;
    # the probes' vectors are the ones kept, so only the edited note and the question are embedded.
    probe = rag.FLOOR_PROBES["zh"][0]
    (notes / "01.md").write_text((notes / "01.md").read_text(encoding="utf-8") + f"\n补充：{probe}\n", encoding="utf-8")
    embedded = len(latin.embedded_texts())
    edited = ask(latin, notes, cache, OFF_TOPIC)
    assert f"from {probes - 1} off-topic questions" in edited["floor"]["source"], edited["floor"]
    assert len(latin.embedded_texts()[embedded:]) == 2 and OFF_TOPIC in latin.embedded_texts()[embedded:]


@pytest.mark.parametrize("damage", [b"\x00" * 5, b"\x00\x00\xc0\x7f" * 4 * len(rag.FLOOR_PROBES["zh"]), "not bytes"],
                         ids=["cut", "nan", "not-bytes"])
def test_kept_probe_vectors_that_are_not_vectors_are_dropped_and_embedded_again(latin, tmp_path, damage):
    notes, cache = write_vault(tmp_path / "notes"), tmp_path / "cache"
    s = rag.Settings(notes_dir=notes, cache_dir=cache, query_instruction="")
    index, _ = rag.open_index(s, ollama.Client(host=latin.url))
    calibration = {**index.calibration, "probes": {**index.calibration["probes"], "vectors": damage}}
    rag.save_index(replace(index, calibration=calibration), rag.cache_path(s))
    assert "probes" not in rag.load_index(rag.cache_path(s))[0].calibration      # the floors stay
    (notes / "01.md").write_text((notes / "01.md").read_text(encoding="utf-8") + "\n补充：新的消息。\n", encoding="utf-8")
    embedded = len(latin.embedded_texts())
    data = ask(latin, notes, cache, OFF_TOPIC)
    assert data["floor"]["source"].startswith("calibrated on this index: zh ")
    assert len(latin.embedded_texts()[embedded:]) == 2 + len(rag.FLOOR_PROBES["zh"])    # the probes again


def test_the_probes_vectors_are_kept_apart_from_the_floors_an_older_version_shows(latin, tmp_path):
    # An older version prints its cached calibration in --eval --json, and ignores a key it does not know.
    notes, cache = write_vault(tmp_path / "notes"), tmp_path / "cache"
    ask(latin, notes, cache, OFF_TOPIC)
    d, _ = read_cache(next(cache.glob("*.pkl")))
    assert "probes" not in d["calibration"] and json.dumps(d["calibration"])
    assert len(d["calibration_probes"]["texts"]) == len(rag.FLOOR_PROBES["zh"])


def test_kept_probe_vectors_of_another_build_of_the_model_are_not_taken(latin, tmp_path):
    notes, cache = write_vault(tmp_path / "notes"), tmp_path / "cache"
    s = rag.Settings(notes_dir=notes, cache_dir=cache, query_instruction="")
    client = ollama.Client(host=latin.url)
    index, _ = rag.open_index(s, client)
    embedded = len(latin.embedded_texts())
    assert rag.calibrated(index, client, s, before=index).calibration["floors"] == index.calibration["floors"]
    assert len(latin.embedded_texts()) == embedded                              # the same build: taken
    rag.calibrated(replace(index, model_digest="sha256:" + "0" * 64), client, s, before=index)
    assert len(latin.embedded_texts()) - embedded == len(rag.FLOOR_PROBES["zh"])  # another: embedded anew


def test_a_rename_that_changes_the_notes_name_order_keeps_the_calibration(latin, tmp_path):
    notes, cache = write_vault(tmp_path / "notes"), tmp_path / "cache"
    first = ask(latin, notes, cache, OFF_TOPIC)
    embedded = len(latin.embedded_texts())
    (notes / "00.md").rename(notes / "zz-moved.md")               # first in name order, now last
    again = ask(latin, notes, cache, OFF_TOPIC)
    assert latin.embedded_texts()[embedded:] == [OFF_TOPIC] and again["floor"] == first["floor"]


def test_a_version_with_other_probes_measures_the_calibration_again(latin, tmp_path, monkeypatch):
    # Touches keep a calibration now, so it must say which probes and rule it was measured with.
    notes, cache = write_vault(tmp_path / "notes"), tmp_path / "cache"
    s = rag.Settings(notes_dir=notes, cache_dir=cache, query_instruction="")
    client = ollama.Client(host=latin.url)
    first, _ = rag.open_index(s, client)
    monkeypatch.setitem(rag.FLOOR_PROBES, "zh", rag.FLOOR_PROBES["zh"][:-1])
    assert not rag.calibration_current(first, s)
    embedded = len(latin.embedded_texts())
    again, _ = rag.open_index(s, client)
    assert rag.calibration_current(again, s) and again.calibration["key"] != first.calibration["key"]
    assert len(latin.embedded_texts()) == embedded          # the probes' vectors were kept: nothing embedded
    assert again.calibration["probes"]["texts"] == first.calibration["probes"]["texts"][:-1]


@pytest.mark.parametrize("constant", ["MIN_CALIBRATION_CHUNKS", "EVIDENCE_POWER", "PROBE_REACH", "BM25_K1", "BM25_B"])
def test_a_version_with_another_scoring_constant_measures_the_calibration_again(latin, tmp_path, monkeypatch,
                                                                                   constant):
    # The probes' confidences go through the fusion and BM25: a floor measured with other constants is stale.
    notes, cache = write_vault(tmp_path / "notes"), tmp_path / "cache"
    s = rag.Settings(notes_dir=notes, cache_dir=cache, query_instruction="")
    first, _ = rag.open_index(s, ollama.Client(host=latin.url))
    monkeypatch.setattr(rag, constant, getattr(rag, constant) + 1)
    assert not rag.calibration_current(first, s)


def test_a_probe_the_model_cannot_embed_is_left_out_not_every_calibration(latin, tmp_path):
    # Ollama fails a whole request for one text whose vector is not a number; the other probes count.
    notes, cache = write_vault(tmp_path / "notes"), tmp_path / "cache"
    latin.embed_refuse = rag.FLOOR_PROBES["zh"][3]
    data = ask(latin, notes, cache, OFF_TOPIC)
    assert not data["found"] and data["floor"]["source"].startswith("calibrated on this index: zh ")
    assert f"from {len(rag.FLOOR_PROBES['zh']) - 1} off-topic questions" in data["floor"]["source"]
