"""A notes folder that changes under the script: a note swapped for a link while it is read, a
folder empty for a moment (a drive not mounted, a sync half done), most notes gone at once, a
link to a folder that sorts before the folder itself. Nothing outside the folder is read and
nothing embedded is lost."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

import demo_rag as rag
from conftest import ROOT

SECRET = "the vault door code is 4417"


def cache_files(cache) -> list:
    return sorted(p for p in cache.glob("*.pkl"))


def note_count(notes) -> int:
    return sum(p.suffix in (".md", ".txt") for p in notes.iterdir())


@pytest.fixture
def outside(tmp_path):
    """A file outside the notes folder that no run may read."""
    secret = tmp_path / "outside.md"
    secret.write_text(f"# Secret\n\n{SECRET}, written outside the notes folder.\n")
    return secret


# ---- a note swapped for a link between the scan and the read ------------------------------

def swapped(folder, outside, name="a.md") -> rag.NoteFile:
    """The scan's record of `name`, then `name` replaced by a link to `outside`."""
    (folder / name).write_text("# Coffee\n\nThe coffee ratio is 1:16, brewed at 93 degrees.\n")
    files, _ = rag.scan_notes(folder)
    (folder / name).unlink()
    (folder / name).symlink_to(outside)
    return next(f for f in files if f.rel == name)


def test_a_note_swapped_for_a_link_after_the_scan_is_refused_unread(tmp_path, outside):
    folder = tmp_path / "notes"
    folder.mkdir()
    file = swapped(folder, outside)
    with pytest.raises(ValueError, match="replaced since the folder was listed"):
        rag.read_note(file)
    with pytest.raises(rag.ToolFailed, match="replaced since the folder was listed"):
        rag.note_lines(file, rag.MAX_NOTE_MB)


def test_a_note_swapped_for_a_fifo_is_refused_without_waiting(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nSome text about fermentation and yeast.\n")
    file = next(f for f in rag.scan_notes(folder)[0] if f.rel == "a.md")
    (folder / "a.md").unlink()
    os.mkfifo(folder / "a.md")
    said = []

    def read():
        try:
            rag.read_note(file)
        except ValueError as e:
            said.append(str(e))
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():                                 # blocked in open(): let it go, then fail
        os.close(os.open(folder / "a.md", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO waited for a writer")
    assert said and "replaced" in said[0], said


@contextlib.contextmanager
def writer_waiting(fifo):
    """A writer waiting in open() on `fifo` while the block runs; yields the event its open sets
    (an open for reading lets it go), and lets it go at the end."""
    opened = threading.Event()
    writer = threading.Thread(target=lambda: (os.close(os.open(fifo, os.O_WRONLY)), opened.set()),
                              daemon=True)
    writer.start()
    time.sleep(0.5)                                       # the writer waits in open() by now
    try:
        yield opened
    finally:
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))   # lets the writer go
        writer.join(10)


def test_a_link_swapped_in_for_a_note_is_not_even_opened_through(tmp_path):
    # Opening acts on some files: a FIFO's writer waiting in open() goes on (and learns the note
    # was read), a tape rewinds. A FIFO outside, its writer waiting, stands for them.
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nSome text about fermentation and yeast.\n")
    file = next(f for f in rag.scan_notes(folder)[0] if f.rel == "a.md")
    os.mkfifo(fifo := tmp_path / "pipe")
    (folder / "a.md").unlink()
    (folder / "a.md").symlink_to(fifo)
    with writer_waiting(fifo) as opened:
        with pytest.raises(ValueError, match="replaced since the folder was listed"):
            rag.read_note(file)
        assert not opened.wait(0.5), "the FIFO a swapped-in link points to was opened"


def test_a_folder_swapped_for_a_link_out_after_its_parent_was_listed_is_not_read(
        tmp_path, monkeypatch):
    folder, away = tmp_path / "notes", tmp_path / "private"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "plan.md").write_text("# Plan\n\nThe greenhouse launch is in the spring.\n")
    away.mkdir()
    (away / "diary.md").write_text(f"# Diary\n\n{SECRET}, written outside the notes folder.\n")
    real_realpath = os.path.realpath

    def realpath(path, *args, **kwargs):           # the swap, just before the walk resolves it
        if os.fspath(path) == str(folder / "sub") and not os.path.islink(path):
            os.rename(path, tmp_path / "sub-was")
            os.symlink(away, path)
        return real_realpath(path, *args, **kwargs)
    monkeypatch.setattr(os.path, "realpath", realpath)
    files, warnings = rag.scan_notes(folder)
    assert files == [] and any("symlink(s) to outside the notes folder (sub/)" in w
                               for w in warnings), (files, warnings)


