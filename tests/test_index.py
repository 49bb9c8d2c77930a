"""The index: incremental by content, a cache that cannot hurt you, and odd files."""
from __future__ import annotations

import dataclasses
import os
import pickle
import shutil
import subprocess
import sys
import unicodedata

import numpy as np
import ollama
import pytest

import demo_rag as rag
from conftest import ROOT, note_texts, run_cli, run_cli_audited, user_env
from ollama_server import FakeOllama

TOPICS = ["kites", "violins", "glaciers", "bees", "lighthouses", "volcanoes", "origami", "comets"]


def make_vault(folder, n=100):
    """n notes of three sections each, distinct enough to be three chunks at size 300."""
    folder.mkdir(exist_ok=True)
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        body = "".join(f"## Part {p}\n\n" + f"Note {i} part {p} explains {topic} in detail, fact {i * 10 + p}. " * 4
                       + "\n\n" for p in range(3))
        (folder / f"note-{i:03d}.md").write_text(f"# Note {i}: {topic}\n\n{body}")
    return folder


def settings(tmp_path, **kw):
    return rag.Settings(notes_dir=tmp_path / "vault", cache_dir=tmp_path / "cache", chunk_size=300,
                        chunk_overlap=0, **kw)


def index_once(s, server):
    """Build or update the index; return (index, report, texts embedded by this call)."""
    before = len(note_texts(server.embedded_texts()))
    index, report = rag.open_index(s, ollama.Client(host=server.url))
    return index, report, note_texts(server.embedded_texts())[before:]


@pytest.fixture
def vault(tmp_path, server):
    make_vault(tmp_path / "vault")
    s = settings(tmp_path)
    index, report, texts = index_once(s, server)
    assert report.summary(100) == "indexed 100 notes: 0 changed, 100 new, 0 deleted, 0 unchanged (300 chunks embedded)"
    assert len(texts) == len(index.chunks) == 300
    return s


def test_unchanged_vault_is_loaded_without_reading_notes(vault, server):
    index, report, texts = index_once(vault, server)
    assert texts == [] and report.unchanged == 100 and len(index.chunks) == 300


def test_editing_one_note_embeds_only_its_changed_chunks(vault, server):
    note = vault.notes_dir / "note-042.md"
    note.write_text(note.read_text().replace("part 1 explains", "part 1 now explains"))
    index, report, texts = index_once(vault, server)
    assert report.summary(100) == "indexed 100 notes: 1 changed, 0 new, 0 deleted, 99 unchanged (1 chunks embedded)"
    assert len(texts) == 1 and "Note 42 part 1 now explains" in texts[0]
    assert len(index.chunks) == 300


def test_an_incremental_update_keeps_the_bm25_index_of_the_notes_it_did_not_read(vault, server):
    # Edit one note, delete one, copy one, add one: the postings carried over for the rest
    # must be those a build from scratch would make, row for row.
    notes = vault.notes_dir
    (notes / "note-042.md").write_text((notes / "note-042.md").read_text().replace("part 1", "part one"))
    (notes / "note-007.md").unlink()
    (notes / "copy-of-003.md").write_text((notes / "note-003.md").read_text())
    (notes / "new.md").write_text("# New\n\n## Part 0\n\nA brand new note about zeppelins and kites.\n")
    index, report, _ = index_once(vault, server)
    assert (report.changed, report.new, report.deleted) == (1, 2, 1)
    fresh = rag.lexicon_from_texts(list(rag.lexicon_texts(index)))
    lex = index.lexicon
    assert lex.vocab == fresh.vocab
    for name in ("ptr", "docs", "counts", "lengths"):
        assert np.array_equal(getattr(lex, name), getattr(fresh, name)), name
    hits = rag.rank(index, "fact 901", None, vault).hits      # words of a note that was not read again
    assert hits[0].chunk.source == "note-090.md" and "fact 901" in hits[0].chunk.text


