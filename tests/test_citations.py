"""The citation check after every answer (check_citations, Outcome.check) and --eval --answers,
through the command line with the test server's scripted answers."""
from __future__ import annotations

import json

import pytest

import demo_rag as rag

NOTES = {
    "en": {"tyres.md": "# Tyres\n\nPump road tyres to 80 psi and mountain bike tyres to about 30 psi. Check the "
                       "pressure every week, since tyres lose air slowly.\n",
           "chain.md": "# Chain\n\nOil the chain every 300 km, and wipe it clean before oiling. A dry chain "
                       "squeaks and wears the cassette faster.\n"},
    "zh": {"轮胎.md": "# 轮胎\n\n公路车的轮胎气压打到 80 psi，山地车的轮胎大约 30 psi。轮胎会慢慢漏气，所以每周检查一次气压。\n",
           "链条.md": "# 链条\n\n链条每骑 300 公里上一次油，上油之前先把链条擦干净。干的链条会吱吱响，飞轮也磨损得更快。\n"},
}
QUESTION = {"en": "How often do I oil the chain and how hard do I pump the tyres?",
            "zh": "链条多久上油，轮胎气压打多少？"}
# Each verdict's sentence, {tyres} and {chain} standing for the numbers those sources get.
SENTENCES = {
    "en": {"supported": "Road tyres take 80 psi [{tyres}].",
           "number changed": "Road tyres take 95 psi [{tyres}].",
           "swapped": "Wipe the chain clean, then oil it every 300 km [{tyres}].",
           "wrong": "Oil the chain every 300 km [7].",
           "uncited": "Mountain bike tyres need about 30 psi.",
           "outside": "Carbon frames are lighter than steel ones [{chain}].",
           "negated": "The notes say road tyres should never go below 80 psi [{tyres}].",
           "negated, number changed": "The notes say road tyres should never go below 95 psi [{tyres}]."},
    "zh": {"supported": "公路车轮胎打到 80 psi【{tyres}】。",
           "number changed": "公路车轮胎打到 95 psi [{tyres}]。",
           "swapped": "链条每骑 300 公里上一次油，上油前先擦干净 [{tyres}]。",
           "wrong": "链条每骑 300 公里上油 [7]。",
           "uncited": "山地车的轮胎气压大约 30 psi。",
           "outside": "碳纤维车架比钢架轻得多，价格也更贵 [{chain}]。",
           "negated": "资料里没有说明公路车轮胎可以低于 80 psi【{tyres}】。",
           "negated, number changed": "资料里没有说明公路车轮胎可以低于 95 psi【{tyres}】。"},
}
VERDICT = {"supported": "supported", "number changed": "unsupported", "swapped": "unsupported",
           "wrong": "wrong", "uncited": "uncited", "outside": "unsupported",
           # a sentence that says what the notes do not say still has its numbers checked
           "negated": "supported", "negated, number changed": "unsupported"}


@pytest.fixture
def bike(tmp_path):
    """A notes folder for one language; run(answer, *flags) asks QUESTION with that scripted answer."""
    def make(lang):
        folder = tmp_path / lang
        folder.mkdir()
        for name, text in NOTES[lang].items():
            (folder / name).write_text(text, encoding="utf-8")
        return folder
    return make


def source_numbers(cli, notes, question) -> dict[str, int]:
    """Which [n] each note gets for the question: {"tyres": 1, "chain": 2} (the order is the ranking's)."""
    out = cli(question, "--notes", notes, "--min-score", "0.05", "--retrieve-only", "--json")
    names = [s["source"] for s in json.loads(out.stdout)["sources"]]
    assert len(names) == 2, names
    return {"tyres": 1 + int(names[1] in ("tyres.md", "轮胎.md")),
            "chain": 1 + int(names[1] in ("chain.md", "链条.md"))}


def asked(cli, server, notes, lang, answer, *flags):
    server.answer = answer
    return cli(QUESTION[lang], "--notes", notes, "--min-score", "0.05", *flags)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("case", list(VERDICT))
