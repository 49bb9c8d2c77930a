"""The answer's stream and the script's own: an answer that never ends is stopped and said to be
cut short, and the connection closed so that Ollama stops too; a stdout or stderr that cannot take
the text (another encoding, closed, full) still gets a result or one line and an exit code; a run
stopped mid-answer under --json still prints one object. Each runs the script as a subprocess,
with the real file descriptors."""
from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import time

import pytest
from conftest import SCRIPT_COMMAND, read_until, user_env
from ollama_server import FakeOllama

import demo_rag as rag

QUESTION = "What is asyncio?"


# ---- the answer: a limit the model is told, and a stop for a reply that does not keep to it ----

def test_the_answer_is_asked_for_max_answer_tokens_and_said_to_be_cut_when_it_reaches_them(cli, server, notes):
    out = cli(QUESTION, "--notes", notes)
    assert out.returncode == 0 and "cut short" not in out.stderr, out.stderr
    assert server.of("/api/chat")[0]["options"]["num_predict"] == rag.ANSWER_TOKENS
    out = cli(QUESTION, "--notes", notes, "--max-answer-tokens", "4")
    assert out.returncode == 0, out.stderr
    assert server.of("/api/chat")[1]["options"]["num_predict"] == 4
    assert "Answer:\nAccording to the notes, " in out.stdout
    assert "warning: the answer was cut short: it reached 4 tokens, the most asked for (--max-answer-tokens)" \
        in out.stderr
    data = json.loads(cli(QUESTION, "--notes", notes, "--max-answer-tokens", "4", "--json").stdout)
    assert data["status"] == "answered" and len(data["answer"].split()) == 4
    assert "reached 4 tokens" in data["cut_short"] and any("cut short" in w for w in data["warnings"])


def test_max_answer_tokens_must_leave_room_for_the_sources(cli):
    for value in ("0", str(rag.MAX_ANSWER_TOKENS + 1)):
        out = cli(QUESTION, "--max-answer-tokens", value)
        assert out.returncode == 2 and f"--max-answer-tokens must be from 1 to {rag.MAX_ANSWER_TOKENS}" in out.stderr


def test_a_reply_that_repeats_itself_is_stopped_and_its_stream_closed(cli, server, notes):
    # a model stuck in a loop, on a server that does not stop it at num_predict: without a stop,
    # 300,000 parts (9 MB of text) would stream in
    server.ignore_num_predict = True
    server.answer = itertools.chain(["According to the notes [1]. "],
                                    itertools.repeat("I keep saying the same thing. ", 300_000))
    out = cli(QUESTION, "--notes", notes, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["status"] == "answered" and "repeating the same text" in data["cut_short"]
    assert data["answer"].startswith("According to the notes [1]. I keep") and len(data["answer"]) < 2500
    (record,) = server.records("/api/chat")
    assert record["gone"] and record["sent_parts"] < 300_000     # the client hung up: Ollama stops generating


def test_a_long_answer_that_lists_similar_items_is_not_taken_for_a_loop(cli, server, notes):
    items = "".join(f"- Day {n}: feed the starter 50 g of flour and 50 g of water [1].\n" for n in range(1, 120))
    server.answer = "According to the notes:\n" + items
    out = cli(QUESTION, "--notes", notes, "--json", "--max-answer-tokens", "4000")    # room for its 1,700 words
    data = json.loads(out.stdout)
    assert data["status"] == "answered" and data["cut_short"] is None, data["warnings"]
    assert data["answer"] == server.answer                # all 8,000 characters of it


def test_a_server_that_ignores_num_predict_is_stopped_at_the_character_cap(cli, server, notes):
    server.ignore_num_predict = True
    server.answer = "".join(f"Fact {n} from the notes [1]. " for n in range(5000))     # no loop, just long
    out = cli(QUESTION, "--notes", notes, "--max-answer-tokens", "10")
    assert out.returncode == 0, out.stderr
    answer = out.stdout.split("Answer:\n", 1)[1].split("\n", 1)[0]    # its line, then any "Cited at"
    assert len(answer) == 10 * rag.ChatStream.CHARS_PER_TOKEN and server.answer.startswith(answer)
    assert f"cut short: it ran past {10 * rag.ChatStream.CHARS_PER_TOKEN} characters" in out.stderr
    assert server.records("/api/chat")[0]["gone"]


def test_one_endless_line_from_the_server_is_refused_before_it_fills_the_memory(cli, server, notes):
    server.endless_line = 64 << 20                        # 64 MB without a line break
    out = cli(QUESTION, "--notes", notes, "--json")
    assert out.returncode == rag.EXIT_OLLAMA and "Traceback" not in out.stderr, out.stderr
    data = json.loads(out.stdout)
    assert data["status"] == "failed" and data["answer"].startswith("According")
    assert f"a line of its reply ran past {rag.MAX_REPLY_LINE >> 20} MB" in data["error"]
    (record,) = server.records("/api/chat")
    assert record["gone"] and record["sent_bytes"] < 2 * rag.MAX_REPLY_LINE


# ---- the script's own streams: another encoding, closed, full --------------------------------

def run_with_fds(args, host: str, close=(), env=None, **streams) -> subprocess.CompletedProcess:
    """Run the script with real file descriptors: `streams` are subprocess.run's stdin, stdout and
    stderr (pipes by default), and `close` lists the descriptors (0, 1, 2) closed before it starts."""
    def closing():
        for fd in close:
            os.close(fd)
    streams = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **streams}
    return subprocess.run([*SCRIPT_COMMAND, *map(str, args)], env=user_env(host, env),
                          preexec_fn=closing if close else None, timeout=60, **streams)