def test_touching_every_note_embeds_nothing(vault, server):
    for note in vault.notes_dir.iterdir():
        os.utime(note, ns=(10**18, 10**18))
    _, report, texts = index_once(vault, server)
    assert texts == [] and report.unchanged == 100 and report.embedded == 0
    _, report, texts = index_once(vault, server)      # the new mtimes are recorded: fast path
    assert texts == []


def test_renaming_or_moving_a_note_embeds_nothing(vault, server):
    (vault.notes_dir / "sub").mkdir()
    (vault.notes_dir / "note-007.md").rename(vault.notes_dir / "sub" / "renamed.md")
    index, report, texts = index_once(vault, server)
    assert texts == []
    assert report.summary(100) == "indexed 100 notes: 0 changed, 1 new, 1 deleted, 99 unchanged (0 chunks embedded)"
    assert {c.source for c in index.chunks if "Note 7 " in c.text} == {"sub/renamed.md"}


def test_deleting_and_adding_notes(vault, server):
    (vault.notes_dir / "note-000.md").unlink()
    (vault.notes_dir / "fresh.md").write_text("# Fresh\n\nA new note about the migration of arctic terns.")
    index, report, texts = index_once(vault, server)
    assert (report.new, report.deleted, report.unchanged) == (1, 1, 99)
    assert len(texts) == 1 and len(index.chunks) == 298
    assert not any(c.source == "note-000.md" for c in index.chunks)
    # vectors still line up with their chunks after the shuffle
    client = ollama.Client(host=server.url)
    fresh = rag.embed_texts(client, vault.embed_model, [c.embed_text for c in index.chunks])
    assert np.allclose(index.vectors, fresh, atol=2e-3)


def test_rebuild_flag_re_embeds_everything(vault, server):
    before = len(note_texts(server.embedded_texts()))
    index, report = rag.open_index(vault, ollama.Client(host=server.url), rebuild="--rebuild")
    assert len(note_texts(server.embedded_texts())) - before == 300 and report.reason == "--rebuild"


def test_search_results_survive_the_cache_round_trip(vault, server):
    client = ollama.Client(host=server.url)
    fresh, _ = rag.open_index(vault, client, rebuild="--rebuild")
    loaded, reason = rag.load_index(rag.cache_path(vault))
    assert reason == ""
    q = rag.embed_query(client, "glaciers fact 421", vault)
    a, b = rag.rank(fresh, "glaciers fact 421", q, vault), rag.rank(loaded, "glaciers fact 421", q, vault)
    assert [h.row for h in a.hits] == [h.row for h in b.hits]
    assert a.hits[0].chunk.source == "note-042.md"
    assert loaded.chunks == fresh.chunks and loaded.files == fresh.files


def test_cache_holds_plain_data_then_page_aligned_float32_vectors(vault):
    with open(rag.cache_path(vault), "rb") as f:
        header = rag.BuiltinsOnlyUnpickler(f).load()          # what others may read without the rest
        start = f.tell()
        body = rag.BuiltinsOnlyUnpickler(f).load()
        f.seek(-f.tell() % 4096, 1)
        vectors = np.fromfile(f, dtype="<f4")
    assert set(header) == set(rag.HEADER_KEYS) and start < 1000 and "chunks" in body
    assert header["vectors_shape"] == (300, 256) and vectors.size == 300 * 256
    assert header["format"] == rag.CACHE_FORMAT and header["embed_model"] == "qwen3-embedding:0.6b"
    assert header["notes_dir"] == os.path.realpath(vault.notes_dir)
    index, _ = rag.load_index(rag.cache_path(vault))
    assert index.vectors.dtype == np.float32 and not index.vectors.flags.writeable   # memory-mapped
    assert np.array_equal(index.vectors, vectors.reshape(300, 256))