def test_a_folder_that_is_itself_only_while_the_walk_checks_it_shows_no_outside_file(
        tmp_path, monkeypatch):
    """`sub` is a link out but while os.path.islink or realpath looks at it: a walk by path
    lists, and a read by path reads, the outside folder's file."""
    folder, away, kept = tmp_path / "notes", tmp_path / "private", tmp_path / "sub-real"
    for made in (folder, away, kept):
        made.mkdir()
    (kept / "plan.md").write_text("# Plan\n\nThe greenhouse launch is in the spring.\n")
    (away / "diary.md").write_text(f"# Diary\n\n{SECRET}, written outside the notes folder.\n")
    (sub := folder / "sub").symlink_to(away)

    def while_looking(check):
        def look(*args, **kwargs):
            sub.unlink()
            kept.rename(sub)
            try:
                return check(*args, **kwargs)
            finally:
                sub.rename(kept)
                sub.symlink_to(away)
        return look
    for check in ("islink", "realpath"):
        monkeypatch.setattr(os.path, check, while_looking(getattr(os.path, check)))
    files, warnings = rag.scan_notes(folder)
    assert [f.rel for f in files if "diary" in f.rel] == [], (files, warnings)
    for file in files:
        with contextlib.suppress(ValueError):
            assert SECRET not in rag.read_note(file)[0][0].text
    assert any("sub" in w for w in warnings), warnings         # said, not passed over silently


def test_a_folder_out_whenever_a_path_through_it_is_used_lends_no_note_its_outside_twin(
        tmp_path, monkeypatch):
    """`sub` is a link out while an lstat or an open goes by a path through it: a scan by path
    records, and a read by path reads, the outside plan.md as the note."""
    folder, away, kept = tmp_path / "notes", tmp_path / "private", tmp_path / "sub-real"
    for made in (folder / "sub", away):
        made.mkdir(parents=True)
    (folder / "sub" / "plan.md").write_text("# Plan\n\nThe greenhouse launch is in the spring.\n")
    (away / "plan.md").write_text(f"# Plan\n\n{SECRET}, written outside the notes folder.\n")
    inode, sub = os.stat(folder / "sub" / "plan.md").st_ino, folder / "sub"

    def out_while(call):
        def through(path, *args, **kwargs):
            if not isinstance(path, str) or not path.startswith(f"{sub}/"):
                return call(path, *args, **kwargs)
            sub.rename(kept)
            sub.symlink_to(away)
            try:
                return call(path, *args, **kwargs)
            finally:
                sub.unlink()
                kept.rename(sub)
        return through
    for call in ("lstat", "open"):
        monkeypatch.setattr(os, call, out_while(getattr(os, call)))
    files, warnings = rag.scan_notes(folder)
    assert [(f.rel, f.ino) for f in files] == [("sub/plan.md", inode)], (files, warnings)
    with pytest.raises(ValueError, match="replaced since the folder was listed"):
        rag.read_note(files[0])


def test_a_link_to_a_fifo_inside_the_folder_is_named_by_the_scan_unopened(tmp_path):
    folder = tmp_path / "notes"
    (folder / ".pipes").mkdir(parents=True)
    os.mkfifo(fifo := folder / ".pipes" / "pipe")
    (folder / "pipe.md").symlink_to(fifo)
    with writer_waiting(fifo) as opened:
        files, warnings = rag.scan_notes(folder)
        assert files == [] and "skipped pipe.md: not a regular file" in warnings, warnings
        assert not opened.wait(0.5), "the scan opened the FIFO a link inside the folder leads to"


