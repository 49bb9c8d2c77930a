"""The citation check's reading rules (check_citations), each in two languages or more: a true
sentence and its false twin against the same note, the false one flagged with why; and through
the command line, each sentence placed at its file's line, and the judge model (--judge)."""
from __future__ import annotations

import json

import pytest

import demo_rag as rag


def verdicts(answer: str, *sources: str) -> list[tuple[str, str]]:
    """(verdict, why) of each sentence of `answer`."""
    return [(s.verdict, s.why) for s in rag.check_citations(answer, list(sources)).sentences]


OK = ("supported", "")
# (rule, note, a sentence it supports, a sentence it does not, that one's verdict and why)
RULES = [
    ("units", "The loop is 12 km long.", "The loop is 7.5 miles long [1].", "The loop is 12 miles long [1].",
     ("unsupported", "12 where its line says 12 km")),
    ("units", "Die Runde ist 12 km lang.", "Die Runde ist 7,5 Meilen lang [1].", "Die Runde ist 12 Meilen lang [1].",
     ("unsupported", "12 where its line says 12 km")),
    ("units", "Use 1 kg of flour for the dough.", "Use 1000 g of flour [1].", "Use 1500 g of flour [1].",
     ("unsupported", "1500 g is in none of its lines")),
    ("units", "Bake the bread at 180 °C for 40 minutes.", "Bake at 356 °F [1].", "Bake at 375 °F [1].",
     ("unsupported", "375 °F is in none of its lines")),
    ("units", "Das Brot bei 180 °C 40 Minuten backen.", "Backen bei 356 °F [1].", "Backen bei 375 °F [1].",
     ("unsupported", "375 °F is in none of its lines")),
    ("units", "Pump the tyres to 30 psi.", "Pump to 2 bar [1].", "Pump to 3 bar [1].",
     ("unsupported", "3 bar is in none of its lines")),
    ("another fact's number", "The park opens at 7:30. An adult ticket costs 55 yuan, a child ticket costs 25 yuan.",
     "An adult ticket costs 55 yuan [1].", "A child ticket costs 55 yuan [1].",
     ("wrong", "55 is another fact's: there its line says 25")),
    ("another fact's number", "Der Park öffnet um 7:30. Ein Erwachsenenticket kostet 55 Euro, ein Kinderticket "
     "kostet 25 Euro.", "Ein Erwachsenenticket kostet 55 Euro [1].", "Ein Kinderticket kostet 55 Euro [1].",
     ("wrong", "55 is another fact's: there its line says 25")),
    ("dates", "The lease ends on 2026-03-05.", "The lease ends on 5 March 2026 [1].",
     "The lease ends on 6 March 2026 [1].", ("unsupported", "6 March 2026 is in none of its lines")),
    ("dates", "Der Mietvertrag endet am 05.03.2026.", "Der Mietvertrag endet am 5. März 2026 [1].",
     "Der Mietvertrag endet am 3. Mai 2026 [1].", ("unsupported", "3. Mai 2026 is in none of its lines")),
    ("ranges", "Brew the coffee at 90 to 96 °C.", "Brew between 90 and 96 °C [1].", "Brew between 90 and 98 °C [1].",
     ("unsupported", "98 °C is in none of its lines")),
    ("ranges", "Der Reifendruck liegt bei 3,0 bis 5,5 bar.", "Reifendruck 3,0 bis 5,5 bar [1].",
     "Reifendruck 3,0 bis 6,5 bar [1].", ("wrong", "3,0 to 6,5 where its line says 3,0 to 5,5")),
    ("number words", "The ride to the lake takes 20 minutes.", "The ride takes twenty minutes [1].",
     "The ride takes thirty minutes [1].", ("unsupported", "thirty min is in none of its lines")),
    ("number words", "La balade jusqu'au lac dure 20 minutes.", "La balade dure vingt minutes [1].",
     "La balade dure trente minutes [1].", ("unsupported", "trente min is in none of its lines")),
    ("number words", "骑到湖边要20分钟。", "骑到湖边要二十分钟 [1]。", "骑到湖边要三十分钟 [1]。",
     ("unsupported", "三十 min is in none of its lines")),
    ("negation", "Do not boil the water for green tea; let it cool to 80 °C.",
     "Do not boil the water for green tea [1].", "Boil the water for green tea [1].",
     ("wrong", 'leaves out the "not" of its line ("Do not boil the water for green tea")')),
    ("negation", "Das Wasser für grünen Tee nicht kochen lassen, sondern auf 80 °C abkühlen.",
     "Das Wasser für grünen Tee nicht kochen [1].", "Das Wasser für grünen Tee kochen [1].",
     ("wrong", 'leaves out the "not" of its line ("Das Wasser für grünen Tee nicht kochen l")')),
    ("negation", "绿茶不要用沸水泡，水温80度左右。", "绿茶不要用沸水泡 [1]。", "绿茶要用沸水泡 [1]。",
     ("wrong", 'leaves out the "not" of its line ("绿茶不要用沸水泡")')),
    ("names", "| Person | Task |\n|---|---|\n| Priya | design review |\n| Marta | budget meeting |\n",
     "Priya runs the design review [1].", "Marta runs the design review [1].", ("unsupported", "not in [1]")),
    ("names", "| Persona | Tarea |\n|---|---|\n| Priya | revisión de diseño |\n| Marta | reunión de presupuesto |\n",
     "Priya dirige la revisión de diseño [1].", "Marta dirige la revisión de diseño [1].",
     ("unsupported", "not in [1]")),
    ("names", "Priya leads the design review on Monday.", "Priya leads the design review on Monday [1].",
     "Olga leads the design review on Monday [1].", ("unsupported", "not in [1]")),
    ("names", "Priya leads the design review on Monday.", "Priya leads the design review on Monday [1].",
     "Priya and Olga lead the design review on Monday [1].", ("wrong", "Olga is not in the sources")),
    ("names", "Priya dirige la revisión de diseño el lunes.", "Priya dirige la revisión de diseño el lunes [1].",
     "Priya y Olga dirigen la revisión de diseño el lunes [1].", ("wrong", "Olga is not in the sources")),
    ("codes", "Run `demo_rag.py --top-k 5` for five sources.", "Run `demo_rag.py --top-k 5` for five sources [1].",
     "Run `demo_rag.py --top-n 5` for five sources [1].", ("wrong", "--top-n is not in the sources")),
    ("codes", "Mit `demo_rag.py --top-k 5` kommen fünf Quellen.", "Mit `demo_rag.py --top-k 5` kommen fünf Quellen [1].",
     "Mit `demo_rag.py --top-n 5` kommen fünf Quellen [1].", ("wrong", "--top-n is not in the sources")),
    ("inflected names", "Raport trafia do pana Kowalski.", "Raport trafia do pana Kowalskiego [1].", None, None),
    ("inflected names", "Отчёт получает Анна Петрова.", "Отчёт получает Петровой [1].", None, None),
    ("inflected names", "Der Bericht geht an Frau Sommers Team.", "Der Bericht geht an Frau Sommer [1].", None, None),
    ("bounds", "Rest the dough for about 5 hours before baking.", "Rest the dough for about 5 hours [1].",
     "Rest the dough for exactly 5 hours [1].", ("wrong", '"exactly 5" where its line says "about"')),
    ("bounds", "Laisser reposer la pâte environ 5 heures avant la cuisson.",
     "Laisser reposer la pâte environ 5 heures [1].", "Laisser reposer la pâte exactement 5 heures [1].",
     ("wrong", '"exactement 5" where its line says "environ"')),
    ("bounds", "Den Teig mindestens 5 Stunden ruhen lassen.", "Den Teig mindestens 5 Stunden ruhen lassen [1].",
     "Den Teig höchstens 5 Stunden ruhen lassen [1].", ("wrong", '"höchstens 5" where its line says "mindestens"')),
    ("bounds", "Rest the dough for at least 5 hours before baking.", "Rest the dough for at least 5 hours [1].",
     "Rest the dough for at most 5 hours [1].", ("wrong", '"at most 5" where its line says "at least"')),
    ("codes", "Run `demo_rag.py --top-k 5` for five sources.", "Run `demo_rag.py --top-k 5` for five sources [1].",
     "Run `demo_rag.py --top-k 8` for five sources [1].", ("wrong", "8 is in none of its lines")),
    ("codes", "Mit `demo_rag.py --top-k 5` kommen fünf Quellen.", "Mit `demo_rag.py --top-k 5` kommen fünf Quellen [1].",
     "Mit `demo_rag.py --top-k 8` kommen fünf Quellen [1].", ("wrong", "8 is in none of its lines")),
    ("codes", "Flight TP9999 to Lisbon leaves at 23:59.", "Flight TP9999 to Lisbon leaves at 23:59 [1].",
     "Flight TP9998 to Lisbon leaves at 23:59 [1].", ("unsupported", "9998 is in none of its lines")),
    ("table", "# Budget\n\n| Month | Savings | Goal |\n|---|---|---|\n| January | 12% | 20% |\n| February | 15% | 20% |\n",
     "In February the savings were 15% [1].", "In February the goal was 15% [1].",
     ("wrong", "15 is under another column than the one it names (there: 20%)")),
    ("table", "| Mes | Ahorro | Meta |\n|---|---|---|\n| Enero | 12% | 20% |\n| Febrero | 15% | 20% |\n",
     "En febrero el ahorro fue del 15% [1].", "En febrero la meta fue del 15% [1].",
     ("wrong", "15 is under another column than the one it names (there: 20%)")),
]


