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
# What each sentence gets (as the answer's second sentence, after a supported one), and why.
VERDICT = {"supported": "supported", "swapped": "unsupported", "wrong": "wrong", "outside": "unsupported",
           # a sentence citing nothing is checked like any other: the notes hold this one
           "uncited": "supported",
           # a sentence that says what the notes do not say still has its numbers checked
           "negated": "supported", "negated, number changed": "unsupported"}
NUMBER_CHANGED = {"en": "unsupported", "zh": "wrong"}   # the zh sentence holds enough words for its line
WHY = {"swapped": "it is in [{chain}], not [{tyres}]", "wrong": "[7] names no source (2 were sent)",
       "outside": "not in [{chain}]", "number changed": "95 psi is in none of its lines",
       "negated, number changed": "95 psi is in none of its lines"}


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


def checked(out) -> dict:
    """The citation check of a --json run that answered."""
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["citations"]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("case", [*VERDICT, "number changed"])
def test_each_verdict_in_both_languages(cli, server, bike, lang, case):
    notes = bike(lang)
    n = source_numbers(cli, notes, QUESTION[lang])
    lead = "" if case == "supported" else SENTENCES[lang]["supported"].format(**n) + " "
    check = checked(asked(cli, server, notes, lang, lead + SENTENCES[lang][case].format(**n), "--json"))
    verdict = NUMBER_CHANGED[lang] if case == "number changed" else VERDICT[case]
    assert [s["verdict"] for s in check["sentences"]] == ([] if case == "supported" else ["supported"]) + [verdict]
    last = check["sentences"][-1]
    if case in WHY:
        assert last["why"] == WHY[case].format(**n)
        assert f'2 "{last["text"]}" {last["why"]}' in check["summary"]
    else:
        assert last["why"] is None and check["summary"].count(";") == 0   # nothing flagged
    if case == "swapped":                 # placed at the source that holds its words instead
        assert last["source"] == n["chain"] and last["path"] in ("chain.md", "链条.md") and last["line"] == 3
    if case == "number changed":          # placed at its line all the same
        assert last["source"] == n["tyres"] and last["path"] in ("tyres.md", "轮胎.md") and last["line"] == 3
    if case == "uncited":
        assert last["cited"] == [] and last["path"] in ("tyres.md", "轮胎.md") and last["line"] == 3
        assert "(1 cites nothing)" in check["summary"] and check["counts"]["not_cited"] == 1


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_answer_citing_nothing_is_checked_against_every_source(cli, server, bike, lang):
    notes = bike(lang)
    out = asked(cli, server, notes, lang, SENTENCES[lang]["uncited"] + " " + SENTENCES[lang]["uncited"])
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("checked:") == 1
    assert "checked: 2 of 2 sentences supported by their words and numbers (2 cite nothing)\n" in out.stderr
    assert "checked" not in out.stdout   # stdout keeps the sources and the answer alone
    # ...and one the notes do not hold is flagged, with the line nearest to it
    out = asked(cli, server, notes, lang, SENTENCES[lang]["uncited"].replace("30", "45"))
    assert "checked: 0 of 1 sentence supported by their words and numbers · 1 flagged\n" in out.stderr
    assert f'  1 "{SENTENCES[lang]["uncited"].replace("30", "45")}" 45 psi is in none of its lines · ' \
           f'{"tyres.md" if lang == "en" else "轮胎.md"}:3\n' in out.stderr


def test_the_summary_and_the_flagged_lines_follow_the_answer_on_stderr(cli, server, bike):
    notes = bike("en")
    n = source_numbers(cli, notes, QUESTION["en"])
    s = SENTENCES["en"]
    answer = " ".join([s["supported"], s["supported"], s["supported"], s["supported"], s["wrong"].replace("[7]", "[5]"),
                       s["uncited"], s["swapped"]]).format(**n)
    out = asked(cli, server, notes, "en", answer)
    assert out.returncode == 0, out.stderr
    assert "checked: 5 of 7 sentences supported by their words and numbers (1 cites nothing) · 2 flagged\n" \
           '  5 "Oil the chain every 300 km [5]." [5] names no source (2 were sent)\n' \
           f'  7 "Wipe the chain clean, then oil it every 300 km [{n["tyres"]}]." it is in [{n["chain"]}], ' \
           f'not [{n["tyres"]}] · chain.md:3\n' in out.stderr
    assert out.stderr.index("checked:") < out.stderr.index("timings:")