def test_a_pdf_swapped_for_a_link_is_refused_before_its_reader_sees_it(tmp_path, outside):
    pytest.importorskip("pypdf")
    from pdfs import make_pdf
    folder = tmp_path / "notes"
    folder.mkdir()
    make_pdf(folder / "a.pdf", [["The coffee ratio is 1:16, brewed at 93 degrees."]])
    file = next(f for f in rag.scan_notes(folder)[0] if f.rel == "a.pdf")
    make_pdf(outside.with_suffix(".pdf"), [[SECRET]])
    (folder / "a.pdf").unlink()
    (folder / "a.pdf").symlink_to(outside.with_suffix(".pdf"))
    with pytest.raises(ValueError, match="replaced"):
        rag.read_note(file)


def test_an_index_update_never_reads_what_a_swapped_note_points_to(tmp_path, outside, server):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "b.md").write_text("# Tea\n\nGreen tea steeps at 80 degrees for two minutes.\n")
    file = swapped(folder, outside)
    files = [file, *(f for f in rag.scan_notes(folder)[0] if f.rel == "b.md")]
    settings = rag.Settings(notes_dir=folder, cache_dir=tmp_path / "cache")
    index, report = rag.update_index(settings, rag.ollama_client(), None, files)
    assert not any(SECRET in c.text for c in index.chunks)
    assert not any(SECRET in t for t in server.embedded_texts())
    assert [c.source for c in index.chunks] == ["b.md"]
    assert any("a.md" in w and "replaced" in w for w in report.warnings), report.warnings


# A process that swaps each note for a link to `outside` and back as fast as it can, for
# `seconds`: one system call a swap, Linux's renameat2(RENAME_EXCHANGE) of the note and a link
# beside it, so the note's name is never missing, and each swap back brings the same file.
SWAPPER = """
import ctypes, os, sys, time
rename2 = ctypes.CDLL(None, use_errno=True).renameat2
folder, outside, end, names = sys.argv[1], sys.argv[2], time.time() + float(sys.argv[3]), sys.argv[4:]
pairs = [(os.fsencode(os.path.join(folder, n)), os.fsencode(os.path.join(folder, ".link-" + n)))
         for n in names]
for _, link in pairs:
    os.symlink(outside, link)
print("swapping", flush=True)
while time.time() < end:
    for note, link in pairs * 100:
        if rename2(-100, note, -100, link, 2):   # AT_FDCWD, RENAME_EXCHANGE
            sys.exit(os.strerror(ctypes.get_errno()))
"""
RACING = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")


@contextlib.contextmanager
def swapping(folder, outside, names, seconds):
    """SWAPPER running on `names` in `folder` while the block runs (it stops by itself)."""
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(folder), str(outside),
                                str(seconds), *names], stdout=subprocess.PIPE, text=True)
    try:
        assert swapper.stdout.readline() == "swapping\n"
        yield
    finally:
        swapper.kill()
        swapper.wait()


def racing_folder(tmp_path, n: int) -> tuple:
    folder = tmp_path / "notes"
    folder.mkdir()
    names = [f"orchids-{i}.md" for i in range(n)]
    for name in names:
        (folder / name).write_text(f"# Orchids\n\nWater the orchids ({name}) once a week, "
                                   "from below, and never let them stand in water.\n")
    return folder, names


@RACING
def test_a_note_swapped_for_a_link_and_back_during_the_scan_never_lends_its_identity(
        tmp_path, outside):
    folder, names = racing_folder(tmp_path, 5)
    secret, scans = os.stat(outside), 0
    with swapping(folder, outside, names, 5):
        end = time.monotonic() + 3
        while time.monotonic() < end:
            files, _ = rag.scan_notes(folder)
            scans += 1
            # what a later read compares the file it opens with (note_bytes)
            assert not [f.rel for f in files if (f.dev, f.ino) == (secret.st_dev, secret.st_ino)]
    assert scans > 100


@RACING
def test_the_command_line_never_answers_from_a_file_a_note_was_swapped_for(cli, tmp_path,
                                                                         outside):
    folder, names = racing_folder(tmp_path, 3)
    runs = 0
    with swapping(folder, outside, names, 30):
        end = time.monotonic() + 10
        while time.monotonic() < end and runs < 40:
            out = cli("--notes", folder, "--retrieve-only", "--json", "vault door code")
            runs += 1
            assert SECRET not in out.stdout + out.stderr, f"run {runs}"
    assert runs >= 2