def test_a_stdout_that_lacks_chinese_gets_escapes_and_a_note_saying_so(server, notes, tmp_path):
    out = run_with_fds(["什么是 RAG？", "--notes", notes, "--cache", tmp_path / "c"], server.url,
                       env={"PYTHONIOENCODING": "cp1252"})
    said, stdout = out.stderr.decode("cp1252"), out.stdout.decode("cp1252")
    assert out.returncode == 0 and "Traceback" not in said, said
    assert "[1] rag-\\u5165\\u95e8.md" in stdout and "Answer:\nAccording to the notes" in stdout
    assert "note: stdout's encoding (cp1252) lacks some characters of the output: they are written as \\u" in said


def test_json_on_a_stdout_that_lacks_chinese_stays_valid_and_reads_back_the_same(server, notes, tmp_path):
    out = run_with_fds(["什么是 RAG？", "--notes", notes, "--cache", tmp_path / "c", "--json"], server.url,
                       env={"PYTHONIOENCODING": "cp1252"})
    assert out.returncode == 0, out.stderr.decode("cp1252")
    data = json.loads(out.stdout.decode("cp1252"))
    assert data["sources"][0]["source"] == "rag-入门.md" and "RAG 入门笔记 [1]" in data["answer"]


def test_a_closed_stdout_is_one_line_and_exit_1_before_any_work(server, notes, tmp_path):
    out = run_with_fds(["What is asyncio?", "--notes", notes, "--cache", tmp_path / "c"], server.url, close=(1,))
    assert out.returncode == rag.EXIT_OUTPUT, out.stderr
    assert out.stderr.decode().splitlines() == ["error: stdout is closed, so nothing could be shown; send it "
                                                "somewhere (> answer.txt, or > /dev/null to only update the index)"]
    assert server.requests == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_a_full_stdout_is_one_line_and_exit_1(server, notes, tmp_path, json_flag):
    with open("/dev/full", "w") as full:
        out = run_with_fds(["What is asyncio?", "--notes", notes, "--cache", tmp_path / "c", *json_flag],
                           server.url, stdout=full)
    said = out.stderr.decode()
    assert out.returncode == rag.EXIT_OUTPUT and "Traceback" not in said, said
    assert said.endswith("error: cannot write to stdout (No space left on device)\n")


@pytest.mark.parametrize("how", ["closed", "full"])
def test_a_stderr_closed_or_full_still_gives_the_answer(server, notes, tmp_path, how):
    if how == "full" and not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    args = ["What is asyncio?", "--notes", notes, "--cache", tmp_path / "c"]
    if how == "closed":
        out = run_with_fds(args, server.url, close=(2,))
    else:
        with open("/dev/full", "w") as full:
            out = run_with_fds(args, server.url, stderr=full)
    assert out.returncode == 0 and "Answer:\nAccording to the notes" in out.stdout.decode(), out
    again = run_with_fds(args, server.url)                # the cache it wrote meanwhile is sound
    assert again.returncode == 0 and "(0 chunks embedded)" in again.stderr.decode(), again.stderr


@pytest.mark.parametrize("stdin, code, said", [
    ("closed", rag.EXIT_USAGE, "error: --chat reads its questions from stdin, which is closed"),
    ("write-only", rag.EXIT_USAGE, "error: --chat cannot read its questions from stdin (Bad file descriptor)"),
    ("empty", rag.EXIT_OK, ""),                          # /dev/null: at once the end, as Ctrl-D
])
def test_chat_says_when_it_cannot_read_its_questions(server, notes, tmp_path, stdin, code, said):
    args = ["--chat", "--notes", notes, "--cache", tmp_path / "c"]
    if stdin == "write-only":
        with open(tmp_path / "w", "w") as w:
            out = run_with_fds(args, server.url, stdin=w)
    else:
        out = run_with_fds(args, server.url, close=(0,) if stdin == "closed" else ())
    err = out.stderr.decode()
    assert out.returncode == code and said in err and "Traceback" not in err, err