@pytest.mark.parametrize("rule, note, right, wrong, flagged", RULES)
def test_each_rule_supports_the_true_sentence_and_flags_its_twin(rule, note, right, wrong, flagged):
    assert verdicts(right, note) == [OK], rule
    if wrong is not None:
        assert verdicts(wrong, note) == [flagged], rule


@pytest.mark.parametrize("rule, note, right, wrong, flagged", [
    # a conversion rounded to its hundreds is no rounding: 400 °F is 204 °C
    ("°F as people round", "Bake the bread at 180 °C for 40 minutes.", "Bake at 360 °F [1].",
     "Bake at 400 °F [1].", ("unsupported", "400 °F is in none of its lines")),
    ("°F as people round", "Das Brot bei 180 °C 40 Minuten backen.", "Backen bei 350 °F [1].",
     "Backen bei 400 °F [1].", ("unsupported", "400 °F is in none of its lines")),
    # "exactly" is no "at least"
    ("a bound", "Rest the dough for at least 5 hours before baking.", "Rest the dough for at least 5 hours [1].",
     "Rest the dough for exactly 5 hours [1].", ("wrong", '"exactly 5" where its line says "at least"')),
    ("a bound", "Den Teig mindestens 5 Stunden ruhen lassen.", "Den Teig mindestens 5 Stunden ruhen lassen [1].",
     "Den Teig genau 5 Stunden ruhen lassen [1].", ("wrong", '"genau 5" where its line says "mindestens"')),
])
def test_a_conversion_too_coarse_and_an_exact_number_for_a_bound_are_flagged(rule, note, right, wrong, flagged):
    assert verdicts(right, note) == [OK], rule
    assert verdicts(wrong, note) == [flagged], rule