def test_json_carries_every_sentence_and_its_place(cli, server, bike):
    notes = bike("en")
    n = source_numbers(cli, notes, QUESTION["en"])
    check = checked(asked(cli, server, notes, "en", SENTENCES["en"]["supported"].format(**n) + " " +
                          SENTENCES["en"]["swapped"].format(**n), "--json"))
    assert set(check) == {"summary", "sources", "all_supported", "cites_nothing", "judge", "counts", "sentences"}
    assert check["sources"] == 2 and check["cites_nothing"] is False and check["all_supported"] is False
    assert check["judge"] is None
    assert check["counts"] == {"supported": 1, "unsupported": 1, "wrong": 0, "judged": 0, "skipped": 0,
                               "not_cited": 0}
    first, second = check["sentences"]
    assert set(first) == {"text", "cited", "verdict", "why", "source", "path", "line", "end_line", "page",
                          "support", "judge"}
    assert first["text"] == SENTENCES["en"]["supported"].format(**n) and first["cited"] == [n["tyres"]]
    assert (first["source"], first["path"], first["line"], first["end_line"], first["page"], first["judge"]) == \
           (n["tyres"], "tyres.md", 3, 3, None, None)
    assert 0.5 <= first["support"] <= 1 and first["why"] is None
    assert check["summary"] == ("checked: 1 of 2 sentences supported by their words and numbers · 1 flagged; "
                                f'2 "{second["text"]}" it is in [{n["chain"]}], not [{n["tyres"]}] · chain.md:3')


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
    assert out.stderr.count("checked: 1 of 2 sentences supported by their words and numbers · 1 flagged\n"
                            '  2 "Oil the chain every 300 km [7]." [7] names no source (2 were sent)\n') == 2


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
                "full-width digits": ["supported"], "a thousand citations": ["wrong"],
                # a line of code is checked as the notes' too: these notes hold no print()
                "code block": ["skipped", "unsupported"],
                # a fence never closed is a line alone: what follows it is read as prose
                "huge number": ["wrong"], "unclosed code block": ["wrong"]}[case]
    assert [s.verdict for s in c.sentences] == expected
    assert c.cites_nothing == (case in ("empty", "no sentences"))


@pytest.mark.xfail(strict=True, reason="cited_numbers() leaves out inline code only: a line of a fenced "
                                       "block is read as prose, so tyres[1] in it cites source 1")
def test_a_bracketed_number_in_a_code_block_is_code_not_a_citation():
    c = rag.check_citations(BAD_ANSWERS["code block"], [NOTES["en"]["tyres.md"], NOTES["en"]["chain.md"]])
    assert c.sentences[1].cited == () and c.cites_nothing


def test_a_thousand_citations_through_the_command_line(cli, server, bike):
    notes = bike("en")
    out = asked(cli, server, notes, "en", BAD_ANSWERS["a thousand citations"])
    assert out.returncode == 0 and "Traceback" not in out.stderr
    # the first that names no source is named, and the sentence cut short
    assert '  1 "Road tyres take 80 psi [0][1][2][3][4][5][6][7][8][9][10][1…" [0] names no source ' \
           '(2 were sent)\n' in out.stderr


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
    assert [s.verdict for s in c.sentences] == ["supported", "unsupported"]
    assert c.sentences[1].why == "45 psi is in none of its lines" and c.sentences[0].line == 3


@pytest.mark.parametrize("answer", ["The notes do not cover tyre sizes.", "I don't know.", "笔记里没有提到轮胎的尺寸。"])
def test_saying_the_notes_lack_the_answer_is_no_claim_and_gets_no_warning(answer):
    c = rag.check_citations(answer, [NOTES["en"]["tyres.md"]])
    assert [s.verdict for s in c.sentences] == ["skipped"] and c.cites_nothing and c.all_supported
    assert c.summary() == "checked: no sentence states anything to check" and c.flagged_lines() == []


FLIGHT = {"en": "# Flights\n\nFlight TP9999 to Lisbon leaves at 23:59 from gate 12; boarding closes 20 minutes "
                "before.\n",
          "zh": "# 航班\n\nTP9999 航班 23:59 从 12 号登机口飞往里斯本，起飞前 20 分钟停止登机。\n"}
# Sentences that say what the notes do not say, in other words and both languages: each
# states the flight's time and code, {time} and {code} standing for right or wrong ones.
# The last: the verdict of a wrong code (unsupported, or wrong where the rest holds enough words
# for its line); a wrong time is always wrong.
NEGATED = [
    ("en", "The notes say flight {code} does not leave Lisbon until {time} [1].", "unsupported"),
    ("en", "According to the notes, {code} never departs for Lisbon before {time} [1].", "unsupported"),
    ("en", "No flight in the context leaves for Lisbon earlier than {code} at {time} [1].", "unsupported"),
    ("en", "The source doesn't give a gate change; {code} leaves at {time} from gate 12 [1].", "wrong"),
    ("en", "There is no information about delays: {code} departs at {time} [1].", "unsupported"),
    ("zh", "资料里没有说明 {code} 航班会在 {time} 之前起飞 [1]。", "unsupported"),
    ("zh", "笔记没有提到更早的航班，{code} 航班 {time} 起飞【1】。", "unsupported"),
    ("zh", "未提及延误，{code} 航班 {time} 从 12 号登机口起飞 [1]。", "wrong"),
]