@RACING
def test_mcp_tools_never_give_a_file_a_note_was_swapped_for(server, tmp_path, outside):
    from test_mcp import Mcp
    folder, names = racing_folder(tmp_path, 5)
    m = Mcp(["--notes", folder, "--cache", tmp_path / "cache"], server.url)
    # every refresh in the race warns of the notes it skipped: read them as a client's log does,
    # or the server blocks on a full stderr pipe
    threading.Thread(target=lambda: all(iter(lambda: m.p.stderr.read1(65536), b"")),
                     daemon=True).start()
    calls = 0
    try:
        m.initialize()
        with swapping(folder, outside, names, 30):
            end = time.monotonic() + 8
            while time.monotonic() < end:
                calls += 1
                for r in (m.call("search_notes", query="vault door code"),
                          m.call("read_note", path=names[calls % len(names)])):
                    assert SECRET not in json.dumps(r), f"call {calls}"
    finally:
        m.close()
    assert calls >= 10


def test_a_note_that_flips_between_a_file_and_a_link_at_every_look_never_lends_its_identity(
        tmp_path, outside, monkeypatch):
    # The race above, made certain: the note is a link to `outside` when the scan first looks,
    # and after each lstat of it (islink and realpath look by lstat too) it really flips.
    folder = tmp_path / "notes"
    folder.mkdir()
    note, keep = folder / "orchids.md", folder / ".keep"
    keep.write_text("# Orchids\n\nWater the orchids once a week, from below, never standing.\n")
    note.symlink_to(outside)
    real_lstat, secret = os.lstat, os.stat(outside)

    def flip():
        tmp = folder / ".tmp"
        if os.path.islink(note):
            os.link(keep, tmp)
        else:
            tmp.symlink_to(outside)
        os.replace(tmp, note)

    def lstat(path, *args, **kw):
        st = real_lstat(path, *args, **kw)
        if os.fspath(path) == str(note):
            monkeypatch.setattr(os, "lstat", real_lstat)          # flip() looks too
            flip()
            monkeypatch.setattr(os, "lstat", lstat)
        return st
    monkeypatch.setattr(os, "lstat", lstat)
    for _ in range(4):                    # the scan starting on either side of a flip
        files, _ = rag.scan_notes(folder)
        assert (secret.st_dev, secret.st_ino) not in [(f.dev, f.ino) for f in files]
        for f in files:
            with contextlib.suppress(ValueError):
                assert SECRET not in rag.read_note(f)[0][0].text


# ---- a folder empty for a moment, or most of it gone -------------------------------------

def test_an_empty_folder_keeps_its_cache_and_notes_that_come_back_are_not_embedded_again(
        cli, server, notes, tmp_path):
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    [cache] = cache_files(cli.cache)
    size, away, n = cache.stat().st_size, tmp_path / "away", note_count(notes)
    shutil.move(notes, away)
    notes.mkdir()                                         # the mount point, the drive not there yet
    for args in (["coffee ratio"], ["coffee ratio", "--json"]):
        out = cli("--notes", notes, "--retrieve-only", *args)
        assert out.returncode == rag.EXIT_USAGE and "Traceback" not in out.stderr
        said = out.stdout + out.stderr
        assert f"cache of {n} notes is kept as it was" in said, said
        assert cache_files(cli.cache) == [cache] and cache.stat().st_size == size
    notes.rmdir()
    shutil.copytree(away, notes)                          # back, as new files with new times
    embedded = len(server.embedded_texts())
    out = cli("--notes", notes, "--retrieve-only", "coffee ratio", "--json")
    assert out.returncode == 0, out.stderr
    assert len(server.embedded_texts()) - embedded == 1   # the question, no chunk
    assert json.loads(out.stdout)["sources"]