@pytest.mark.parametrize("rule, note, right, wrong", [
    ("a name swapped in prose", "# Team\n\nPriya leads the design review on Monday.\n\nMarta takes the budget "
     "meeting on Friday.\n", "Priya leads the design review on Monday [1].",
     "Marta leads the design review on Monday [1]."),
    ("an inflected short name", "Отчёт отправляет Иван Петров.", "Отчёт отправляют Ивану Петрову [1].", None),
])
@pytest.mark.xfail(strict=True, reason="what the check cannot see yet: a name of another line passes where "
                                       "its line is prose, not a table row; a name under PREFIX letters "
                                       "inflected (Ивану) is 'not in the sources'")
def test_what_the_check_lets_pass_or_flags_wrongly(rule, note, right, wrong):
    assert verdicts(right, note) == [OK], rule
    if wrong is not None:
        assert verdicts(wrong, note)[0][0] != "supported", rule


@pytest.mark.parametrize("answer, note", [
    ("The notes do not say how often to replace the tyres. Pump road tyres to 80 psi [1].",
     "Pump road tyres to 80 psi."),
    ("Die Notizen sagen nicht, wie oft man die Reifen wechselt. Die Reifen auf 80 psi pumpen [1].",
     "Die Reifen auf 80 psi pumpen."),
    ("笔记里没有提到多久换一次轮胎。公路车轮胎打到 80 psi [1]。", "公路车的轮胎气压打到 80 psi。"),
])
def test_a_sentence_saying_the_notes_lack_something_has_nothing_to_check(answer, note):
    c = rag.check_citations(answer, [note])
    assert [(s.verdict, s.line) for s in c.sentences] == [("skipped", None), ("supported", 1)]
    assert c.summary() == "checked: 1 of 1 sentence supported by their words and numbers · 1 with nothing to check"