@pytest.mark.parametrize("lang, sentence, code_verdict", NEGATED)
def test_a_sentence_saying_what_the_notes_do_not_say_still_has_its_facts_checked(lang, sentence, code_verdict):
    assert rag.NOT_IN_NOTES.search(sentence)          # the wording is one the rule knows
    right = rag.check_citations(sentence.format(code="TP9999", time="23:59"), [FLIGHT[lang]])
    assert [(s.verdict, s.line) for s in right.sentences] == [("supported", 3)], right.summary()
    for code, time, verdict, why in [("TP9999", "22:59", "wrong", "22:59 is in none of its lines"),
                                     ("TP9998", "23:59", code_verdict, "9998 is in none of its lines")]:
        wrong = rag.check_citations(sentence.format(code=code, time=time), [FLIGHT[lang]])
        assert [(s.verdict, s.why) for s in wrong.sentences] == [(verdict, why)], wrong.summary()


def test_a_code_is_a_fact_like_a_number():
    c = rag.check_citations("Flight TP9998 to Lisbon leaves at 23:59 from gate 12 [1].", [FLIGHT["en"]])
    assert [s.verdict for s in c.sentences] == ["wrong"]
    assert c.flagged_lines() == ['1 "Flight TP9998 to Lisbon leaves at 23:59 from gate 12 [1]." 9998 is in none '
                                 'of its lines · [1] line 3']


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
# (a note's number, a sentence's number that does not mean the same, how the check names it)
DIFFERENT = [("93,5 °C", "935 °C", "935 °C"), ("93.5 °C", "935 °C", "935 °C"), ("1 500 g", "500 g", "500 g"),
             ("1500 g", "150 g", "150 g"), ("1,250 g, 2.5 kg", "1.25 g", "1.25 g"),
             ("1.250 g, 93,5 °C", "1.25 g", "1.25 g"), ("1:16 ratio, 15 g", "1:15", "1:15"),
             ("2026-03-05", "6 March 2026", "6 March 2026"), ("2026-03-05", "5 April 2026", "5 April 2026"),
             ("2026-03-05", "2026年4月5日", "2026年4月5日"), ("23:59", "22:59", "22:59"),
             ("Python 3.11.7", "Python 3.11.8", "3.11.8"),
             ("1/3 cup and 2 eggs", "1/2 cup", "1/2"), ("¼ cup and 2 eggs", "½ cup", "1/2"),   # a fraction's parts
             ("10² m² and a balcony", "102 m²", "102 m"),                                    # a power's digits
             ("1.25 kg", "1,250 kg", "1,250 kg"), ("1,25 kg", "1.250 kg", "1.250 kg"),   # as its source
             # a 1,500 alone in its source is read as its answer reads its own numbers
             ("1,500 €", "1.5 €", "1.5 €"), ("1.500 €", "1,5 €", "1,5 €")]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("note, written", SAME)
def test_a_number_written_another_way_is_the_same_number(lang, note, written):
    sentence = {"en": f"The figure is {written} [1].", "zh": f"数值是 {written}【1】。"}[lang]
    c = rag.check_citations(sentence, [f"The figure: {note}."])
    assert [(s.verdict, s.line) for s in c.sentences] == [("supported", 1)], c.summary()


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("note, written, missing", DIFFERENT)
def test_a_different_number_is_still_caught(lang, note, written, missing):
    sentence = {"en": f"The figure is {written} [1].", "zh": f"数值是 {written}【1】。"}[lang]
    c = rag.check_citations(sentence, [f"The figure: {note}."])
    # wrong where the rest of the sentence holds enough words for its line
    verdict = "wrong" if (lang, written) == ("en", "102 m²") else "unsupported"
    assert [(s.verdict, s.why) for s in c.sentences] == [(verdict, f"{missing} is in none of its lines")]


def test_a_number_of_thousands_of_digits_is_read_not_refused():
    huge = "9" * 5000                     # int() refuses more than 4,300 digits
    c = rag.check_citations(f"Road tyres take {huge},5 psi or 1 000.{huge} psi [1].", [f"{huge},5 psi"])
    assert [(s.verdict, s.why) for s in c.sentences] == [("unsupported", f"1 000.{huge} psi is in none of its lines")]


def test_a_1_250_is_read_both_ways_where_its_cited_sources_disagree_on_the_decimal_mark():
    c = rag.check_citations("The crate weighs 1,250 kg on a 2 km road [1][2].",
                            ["Die Kiste wiegt 1,25 kg.", "The road is 2 km, 2.5 with the bridge."])
    # its numbers are held (else the why names one): only its words fall short of a line
    assert [(s.verdict, s.why) for s in c.sentences] == [("unsupported", "not in [1][2]")], c.summary()
    c = rag.check_citations("The crate weighs 1,250 kg [1].", ["The crate weighs 1.25 kg."])
    assert [(s.verdict, s.why) for s in c.sentences] == [("unsupported", "1,250 kg is in none of its lines")]


def test_the_check_and_the_search_read_a_word_alike():
    # One folding of words for both: what the check weighs is what the keyword index counts.
    sentence = "The notes list boxes, watches and classes of queries"
    assert rag.claim_terms(sentence) == [t for t in rag.tokenize(sentence) if t not in rag.PROVENANCE]
    assert {"box", "watch", "class", "query"} <= set(rag.claim_terms(sentence))