def test_a_folder_that_lost_most_notes_keeps_a_copy_whose_vectors_serve_them_when_back(
        cli, server, notes, tmp_path):
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    away, n = tmp_path / "away", note_count(notes)
    away.mkdir()
    moved = sorted(p for p in notes.iterdir() if p.suffix in (".md", ".txt"))[:6]
    for p in moved:
        shutil.move(p, away / p.name)
    out = cli("--notes", notes, "--retrieve-only", "coffee ratio")
    assert out.returncode == 0, out.stderr
    assert f"6 of the {n} notes the cache held are gone" in out.stderr, out.stderr
    assert len(cache_files(cli.cache)) == 2               # the cache and the copy kept
    for p in moved:
        shutil.copy(away / p.name, notes / p.name)
    embedded = len(server.embedded_texts())
    out = cli("--notes", notes, "--retrieve-only", "coffee ratio")
    assert out.returncode == 0, out.stderr
    assert len(server.embedded_texts()) - embedded == 1   # the question, no chunk
    assert len(cache_files(cli.cache)) == 1               # the copy is not needed any more


def test_a_folder_that_loses_notes_in_steps_keeps_a_copy_once_half_of_them_are_gone(
        cli, server, tmp_path):
    notes, away = tmp_path / "steps", tmp_path / "away"
    notes.mkdir(), away.mkdir()
    for i in range(40):
        (notes / f"n{i:02}.md").write_text(f"# Note {i}\n\nThe note number {i} tells of the "
                                           f"{i}th kite flown on the hill.\n")
    assert cli("--notes", notes, "--retrieve-only", "kite").returncode == 0
    said = []
    for gone in (18, 10, 5, 3):                           # 45% of the notes left, four times
        for p in sorted(notes.iterdir())[:gone]:
            shutil.move(p, away / p.name)
        out = cli("--notes", notes, "--retrieve-only", "kite")
        assert out.returncode == 0, out.stderr
        said.append(out.stderr)
    assert "gone from" not in said[0] and "28 of the 40 notes the cache held are gone" in said[1]
    assert len(cache_files(cli.cache)) == 2               # the copy of all 40, kept at 12
    for p in away.iterdir():
        shutil.move(p, notes / p.name)
    embedded = len(server.embedded_texts())
    assert cli("--notes", notes, "--retrieve-only", "kite").returncode == 0
    assert [t for t in server.embedded_texts()[embedded:] if "Query:" not in t] == []
    assert len(cache_files(cli.cache)) == 1


def test_notes_deleted_a_few_at_a_time_keep_the_copy_till_the_folder_holds_as_many_again(
        cli, notes):
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    for p in sorted(p for p in notes.iterdir() if p.suffix in (".md", ".txt"))[:3]:
        p.unlink()                                        # 3 of 10: meant, or a first step
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    assert len(cache_files(cli.cache)) == 2               # the cache before, in case
    for n in range(3):
        (notes / f"new{n}.md").write_text(f"# New {n}\n\nA new note about bicycle wheel {n}.\n")
        assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
        assert len(cache_files(cli.cache)) == (2 if n < 2 else 1)   # 10 notes again: meant


def test_an_edit_between_steps_of_a_loss_keeps_the_copy_of_the_whole(cli, server, tmp_path):
    notes, away = tmp_path / "steps", tmp_path / "away"
    notes.mkdir(), away.mkdir()
    for i in range(40):
        (notes / f"n{i:02}.md").write_text(f"# Note {i}\n\nNote {i} tells of kite {i}.\n")
    assert cli("--notes", notes, "--retrieve-only", "kite").returncode == 0
    for step in range(2):
        for p in sorted(notes.iterdir())[:15]:            # 15 of 40 away, then 15 more
            shutil.move(p, away / p.name)
        assert cli("--notes", notes, "--retrieve-only", "kite").returncode == 0
        (notes / "n39.md").write_text(f"# Note 39\n\nNote 39, edited {step}.\n")
        assert cli("--notes", notes, "--retrieve-only", "kite").returncode == 0
    for p in away.iterdir():
        shutil.move(p, notes / p.name)
    embedded = len(server.embedded_texts())
    assert cli("--notes", notes, "--retrieve-only", "kite").returncode == 0
    assert [t for t in server.embedded_texts()[embedded:] if "Query:" not in t] == []