@pytest.mark.parametrize("answer, note", [
    ("Install it:\n```\nRoad tyres take 95 psi [1].", "Pump road tyres to 80 psi."),
    ("So installieren:\n~~~\nDie Reifen auf 95 psi pumpen [1].", "Die Reifen auf 80 psi pumpen."),
])
def test_the_sentences_after_a_code_fence_that_never_closes_are_checked(answer, note):
    c = rag.check_citations(answer, [note])
    assert [s.verdict for s in c.sentences] == ["skipped", "unsupported"]
    assert c.sentences[1].why == "95 psi is in none of its lines" and c.sentences[1].line == 1


# ---- through the command line ---------------------------------------------------------------

BIKE = {"en": ("bike.md", "---\ntags: [bike]\ndate: 2026-03-05\n---\n# Bike care\n\n## Tyres\n\n"
                          "Pump road tyres to 80 psi.\nCheck the pressure every week.\n\n## Chain\n\n"
                          "Oil the chain every 300 km.\n"),
        "de": ("fahrrad.md", "---\ntags: [fahrrad]\n---\n# Fahrradpflege\n\n## Reifen\n\n"
                             "Die Rennradreifen auf 80 psi pumpen.\nDen Druck jede Woche prüfen.\n\n## Kette\n\n"
                             "Die Kette alle 300 km ölen.\n")}
QUESTION = {"en": "How hard do I pump the road tyres and how often do I oil the chain?",
            "de": "Wie fest pumpe ich die Rennradreifen und wie oft öle ich die Kette?"}
SAID = {"en": ["Pump road tyres to 80 psi [1].", "Oil the chain every 300 km.", "Oil the chain every 500 km."],
        "de": ["Die Rennradreifen auf 80 psi pumpen [1].", "Die Kette alle 300 km ölen.", "Die Kette alle 500 km ölen."]}


def ask(cli, server, tmp_path, lang, answer, *flags):
    name, text = BIKE[lang]
    folder = tmp_path / lang
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    server.answer = answer
    return cli(QUESTION[lang], "--notes", folder, "--min-score", "0.05", "--json", *flags)


def line_of(lang: str, sentence: str) -> int:
    """The line of the note (front matter counted) that holds the sentence's start."""
    lines = BIKE[lang][1].split("\n")
    return next(n for n, line in enumerate(lines, 1) if line[:12] == sentence[:12])


@pytest.mark.parametrize("lang", ["en", "de"])
def test_every_sentence_is_placed_at_its_file_s_line_front_matter_counted(cli, server, tmp_path, lang):
    out = ask(cli, server, tmp_path, lang, " ".join(SAID[lang]))
    assert out.returncode == 0, out.stderr
    check = json.loads(out.stdout)["citations"]
    placed = [(s["verdict"], s["path"], s["line"], s["end_line"]) for s in check["sentences"]]
    name = BIKE[lang][0]
    tyres, chain = line_of(lang, SAID[lang][0]), line_of(lang, SAID[lang][1])
    assert (tyres, chain) == ((9, 14) if lang == "en" else (8, 13))
    # en: the next line holds "tyres" by its heading ("## Tyres"), so the place runs on to it
    assert placed == [("supported", name, tyres, tyres + (lang == "en")), ("supported", name, chain, chain),
                      ("unsupported", name, chain, chain)]
    assert check["summary"].endswith(f'3 "{SAID[lang][2]}" 500 km is in none of its lines · {name}:{chain}')