def test_each_verdict_in_both_languages(cli, server, bike, lang, case):
    notes = bike(lang)
    n = source_numbers(cli, notes, QUESTION[lang])
    # a supported sentence first, so that the answer cites something (else "cites nothing" is said instead)
    lead = "" if case == "supported" else SENTENCES[lang]["supported"].format(**n) + " "
    out = asked(cli, server, notes, lang, lead + SENTENCES[lang][case].format(**n), "--json")
    assert out.returncode == 0, out.stderr
    check = json.loads(out.stdout)["citations"]
    assert [s["verdict"] for s in check["sentences"]] == ([] if case == "supported" else ["supported"]) + [VERDICT[case]]
    last = check["sentences"][-1]
    if case == "swapped":                 # the source that holds its words instead is named
        assert last["best_source"] == n["chain"] and f"is in [{n['chain']}], not [{n['tyres']}]" in check["summary"]
    if case in ("number changed", "negated, number changed"):
        assert last["missing_numbers"] == ["95"] and f"95 not in [{n['tyres']}]" in check["summary"]
    if case == "wrong":
        assert check["wrong_numbers"] == [7] and "[7] names no source (2 were sent)" in check["summary"]
    if case == "uncited":
        assert check["summary"].endswith("1 sentence cites nothing")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_answer_citing_nothing_gets_one_warning_after_it(cli, server, bike, lang):
    notes = bike(lang)
    out = asked(cli, server, notes, lang, SENTENCES[lang]["uncited"] + " " + SENTENCES[lang]["uncited"])
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("checked:") == 1
    assert "checked: the answer cites no source: it is the model's own words, not your notes" in out.stderr
    assert "checked" not in out.stdout   # stdout keeps the sources and the answer alone


def test_the_summary_line_follows_the_answer_on_stderr(cli, server, bike):
    notes = bike("en")
    n = source_numbers(cli, notes, QUESTION["en"])
    s = SENTENCES["en"]
    answer = " ".join([s["supported"], s["supported"], s["supported"], s["supported"], s["wrong"].replace("[7]", "[5]"),
                       s["uncited"]]).format(**n)
    out = asked(cli, server, notes, "en", answer)
    assert out.returncode == 0, out.stderr
    assert "checked: 4 of 5 cited sentences supported · [5] names no source (2 were sent) · " \
           "1 sentence cites nothing\n" in out.stderr
    assert out.stderr.index("checked:") < out.stderr.index("timings:")


def test_json_carries_every_sentence(cli, server, bike):
    notes = bike("en")
    n = source_numbers(cli, notes, QUESTION["en"])
    out = asked(cli, server, notes, "en", SENTENCES["en"]["supported"].format(**n) + " " +
                SENTENCES["en"]["swapped"].format(**n), "--json")
    data = json.loads(out.stdout)
    check = data["citations"]
    assert set(check) == {"summary", "sources", "cites_nothing", "states_facts", "wrong_numbers", "counts", "sentences"}
    assert check["sources"] == 2 and check["cites_nothing"] is False and check["states_facts"] is True
    assert check["counts"] == {"supported": 1, "unsupported": 1, "wrong": 0, "uncited": 0, "skipped": 0}
    first = check["sentences"][0]
    assert set(first) == {"text", "cited", "verdict", "support", "best_source", "best_support", "missing_numbers"}
    assert first["text"] == SENTENCES["en"]["supported"].format(**n) and first["cited"] == [n["tyres"]]
    assert first["best_source"] == n["tyres"] and 0.5 <= first["support"] <= 1


def test_json_has_no_check_when_nothing_was_answered(cli, server, bike):
    out = cli("What is the capital of Peru?", "--notes", bike("en"), "--json")
    data = json.loads(out.stdout)
    assert data["status"] == "declined" and data["citations"] is None


def test_chat_checks_every_turn(cli, server, bike):
    notes = bike("en")
    n = source_numbers(cli, notes, QUESTION["en"])
    server.answer = SENTENCES["en"]["supported"].format(**n) + " " + SENTENCES["en"]["wrong"]
    out = cli("--chat", "--notes", notes, "--min-score", "0.05",
              stdin=QUESTION["en"] + "\n" + QUESTION["en"] + "\n")
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("checked: 1 of 2 cited sentences supported · [7] names no source") == 2