def test_a_cache_whose_words_an_older_tokenizer_counted_is_counted_again_not_embedded(server, tmp_path, monkeypatch):
    notes = tmp_path / "vault"
    notes.mkdir()
    (notes / "cafe.md").write_text(unicodedata.normalize("NFD", "# Café\n\nMüller and Schäfer roast beans on Tuesdays.\n"))
    (notes / "kites.md").write_text("# Kites\n\nA kite needs steady wind and a long string to fly well.\n")
    s = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache")
    index, _, _ = index_once(s, server)
    # The cache as a version before TOKENIZER_VERSION wrote it: no stamp, its words counted unnormalised.
    with monkeypatch.context() as m:
        m.setattr(rag.unicodedata, "normalize", lambda form, text: text)
        old = dataclasses.replace(index, lexicon=rag.lexicon_from_texts([c.text for c in index.chunks]))
    assert not rag.query_postings(old.lexicon, "Müller")[0].rows.size     # "mu", "ller": not found
    with monkeypatch.context() as m:          # written as such a version wrote it: without the stamp
        as_dict = rag.index_to_dict
        m.setattr(rag, "index_to_dict", lambda ix: {k: v for k, v in as_dict(ix).items() if k != "tokenizer"})
        rag.save_index(old, rag.cache_path(s))
    out = run_cli("Müller Schäfer", "--notes", notes, "--cache", s.cache_dir, "--retrieve-only", host=server.url)
    assert out.returncode == 0, out.stderr
    assert "(0 chunks embedded)" in out.stderr and "[1] cafe.md:3 › " in out.stdout
    assert " · bm25 0.00)" not in out.stdout.split("\n  [2]")[0], out.stdout     # found by its words
    loaded, _ = rag.load_index(rag.cache_path(s))
    assert loaded.fingerprint and rag.query_postings(loaded.lexicon, "Müller")[0].rows.size   # written again


@pytest.mark.parametrize("stamp", ["older", "none"])
def test_notes_an_older_reader_read_are_read_again_and_only_changed_texts_embedded(server, tmp_path, monkeypatch, stamp):
    notes = tmp_path / "vault"
    notes.mkdir()
    (notes / "kites.md").write_text("# Kites\n\nA kite needs steady wind and a long string to fly well.\n")
    (notes / "page.html").write_text("<h1>Bees</h1>\n<p>Bees dance to show the hive where the clover is.</p>\n"
                                     "<p>A queen lays two thousand eggs a day.</p>\n")
    s = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache")
    index, _, _ = index_once(s, server)
    # The cache as a version whose HTML reader dropped the queen's paragraph wrote it (stamped, or from before
    # readers were stamped).
    row = next(i for i, c in enumerate(index.chunks) if c.source == "page.html")
    assert "\nA queen" in index.chunks[row].text
    was = index.chunks[row]._replace(text=index.chunks[row].text.split("\nA queen")[0])
    old = dataclasses.replace(index, chunks=[was if i == row else c for i, c in enumerate(index.chunks)],
                              reader=rag.READER_VERSION - 1)
    with monkeypatch.context() as m:
        as_dict = rag.index_to_dict
        m.setattr(rag, "index_to_dict", lambda ix: {k: v for k, v in as_dict(ix).items() if k != "reader" or stamp != "none"})
        rag.save_index(old, rag.cache_path(s))
    before = len(server.embedded_texts())
    out = run_cli("queen eggs", "--notes", notes, "--cache", s.cache_dir, "--retrieve-only", host=server.url)
    assert out.returncode == 0, out.stderr
    assert "its notes were read by an older demo_rag's readers: read again" in out.stderr
    assert "0 changed, 0 new, 0 deleted, 2 unchanged (1 chunks embedded)" in out.stderr
    embedded = note_texts(server.embedded_texts()[before:])
    assert embedded[:-1] == [index.chunks[row].embed_text] and "queen eggs" in embedded[-1]   # and the question
    assert "[1] page.html:3 › # Bees" in out.stdout and "… A queen lays" in out.stdout      # found by its words
    loaded, said = rag.load_index(rag.cache_path(s))
    assert said == "" and loaded.reader == rag.READER_VERSION and list(loaded.chunks) == list(index.chunks)
    assert np.array_equal(loaded.vectors, index.vectors)
    out = run_cli("queen eggs", "--notes", notes, "--cache", s.cache_dir, "--retrieve-only", host=server.url)
    assert "updating index" not in out.stderr and len(server.embedded_texts()) == before + len(embedded) + 1