@pytest.mark.parametrize("lang", ["en", "de"])
def test_the_judge_says_no_to_a_sentence_the_words_support(cli, server, tmp_path, lang):
    # the test server's judge says No where a word of four letters or more is not in the source
    extra = {"en": "Pump road tyres to 80 psi weekly [1].", "de": "Die Rennradreifen nachts auf 80 psi pumpen [1]."}
    plain = ask(cli, server, tmp_path, lang, f"{SAID[lang][0]} {extra[lang]}")
    assert [s["verdict"] for s in json.loads(plain.stdout)["citations"]["sentences"]] == ["supported"] * 2
    out = ask(cli, server, tmp_path, lang, f"{SAID[lang][0]} {extra[lang]}", "--judge", "bespoke-minicheck")
    assert out.returncode == 0, out.stderr
    check = json.loads(out.stdout)["citations"]
    assert [(s["verdict"], s["judge"], s["why"]) for s in check["sentences"]] == [
        ("supported", "yes", None), ("judged", "no", "bespoke-minicheck finds it not in its source")]
    assert check["judge"] == "bespoke-minicheck" and check["counts"]["judged"] == 1 and not check["all_supported"]
    assert check["summary"].startswith("checked: 1 of 2 sentences supported by their words and numbers · "
                                       "bespoke-minicheck read 2 (")
    assert "s a sentence) and said no to 1 · 1 flagged; 2 " in check["summary"]
    asked = [b for b in server.of("/api/chat") if b["model"] == "bespoke-minicheck"]
    assert [b["messages"][-1]["content"].rpartition("\nClaim: ")[2] for b in asked] == [
        s.replace(" [1].", " .") for s in (SAID[lang][0], extra[lang])]   # the citation's place left as a space
    assert all(b["messages"][-1]["content"].startswith("Document: ") for b in asked)


def test_the_judge_on_the_terminal_and_a_judge_not_pulled_warns_and_keeps_the_verdicts(cli, server, tmp_path):
    answer = f"{SAID['en'][0]} Pump road tyres to 80 psi weekly [1]."
    out = ask(cli, server, tmp_path, "en", answer, "--judge", "bespoke-minicheck")
    text = cli(QUESTION["en"], "--notes", tmp_path / "en", "--min-score", "0.05", "--judge", "bespoke-minicheck")
    assert text.returncode == 0, text.stderr
    assert '  2 "Pump road tyres to 80 psi weekly [1]." bespoke-minicheck finds it not in its source · bike.md:9\n' \
           in text.stderr
    out = ask(cli, server, tmp_path, "en", answer, "--judge", "no-such-judge")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    data = json.loads(out.stdout)
    assert [s["verdict"] for s in data["citations"]["sentences"]] == ["supported", "supported"]
    assert any(w.startswith("the judge no-such-judge did not read sentence 1 (") and w.endswith(
        "; it and the sentences after it keep the check's verdict") for w in data["warnings"]), data["warnings"]


