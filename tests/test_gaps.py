"""The gap log: every question the notes could not answer (below the floor, or answered with half
its sentences or more not in the notes) is kept in the cache folder, one line each; --gaps groups them by topic and says which
today's notes answer. Through the CLI, against the stand-in server."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

from conftest import ROOT, SCRIPT_COMMAND, user_env

import demo_rag as rag

ON_TOPIC = "How many grams of coffee for 240 g of water?"
OFF_TOPIC = "Who won the 1998 football World Cup?"
TOMATO = "Which fertiliser suits tomato seedlings?"


def log_of(cli) -> list[dict]:
    path = cli.cache / rag.GAP_LOG
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def gaps_json(cli, notes, *more, **kw) -> dict:
    out = cli("--notes", notes, "--gaps", "--json", *more, **kw)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def entry(question: str, notes, when: str = "2026-11-30T10:00:00Z", **more) -> dict:
    """A log line as a run writes it, without a vector (--gaps embeds such questions itself)."""
    return {"v": rag.GAP_LOG_VERSION, "time": when, "question": question, "language": "en",
            "notes": os.path.realpath(notes), "why": "floor", "confidence": 0.1, "floor": 0.4, "sources": [],
            "filters": {}, **more}


def write_log(cli, lines: list) -> None:
    cli.cache.mkdir(parents=True, exist_ok=True)
    (cli.cache / rag.GAP_LOG).write_text("".join((json.dumps(x, ensure_ascii=False) if isinstance(x, dict) else x)
                                                 + "\n" for x in lines), encoding="utf-8")


# ---- what is kept ---------------------------------------------------------------------------

@pytest.mark.parametrize("case, logged", [("found", None), ("declined", "floor"), ("unsupported", "unsupported"),
                                          ("supported, citing nothing", None), ("keyword-only", None)])
def test_what_is_logged_and_what_is_not(cli, server, notes, case, logged):
    question = OFF_TOPIC if case in ("declined", "keyword-only") else ON_TOPIC
    if case == "unsupported":             # half its sentences or more are not in the notes
        server.answer = "Use 15 g of coffee to 240 g of water [1]. Chill the beans in the freezer overnight."
    if case == "supported, citing nothing":
        server.answer = "Use fifteen grams of coffee."          # no citation, but the notes hold it
    if case == "keyword-only":
        assert cli("--notes", notes, "--retrieve-only", ON_TOPIC).returncode == 0   # the index, with vectors
        server.errors["/api/embed"] = (500, "the embedder broke")
    out = cli("--notes", notes, question)
    assert out.returncode == 0, out.stderr
    got = log_of(cli)
    assert [e["why"] for e in got] == ([logged] if logged else [])
    if logged:
        (e,) = got
        assert e["question"] == question and e["language"] == "en" and e["notes"] == os.path.realpath(notes)
        assert e["v"] == rag.GAP_LOG_VERSION and e["time"].endswith("Z") and e["filters"] == {}
        assert isinstance(e["confidence"], float) and isinstance(e["floor"], float)
        assert (e["confidence"] < e["floor"]) == (case == "declined")
        assert e["sources"] and all({"source", "heading", "score"} <= set(s) for s in e["sources"])
        assert e["vector"]["model"] == rag.EMBED_MODEL and e["vector"]["f16"]
        assert oct((cli.cache / rag.GAP_LOG).stat().st_mode & 0o777) == "0o600"    # the user's alone


@pytest.mark.parametrize("front_end", [["--json"], ["--explain"], ["--retrieve-only"]])
def test_every_front_end_that_answers_logs_through_answer(cli, notes, front_end):
    out = cli("--notes", notes, "--source", "*.md", "--since", "2000", *front_end, OFF_TOPIC)
    assert out.returncode == 0, out.stderr
    (e,) = log_of(cli)
    assert e["question"] == OFF_TOPIC and e["filters"] == {"source": "*.md", "since": "2000"}


def test_chat_logs_the_rewritten_question_not_the_follow_up(cli, notes):
    follow_up = "Which team won the 1998 World Cup final in Paris, and who scored in it?"
    out = cli("--chat", "--notes", notes, stdin=f"What is BM25?\n{follow_up}\n")
    assert out.returncode == 0, out.stderr
    standalone = f"What is BM25? {follow_up}"                 # the stand-in's rewrite
    assert f"(searching for: {standalone})" in out.stdout and rag.NOT_FOUND in out.stdout
    (e,) = log_of(cli)
    assert e["question"] == standalone and e["asked"] == follow_up


def test_eval_and_tune_never_log(cli, notes, tmp_path):
    items = tmp_path / "set.jsonl"
    items.write_text(json.dumps({"question": "What is BM25?", "answers": ["ranking"], "source": "bm25.md"}) + "\n"
                     + json.dumps({"question": OFF_TOPIC, "answers": []}) + "\n", encoding="utf-8")
    for mode in ("--eval", "--tune"):
        out = cli("--notes", notes, mode, items)
        assert out.returncode == 0, out.stderr
    assert log_of(cli) == []


@pytest.mark.parametrize("how", ["--no-log", "env", "env=0"])
def test_no_log_for_a_run_and_the_variable_for_good(cli, notes, how):
    args = ["--no-log"] if how == "--no-log" else []
    env = {rag.NO_LOG_ENV: "0" if how == "env=0" else "1"} if how != "--no-log" else None
    out = cli("--notes", notes, *args, OFF_TOPIC, env=env)
    assert out.returncode == 0 and rag.NOT_FOUND in out.stdout, out.stderr
    assert len(log_of(cli)) == (1 if how == "env=0" else 0)     # 0 means "not set"


# ---- --gaps ---------------------------------------------------------------------------------

KITES = ["How do I fly a kite in strong wind?", "Can I fly a kite in strong wind?", "kite flying in strong wind"]
TAXES = ["What tax form do I file for freelance income?", "Which tax form for freelance income?"]


def test_gaps_groups_a_hand_made_set_by_topic_most_asked_first(cli, notes):
    write_log(cli, [entry(TAXES[0], notes, "2026-11-01T09:00:00Z"), entry(KITES[0], notes, "2026-11-02T09:00:00Z"),
                    entry(KITES[1], notes, "2026-11-03T09:00:00Z"), entry(TAXES[1], notes, "2026-11-04T09:00:00Z"),
                    entry(KITES[2], notes, "2026-11-05T09:00:00Z"), entry(KITES[0].upper(), notes),
                    entry("Which tax form for freelance income?", "/another/folder")])   # not these notes
    report = gaps_json(cli, notes)
    groups = [[q["question"] for q in g["asked"]] for g in report["groups"]]
    assert groups == [[KITES[0].upper(), KITES[1], KITES[2]], TAXES]     # asked again: counted once, as last asked
    kites, taxes = report["groups"]
    assert (kites["questions"], kites["first"], kites["last"]) == (4, "2026-11-02T09:00:00Z", "2026-11-30T10:00:00Z")
    assert kites["asked"][0]["times"] == 2 and kites["status"] == "open" and kites["closest_notes"]
    assert (taxes["questions"], taxes["first"], taxes["last"]) == (2, "2026-11-01T09:00:00Z", "2026-11-04T09:00:00Z")
    assert report["questions"] == 6 and report["different"] == 5 and report["now_found"] == 0
    out = cli("--notes", notes, "--gaps")
    assert out.returncode == 0, out.stderr
    assert "6 question(s) the notes could not answer (5 different), in 2 group(s); 0 now found" in out.stdout
    assert "1. 4 question(s), 2026-11-02 to 2026-11-30: open" in out.stdout and "  2× HOW DO I FLY" in out.stdout


def test_gaps_groups_with_the_logged_vectors_without_embedding_them_again(cli, server, notes):
    for q in (KITES[0], KITES[1], TAXES[0]):
        assert cli("--notes", notes, "--retrieve-only", q).returncode == 0
    embedded = len(server.of("/api/embed"))
    report = gaps_json(cli, notes)
    assert [len(g["asked"]) for g in report["groups"]] == [2, 1]
    sent = [t for body in server.of("/api/embed")[embedded:] for t in body["input"]]
    probes = [q for qs in rag.FLOOR_PROBES.values() for q in qs]
    assert sent == [rag.query_text(q, rag.Settings()) for q in probes]       # the probes alone
    assert server.of("/api/chat") == []                                      # nor the chat model


def test_gaps_takes_the_probe_vectors_the_calibration_kept(cli, server, tmp_path):
    notes = tmp_path / "vault"
    notes.mkdir()
    for i, topic in enumerate(["kites", "tides", "ferns", "clocks", "bread", "rivers", "owls", "bridges", "maps",
                               "bees", "glass", "salt", "wool", "ink", "moss", "dunes", "reefs", "caves",
                               "comets", "lamps", "roads", "mills", "boats", "bells"]):
        (notes / f"{i:02d}-{topic}.md").write_text(f"# {topic.title()}\n\nNotes on {topic}: how {topic} are made, "
                                                   f"kept and mended, with the {topic} of this town.\n")
    assert cli("--notes", notes, OFF_TOPIC).returncode == 0                # calibrated, and logged
    embedded = len(server.of("/api/embed"))
    assert gaps_json(cli, notes)["questions"] == 1
    sent = [t for body in server.of("/api/embed")[embedded:] for t in body["input"]]
    assert sent == [rag.query_text(q, rag.Settings()) for q in rag.FLOOR_PROBES["zh"]]   # English ones kept


def test_a_gap_closes_once_a_note_answers_it(cli, notes):
    for q in (TOMATO, OFF_TOPIC):
        assert cli("--notes", notes, q).returncode == 0
    before = gaps_json(cli, notes)
    assert [g["status"] for g in before["groups"]] == ["open", "open"]
    (notes / "tomatoes.md").write_text("# Tomatoes\n\n## Fertiliser for tomato seedlings\n\nTomato seedlings suit "
                                       "a weak liquid fertiliser once a week, from their second true leaf on.\n",
                                       encoding="utf-8")
    after = gaps_json(cli, notes)
    found = {q["question"]: q["now_found"] for g in after["groups"] for q in g["asked"]}
    assert found == {TOMATO: True, OFF_TOPIC: False} and after["now_found"] == 1
    tomato = next(g for g in after["groups"] if g["asked"][0]["question"] == TOMATO)
    assert tomato["status"] == "closed" and tomato["closest_notes"][0] == "tomatoes.md"
    out = cli("--notes", notes, "--gaps")
    assert "closed: today's notes answer every one" in out.stdout and f"{TOMATO}  (now found)" in out.stdout


def now_found(cli, notes) -> list[bool]:
    return [q["now_found"] for g in gaps_json(cli, notes)["groups"] for q in g["asked"]]


def a_closer_note(notes) -> None:
    (notes / "aaa-coffee.md").write_text("# Coffee for 240 g of water\n\nHow many grams of coffee for 240 g of "
                                         "water? Fifteen grams of coffee for 240 g of water.\n", encoding="utf-8")


def test_an_old_log_s_uncited_answer_is_now_found_only_when_another_source_comes_first(cli, server, notes):
    # A log an older version wrote: an answer citing nothing was logged "uncited". It still reads.
    server.answer = "Use 15 g of coffee. Chill the beans in the freezer overnight."
    assert cli("--notes", notes, ON_TOPIC).returncode == 0
    (e,) = log_of(cli)
    write_log(cli, [{**e, "why": "uncited"}])
    assert now_found(cli, notes) == [False]
    a_closer_note(notes)
    assert now_found(cli, notes) == [True]


def test_an_unsupported_answer_is_now_found_only_when_another_source_comes_first(cli, server, notes):
    server.answer = "Use 15 g of coffee [1]. Chill the beans in the freezer overnight."
    assert cli("--notes", notes, ON_TOPIC).returncode == 0
    assert [e["why"] for e in log_of(cli)] == ["unsupported"]
    assert now_found(cli, notes) == [False]
    a_closer_note(notes)
    assert now_found(cli, notes) == [True]


def test_to_eval_appends_the_open_questions_once_and_eval_counts_them_apart(cli, notes, tmp_path):
    for q in (TOMATO, OFF_TOPIC):
        assert cli("--notes", notes, q).returncode == 0
    (notes / "tomatoes.md").write_text("# Tomatoes\n\nA weak fertiliser suits tomato seedlings, once a week.\n" * 3,
                                       encoding="utf-8")
    items = tmp_path / "set.jsonl"
    items.write_text(json.dumps({"question": "What is BM25?", "answers": ["ranking"]}), encoding="utf-8")  # no \n
    for _ in range(2):                                        # the second time adds nothing
        out = cli("--notes", notes, "--gaps", "--to-eval", items)
        assert out.returncode == 0, out.stderr
    assert "added 0 open question(s) as unanswerable ones (1 were there already)" in out.stdout
    lines = [json.loads(line) for line in items.read_text(encoding="utf-8").splitlines()]
    assert lines == [{"question": "What is BM25?", "answers": ["ranking"]},
                     {"question": OFF_TOPIC, "answers": [], "from": rag.GAP_FROM}]
    out = cli("--notes", notes, "--eval", items)
    assert out.returncode == 0, out.stderr
    assert "declined 0/0 unanswerable, and 1/1 from the gap log" in out.stdout
    out = cli("--notes", notes, "--tune", items)
    assert out.returncode == 0 and "2 questions (1 answerable, 1 unanswerable, 1 of them from the gap log)" \
        in out.stdout, out.stderr
    assert len(log_of(cli)) == 2                              # --eval added nothing


def test_a_question_declined_under_a_filter_stays_open_and_goes_to_eval_with_it(cli, notes, tmp_path):
    (notes / "work.md").write_text("---\ntags: [work]\n---\n# Planning\n\nThe quarterly planning meeting "
                                   "moved to Thursday; the budget review follows it.\n", encoding="utf-8")
    for flags in (["--tag", "work"], ["--source", "work*"]):         # bm25.md answers both, unfiltered
        out = cli("--notes", notes, "What is BM25?" if "--tag" in flags else "How is BM25 computed?", *flags)
        assert out.returncode == 0 and "not found" in out.stdout.lower() + out.stderr.lower(), out.stdout
    report = gaps_json(cli, notes)
    asked = {q["question"]: q for g in report["groups"] for q in g["asked"]}
    assert {q: (a["now_found"], a["filters"]) for q, a in asked.items()} == {
        "What is BM25?": (False, {"tags": ["work"]}), "How is BM25 computed?": (False, {"source": "work*"})}
    items = tmp_path / "set.jsonl"
    out = cli("--notes", notes, "--gaps", "--to-eval", items)
    assert out.returncode == 0, out.stderr
    assert "(asked with --tag work)" in out.stdout and "1 asked with --source left out" in out.stdout
    assert [json.loads(line) for line in items.read_text(encoding="utf-8").splitlines()] == \
        [{"question": "What is BM25?", "answers": [], "from": rag.GAP_FROM, "tags": ["work"]}]
    out = cli("--notes", notes, "--eval", items)                        # asked with its tag, it is declined
    assert out.returncode == 0 and "1/1 from the gap log" in out.stdout, out.stdout + out.stderr


def test_logged_filters_are_read_as_they_were_meant_when_asked(cli, notes, tmp_path):
    write_log(cli, [entry("What is the tallest mountain on Mars?", notes, "2026-01-10T09:00:00Z",
                          filters={"since": "7d", "tags": ["work", 3, "two words"]}),
                    entry("Who painted the Sistine Chapel ceiling?", notes, "2026-03-02T09:00:00Z",
                          filters={"source": "my notes/" + "x" * 5000, "since": "2026-05", "until": "2026-01"})])
    asked = {q["question"]: q for g in gaps_json(cli, notes)["groups"] for q in g["asked"]}
    assert asked["What is the tallest mountain on Mars?"]["filters"] == {"tags": ["work"], "since": "2026-01-03"}
    assert asked["Who painted the Sistine Chapel ceiling?"]["filters"] == {"source": "my notes/" + "x" * 5000}
    items = tmp_path / "set.jsonl"
    out = cli("--notes", notes, "--gaps", "--to-eval", items)
    assert out.returncode == 0, out.stderr
    assert "(asked with --tag work --since 2026-01-03)" in out.stdout                  # 7 days before it was asked
    (line,) = [line for line in out.stdout.splitlines() if "(asked with --source 'my notes/xxx" in line]
    assert len(line) < 150, line
    assert [json.loads(line)["since"] for line in items.read_text(encoding="utf-8").splitlines()] == ["2026-01-03"]


def test_gaps_refuses_a_tag_or_source_of_its_own(cli, notes):
    for flags in (["--tag", "work"], ["--source", "*.md"]):
        out = cli("--notes", notes, "--gaps", *flags)
        assert out.returncode == rag.EXIT_USAGE and "each logged question" in out.stderr, out.stderr


def test_gaps_of_a_folder_that_is_not_there_is_an_error(cli, tmp_path):
    out = cli("--notes", tmp_path / "nowhere", "--gaps")
    assert out.returncode == rag.EXIT_USAGE and "notes folder not found" in out.stderr, out.stdout


def test_since_and_until_date_the_logged_questions_not_the_notes(cli, notes):
    write_log(cli, [entry("What is the tallest mountain on Mars?", notes, "2026-01-10T09:00:00Z"),
                    entry("Who painted the Sistine Chapel ceiling?", notes, "2026-03-02T09:00:00Z")])
    asked = lambda *flags: [q["question"] for g in gaps_json(cli, notes, *flags)["groups"]  # noqa: E731
                            for q in g["asked"]]
    assert asked("--since", "2026-02") == ["Who painted the Sistine Chapel ceiling?"]
    assert asked("--until", "2026-01") == ["What is the tallest mountain on Mars?"]
    assert sorted(asked()) == sorted(asked("--since", "2026", "--until", "2026-03-02"))    # notes undated by them


def test_gaps_counts_the_questions_an_agent_asked_through_mcp(cli, notes):
    write_log(cli, [entry(KITES[0], notes, via="mcp"), entry(KITES[0], notes, via="mcp"), entry(KITES[1], notes),
                    entry(TAXES[0], notes)])
    report = gaps_json(cli, notes)
    kites, taxes = report["groups"]
    assert (report["via_mcp"], kites["via_mcp"], taxes["via_mcp"]) == (2, 2, 0)
    assert [(q["question"], q["times"], q["via_mcp"]) for q in kites["asked"]] == [(KITES[0], 2, 2), (KITES[1], 1, 0)]
    out = cli("--notes", notes, "--gaps")
    assert "; 0 now found; 2 asked by an agent (via MCP)\n" in out.stdout
    assert "1. 3 question(s) (2 via MCP), " in out.stdout and "2. 1 question(s), " in out.stdout
    assert f"  2× {KITES[0]}  (via MCP)\n" in out.stdout and f"{KITES[1]}\n" in out.stdout


def test_clear_deletes_the_log(cli, notes):
    assert cli("--notes", notes, OFF_TOPIC).returncode == 0
    out = cli("--notes", notes, "--gaps", "--clear")
    assert out.returncode == 0 and out.stdout.strip() == \
        f"deleted the gap log, every notes folder's questions: {cli.cache / rag.GAP_LOG}", out.stderr
    assert not (cli.cache / rag.GAP_LOG).exists()
    out = cli("--notes", notes, "--gaps")
    assert out.returncode == 0 and "no question about" in out.stdout and "is in the gap log" in out.stdout


# ---- two writers, a kill, a full log ----------------------------------------------------------

def test_two_runs_appending_at_once_never_mix_their_lines(server, notes, tmp_path):
    cache = tmp_path / "cache"
    args = [*SCRIPT_COMMAND, "--notes", str(notes), "--cache", str(cache)]
    out = subprocess.run([*args, "--retrieve-only", "What is BM25?"], capture_output=True, env=user_env(server.url))
    assert out.returncode == 0, out.stderr
    n = 150                                                   # long questions: lines of ~5 KB each
    runs = []
    try:
        for k in range(2):                                    # their output is not read: it would fill a pipe
            runs.append(subprocess.Popen([*args, "--chat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, env=user_env(server.url)))
        for k, p in enumerate(runs):
            p.stdin.write("".join(f"Who won football World Cup number {i} of writer {k}? " + "zebra " * 400 + "\n"
                                  for i in range(n)).encode())
            p.stdin.close()
        assert [p.wait(timeout=120) for p in runs] == [0, 0]
    finally:
        for p in runs:
            p.kill()
            p.wait()
    lines = (cache / rag.GAP_LOG).read_bytes().split(b"\n")
    assert lines.pop() == b""
    got = [json.loads(line) for line in lines]                # every line whole
    for k in range(2):
        mine = [e["question"].split("?")[0] for e in got if f"of writer {k}" in e["question"]]
        assert mine == [f"Who won football World Cup number {i} of writer {k}" for i in range(n)]


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux's /proc/locks to see a run wait")
def test_a_run_waits_for_another_run_s_line_to_end_before_it_looks_at_the_log_s_end(tmp_path):
    import fcntl
    import time
    log = tmp_path / rag.GAP_LOG
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b'{"v": 1, "question": "mine, its first half')       # another run, mid-line
    code = "import sys; sys.path.insert(0, sys.argv[1]); import demo_rag as rag; from pathlib import Path; " \
           "rag.append_gap(Path(sys.argv[2]), {'v': 1, 'question': 'theirs'})"
    p = subprocess.Popen([sys.executable, "-c", code, str(ROOT), str(log)])
    deadline, inode = time.monotonic() + 60, f":{os.fstat(fd).st_ino} "
    while p.poll() is None and time.monotonic() < deadline:                # until it waits, or has written
        with open("/proc/locks") as locks:
            if any("->" in line and inode in line for line in locks):
                break
        time.sleep(0.01)
    os.write(fd, b' and the second"}\n')
    os.close(fd)
    assert p.wait(timeout=60) == 0
    assert [json.loads(line)["question"] for line in log.read_text().splitlines()] == \
        ["mine, its first half and the second", "theirs"]


WRITER = """
import sys; sys.path.insert(0, sys.argv[1])
import demo_rag as rag
from pathlib import Path
rag.GAP_LOG_MAX_MB = 0.25
while not Path(sys.argv[2] + ".go").exists():             # both start together
    pass