# ---- a cache that cannot hurt you ---------------------------------------------------

class Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_cache_crafted_to_run_code_is_refused_and_rebuilt(vault, server, tmp_path, capsys):
    marker = tmp_path / "pwned"
    rag.cache_path(vault).write_bytes(pickle.dumps({"format": rag.CACHE_FORMAT, "x": Exploit(marker)}))
    index, reason = rag.load_index(rag.cache_path(vault))
    assert index is None and "refusing to load posix.system" in reason
    assert not marker.exists()
    out = run_cli("kites", "--notes", vault.notes_dir, "--cache", vault.cache_dir, "--chunk-size", 300,
                  "--chunk-overlap", 0, "--retrieve-only", host=server.url)
    assert out.returncode == 0 and not marker.exists()
    assert "rebuilding index: cache refused" in out.stderr
    assert rag.load_index(rag.cache_path(vault))[0] is not None


@pytest.mark.parametrize("damage, reason", [
    (lambda b: b[: len(b) // 2], "cache is damaged (vectors are cut short"),
    (lambda b: b[:100], "cache is damaged (it ends too soon: a copy cut short"),
    (lambda b: b"not a pickle at all", "cache is damaged (UnpicklingError: invalid load key"),
    (lambda b: pickle.dumps(["a", "foreign", "pickle"]), "cache is from another version"),
    (lambda b: pickle.dumps({"format": 1}), "cache is from another version"),
    (lambda b: b"", "cache is damaged (it ends too soon"),
])
def test_damaged_caches_are_rebuilt_with_one_line(vault, server, damage, reason):
    path = rag.cache_path(vault)
    path.write_bytes(damage(path.read_bytes()))
    out = run_cli("kites", "--notes", vault.notes_dir, "--cache", vault.cache_dir, "--chunk-size", 300,
                  "--chunk-overlap", 0, "--retrieve-only", host=server.url)
    assert out.returncode == 0, out.stderr
    assert "rebuilding index: " + reason in out.stderr and "Traceback" not in out.stderr
    assert "(300 chunks embedded)" in out.stderr


def test_two_processes_indexing_at_once_leave_one_complete_cache(tmp_path, server, spawn):
    make_vault(tmp_path / "vault", 60)
    args = ["kites", "--notes", tmp_path / "vault", "--cache", tmp_path / "cache", "--chunk-size", "300",
            "--chunk-overlap", "0", "--retrieve-only"]
    procs = [spawn(args, host=server.url) for _ in range(2)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    (pkl,) = (tmp_path / "cache").iterdir()
    index, reason = rag.load_index(pkl)
    assert reason == "" and len(index.chunks) == 180 and index.complete


def test_settings_tried_and_reverted_cost_no_re_embedding(vault, server):
    """One cache per model and chunking: trying --chunk-size 400 or another model keeps the first."""
    _, report, texts = index_once(rag.Settings(**{**vars(vault), "chunk_size": 400}), server)
    assert report.reason == "no cache yet" and texts == []    # its own cache; its chunks' texts were embedded
    with FakeOllama(models=["other-embed"]) as other:
        s = rag.Settings(**{**vars(vault), "embed_model": "other-embed"})
        _, report = rag.open_index(s, ollama.Client(host=other.url))
        assert len(note_texts(other.embedded_texts())) == 300
    _, report, texts = index_once(vault, server)
    assert texts == [] and report.unchanged == 100
    assert len(list(vault.cache_dir.iterdir())) == 3


def test_a_new_vector_size_re_embeds_everything(vault, tmp_path):
    (vault.notes_dir / "note-001.md").write_text("# Changed\n\nSomething new about kites and string, long enough to be a note.")
    with FakeOllama(dim=64) as small:
        index, report = rag.open_index(vault, ollama.Client(host=small.url))
        assert report.reason == "vector size changed (256 -> 64) under the same model name 'qwen3-embedding:0.6b'; re-embedding all"
        assert index.vectors.shape == (298, 64) and len(note_texts(small.embedded_texts())) == 1 + 298


def test_odd_files_are_reported_and_the_rest_indexes(tmp_path, server):
    folder = make_vault(tmp_path / "vault", 3)
    (folder / "binary.md").write_bytes(bytes(range(256)) * 10)
    with open(folder / "huge.md", "wb") as f:          # 50 MB, written sparsely
        f.truncate(50 * 2**20)
    os.symlink(folder, folder / "loop")
    os.symlink(folder / "gone.md", folder / "dangling.md")
    (folder / "empty.txt").write_text("")
    index, report, _ = index_once(settings(tmp_path), server)
    text = "\n".join(report.warnings)
    assert "skipped binary.md: looks binary" in text
    assert "skipped huge.md: 50.0 MB is over the 5 MB limit" in text
    assert "symlink loop" in text and "dangling.md" in text
    assert "skipped empty.txt: under 50 characters (12 besides headings)" in text
    assert len(index.files) == 3


def test_a_warm_query_does_not_import_the_text_splitter(vault, server):
    code = ("import sys, demo_rag; demo_rag.main(sys.argv[1:]); "
            "print('SPLITTER' if 'langchain_text_splitters' in sys.modules else 'LEAN')")
    out = subprocess.run([sys.executable, "-c", code, "kites", "--notes", str(vault.notes_dir), "--cache",
                          str(vault.cache_dir), "--chunk-size", "300", "--chunk-overlap", "0", "--retrieve-only"],
                         capture_output=True, text=True, cwd=rag.HERE, env=user_env(server.url))
    assert out.stdout.strip().endswith("LEAN"), out.stderr


@pytest.mark.parametrize("then, out", [("", "kept"), ("os.close(1); ", "")])
def test_the_quick_exit_flushes_what_was_printed_and_keeps_the_exit_code(then, out):
    # exit_now() skips the interpreter's teardown, which is what would flush a pipe's
    # buffer; a reader gone away (here: stdout closed) is not an error either.
    code = f"import os, demo_rag; print('kept', end=''); {then}demo_rag.exit_now(3)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}     # a pipe is buffered
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=rag.HERE, env=env)
    assert (done.returncode, done.stdout, done.stderr) == (3, out, "")


def glob(module, name):
    return f"c{module}\n{name}\n".encode()


def text(s):
    return b"V" + s.encode("raw_unicode_escape") + b"\n"


def gadgets(marker) -> dict[str, bytes]:
    """Hand-written pickles (protocol 0) that run code on load; each maps from the first global it names."""
    code = text(f"open({str(marker)!r}, 'w').close()")
    return {
        "builtins.exec": glob("builtins", "exec") + b"(" + code + b"tR.",
        "builtins.eval": glob("builtins", "eval") + b"(" + code + b"tR.",
        # getattr(__import__("os"), "system")("touch marker")
        "builtins.getattr": glob("builtins", "getattr") + b"(" + glob("builtins", "__import__") + b"(" + text("os")
        + b"tR" + text("system") + b"tR(" + text(f"touch {marker}") + b"tR.",
        # copyreg._reconstructor(Popen, Popen, ["touch", marker]) calls Popen(["touch", marker])
        "copyreg._reconstructor": glob("copyreg", "_reconstructor") + b"(" + glob("subprocess", "Popen")
        + glob("subprocess", "Popen") + b"(" + text("touch") + text(str(marker)) + b"ltR.",
        "os.system": glob("os", "system") + b"(" + text(f"touch {marker}") + b"tR.",
        "posix.system": pickle.dumps({"format": rag.CACHE_FORMAT, "x": Exploit(marker)}),
    }


@pytest.mark.parametrize("name", list(gadgets("m")))
def test_cache_gadgets_are_refused_at_their_first_reference(tmp_path, name):
    marker = tmp_path / "pwned"
    path = tmp_path / "cache.pkl"
    path.write_bytes(gadgets(marker)[name])
    index, reason = rag.load_index(path)
    assert index is None and f"refusing to load {name}" in reason, reason
    assert not marker.exists()


def test_a_warm_run_opens_no_note_and_leaves_the_cache_alone(tmp_path, server, notes):
    cache, log = tmp_path / "cache", tmp_path / "opened.log"
    args = ("what is BM25?", "--notes", notes, "--cache", cache, "--retrieve-only")
    assert run_cli(*args, host=server.url).returncode == 0
    (pkl,) = cache.glob("*.pkl")
    before = pkl.stat()
    out = run_cli_audited(*args, host=server.url, under=notes, log=log)
    assert out.returncode == 0, out.stderr
    assert not log.exists(), log.read_text()                       # not one note was opened
    after = pkl.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (before.st_ino, before.st_mtime_ns, before.st_size)
    # one note edited: it alone is read; the others are known by size and mtime
    (notes / "git-tips.md").write_text((notes / "git-tips.md").read_text() + "\nOne more tip: git stash.\n")
    out = run_cli_audited(*args, host=server.url, under=notes, log=log)
    assert out.returncode == 0, out.stderr
    assert set(log.read_text().splitlines()) == {str(notes / "git-tips.md")}


def test_a_moved_folder_is_neither_read_nor_embedded_again_and_a_copy_only_read(tmp_path, server, notes):
    cache, log = tmp_path / "cache", tmp_path / "opened.log"
    assert run_cli("what is BM25?", "--notes", notes, "--cache", cache, "--retrieve-only", host=server.url).returncode == 0
    embedded = len(server.of("/api/embed"))
    moved = tmp_path / "Documents" / "vault"
    moved.parent.mkdir()
    notes.rename(moved)
    out = run_cli_audited("what is BM25?", "--notes", moved, "--cache", cache, "--retrieve-only",
                          host=server.url, under=moved, log=log)
    assert out.returncode == 0, out.stderr
    assert f"updating index: taking over the index of the same notes at {notes}" in out.stderr
    assert "(0 chunks embedded)" in out.stderr and not log.exists()          # not one note opened
    assert len(server.of("/api/embed")) == embedded + 1 and "[1] bm25.md" in out.stdout   # the question only
    own = rag.cache_path(rag.Settings(notes_dir=moved, cache_dir=cache))
    assert [p.name for p in cache.iterdir()] == [own.name]                     # the old folder's cache is gone
    copy = tmp_path / "copy"
    shutil.copytree(moved, copy)                                               # new inodes: each note hashed
    out = run_cli("what is BM25?", "--notes", copy, "--cache", cache, "--retrieve-only", host=server.url)
    assert "taking over the index" in out.stderr and "(0 chunks embedded)" in out.stderr, out.stderr
    out = run_cli_audited("what is BM25?", "--notes", moved, "--cache", cache, "--retrieve-only",
                          host=server.url, under=moved, log=log)
    assert "taking over" not in out.stderr and not log.exists()                # its own cache now: warm


def test_a_text_embedded_for_another_folder_or_chunk_size_is_not_embedded_again(tmp_path, server, notes):
    cache = tmp_path / "cache"

    def run(folder, *flags):
        out = run_cli("what is BM25?", "--notes", folder, "--cache", cache, "--retrieve-only", *flags, host=server.url)
        assert out.returncode == 0, out.stderr
        return out
    run(notes)
    other = tmp_path / "work"                              # another folder, holding three of those notes
    other.mkdir()
    for name in ("bm25.md", "git-tips.md", "sourdough.md"):
        shutil.copy(notes / name, other / name)
    (other / "kites.md").write_text("# Kites\n\nA kite needs steady wind and a long string to climb.\n")
    def chunks_embedded():                                 # the chunks' texts: not the questions, not the probes
        return [t for t in note_texts(server.embedded_texts()) if "Query:" not in t]
    before = len(chunks_embedded())
    out = run(other)
    assert len(chunks_embedded()) == before + 1 and "A kite needs steady wind" in chunks_embedded()[-1]
    assert "chunks' vectors found in other caches of qwen3-embedding:0.6b" in out.stderr
    before = len(chunks_embedded())
    out = run(notes, "--chunk-size", "700")               # a note shorter than both sizes is one chunk in both
    assert "found in other caches" in out.stderr and len(chunks_embedded()) > before
    assert len(chunks_embedded()) == len(set(chunks_embedded()))   # and not one text was embedded twice


def test_a_moved_folder_whose_cache_is_of_another_build_leaves_that_cache_alone(tmp_path, server, notes):
    cache = tmp_path / "cache"
    assert run_cli("what is BM25?", "--notes", notes, "--cache", cache, "--retrieve-only", host=server.url).returncode == 0
    (old,) = cache.iterdir()
    moved = tmp_path / "moved"
    notes.rename(moved)
    server.digests[rag.EMBED_MODEL] = "7" * 64                 # and Ollama runs another build now
    out = run_cli("what is BM25?", "--notes", moved, "--cache", cache, "--retrieve-only", host=server.url)
    assert "is another build under the same name" in out.stderr and "(12 chunks embedded)" in out.stderr
    assert old.exists()                                         # its vectors were not taken over: kept


def test_the_cache_of_a_folder_that_is_gone_is_named_with_its_size_once(tmp_path, server, notes):
    cache, gone = tmp_path / "cache", tmp_path / "old-vault"
    gone.mkdir()
    (gone / "gliders.md").write_text("# Gliders\n\n" + "A glider climbs in thermals and sinks between them. " * 4)
    assert run_cli("gliders", "--notes", gone, "--cache", cache, "--retrieve-only", host=server.url).returncode == 0
    (stale,) = cache.iterdir()
    shutil.rmtree(gone)
    runs = [run_cli("what is BM25?", "--notes", notes, "--cache", cache, "--retrieve-only", host=server.url)
            for _ in range(2)]
    line = (f"warning: 1 cache file(s) in {cache} ({stale.stat().st_size / 2**20:.1f} MB) hold the index of notes "
            f"folders that are gone ({gone}): delete them if those are gone for good")
    assert [out.stderr.count(line) for out in runs] == [1, 0], runs[0].stderr   # said by the first build only
    assert stale.exists()                                  # not deleted: that folder may be on a drive not mounted


def test_an_edit_that_keeps_size_and_mtime_is_seen_and_a_chmod_costs_no_embedding(tmp_path, server, notes):
    cache, log = tmp_path / "cache", tmp_path / "opened.log"
    args = ("git rebase", "--notes", notes, "--cache", cache, "--retrieve-only")
    assert run_cli(*args, host=server.url).returncode == 0
    note, text = notes / "git-tips.md", (notes / "git-tips.md").read_text()
    stat = note.stat()

    def put_back_size_and_mtime(path):
        assert path.stat().st_size == stat.st_size
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    note.write_text(text.replace("reword", "retell"))           # then `touch -r`: the old mtime again
    put_back_size_and_mtime(note)
    out = run_cli(*args, host=server.url)
    assert "1 changed, 0 new, 0 deleted" in out.stderr and "(1 chunks embedded)" in out.stderr, out.stderr
    assert "retell" in out.stdout
    copy = notes / ".git-tips.md.partial"                        # `rsync -t`: a new file renamed over it
    copy.write_text(text.replace("reword", "redraw"))
    put_back_size_and_mtime(copy)
    os.replace(copy, note)
    out = run_cli(*args, host=server.url)
    assert "1 changed, 0 new, 0 deleted" in out.stderr and "(1 chunks embedded)" in out.stderr, out.stderr
    assert "redraw" in out.stdout
    note.chmod(0o600)                                            # a new ctime alone: hashed, not embedded
    out = run_cli_audited(*args, host=server.url, under=notes, log=log)
    assert "0 changed, 0 new, 0 deleted" in out.stderr and "(0 chunks embedded)" in out.stderr, out.stderr
    assert set(log.read_text().splitlines()) == {str(note)}
    log.unlink()
    out = run_cli_audited(*args, host=server.url, under=notes, log=log)   # and recorded: a warm run again
    assert out.returncode == 0 and not log.exists()


def test_a_file_over_the_size_limit_is_skipped_without_being_read(tmp_path, server, notes):
    cache, log = tmp_path / "cache", tmp_path / "opened.log"
    with open(notes / "server-log.md", "wb") as f:       # 6 MB of a log, written sparsely
        f.truncate(6 * 2**20)
    args = ("what is BM25?", "--notes", notes, "--cache", cache, "--retrieve-only")
    for change in (None, "git-tips.md", None):          # a first build, an update, a warm run
        if change:
            (notes / change).write_text((notes / change).read_text() + "\nOne more tip: git stash.\n")
        out = run_cli_audited(*args, host=server.url, under=notes, log=log)
        assert out.returncode == 0, out.stderr
        assert "warning: skipped server-log.md: 6.0 MB is over the 5 MB limit (--max-note-mb)" in out.stderr
        assert str(notes / "server-log.md") not in log.read_text().splitlines()   # not hashed, not read
    assert "(0 chunks embedded)" in out.stderr


SAVE_WITH_A_FILE_SIZE_LIMIT = """
import resource, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import demo_rag as rag
index, reason = rag.load_index(Path(sys.argv[2]))
assert index is not None, reason
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)        # writing past the limit fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[4]), resource.RLIM_INFINITY))
try:
    rag.save_index(index, Path(sys.argv[3]))
except OSError as e:
    print("save failed:", e.strerror)
"""


def test_a_save_that_fails_part_way_leaves_the_previous_cache_whole(vault, notes, server, tmp_path):
    small = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "small")
    rag.open_index(small, ollama.Client(host=server.url))
    path, big = rag.cache_path(small), rag.cache_path(vault)
    before = path.read_bytes()
    # Another process saves the vault's (bigger) index over it, and the disk fills half-way through.
    out = subprocess.run([sys.executable, "-c", SAVE_WITH_A_FILE_SIZE_LIMIT, str(ROOT), str(big), str(path),
                          str(big.stat().st_size // 2)], capture_output=True, text=True, timeout=60)
    assert "save failed: File too large" in out.stdout, out.stderr
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]      # no temp file left behind


def test_a_partly_embedded_index_is_searched_by_keywords_only(vault, server):
    (vault.notes_dir / "zephyr.md").write_text("# Zephyr\n\n" + "The zephyr kite festival opens in May. " * 5)
    server.embed_fail_after = len(server.of("/api/embed"))          # from now on, embedding fails
    client = ollama.Client(host=server.url)
    index, report = rag.open_index(vault, client)
    assert report.embed_error and not index.complete
    server.embed_fail_after = None                                   # back, for the question only
    question = "zephyr kite festival"
    r = rag.rank(index, question, rag.embed_query(client, question, vault), vault)
    assert r.lexical_only and r.dense is None
    assert r.hits[0].chunk.source == "zephyr.md"


def test_embedding_requests_stay_under_the_character_limit(server, tmp_path, monkeypatch):
    monkeypatch.setattr(rag, "EMBED_BATCH_CHARS", 2000)
    s = rag.Settings(notes_dir=ROOT / "demo-data", cache_dir=tmp_path / "cache", chunk_size=300, chunk_overlap=0)
    index, _ = rag.open_index(s, ollama.Client(host=server.url))
    sizes = [sum(map(len, body["input"])) for body in server.of("/api/embed")]
    assert len(sizes) >= 5 and max(sizes) <= 2000, sizes
    assert len(note_texts(server.embedded_texts())) == len(index.chunks)