def test_a_judge_s_warning_starts_a_line_of_its_own_after_the_answer(server, tmp_path):
    # a terminal shows stdout and stderr as one: the answer, streamed without its line's end, is
    # ended before any warning after it is written
    import subprocess
    from conftest import SCRIPT_COMMAND, user_env
    ask(lambda *a: None, server, tmp_path, "en", f"{SAID['en'][0]}")
    out = subprocess.run([*SCRIPT_COMMAND, QUESTION["en"], "--notes", str(tmp_path / "en"), "--cache",
                          str(tmp_path / "cache"), "--min-score", "0.05", "--judge", "no-such-judge"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, encoding="utf-8",
                         env=user_env(server.url), timeout=60)
    assert out.returncode == 0 and "\nwarning: the judge no-such-judge did not read" in out.stdout, out.stdout
    assert all(line.startswith("warning: ") for line in out.stdout.splitlines() if "warning: " in line)


@pytest.mark.parametrize("note, answer", [
    ("Rent is due on 25/6/2026; the inspection is on 5 March 2026.", "The inspection is on {date} [1]."),
    ("Die Miete ist am 25/6/2026 fällig; die Abnahme ist am 5. März 2026.", "Die Abnahme ist am {date} [1]."),
])
def test_an_answer_s_numeric_date_is_read_as_its_sources_write_theirs(note, answer):
    # the sources write the day first (25/6): the answer's 3/5/2026 is 3 May, not 5 March
    assert verdicts(answer.format(date="5/3/2026"), note) == [OK]
    assert verdicts(answer.format(date="3/5/2026"), note)[0][0] != "supported"


@pytest.mark.parametrize("answer, note", [
    ("When can I feed the fern? Feed the fern once a month in spring [1].",
     "Feed the fern once a month in spring and summer."),
    ("Wann dünge ich den Farn? Den Farn im Frühling einmal im Monat düngen [1].",
     "Den Farn im Frühling und Sommer einmal im Monat düngen."),
])
def test_a_question_in_an_answer_states_nothing_and_is_skipped(answer, note):
    # a small model often echoes the question: it is no claim the notes could fail to hold
    assert verdicts(answer, note) == [("skipped", ""), OK]


# ---- a number alone holds no claim ------------------------------------------------------------

SLEEP = "Wait a second.\ntime.sleep(5)\nThen go on."
NOT_HELD = ("unsupported", "not in [1]")
# (a sentence, the note it cites, its verdict): a line holding its number but not its words
# holds no claim, in any language; a number with nothing else to read is none to check, unless
# no line holds it; a line holding its words and its number holds it.
NUMBER_ALONE = [
    ("Fact 5 from the notes [1].", SLEEP, NOT_HELD),
    ("Version 0.5 [1].", "Install it: pip install foo==0.5", NOT_HELD),
    ("It needs 5 GB [1].", "The disk holds 5 GB of photos.", NOT_HELD),
    ("Backup on 5 March 2026 [1].", "Invoice of 2026-03-05: paid.", NOT_HELD),
    ("Fait 5 des notes [1].", "Attendre un peu.\ntime.sleep(5)\nPuis continuer.", NOT_HELD),
    ("Der Wert ist 5 [1].", "Kurz warten.\ntime.sleep(5)\nDann weiter.", NOT_HELD),
    ("版本是 0.5 [1]。", "安装：pip install foo==0.5", NOT_HELD),
    ("5 [1].", SLEEP, ("skipped", "")),
    ("It is 5 GB [1].", "The disk holds 5 GB of photos.", ("skipped", "")),
    ("7 [1].", SLEEP, ("unsupported", "7 is in none of its lines")),
    ("The release 0.5 fixed the crash [1].", "Release 0.5 fixed the crash on start.", OK),
    ("Add 3 cups of flour [1].", "Step 3: add 3 cups of flour.", OK),
    ("Use 18 g of coffee [1].", "Coffee: 18 g per 300 g of water.", OK),
    ("Der Server braucht 5 GB Speicher [1].", "Der Server braucht 5 GB Speicher.", OK),
    ("服务器需要 5 GB 内存 [1]。", "服务器需要 5 GB 内存。", OK),
]


@pytest.mark.parametrize("answer, note, verdict", NUMBER_ALONE)
def test_a_line_holding_a_sentence_s_number_but_not_its_words_does_not_hold_it(answer, note, verdict):
    assert verdicts(answer, note) == [verdict]


def test_a_number_beside_only_words_every_note_holds_is_not_held():
    # "bike" is in every note: by the notes' idf it says nothing, and "weighs" is not in the line
    sources = ["Bike bags hold 5 kg at most.", "Oil the bike chain every 300 km."]
    notes = rag.lexicon_from_texts(sources + [f"bike note {i}" for i in range(20)])
    checked = rag.check_citations("The bike weighs 5 kg [1]. Bike bags hold 5 kg [1].", sources, notes)
    assert [(s.verdict, s.why) for s in checked.sentences] == [NOT_HELD, OK]


def test_the_command_line_holds_no_sentence_by_its_number_alone(cli, server, tmp_path):
    answer = "Pump road tyres to 80 psi [1]. The fact is 80 [1].\n\n80 psi [1]."
    out = ask(cli, server, tmp_path, "en", answer)
    assert out.returncode == 0, out.stderr
    check = json.loads(out.stdout)["citations"]
    assert [(s["verdict"], s["why"]) for s in check["sentences"]] == [
        ("supported", None), ("unsupported", "not in [1]"), ("skipped", None)]
    assert check["summary"].startswith("checked: 1 of 2 sentences supported")
