"""What real folders and users throw at the script (odd files, odd names,
old encodings, bad flags, a broken environment). Each case as a user meets it: the
script as a subprocess, in a temporary folder, against the stand-in Ollama server."""
from __future__ import annotations

import json
import math
import os
import re
import socket
import subprocess
import threading
import unicodedata
from pathlib import Path

import pytest

import demo_rag as rag
from conftest import SCRIPT_COMMAND, read_cache, run_cli, run_cli_audited, user_env, write_cache
from ollama_server import FakeOllama

NOTE = "# Kites\n\nA kite needs steady wind and a long string; launch it with your back to the wind.\n"


def folder_with(tmp_path, **files) -> os.PathLike:
    """A notes folder holding one ordinary note plus `files` (name -> text or bytes)."""
    folder = tmp_path / "n"
    folder.mkdir()
    (folder / "kites.md").write_text(NOTE)
    for name, data in files.items():
        (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    return folder


# ---- FIFOs and devices named like notes -----------------------------------------

def test_a_fifo_or_device_named_like_a_note_is_skipped_not_waited_on(cli, tmp_path):
    folder = folder_with(tmp_path)
    os.mkfifo(folder / "note.md")
    os.symlink("/dev/zero", folder / "zero.md")
    out = cli("kite wind", "--notes", folder, "--retrieve-only", timeout=30)
    assert out.returncode == 0, out.stderr
    assert "skipped note.md: not a regular file" in out.stderr
    assert "skipped 1 symlink(s) to outside the notes folder (zero.md)" in out.stderr
    assert "[1] kites.md" in out.stdout
    os.mkfifo(tmp_path / "pipe")
    os.symlink(tmp_path / "pipe", folder / "outside-pipe.md")
    out = cli("kite wind", "--notes", folder, "--retrieve-only", "--follow-links", timeout=30)
    assert out.returncode == 0, out.stderr
    assert "skipped outside-pipe.md: not a regular file" in out.stderr and "[1] kites.md" in out.stdout
    assert "(zero.md): links to / or to a system folder are never followed" in out.stderr


def test_folders_nested_deeper_than_python_can_recurse_are_skipped_and_said(cli, tmp_path):
    folder = folder_with(tmp_path)
    levels = [os.open(folder, os.O_RDONLY)]   # made a level at a time: os.makedirs recurses too
    try:
        for _ in range(1_100):
            os.mkdir("d", dir_fd=levels[-1])
            levels.append(os.open("d", os.O_RDONLY, dir_fd=levels[-1]))
        out = cli("kite wind", "--notes", folder, "--retrieve-only", timeout=120)
        assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
        assert f"more than {rag.FOLDER_DEPTH} folders deep" in out.stderr and "[1] kites.md" in out.stdout
    finally:                              # taken down a level at a time: pytest's rmtree recurses
        for parent in reversed(levels[:-1]):
            os.close(levels.pop())
            os.rmdir("d", dir_fd=parent)
        os.close(levels.pop())


def test_the_walk_opens_each_folder_once_in_the_one_above_it_and_holds_one_a_level(tmp_path, monkeypatch):
    # Each folder opened from / a name at a time, a chain 40 deep costs about 40 * 40 / 2 opens.
    folder = folder_with(tmp_path)
    (deep := folder.joinpath(*["d"] * 40)).mkdir(parents=True)
    (deep / "deep.md").write_text(NOTE)
    for i in range(100):                  # siblings: what is held open stays one a level, not one each
        (folder / f"s{i:03d}").mkdir()
    opened, held, real_open = [], [], os.open

    def counted(path, *args, **kw):
        opened.append(path)
        return real_open(path, *args, **kw)
    monkeypatch.setattr(os, "open", counted)
    fds = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"     # Linux, macOS
    before = len(os.listdir(fds))
    for _ in rag.walk_folders(str(folder), said := []):
        held.append(len(os.listdir(fds)) - before)
    top = len(Path(os.path.realpath(folder)).parts)   # "/" and each name down to the notes folder
    assert not said and len(held) == 1 + 100 + 40 and len(opened) == top + 100 + 40, (said, opened)
    assert max(held) <= 40 + 1, held


# ---- file names that are not UTF-8 ----------------------------------------------

def test_a_file_name_that_is_not_utf8_is_indexed_cited_and_printed(cli, tmp_path):
    folder = folder_with(tmp_path)
    name = os.fsdecode(b"caf\xe9.md")               # Latin-1 bytes, as old disks hold them
    (folder / name).write_text("# Café\n\nEspresso wants a fine grind and 25 seconds of extraction.\n")
    for _ in range(2):                              # the first run indexes, the second loads the cache
        out = cli("espresso grind", "--notes", folder, "--retrieve-only")
        assert out.returncode == 0, out.stderr
        assert "[1] caf\\xe9.md" in out.stdout and "Traceback" not in out.stderr
    out = cli("espresso grind", "--notes", folder, "--json")
    assert out.returncode == 0, out.stderr
    assert '"source": "caf\\\\xe9.md"' in out.stdout


def test_a_notes_folder_whose_name_is_not_utf8(cli, tmp_path):
    folder = tmp_path / os.fsdecode(b"notizen-\xfc")
    folder.mkdir()
    (folder / "kites.md").write_text(NOTE)
    out = cli("kite wind", "--notes", folder, "--retrieve-only")
    assert out.returncode == 0, out.stderr
    assert "[1] kites.md" in out.stdout


def test_readable_name():
    assert rag.readable_name("café.md") == rag.readable_name(nfd("café.md")) == "café.md"
    assert rag.readable_name(nfd("café.md"), composed=False) == nfd("café.md")
    assert rag.readable_name(os.fsdecode(b"sub/caf\xe9.md")) == "sub/caf\\xe9.md"


# ---- the same letters written two ways (Unicode forms) ------------------------------

def nfd(text: str) -> str:
    """Accents as separate marks ("u" + "¨"), as macOS file names, zip archives and some editors write them."""
    return unicodedata.normalize("NFD", text)


def bm25_of(out, name: str) -> float:
    """The BM25 score --retrieve-only printed for the source `name`."""
    return float(re.search(rf"\] {re.escape(name)}:\d+ ›[^\n]*· bm25 ([\d.]+)\)", out.stdout).group(1))


def test_decomposed_accents_and_full_width_letters_are_found_by_their_words_and_names(cli, tmp_path):
    folder = folder_with(tmp_path, **{nfd("café-notes.md"): nfd("# Café\n\nMüller and Schäfer roast beans on Tuesdays.\n"),
                                      "预算.md": "# 预算\n\n用ＲＡＧ检索家庭预算的笔记：每月第１２天结账，房租、水电和伙食各记一行，月底再对一次账。\n"})
    for question in ["Müller Schäfer", nfd("Müller Schäfer")]:     # typed, or pasted from a decomposed name
        out = cli(question, "--notes", folder, "--retrieve-only")
        assert out.returncode == 0, out.stderr
        assert bm25_of(out, "café-notes.md") > 0, out.stdout             # its name is shown composed, too
    out = cli("RAG 12", "--notes", folder, "--retrieve-only")
    assert bm25_of(out, "预算.md") > 0, out.stdout                        # "ＲＡＧ", "１２" in the note
    for pattern in ["café", nfd("café*")]:
        out = cli("beans", "--notes", folder, "--source", pattern, "--json", "--retrieve-only")
        assert out.returncode == 0, out.stderr
        assert {s["source"] for s in json.loads(out.stdout)["sources"]} == {"café-notes.md"}


def test_two_names_that_differ_only_in_how_accents_are_written_stay_two_notes(cli, tmp_path):
    folder = folder_with(tmp_path, **{"café.md": "# Espresso\n\nEspresso wants a fine grind, 25 seconds.\n",
                                      nfd("café.md"): "# Filter\n\nFilter coffee wants a coarse grind, 4 minutes.\n"})
    out = cli("grind", "--notes", folder, "--retrieve-only")
    assert "indexed 3 notes: 0 changed, 3 new" in out.stderr, out.stderr
    out = cli("grind", "--notes", folder, "--json", "--retrieve-only")
    assert out.returncode == 0, out.stderr
    assert {s["source"] for s in json.loads(out.stdout)["sources"]} >= {"café.md", nfd("café.md")}


# ---- a note skipped once is looked at again -------------------------------------

BIG = "# Big\n\n" + "Glaciers move slowly downhill under their own weight. " * 60   # ~3.3 KB


def test_a_note_skipped_for_size_comes_back_when_the_limit_is_raised(cli, tmp_path):
    folder = folder_with(tmp_path, **{"big.md": BIG})
    for _ in range(2):                              # every run says so, not just the first
        out = cli("glaciers", "--notes", folder, "--retrieve-only", "--max-note-mb", "0.002")
        assert out.returncode == 0, out.stderr
        assert "skipped big.md" in out.stderr and "0.002 MB limit" in out.stderr
        assert "big.md" not in out.stdout
    out = cli("glaciers", "--notes", folder, "--retrieve-only", "--max-note-mb", "50")
    assert out.returncode == 0, out.stderr
    assert "skipped" not in out.stderr and "[1] big.md" in out.stdout
    out = cli("glaciers", "--notes", folder, "--retrieve-only", "--max-note-mb", "50")
    assert "(0 chunks embedded)" in out.stderr
    assert "[1] big.md" in out.stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_a_note_skipped_for_permissions_comes_back_when_they_are_fixed(cli, tmp_path):
    folder = folder_with(tmp_path, **{"big.md": BIG})
    (folder / "big.md").chmod(0)
    out = cli("glaciers", "--notes", folder, "--retrieve-only")
    assert "skipped big.md: Permission denied" in out.stderr
    (folder / "big.md").chmod(0o644)
    out = cli("glaciers", "--notes", folder, "--retrieve-only")
    assert out.returncode == 0 and "[1] big.md" in out.stdout


def test_a_skipped_note_that_stays_unusable_keeps_the_fast_path(server, tmp_path):
    folder = folder_with(tmp_path, **{"binary.md": bytes(range(256)) * 4})
    s = rag.Settings(notes_dir=folder, cache_dir=tmp_path / "cache")
    rag.open_index(s)
    (cache,) = s.cache_dir.glob("*.pkl")
    written = cache.stat().st_ino
    index, report = rag.open_index(s)
    assert report.unchanged == 1 and any("skipped binary.md: looks binary" in w for w in report.warnings)
    assert report.skipped["binary.md"].why == "looks binary, not text"          # by name, for a script
    assert cache.stat().st_ino == written             # loaded as it was: not updated, not saved again


def test_a_short_note_that_says_something_is_a_note_a_title_alone_is_not(cli, tmp_path):
    folder = folder_with(tmp_path, **{"wifi.md": "# Cabin\n\nWifi: 7hG!2kq9\n", "乌龙.md": "# 乌龙\n\n水温九十五度。\n",
                                      "2024-05-09.md": "# Daily note, 9 May 2024\n\n## Done\n\n", "todo.md": "- [ ] milk\n",
                                      "lease.md": "# Landlord: deposit 2400 EUR, due 1 June, call Mr Weber\n",
                                      "租房.md": "# 房东：押金两千四百欧元，六月一日前交\n",
                                      "blank.md": " \n" * 130})
    out = cli("cabin wifi", "--notes", folder, "--retrieve-only", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["skipped"] == {"2024-05-09.md": rag.STUB, "todo.md": rag.STUB, "blank.md": rag.STUB}, \
        result["skipped"]                 # a long heading alone says something: lease.md and 租房.md are notes
    assert result["sources"][0]["source"] == "wifi.md" and "7hG!2kq9" in result["sources"][0]["text"]
    out = cli("乌龙 水温", "--notes", folder, "--retrieve-only", "--json")
    assert json.loads(out.stdout)["sources"][0]["source"] == "乌龙.md"


def test_many_skipped_stubs_cost_one_line_and_are_not_read_again_until_they_change(server, tmp_path):
    folder = folder_with(tmp_path, **{f"2024-05-{day:02d}.md": f"# May {day}\n" for day in range(1, 31)})
    log, cache = tmp_path / "opened.log", tmp_path / "cache"

    def run(*extra):
        log.unlink(missing_ok=True)
        out = run_cli_audited("kites", "--notes", folder, "--cache", cache, "--retrieve-only", *extra,
                              host=server.url, under=folder, log=log)
        assert out.returncode == 0, out.stderr
        return out, [p for p in (log.read_text().splitlines() if log.exists() else []) if "2024-05-" in p]
    summary = "skipped 30 notes: 30 under 50 characters (12 besides headings); --json or --explain names them"
    out, _ = run()
    assert out.stderr.count("skipped") == 1 and f"warning: {summary}\n" in out.stderr
    assert "[1] kites.md" in out.stdout
    out, opened = run()                                   # a warm run: not one stub read again
    assert opened == [] and out.stderr.count("skipped") == 1 and summary in out.stderr
    (folder / "kites.md").write_text(NOTE + "Fly it on an open field.\n")
    out, opened = run()                                   # an update: the stubs are still known
    assert opened == [] and summary in out.stderr and "1 changed" in out.stderr
    out, _ = run("--json")
    assert json.loads(out.stdout)["warnings"] == [summary]
    assert json.loads(out.stdout)["skipped"]["2024-05-09.md"] == "under 50 characters (12 besides headings)"       # named for scripts
    explained = run_cli("--explain", "kites", "--notes", folder, "--cache", cache, "--retrieve-only", host=server.url)
    assert "skipped 2024-05-09.md: under 50 characters (12 besides headings)" in explained.stdout                  # and for people
    (folder / "2024-05-07.md").write_text("# May 7\n\nFlew the red kite over the dunes; the wind held all afternoon.\n")
    out, opened = run()                                   # a stub that changed is read, and is a note now
    assert set(opened) == {str(folder / "2024-05-07.md")} and "1 new" in out.stderr
    assert "skipped 29 notes: 29 under 50 characters (12 besides headings)" in out.stderr


def test_a_cache_of_the_previous_format_is_upgraded_without_re_embedding(cli, server, tmp_path):
    folder = folder_with(tmp_path, **{"binary.md": bytes(range(256)) * 4})
    assert cli("kites", "--notes", folder, "--retrieve-only").returncode == 0
    (path,) = cli.cache.glob("*.pkl")
    d, vectors = read_cache(path)                        # rewritten as the previous version wrote it, where
    legacy = rag.older_cache_paths(path)[0]              # it wrote it: the same name without ".v<format>"
    for key in ("notes_dir", "names", "model_digest"):
        del d[key]
    d.update(format=5, skipped={"binary.md": "looks binary, not text"},
             files={rel: (r.size, r.mtime_ns, r.digest, r.start, r.stop)
                    for rel, r in rag.load_index(path)[0].files.items()})
    write_cache(legacy, d, vectors, header_keys=())
    path.unlink()
    before = legacy.read_bytes()
    embedded = len(server.of("/api/embed"))
    out = cli("kites", "--notes", folder, "--retrieve-only")
    assert out.returncode == 0, out.stderr
    assert "updating index: cache written by an older demo_rag (format 5): its vectors are kept" in out.stderr
    assert "(0 chunks embedded)" in out.stderr and "skipped binary.md: looks binary" in out.stderr
    assert len(server.of("/api/embed")) == embedded + 1  # the question, no more
    assert "format 5" not in cli("kites", "--notes", folder, "--retrieve-only").stderr
    assert legacy.read_bytes() == before and path.exists()    # the previous version keeps its own


# ---- encodings people's editors write -------------------------------------------

GERMAN = "# Bäckerei\n\nMüller backt Brötchen in jeder Größe, für Frühstück und Abendbrot.\n"
CHINESE = "# 旧笔记\n\n这是一篇用 GBK 编码保存的旧笔记，讲的是如何冲泡乌龙茶和保存茶叶。乌龙茶要用沸水，每泡十几秒出汤。\n"


@pytest.mark.parametrize("data, text, guessed", [
    (GERMAN.encode("utf-8"), GERMAN, None),
    (b"\xef\xbb\xbf" + GERMAN.encode("utf-8"), GERMAN, None),          # UTF-8 with BOM (Notepad)
    (GERMAN.encode("utf-16"), GERMAN, None),                             # UTF-16 with BOM (PowerShell >)
    (b"\xfe\xff" + GERMAN.encode("utf-16-be"), GERMAN, None),
    (GERMAN.encode("cp1252"), GERMAN, "Windows-1252"),                   # also decodes as GB18030: "M黮ler"
    ("“Smart quotes” – Word’s favourite.".encode("cp1252"), "“Smart quotes” – Word’s favourite.", "Windows-1252"),
    ("À côté de l'église, où l'on dîne.".encode("latin-1"), "À côté de l'église, où l'on dîne.", "Windows-1252"),
    (CHINESE.encode("gb18030"), CHINESE, "GB18030"),
    ("繁體中文筆記，講的是烏龍茶。".encode("gbk"), "繁體中文筆記，講的是烏龍茶。", "GB18030"),
])
def test_decode_note_chooses_the_encoding_by_evidence(data, text, guessed):
    got, warning = rag.decode_note(data)
    assert got.lstrip("\ufeff") == text
    assert (warning is None) if guessed is None else (guessed in warning)


@pytest.mark.parametrize("data", [b"\x00\x01\x02binary" * 20, b"\x81\x30\xff\xfe" * 40])
def test_decode_note_refuses_what_is_not_text(data):
    with pytest.raises(ValueError):
        rag.decode_note(data)


def test_old_encodings_are_indexed_and_the_guess_is_said_on_every_run(cli, tmp_path):
    folder = folder_with(tmp_path, **{"baecker.md": GERMAN.encode("cp1252"),
                                      "notepad.txt": ("# Notepad\n\n" + GERMAN).encode("utf-16"),
                                      "tee.md": CHINESE.encode("gb18030")})
    for _ in range(3):
        out = cli("Größe Brötchen", "--notes", folder, "--retrieve-only")
        assert out.returncode == 0, out.stderr
        assert "baecker.md: not UTF-8; read as Windows-1252" in out.stderr
        assert "tee.md: not UTF-8; read as GB18030" in out.stderr
        assert not [w for w in out.stderr.splitlines() if w.startswith("warning") and "notepad.txt" in w]  # a BOM is no guess
        # the preview shows where the question's words are, decoded right (not "M黮ller")
        assert "backt Brötchen in jeder Größe" in out.stdout and "黮" not in out.stdout
        assert {"baecker.md", "notepad.txt"} <= {line.split()[1].split(":")[0] for line in out.stdout.splitlines()
                                                 if line.strip().startswith("[")}
        (folder / "kites.md").write_text(NOTE + "Edited.\n")   # the next run updates, reusing the others


def test_many_notes_with_one_warning_get_one_line_on_every_run(cli, tmp_path):
    folder = folder_with(tmp_path, **{f"2025-03-{d:02}.md": (GERMAN + f"Tag {d}.\n").encode("cp1252")
                                      for d in range(1, 31)}, **{"tee.md": CHINESE.encode("gb18030")})
    for _ in range(3):                    # built, unchanged, then updated
        out = cli("Größe Brötchen", "--notes", folder, "--retrieve-only")
        assert out.returncode == 0, out.stderr
        said = [w for w in out.stderr.splitlines() if w.startswith("warning")]
        assert said == ["warning: 30 notes: not UTF-8; read as Windows-1252 (a guess: save it as UTF-8 to be sure) "
                        "(2025-03-01.md, 2025-03-02.md, 2025-03-03.md, … 27 more)",
                        "warning: tee.md: not UTF-8; read as GB18030 (a guess: save it as UTF-8 to be sure)"], said
        (folder / "kites.md").write_text(NOTE + "Edited.\n")


# ---- bad flags and a broken environment -----------------------------------------

@pytest.mark.parametrize("flag, value", [("--min-score", "nan"), ("--min-score", "inf"), ("--min-score", "-5"),
                                         ("--min-score", "1e308"), ("--min-score", "2.5"), ("--max-note-mb", "nan"),
                                         ("--max-note-mb", "inf"), ("--max-note-mb", "-1"), ("--max-note-mb", "0"),
                                         ("--timeout", "0"), ("--timeout", "nan"), ("--checkpoint-seconds", "nan"),
                                         ("--checkpoint-seconds", "-1"), ("--progress-seconds", "nan"),
                                         ("--progress-seconds", "inf")])
def test_meaningless_numbers_are_usage_errors(cli, flag, value):
    out = cli("q", flag, value)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert flag in out.stderr.splitlines()[-1]


def test_min_score_takes_0_to_2_as_its_help_says(cli, tmp_path):
    folder = folder_with(tmp_path)
    for value, floor in (("0", 0.0), ("2", 2.0), ("-0", 0.0)):
        out = cli("kite wind", "--notes", folder, "--min-score", value, "--json", "--retrieve-only")
        assert out.returncode == 0, out.stderr
        said = json.loads(out.stdout)["floor"]
        assert said == {"value": floor, "source": "--min-score"} and math.copysign(1, said["value"]) == 1
    out = cli("kite wind", "--notes", folder, "--min-score", "1e308", "--retrieve-only")
    assert out.returncode == 2
    assert out.stderr.splitlines()[-1] == ("demo_rag.py: error: argument --min-score: expected a number from 0 "
                                           "to 2, like 0.4, not '1e308'")


@pytest.mark.parametrize("limit, parameters", [(-5, ""), (0, ""), ("8192", ""), (True, ""), (10**30, ""),
                                               (None, "num_ctx 0"), (None, "num_ctx " + "9" * 5000)])
def test_a_context_length_that_is_no_size_gives_no_advice(tmp_path, limit, parameters):
    folder = folder_with(tmp_path)
    with FakeOllama(context_limits={"qwen3-embedding:0.6b": limit}) as fake:
        fake.show_parameters = parameters
        out = run_cli("kite wind", "--notes", folder, "--cache", tmp_path / "c", "--retrieve-only", host=fake.url)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "--chunk-size" not in out.stderr, out.stderr
    assert out.stderr.count("did not say qwen3-embedding:0.6b's context length") == 1, out.stderr


def test_a_huge_top_k_is_capped_at_what_a_context_holds(cli, server, tmp_path):
    folder = tmp_path / "n"
    folder.mkdir()
    for i in range(40):                             # 40 notes of 3,000 Chinese characters: 400 chunks
        (folder / f"笔记{i:02d}.md").write_text(f"# 第{i}篇\n\n" + f"风筝需要稳定的风和长线，第{i}篇。" * 200)
    out = cli("风筝", "--notes", folder, "--top-k", "100000", "--chunk-size", "300", "--chunk-overlap", "0",
              "--min-score", "0")
    assert out.returncode == 0, out.stderr
    cap = rag.top_k_limit(300)
    assert f"--top-k 100000 is more sources than fit in a {rag.MAX_NUM_CTX}-token context; using {cap}" in out.stderr
    (request,) = server.of("/api/chat")
    assert request["messages"][1]["content"].count("\n[") == cap     # each source starts a line with [n]
    assert request["options"]["num_ctx"] <= rag.MAX_NUM_CTX


def test_a_question_that_is_not_utf8_is_a_usage_error(cli, notes):
    out = cli(os.fsdecode(b"caf\xe9?"), "--notes", notes)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "not valid UTF-8" in out.stderr


def test_a_chat_line_that_is_not_utf8_does_not_end_the_session(server, notes, tmp_path):
    p = subprocess.run([*SCRIPT_COMMAND, "--chat", "--notes", str(notes), "--cache", str(tmp_path / "c")],
                       input=b"caf\xe9?\nWhat is asyncio?\n/stats\n", capture_output=True, timeout=60,
                       env=user_env(server.url))
    out, err = p.stdout.decode(), p.stderr.decode()
    assert p.returncode == 0, err
    assert "not valid UTF-8" in out and "Traceback" not in err
    assert "[1] python-asyncio.md" in out and "turns kept 1" in out


def test_a_malformed_ollama_host_is_one_line(notes, tmp_path):
    out = run_cli("q", "--notes", notes, "--cache", tmp_path / "c", host="http://localhost:abc")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "OLLAMA_HOST" in out.stderr and "http://localhost:abc" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.fixture
def silent_host():
    """An address that accepts connections and never answers a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held = []

    def accept():
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return
    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()
    for conn in held:
        conn.close()


def test_a_silent_server_is_given_up_on_with_a_clear_message(tmp_path, silent_host):
    folder = folder_with(tmp_path)
    out = run_cli("kite wind", "--notes", folder, "--cache", tmp_path / "c", "--timeout", "1",
                  host=silent_host, timeout=30)
    assert out.returncode == 0, out.stderr            # keyword passages, as when Ollama is down
    assert f"Ollama at {silent_host} did not answer within 1 s" in out.stderr and "--timeout" in out.stderr
    assert "[1] kites.md" in out.stdout and "Traceback" not in out.stderr


def test_a_chat_model_that_falls_silent_mid_answer_times_out(notes, tmp_path):
    with FakeOllama() as server:
        release = server.hold("/api/chat")          # the answer stops before its last part
        try:
            out = run_cli("What is asyncio?", "--notes", notes, "--cache", tmp_path / "c", "--timeout", "1",
                          host=server.url, timeout=15)
        finally:
            release.set()
    assert out.returncode == 3 and "nothing more came within 1 s" in out.stderr
    assert "According to the notes" in out.stdout       # what had arrived is kept


def test_a_source_pattern_that_matches_nothing_says_so(cli, notes):
    out = cli("water", "--notes", notes, "--source", "recipes/*.md")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "no note matches --source 'recipes/*.md'" in out.stderr
    assert "closest sources" not in out.stdout


def test_explain_lists_only_the_notes_source_allows(cli, notes):
    out = cli("--explain", "How often should I water?", "--notes", notes, "--source", "houseplants*")
    assert out.returncode == 0, out.stderr
    step5 = out.stdout.split("STEP 5")[1].split("STEP 6")[0]
    assert "inf" not in step5
    listed = [line.split()[1] for line in step5.splitlines() if re.match(r" +-?\d+\.\d{3}  ", line)]
    assert listed and set(listed) == {"houseplants.txt"}