def test_eval_answers_scores_the_answers_next_to_retrieval(cli, server, bike, tmp_path):
    notes = bike("en")
    n = source_numbers(cli, notes, QUESTION["en"])
    eval_set = tmp_path / "set.jsonl"
    eval_set.write_text("\n".join(json.dumps(item) for item in [
        {"question": QUESTION["en"], "answers": ["80 psi"], "source": "tyres.md"},
        {"question": QUESTION["en"], "answers": ["300 km"], "source": "chain.md", "heading": "Chain"},
        {"question": "What is the capital of Peru?", "answers": []}]) + "\n", encoding="utf-8")
    # every answer cites the tyres note: right for the first question, not for the second
    server.answer = SENTENCES["en"]["supported"].format(**n) + " " + SENTENCES["en"]["swapped"].format(**n)
    out = cli("--eval", eval_set, "--notes", notes, "--min-score", "0.05", "--answers", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["hit@1"] is not None     # retrieval is still scored
    a = data["answers"]
    assert (a["answerable"], a["answered"], a["cite_gold"], a["cite_gold_share"]) == (2, 2, 1, 0.5)
    assert (a["cited_sentences"], a["supported"], a["supported_share"]) == (4, 2, 0.5)
    assert (a["unanswerable"], a["declined_or_uncited"], a["declined_or_uncited_share"]) == (1, 1, 1.0)
    assert a["first_word_seconds"] > 0 and a["tokens_per_second"] > 0 and a["chat_model"] == "qwen3:0.6b"
    assert [q["cites_gold"] for q in a["questions"]] == [True, False, False]
    text = cli("--eval", eval_set, "--notes", notes, "--min-score", "0.05", "--answers")
    assert "answers by qwen3:0.6b: cite the gold source 1/2 (50%) answerable · cited sentences supported 2/4 (50%) " \
           "· unanswerable declined or citing nothing 1/1 (100%) · first word " in text.stdout


def test_eval_without_answers_asks_no_chat_model(cli, server, tmp_path):
    out = cli("--eval", rag.NOTES_DIR / "eval.jsonl", "--json")
    assert out.returncode == 0 and "answers" not in json.loads(out.stdout)
    assert not server.of("/api/chat")


@pytest.mark.parametrize("argv", [("a question", "--answers"), ("--chat", "--answers"), ("--tune", "x.jsonl", "--answers")])
def test_answers_goes_with_eval_only(cli, argv):
    out = cli(*argv)
    assert out.returncode == 2 and "--answers goes with --eval" in out.stderr and "Traceback" not in out.stderr


BAD_ANSWERS = {
    "empty": "",
    "no sentences": " ... \n\n —",
    "only citations": "[1][2]",
    "zero": "Road tyres take 80 psi [0].",
    "negative": "Road tyres take 80 psi [-1].",
    "range": "Road tyres take 80 psi and the chain is oiled every 300 km [1-3].",
    "lenticular brackets": "Road tyres take 80 psi【1】。",
    "full-width digits": "Road tyres take ８０ psi ［１］.",
    "a thousand citations": "Road tyres take 80 psi " + "".join(f"[{i}]" for i in range(1000)) + ".",
    "code block": "Run this:\n```\nprint(tyres[1])\n```\n",
    "huge number": "Road tyres take 80 psi [99999999999999999999999].",
    "unclosed code block": "```\nx = a[3]",
}


@pytest.mark.parametrize("case", list(BAD_ANSWERS))
def test_odd_answers_give_a_verdict_not_a_traceback(case):
    c = rag.check_citations(BAD_ANSWERS[case], [NOTES["en"]["tyres.md"], NOTES["en"]["chain.md"]])
    line = c.summary()
    assert line.startswith("checked: ") and "\n" not in line and len(line) < 300
    json.dumps(c.as_json())
    expected = {"empty": [], "no sentences": [], "only citations": ["skipped"], "zero": ["wrong"],
                "negative": ["wrong"], "range": ["wrong"], "lenticular brackets": ["supported"],
                "full-width digits": ["supported"], "a thousand citations": ["wrong"], "code block": ["skipped"],
                "huge number": ["wrong"], "unclosed code block": []}[case]
    assert [s.verdict for s in c.sentences] == expected
    assert c.cites_nothing == (case in ("empty", "no sentences", "code block", "unclosed code block"))


def test_a_thousand_citations_through_the_command_line(cli, server, bike):
    notes = bike("en")
    out = asked(cli, server, notes, "en", BAD_ANSWERS["a thousand citations"])
    assert out.returncode == 0 and "Traceback" not in out.stderr
    assert "[0], [3], [4], [5], [6], … (998 in all) name no source (2 were sent)" in out.stderr


def test_idf_from_the_index_weighs_words_common_in_the_notes_less():
    """The same sentence against the same source: 'bike', in every note of the folder, weighs
    little by the notes' idf, so the missing 'carbon' sinks the share further."""
    sources = ["Pump road bike tyres to 80 psi.", "Oil the bike chain every 300 km."]
    sentence = "A carbon bike frame is light [1]."
    alone = rag.check_citations(sentence, sources).sentences[0].support
    notes = rag.lexicon_from_texts(sources + [f"bike note {i}" for i in range(20)])
    indexed = rag.check_citations(sentence, sources, notes).sentences[0].support
    assert indexed < alone


def test_a_sentence_in_another_script_is_judged_by_its_numbers_alone():
    english = [NOTES["en"]["tyres.md"]]
    c = rag.check_citations("公路车轮胎打到 80 psi [1]。山地车轮胎打到 45 psi [1]。", english)
    assert [s.verdict for s in c.sentences] == ["skipped", "unsupported"]
    assert c.sentences[1].missing_numbers == ("45",)


@pytest.mark.parametrize("answer", ["The notes do not cover tyre sizes.", "I don't know.", "笔记里没有提到轮胎的尺寸。"])
def test_saying_the_notes_lack_the_answer_is_no_claim_and_gets_no_warning(answer):
    c = rag.check_citations(answer, [NOTES["en"]["tyres.md"]])
    assert [s.verdict for s in c.sentences] == ["skipped"] and c.cites_nothing and not c.states_facts
    assert c.summary() == "checked: no sentence states anything to check"


FLIGHT = {"en": "# Flights\n\nFlight TP9999 to Lisbon leaves at 23:59 from gate 12; boarding closes 20 minutes "
                "before.\n",
          "zh": "# 航班\n\nTP9999 航班 23:59 从 12 号登机口飞往里斯本，起飞前 20 分钟停止登机。\n"}
# Sentences that say what the notes do not say, in other words and both languages: each
# states the flight's time and code, {time} and {code} standing for right or wrong ones.
NEGATED = [
    ("en", "The notes say flight {code} does not leave Lisbon until {time} [1]."),
    ("en", "According to the notes, {code} never departs for Lisbon before {time} [1]."),
    ("en", "No flight in the context leaves for Lisbon earlier than {code} at {time} [1]."),
    ("en", "The source doesn't give a gate change; {code} leaves at {time} from gate 12 [1]."),
    ("en", "There is no information about delays: {code} departs at {time} [1]."),
    ("zh", "资料里没有说明 {code} 航班会在 {time} 之前起飞 [1]。"),
    ("zh", "笔记没有提到更早的航班，{code} 航班 {time} 起飞【1】。"),
    ("zh", "未提及延误，{code} 航班 {time} 从 12 号登机口起飞 [1]。"),
]


@pytest.mark.parametrize("lang, sentence", NEGATED)
def test_a_sentence_saying_what_the_notes_do_not_say_still_has_its_facts_checked(lang, sentence):
    assert rag.NOT_IN_NOTES.search(sentence)          # the wording is one the rule knows
    right = rag.check_citations(sentence.format(code="TP9999", time="23:59"), [FLIGHT[lang]])
    assert [s.verdict for s in right.sentences] == ["supported"], right.summary()
    for code, time, missing in [("TP9999", "22:59", ("22:59",)), ("TP9998", "23:59", ("TP9998",))]:
        wrong = rag.check_citations(sentence.format(code=code, time=time), [FLIGHT[lang]])
        assert [s.verdict for s in wrong.sentences] == ["unsupported"], wrong.summary()
        assert wrong.sentences[0].missing_numbers == missing


def test_a_code_is_a_fact_like_a_number():
    c = rag.check_citations("Flight TP9998 to Lisbon leaves at 23:59 from gate 12 [1].", [FLIGHT["en"]])
    assert [s.verdict for s in c.sentences] == ["unsupported"] and "TP9998 not in [1]" in c.summary()


# (a note's number, a sentence's number that means the same) and (..., one that does not)
SAME = [("93,5 °C", "93.5 °C"), ("93.5 °C", "93,5 °C"), ("1500 g", "1 500 g"), ("1500 g", "1\u202f500 g"),
        ("1500 g", "1\u00a0500 g"), ("1500 g", "1\u2009500 g"), ("1 500 g", "1500 g"), ("1250 g", "1.250 g"),
        ("1250 g", "1,250 g"), ("1.250 g, 93,5 °C", "1250 g"), ("1,250 g, 2.5 kg", "1250 g"),
        ("16 g of water to 1 g", "1:16"), ("1:16", "1:16"), ("2026-03-05", "5 March 2026"),
        ("2026-03-05", "March 5, 2026"), ("5 March 2026", "2026-03-05"), ("05.03.2026", "5 Mar 2026"),
        ("2026-03-05", "2026年3月5日"), ("1,250.5 g", "1250.5 g"), ("1.250,5 g", "1250,5 g"),
        ("2.50 m", "2.5 m"), ("1.250.000 g", "1,250,000 g"), ("Python 3.11.7", "Python 3.11.7"),
        ("1,250 kg", "1250 kg"), ("1.250 kg", "1250 kg"),       # alone, 1,250 may be either
        ("½ cup", "1/2 cup"), ("1/2 cup", "½ cup"), ("10² m²", "10² m²"), ("3/5/2026", "3/5/2026")]
DIFFERENT = [("93,5 °C", "935 °C", "935"), ("93.5 °C", "935 °C", "935"), ("1 500 g", "500 g", "500"),
             ("1500 g", "150 g", "150"), ("1,250 g, 2.5 kg", "1.25 g", "1.25"),
             ("1.250 g, 93,5 °C", "1.25 g", "1.25"), ("1:16 ratio, 15 g", "1:15", "1:15"),
             ("2026-03-05", "6 March 2026", "6"), ("2026-03-05", "5 April 2026", "4"),
             ("2026-03-05", "2026年4月5日", "4"), ("23:59", "22:59", "22:59"), ("Python 3.11.7", "Python 3.11.8", "3.11.8"),
             ("1/3 cup and 2 eggs", "1/2 cup", "1/2"), ("¼ cup and 2 eggs", "½ cup", "1/2"),
             ("10² m² and a balcony", "102 m²", "102"),
             ("1.25 kg", "1,250 kg", "1250"), ("1,25 kg", "1.250 kg", "1250"),   # as its source
             ("1,500 €", "1.5 €", "1.5"), ("1.500 €", "1,5 €", "1.5")]             # as its answer   # a fraction's parts, a power's digits


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("note, written", SAME)
def test_a_number_written_another_way_is_the_same_number(lang, note, written):
    sentence = {"en": f"The figure is {written} [1].", "zh": f"数值是 {written}【1】。"}[lang]
    c = rag.check_citations(sentence, [f"The figure: {note}."])
    assert c.sentences[0].missing_numbers == () and c.sentences[0].verdict != "unsupported", c.summary()


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("note, written, missing", DIFFERENT)
def test_a_different_number_is_still_caught(lang, note, written, missing):
    sentence = {"en": f"The figure is {written} [1].", "zh": f"数值是 {written}【1】。"}[lang]
    c = rag.check_citations(sentence, [f"The figure: {note}."])
    assert c.sentences[0].verdict == "unsupported" and missing in c.sentences[0].missing_numbers, c.summary()


def test_a_number_of_thousands_of_digits_is_read_not_refused():
    huge = "9" * 5000                     # int() refuses more than 4,300 digits
    c = rag.check_citations(f"Road tyres take {huge},5 psi or 1 000.{huge} psi [1].", [f"{huge},5 psi"])
    assert [s.verdict for s in c.sentences] == ["unsupported"]
    assert c.sentences[0].missing_numbers == (f"1000.{huge}",)


def test_a_1_250_is_read_both_ways_where_its_cited_sources_disagree_on_the_decimal_mark():
    c = rag.check_citations("The crate weighs 1,250 kg on a 2 km road [1][2].",
                            ["Die Kiste wiegt 1,25 kg.", "The road is 2 km, 2.5 with the bridge."])
    assert c.sentences[0].missing_numbers == (), c.summary()
    c = rag.check_citations("The crate weighs 1,250 kg [1].", ["The crate weighs 1.25 kg."])
    assert c.sentences[0].missing_numbers == ("1250",), c.summary()


def test_the_check_and_the_search_read_a_word_alike():
    # One folding of words for both: what the check weighs is what the keyword index counts.
    sentence = "The notes list boxes, watches and classes of queries"
    assert rag.claim_terms(sentence) == [t for t in rag.tokenize(sentence) if t not in rag.PROVENANCE]
    assert {"box", "watch", "class", "query"} <= set(rag.claim_terms(sentence))