for i in range(int(sys.argv[3])):
    rag.append_gap(Path(sys.argv[2]), {"v": 1, "question": f"{sys.argv[4]} {i} " + "x" * 2000})
"""


def test_a_full_log_starts_afresh_keeping_the_one_before_even_with_two_writers(tmp_path):
    log = tmp_path / rag.GAP_LOG
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(ROOT), str(log), "400", name])
               for name in ("a", "b")]
    (tmp_path / f"{rag.GAP_LOG}.go").touch()
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    old, most = log.with_name(rag.GAP_LOG_OLD), 0.25 * 2**20 + 2100      # the bound, and one line more
    assert log.stat().st_size <= most and old.stat().st_size <= most
    kept = [json.loads(line)["question"].split()[:2] for p in (old, log) for line in p.read_text().splitlines()]
    for name in ("a", "b"):                                   # each writer's newest lines, none missing
        mine = [int(i) for who, i in kept if who == name]
        assert mine == list(range(400 - len(mine), 400)), mine
    assert ["a", "399"] in kept or ["b", "399"] in kept       # the last line written is kept
    assert len(kept) >= 0.25 * 2**20 / 2100                   # the oldest went, the older file's worth stays


def test_a_torn_last_line_is_skipped_with_a_warning_and_the_next_entry_starts_a_line(cli, notes):
    whole = json.dumps(entry(KITES[0], notes))
    write_log(cli, [whole])
    with open(cli.cache / rag.GAP_LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry(TAXES[0], notes))[:70])      # a run killed mid-write
    out = cli("--notes", notes, "--gaps")
    assert out.returncode == 0, out.stderr
    assert "1 question(s) the notes could not answer" in out.stdout
    assert out.stderr.count("is cut short (a run stopped while writing it?): skipped") == 1
    assert cli("--notes", notes, OFF_TOPIC).returncode == 0
    lines = (cli.cache / rag.GAP_LOG).read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and json.loads(lines[-1])["question"] == OFF_TOPIC
    out = cli("--notes", notes, "--gaps")
    assert "2 question(s) the notes could not answer" in out.stdout
    assert "1 line(s) of" in out.stderr and "are not gap log entries (line 2 the first): skipped" in out.stderr


# ---- bad input ------------------------------------------------------------------------------

@pytest.mark.parametrize("case, says", [
    ("not JSON", "1 line(s) of {log} are not gap log entries (line 1 the first): skipped"),
    ("another version", "1 entries of {log} come from another version of demo_rag.py"),
    ("1 MB question", None),
    ("no time", "1 line(s) of {log} are not gap log entries (line 1 the first): skipped"),
    ("a time cut short", "1 line(s) of {log} are not gap log entries (line 1 the first): skipped"),
    ("a time of no day", "1 line(s) of {log} are not gap log entries (line 1 the first): skipped"),
])
def test_a_damaged_log_is_read_past_with_one_warning(cli, notes, case, says):
    bad = {"not JSON": "<html>not a log</html>", "another version": {**entry("x", notes), "v": 99},
           "no time": entry(TAXES[0], notes, when="last Tuesday"),
           "a time cut short": entry(TAXES[0], notes, when="2026-1-2T3:4:5Z"),
           "a time of no day": entry(TAXES[0], notes, when="2026-13-45T99:99:99Z"),
           "1 MB question": entry("Why " + "very " * 200_000 + "long?", notes)}[case]
    write_log(cli, [bad, entry(KITES[0], notes)])
    out = cli("--notes", notes, "--gaps")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert ("2" if case == "1 MB question" else "1") + " question(s) the notes could not answer" in out.stdout
    assert len(out.stdout) < 5000                             # a huge question is shown cut short
    if says:
        assert says.format(log=cli.cache / rag.GAP_LOG) in out.stderr


def test_a_log_that_is_a_folder(cli, notes):
    (cli.cache / rag.GAP_LOG).mkdir(parents=True)
    out = cli("--notes", notes, OFF_TOPIC)
    assert out.returncode == 0 and rag.NOT_FOUND in out.stdout          # the answer still comes,
    assert out.stderr.count("warning: the gap log could not be written") == 1, out.stderr   # with one warning
    out = cli("--notes", notes, "--gaps")
    assert out.returncode == 2 and out.stderr.strip() == \
        f"error: {cli.cache / rag.GAP_LOG} is a folder, not the gap log; move it away"


@pytest.mark.skipif(not hasattr(os, "O_NOFOLLOW"), reason="no O_NOFOLLOW here")
def test_a_link_or_a_fifo_in_the_log_s_place_is_neither_written_through_nor_read(cli, notes, tmp_path):
    cli.cache.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("someone else's file\n")
    (cli.cache / rag.GAP_LOG).symlink_to(elsewhere)
    out = cli("--notes", notes, OFF_TOPIC)
    assert out.returncode == 0 and rag.NOT_FOUND in out.stdout          # the answer still comes,
    assert out.stderr.count("warning: the gap log could not be written") == 1, out.stderr
    assert elsewhere.read_text() == "someone else's file\n"             # and nothing went through the link
    out = cli("--notes", notes, "--gaps")
    assert out.returncode == 2 and out.stderr.startswith("error: cannot read the gap log"), out.stderr
    (cli.cache / rag.GAP_LOG).unlink()
    os.mkfifo(cli.cache / rag.GAP_LOG)                                  # a FIFO: reading it would wait for ever
    out = cli("--notes", notes, "--gaps", timeout=60)
    assert out.returncode == 2 and "not a regular file" in out.stderr, out.stderr


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_cache_folder_costs_one_warning(cli, notes):
    assert cli("--notes", notes, "--retrieve-only", ON_TOPIC).returncode == 0
    cli.cache.chmod(0o555)
    try:
        out = cli("--notes", notes, OFF_TOPIC)
    finally:
        cli.cache.chmod(0o755)
    assert out.returncode == 0 and rag.NOT_FOUND in out.stdout
    assert out.stderr.count("warning: the gap log could not be written") == 1, out.stderr


def test_a_full_disk_leaves_no_half_line_in_the_log_and_says_the_question_was_lost(cli, server, notes):
    assert cli("--notes", notes, OFF_TOPIC).returncode == 0            # the index, and one line
    log = cli.cache / rag.GAP_LOG
    before = log.read_bytes()
    room = len(before) + 40                # a file system with room for 40 more bytes (see test_build)
    out = subprocess.run([*SCRIPT_COMMAND, "--notes", str(notes), "--cache", str(cli.cache), TOMATO],
                         capture_output=True, text=True, timeout=60, env=user_env(server.url),
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (room, room)))
    assert out.returncode == 0 and rag.NOT_FOUND in out.stdout and "Traceback" not in out.stderr
    assert log.read_bytes() == before                                   # no half line
    warned = [line for line in out.stderr.splitlines() if "gap log" in line]
    assert warned == [f"warning: the gap log could not be written ({log}: File too large); "
                      f"the question was not kept (--no-log or {rag.NO_LOG_ENV}=1 stops trying)"]
    out = cli("--notes", notes, "--gaps")
    assert out.returncode == 0 and "cut short" not in out.stderr, out.stderr


def test_gaps_without_a_log(cli, notes):
    out = cli("--notes", notes, "--gaps")
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout.startswith("no question about") and "is in the gap log" in out.stdout
    assert json.loads(cli("--notes", notes, "--gaps", "--json").stdout)["groups"] == []


def test_to_eval_through_a_link_to_no_file_yet_writes_the_set_where_it_points(cli, notes, tmp_path):
    # As --make-eval does, and a shell's >>: a set to append to need not be there yet.
    assert cli("--notes", notes, OFF_TOPIC).returncode == 0
    (tmp_path / "set.jsonl").symlink_to(tmp_path / "sets.jsonl")
    out = cli("--notes", notes, "--gaps", "--to-eval", tmp_path / "set.jsonl")
    assert out.returncode == 0, out.stderr
    written = (tmp_path / "sets.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["question"] for line in written] == [OFF_TOPIC]


def test_to_eval_into_a_file_that_is_no_evaluation_set_is_refused(cli, notes, tmp_path):
    write_log(cli, [entry(KITES[0], notes)])
    other = tmp_path / "notes.txt"
    other.write_text("my shopping list\n")
    out = cli("--notes", notes, "--gaps", "--to-eval", other)
    assert out.returncode == 2 and out.stderr.startswith(f"error: {other} exists and is not an evaluation set")
    assert other.read_text() == "my shopping list\n"


@pytest.mark.parametrize("args, says", [(["--to-eval", "x.jsonl", "q"], "--to-eval goes with --gaps"),
                                        (["--clear", "q"], "--clear goes with --gaps"),
                                        (["--gaps", "q"], "--gaps takes no question")])
def test_the_gap_flags_go_with_gaps(cli, args, says):
    out = cli(*args)
    assert out.returncode == 2 and says in out.stderr


DAMAGED = {
    "nested 100,000 deep": "[" * 100_000 + "]" * 100_000,
    "an object nested 100,000 deep": '{"v": 1, "filters": ' + '{"a": ' * 100_000 + "0" + "}" * 100_001,
    "a heading that is a list": lambda notes: entry(TAXES[0], notes, sources=[
        {"source": "bm25.md", "heading": ["# BM25"], "score": 0.3}], why="uncited"),
    "a source that is a string": lambda notes: entry(TAXES[0], notes, sources=["bm25.md"]),
    "a score that is text": lambda notes: entry(TAXES[0], notes, sources=[
        {"source": "bm25.md", "heading": None, "score": "high"}]),
    "sources that are an object": lambda notes: entry(TAXES[0], notes, sources={"source": "bm25.md"}),
    "filters that are a list": lambda notes: entry(TAXES[0], notes, filters=["work"]),
    "a vector that is a number": lambda notes: entry(TAXES[0], notes, vector=3),
    "asked that is a number": lambda notes: entry(TAXES[0], notes, asked=7),
    "a language that is null": lambda notes: entry(TAXES[0], notes, language=None),
    "a confidence that is text": lambda notes: entry(TAXES[0], notes, confidence="low"),
    "via that is a list": lambda notes: entry(TAXES[0], notes, via=["mcp"]),
    # a lone surrogate, as JSON's \\ud800: no request to the embedder can carry it
    "a question that is no text": lambda notes: json.dumps(entry("kite \ud800 wind", notes)),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_line_of_the_wrong_shape_is_skipped_and_clear_still_clears(cli, notes, case):
    bad = DAMAGED[case] if isinstance(DAMAGED[case], str) else DAMAGED[case](notes)    # a line, or an entry
    write_log(cli, [entry(KITES[0], notes, sources=[{"source": "kites.md", "heading": "# Kites", "score": 0.2}],
                          why="uncited"), bad])
    says = f"1 line(s) of {cli.cache / rag.GAP_LOG} are not gap log entries (line 2 the first): skipped"
    out = cli("--notes", notes, "--gaps")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "1 question(s) the notes could not answer" in out.stdout and says in out.stderr
    out = cli("--notes", notes, "--gaps", "--json")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    report = json.loads(out.stdout)
    assert report["questions"] == 1 and report["warnings"] == [says]
    out = cli("--notes", notes, "--gaps", "--clear")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "deleted the gap log" in out.stdout and not (cli.cache / rag.GAP_LOG).exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_clear_reads_nothing_it_deletes(cli, notes):
    """--clear removes the files as they are: not a byte of them is read (a FIFO would refuse)."""
    cli.cache.mkdir(parents=True)
    (cli.cache / rag.GAP_LOG).write_bytes(b"[" * 100_000 + b"\n\xff\xfe not even text\n" + b"{" * 5000)
    os.mkfifo(cli.cache / rag.GAP_LOG_OLD)
    out = cli("--notes", notes, "--gaps", "--clear", "--json", timeout=60)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    said = json.loads(out.stdout)
    assert said["deleted_files"] == [str(cli.cache / rag.GAP_LOG), str(cli.cache / rag.GAP_LOG_OLD)]
    assert said["note"].startswith("deleted the gap log")
    assert not (cli.cache / rag.GAP_LOG).exists() and not (cli.cache / rag.GAP_LOG_OLD).exists()