def test_a_rebuild_between_steps_of_a_loss_keeps_the_count_and_the_copy_of_the_whole(cli, notes):
    from conftest import read_cache
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    for p in sorted(p for p in notes.iterdir() if p.suffix in (".md", ".txt"))[:3]:
        p.unlink()                                        # 3 of 10: a first step, perhaps
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    for p in sorted(p for p in notes.iterdir() if p.suffix in (".md", ".txt"))[:1]:
        p.unlink()                                        # a second step, under a rebuild
    assert cli("--notes", notes, "--retrieve-only", "--rebuild", "coffee ratio").returncode == 0
    assert len(cache_files(cli.cache)) == 2               # the copy of the whole is still kept
    [cache] = [c for c in cache_files(cli.cache) if "kept" not in c.name]
    assert read_cache(cache)[0]["whole"] == 10


def test_a_cache_from_before_the_notes_were_counted_whole_loads_and_embeds_nothing(
        cli, server, notes):
    from conftest import read_cache, write_cache
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    [cache] = cache_files(cli.cache)
    d, vectors = read_cache(cache)
    del d["whole"]
    write_cache(cache, d, vectors)
    embedded = len(server.embedded_texts())
    out = cli("--notes", notes, "--retrieve-only", "coffee ratio")
    assert out.returncode == 0 and "cache" not in out.stderr, out.stderr
    assert len(server.embedded_texts()) - embedded == 1   # the question, no chunk


def test_two_runs_keeping_a_copy_at_once_never_delete_or_overwrite_it(server, notes, tmp_path):
    settings = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache")
    rag.open_index(settings)
    old, _ = rag.load_index(rag.cache_path(settings))
    here = set(list(old.files)[:3])                       # 7 of 10 notes gone, as both runs see
    first, second = rag.KeptCopy(rag.cache_path(settings)), rag.KeptCopy(rag.cache_path(settings))
    listed = second.paths()                               # the second lists the copies first...
    assert "is kept as" in first.keep(old, here, notes)
    second.paths = lambda: listed                         # ...and keeps one after the first did
    assert "kept by another run just now" in second.keep(old, here, notes)
    [copy] = first.paths()
    assert rag.load_index(copy)[0].files.keys() == old.files.keys() and second.made is None