def test_a_reader_that_goes_away_mid_answer_is_no_error(tmp_path, notes, spawn):
    with FakeOllama() as s:
        release = s.hold("/api/chat")
        p = spawn(["What is asyncio?", "--notes", notes, "--cache", tmp_path / "c"], host=s.url)
        read_until(p.stdout, "Top sources")
        p.stdout.close()                                  # `| head -1`
        release.set()
        p.wait(timeout=30)
        err = p.stderr.read().decode()
    assert p.returncode == 0 and "Traceback" not in err, err


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
@pytest.mark.parametrize("fd", [0, 2])
def test_a_closed_descriptor_is_not_left_for_a_file_to_take(tmp_path, notes, spawn, fd):
    # else the first file the run opens (a note, the cache) gets its number, and what a library
    # writes to "stderr" lands in that file
    with FakeOllama() as s:
        release = s.hold("/api/chat")                     # the run waits mid-answer, files opened
        p = spawn(["What is asyncio?", "--notes", notes, "--cache", tmp_path / "c"], host=s.url,
                  preexec_fn=lambda: os.close(fd))
        try:
            s.wait_for(lambda: any(r["held"] for r in s.records("/api/chat")))
            assert os.readlink(f"/proc/{p.pid}/fd/{fd}") == os.devnull
        finally:
            release.set()
        out, _ = p.communicate(timeout=30)
    assert p.returncode == 0 and b"Answer:\nAccording to the notes" in out


# ---- a run stopped mid-answer under --json still prints one object with what came -------------

def wait_until_idle(pid: int, timeout: float = 20, looks: int = 4, every: float = 0.05) -> None:
    """Wait until the process sleeps and uses no CPU over `looks` looks `every` seconds apart (Linux):
    it has read all there was to read, and waits for more."""
    deadline = time.monotonic() + timeout
    seen: list[tuple] = []
    while len(seen) < looks or len(set(seen[-looks:])) > 1 or seen[-1][0] != "S":
        if time.monotonic() > deadline:
            raise TimeoutError(f"process {pid} never went idle: {seen[-looks:]}")
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        seen.append((fields[0], fields[11], fields[12]))     # state, utime, stime
        time.sleep(every)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_sigterm_mid_answer_under_json_prints_one_object_with_what_came(tmp_path, notes, spawn):
    with FakeOllama() as s:
        release = s.hold("/api/chat")                     # all but the answer's last part is sent
        p = spawn(["What is asyncio?", "--notes", notes, "--cache", tmp_path / "c", "--json"], host=s.url)
        try:
            s.wait_for(lambda: any(r["held"] for r in s.records("/api/chat")))
            wait_until_idle(p.pid)                        # it has read the parts that came
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=30)
        finally:
            release.set()
        (record,) = s.records("/api/chat")
    assert p.returncode == rag.EXIT_INTERRUPTED and b"Traceback" not in err, err
    data = json.loads(out)                                # one object, the whole of stdout
    assert data["status"] == "interrupted" and "interrupted mid-answer" in data["error"]
    assert data["answer"] == record["reply"] and data["tokens"] == {}   # all the text; not the last part
    assert data["sources"][0]["source"] == "python-asyncio.md"


def test_an_interrupt_mid_answer_carries_the_outcome_so_far(server, tmp_path):
    import ollama
    s = rag.Settings(notes_dir=rag.NOTES_DIR, cache_dir=tmp_path / "cache")
    client = ollama.Client(host=server.url)
    index, _ = rag.open_index(s, client)
    came = []

    def interrupt_after_two(piece):
        came.append(piece)
        if len(came) == 2:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt) as caught:
        rag.answer(client, index, QUESTION, s, on_token=interrupt_after_two)
    o = caught.value.outcome
    assert o.status == rag.INTERRUPTED and o.text == "".join(came) and o.retrieval.hits
    assert o.conversation == rag.Conversation()           # an answer cut short is not remembered


def test_the_answer_s_line_ends_before_what_stderr_says_after_it_in_one_pipe(server, notes, tmp_path):
    # `2>&1 | less`: the answer's last line must be ended on stdout before the check's line on stderr.
    out = subprocess.run([*SCRIPT_COMMAND, "What is asyncio?", "--notes", str(notes),
                          "--cache", str(tmp_path / "c")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         env=user_env(server.url), timeout=60)
    text = out.stdout.decode()
    assert out.returncode == 0 and "\nchecked: " in text and "]checked:" not in text, text