def test_a_copy_kept_on_a_disk_without_hard_links_is_whole_or_none_when_interrupted(
        server, notes, tmp_path, monkeypatch):
    settings = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache")
    rag.open_index(settings)
    path = rag.cache_path(settings)
    old, _ = rag.load_index(path)
    here = set(list(old.files)[:3])                       # 7 of 10 notes gone

    def no_links(src, dst):                               # as FAT and exFAT refuse one
        raise PermissionError(1, "Operation not permitted")

    def half_then_ctrl_c(src, dst):                       # Ctrl-C halfway through the copy
        with open(src, "rb") as f, open(dst, "wb") as out:
            out.write(f.read(os.path.getsize(src) // 2))
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "link", no_links)
    monkeypatch.setattr(shutil, "copyfile", half_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        rag.KeptCopy(path).keep(old, here, notes)
    assert cache_files(path.parent) == [path] and not list(path.parent.glob("*.tmp"))
    monkeypatch.undo()
    monkeypatch.setattr(os, "link", no_links)
    copy = rag.KeptCopy(path)
    assert "is kept as" in copy.keep(old, here, notes)
    assert rag.load_index(copy.made)[0].files.keys() == old.files.keys()


def test_a_few_notes_gone_keep_no_copy(cli, notes):
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    (notes / "sourdough.md").unlink()
    out = cli("--notes", notes, "--retrieve-only", "coffee ratio")
    assert out.returncode == 0 and "gone from" not in out.stderr
    assert len(cache_files(cli.cache)) == 1


# ---- a question too long to search ---------------------------------------------------------

LONG = "How do I brew coffee? " * 500                     # 11,000 characters


def test_a_long_question_is_refused_in_one_line_in_the_chat_and_the_chat_goes_on(cli, server, notes):
    out = cli("--notes", notes, "--chat", stdin=f"{LONG}\nWhat is BM25?\n")
    assert out.returncode == 0 and "Traceback" not in out.stderr
    assert "characters long, over the 4,000 searched" in out.stdout + out.stderr
    assert len(server.of("/api/chat")) >= 1               # the next question is answered
    assert not any(LONG.strip() in t for t in server.embedded_texts())


def test_a_long_question_is_refused_by_every_mcp_tool_that_takes_one(server, notes, tmp_path):
    from test_mcp import Mcp
    m = Mcp(["--notes", notes, "--cache", tmp_path / "cache"], server.url, None)
    try:
        m.initialize()
        for tool, key in (("search_notes", "query"), ("ask_notes", "question")):
            reply = m.request("tools/call", {"name": tool, "arguments": {key: LONG}})
            said = json.dumps(reply)
            assert "11,000 characters long" in said and "4,000" in said, reply
            assert reply["result"]["isError"] is True       # a tool error, for the model to read
        assert not server.of("/api/chat")
    finally:
        m.close()


def test_every_eval_question_fits_the_bound():
    questions = [json.loads(line)["question"] for line in
                 (ROOT / "demo-data" / "eval.jsonl").read_text(encoding="utf-8").splitlines() if line]
    assert questions and max(map(len, questions)) < rag.MAX_QUESTION_CHARS / 20


# ---- a link to a folder that sorts before the folder ------------------------------------

def test_a_folder_is_read_under_its_own_name_when_a_link_to_it_sorts_first(cli, tmp_path):
    folder = tmp_path / "notes"
    (folder / "zz-projects").mkdir(parents=True)
    (folder / "zz-projects" / "plan.md").write_text(
        "# Plan\n\nThe launch of the greenhouse project is planned for the spring.\n")
    (folder / "other.md").write_text("# Other\n\nSomething about sourdough starters.\n")
    (folder / "aa-shortcut").symlink_to(folder / "zz-projects")
    (folder / "zz-projects" / "back").symlink_to(folder)
    out = cli("--notes", folder, "--retrieve-only", "greenhouse launch", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["sources"][0]["source"] == "zz-projects/plan.md"
    assert "aa-shortcut" in out.stderr and "loop" not in out.stderr.split("aa-shortcut")[1][:80]
    assert "zz-projects/back" in out.stderr and "loop back" in out.stderr
    out = cli("--notes", folder, "--retrieve-only", "greenhouse launch", "--json",
              "--source", "zz-projects/*")
    assert out.returncode == 0, out.stderr
    assert [s["source"] for s in json.loads(out.stdout)["sources"]] == ["zz-projects/plan.md"]


def test_new_notes_do_not_delete_the_copy_while_the_notes_it_holds_are_away(
        cli, server, notes, tmp_path):
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    away = tmp_path / "away"
    away.mkdir()
    moved = sorted(p for p in notes.iterdir() if p.suffix in (".md", ".txt"))[:6]
    for p in moved:
        shutil.move(p, away / p.name)
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    for i in range(20):                                   # more vectors than the copy holds
        (notes / f"new-{i}.md").write_text(f"# Note {i}\n\nA new note, number {i}, about "
                                           f"the {i}th bicycle repair of the season.\n")
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    assert len(cache_files(cli.cache)) == 2               # its notes are still away
    for p in moved:
        shutil.copy(away / p.name, notes / p.name)
    embedded = len(server.embedded_texts())
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    assert len(server.embedded_texts()) - embedded == 1   # the question, no chunk
    assert len(cache_files(cli.cache)) == 1


@pytest.mark.parametrize("new", [3, 30], ids=["the first copy larger", "the cache larger"])
def test_a_second_loss_keeps_the_notes_added_since_the_first_and_those_still_away(
        cli, server, notes, tmp_path, new):
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    for p in sorted(p for p in notes.iterdir() if p.suffix in (".md", ".txt"))[:6]:
        shutil.move(p, first / p.name)                    # most notes gone: a copy kept
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    for i in range(new):                                  # notes added meanwhile
        (notes / f"new-{i}.md").write_text(f"# Note {i}\n\nA new note, number {i}, about "
                                           f"the {i}th bicycle repair of the season.\n")
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    for p in sorted(notes.iterdir())[:-1]:                # then most of those gone too
        shutil.move(p, second / p.name)
    out = cli("--notes", notes, "--retrieve-only", "coffee ratio")
    assert out.returncode == 0 and "gone from" in out.stderr, out.stderr
    for away in (first, second):
        for p in away.iterdir():
            shutil.copy(p, notes / p.name)
    embedded = len(server.embedded_texts())
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    assert [t for t in server.embedded_texts()[embedded:] if "Query:" not in t] == []   # no chunk
    assert len(cache_files(cli.cache)) == 1               # no copy is needed any more


def unreadable(monkeypatch, paths: set[str]) -> None:
    """Opening these files fails as a note without read permission does (the tests run as root,
    whom chmod does not stop)."""
    real_open = os.open

    def refusing(path, *args, **kw):
        if os.fspath(path) in paths:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, *args, **kw)
    monkeypatch.setattr(os, "open", refusing)


def test_notes_that_cannot_be_read_for_now_keep_a_copy_of_the_cache(server, notes, tmp_path,
                                                                    monkeypatch):
    settings = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache")
    rag.open_index(settings)
    locked = sorted(p for p in notes.iterdir() if p.suffix in (".md", ".txt"))[:7]
    for p in locked:                                      # chmod 000 changes the ctime: read again
        os.utime(p, ns=(p.stat().st_atime_ns, p.stat().st_mtime_ns + 10**9))
    with monkeypatch.context() as m:
        unreadable(m, {str(p) for p in locked})
        index, report = rag.open_index(settings)
    assert len(index.files) == len(list(notes.glob("*.*"))) - 1 - 7   # eval.jsonl is no note
    assert any("cannot be read now" in w and "kept as" in w for w in report.warnings), \
        report.warnings
    embedded = len(server.embedded_texts())
    index, report = rag.open_index(settings)              # readable again
    assert len(server.embedded_texts()) == embedded and report.embedded == 0
    assert len(cache_files(settings.cache_dir)) == 1


@pytest.mark.parametrize("readers", ["these", "older"])
def test_notes_in_a_folder_that_cannot_be_reached_for_now_are_kept_as_they_were(
        server, notes, tmp_path, monkeypatch, readers):
    sub = notes / "sub"
    sub.mkdir()
    for i in range(3):
        (sub / f"n{i}.md").write_text(f"# Sub {i}\n\nA note about bicycle repair number {i}.\n")
    settings = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache")
    built = rag.open_index(settings)[0]
    held = len(built.files)
    if readers == "older":                                # its notes to be read again, but these cannot be
        rag.save_index(dataclasses.replace(built, reader=rag.READER_VERSION - 1), rag.cache_path(settings))
    real_scandir, real_stat, real_open, gone = os.scandir, os.stat, os.open, os.stat(sub)

    def refused(path):                                    # as a folder without r and x does
        return PermissionError(13, "Permission denied", str(path))

    def scandir(path="."):                                # by path, or open (a walk by descriptor)
        if os.path.samestat(os.fstat(path), gone) if isinstance(path, int) else \
                os.fspath(path).rstrip("/") == str(sub):
            raise refused(path)
        return real_scandir(path)

    def stat(path, *args, **kw):
        if os.fspath(path).startswith(str(sub) + os.sep):
            raise refused(path)
        return real_stat(path, *args, **kw)

    def open_(path, *args, **kw):
        if os.fspath(path).startswith(str(sub) + os.sep):
            raise refused(path)
        return real_open(path, *args, **kw)
    with monkeypatch.context() as m:
        m.setattr(os, "scandir", scandir)
        m.setattr(os, "stat", stat)
        m.setattr(os, "open", open_)
        index, report = rag.open_index(settings)
    assert len(index.files) == held and report.deleted == 0
    assert any("3 note(s) cannot be reached now" in w for w in report.warnings), report.warnings
    embedded = len(server.embedded_texts())
    index, report = rag.open_index(settings)              # reachable again: nothing to embed
    assert len(index.files) == held and len(server.embedded_texts()) == embedded
    (sub / "n0.md").unlink()                              # and a note really gone is gone
    assert len(rag.open_index(settings)[0].files) == held - 1


def test_every_reader_takes_the_bytes_its_caller_checked_not_the_file_again(tmp_path):
    note = tmp_path / "n.md"
    note.write_text("# Swapped\n\nwhat the file holds now")
    (section,), _ = rag.read_text(note, b"# Checked\n\nthe bytes read_note checked")
    assert "the bytes read_note checked" in section.text and "holds now" not in section.text
