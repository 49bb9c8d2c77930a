"""The first build: it never loses work, shows honest progress, and survives a cache it cannot write.

Interruptions are driven by the stand-in server's request count (hold_at, fail_after), not by
sleeping: 100 notes of three chunks at --chunk-size 300 are 300 chunks, sent in ten requests of at
most 32 texts, so holding the 5th request interrupts the build with 4 x 32 = 128 vectors embedded.
"""
from __future__ import annotations

import itertools
import json
import os
import resource
import signal
import subprocess
import threading
import time

import numpy as np
import ollama
import pytest
from conftest import (SCRIPT_COMMAND, read_cache, read_terminal, read_until, run_cli, user_env,
                      write_cache)
from ollama_server import FakeOllama
from test_index import make_vault

import demo_rag as rag

CHUNKS, PER_REQUEST = 300, 32


@pytest.fixture
def vault(tmp_path):
    return make_vault(tmp_path / "vault")


def args_for(vault, *extra):
    return ["kites", "--notes", vault, "--cache", vault.parent / "cache", "--chunk-size", 300,
            "--chunk-overlap", 0, "--retrieve-only", *extra]


def start(vault, host, *extra, **kw):
    env = user_env(host)
    return subprocess.Popen([*SCRIPT_COMMAND, *map(str, args_for(vault, *extra))], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def chunk_texts_sent(server) -> int:
    """Chunk texts the server was asked to embed (the question, with its instruction, left out)."""
    return sum("Query:" not in t for t in server.embedded_texts())


def stopped_at(vault, request: int, *flags, sig=signal.SIGINT, **server) -> tuple[int, str]:
    """A CLI run over `vault`, sent `sig` while the stand-in holds its `request`-th embed
    request (checkpoints far apart, so only the save on the interrupt keeps what arrived): its
    exit code and stderr."""
    with FakeOllama(hold_at=request, **server) as s:
        p = start(vault, s.url, "--checkpoint-seconds", 1000, *flags)
        s.wait_for_embeds(request)
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
        s.release()
    return p.returncode, err


def texts_the_next_run_embeds(vault) -> int:
    with FakeOllama() as server:
        out = run_cli(*args_for(vault), host=server.url)
        assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
        return chunk_texts_sent(server)


# ---- resumable builds -------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_build_keeps_what_arrived_and_the_next_run_embeds_the_rest(vault, sig):
    code, err = stopped_at(vault, 5, sig=sig)
    assert code == 130, err
    assert "kept 128 of 300 vectors; run again to continue" in err and "Traceback" not in err
    assert texts_the_next_run_embeds(vault) == CHUNKS - 4 * PER_REQUEST
    assert texts_the_next_run_embeds(vault) == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupt_while_the_floor_is_measured_keeps_every_vector_embedded(vault, sig):
    # the 11th embed request is the calibration's probes, after the ten batches of chunks
    with FakeOllama(hold_at=11) as server:
        p = start(vault, server.url, "--checkpoint-seconds", 1000)
        server.wait_for_embeds(11)
        assert all("Query:" in t for t in server.of("/api/embed")[10]["input"])
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
        server.release()
    assert p.returncode == 130 and "Traceback" not in err, err
    assert "kept all 300 vectors; the next run measures the relevance floor" in err
    assert texts_the_next_run_embeds(vault) == 0


def test_an_interrupt_after_the_last_batch_before_the_update_returns_keeps_every_vector(
        vault, server, monkeypatch):
    s = rag.Settings(notes_dir=vault, cache_dir=vault.parent / "cache", chunk_size=300,
                     chunk_overlap=0, checkpoint_seconds=1000)
    real, calls = rag.IndexReport.say_notes, []

    def say_notes(report):                # its second call: every batch has arrived
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        real(report)
    monkeypatch.setattr(rag.IndexReport, "say_notes", say_notes)
    with pytest.raises(KeyboardInterrupt) as stopped:     # not one to end pytest on
        rag.open_index(s, ollama.Client(host=server.url))
    said = "kept all 300 vectors; the next run measures the relevance floor"
    assert isinstance(stopped.value, rag.BuildInterrupted) and str(stopped.value) == said
    assert len(calls) == 2 and chunk_texts_sent(server) == CHUNKS
    assert texts_the_next_run_embeds(vault) == 0


def test_an_interrupt_after_the_index_is_saved_leaves_it_as_saved(vault, server, monkeypatch):
    s = rag.Settings(notes_dir=vault, cache_dir=vault.parent / "cache", chunk_size=300,
                     chunk_overlap=0, checkpoint_seconds=1000)
    # the last step of open_index, after the save: Ctrl-C comes then
    monkeypatch.setattr(rag.KeptCopy, "drop", lambda *_: os.kill(os.getpid(), signal.SIGINT))
    with pytest.raises(KeyboardInterrupt) as stopped:
        rag.open_index(s, ollama.Client(host=server.url))
    assert not isinstance(stopped.value, rag.BuildInterrupted)   # the cache is complete
    index, _ = rag.load_index(rag.cache_path(s))
    assert index.complete and index.calibration is not None      # not the index before its floor


def test_a_rebuild_interrupted_past_the_vectors_the_cache_had_is_continued_by_a_run(vault):
    stopped_at(vault, 5)                                   # a first build stopped at 128
    code, err = stopped_at(vault, 7, "--rebuild", sig=signal.SIGTERM)   # a --rebuild at 192
    assert code == 130 and "Traceback" not in err, err
    assert "kept 192 of 300 vectors; run again to continue (--rebuild starts over)" in err
    assert texts_the_next_run_embeds(vault) == CHUNKS - 6 * PER_REQUEST


def test_an_interrupted_size_change_rebuild_keeps_the_cache_and_the_next_run_goes_on(vault):
    with FakeOllama(dim=256) as server:
        assert run_cli(*args_for(vault), host=server.url).returncode == 0
    note = vault / "note-042.md"
    note.write_text(note.read_text().replace("part 1 explains", "part 1 now explains"))
    code, err = stopped_at(vault, 3, dim=128)              # the edit, then the rebuild's 2nd
    assert code == 130 and "vector size changed (256 -> 128)" in err, err
    assert ("the cache is kept as it was, and 32 of the rebuild's 300 vectors beside it: "
            "the next run goes on from them") in err
    [cache] = [p for p in (vault.parent / "cache").iterdir() if ".rebuild." not in p.name]
    index, _ = rag.load_index(cache)
    assert index.vectors.shape == (300, 256) and index.complete
    with FakeOllama(dim=128) as server:                     # the edit's text, then the rest
        out = run_cli(*args_for(vault), host=server.url)
        assert out.returncode == 0 and chunk_texts_sent(server) == 1 + CHUNKS - PER_REQUEST, out.stderr
    [cache] = (vault.parent / "cache").iterdir()            # the rebuild's aside is gone
    index, _ = rag.load_index(cache)
    assert index.vectors.shape == (300, 128) and index.complete


def test_a_size_change_rebuild_interrupted_before_its_first_batch_says_it_kept_none(vault):
    with FakeOllama(dim=256) as server:
        assert run_cli(*args_for(vault), host=server.url).returncode == 0
    (vault / "note-042.md").write_text("part 1 now explains kites")
    code, err = stopped_at(vault, 2, dim=128)              # the edit, then the rebuild's 1st
    assert code == 130 and "Traceback" not in err, err
    assert "the cache is kept as it was; the rebuild kept none of its 298 vectors" in err, err


def test_an_interrupted_rebuild_keeps_the_cache_and_the_next_rebuild_resumes_it(vault):
    with FakeOllama() as server:
        assert run_cli(*args_for(vault), host=server.url).returncode == 0
    code, err = stopped_at(vault, 5, "--rebuild")
    assert code == 130 and "Traceback" not in err, err
    assert ("the cache is kept as it was, and 128 of the rebuild's 300 vectors beside it: "
            "--rebuild again goes on from them") in err
    assert texts_the_next_run_embeds(vault) == 0            # the cache before serves meanwhile
    with FakeOllama() as server:
        out = run_cli(*args_for(vault, "--rebuild"), host=server.url)
        assert out.returncode == 0 and chunk_texts_sent(server) == CHUNKS - 4 * PER_REQUEST, out.stderr
    assert len(list((vault.parent / "cache").iterdir())) == 1      # its checkpoint is gone
    assert texts_the_next_run_embeds(vault) == 0


def test_a_rebuild_of_a_build_not_known_keeps_nothing_aside_and_says_so(vault):
    # a model pulled again would go unnoticed: what the rebuild embedded is not taken next time
    with FakeOllama() as server:
        server.errors["/api/tags"] = (404, "404 page not found")
        assert run_cli(*args_for(vault), host=server.url).returncode == 0
    with FakeOllama(hold_at=5) as server:
        server.errors["/api/tags"] = (404, "404 page not found")
        p = start(vault, server.url, "--rebuild", "--checkpoint-seconds", 1000)
        server.wait_for_embeds(5)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
        server.release()
    assert "the cache is kept as it was; the rebuild kept none of its 300 vectors" in err, err
    assert [p.name for p in (vault.parent / "cache").glob("*.rebuild.*")] == []


def test_a_run_started_while_another_builds_the_index_waits_for_it_and_embeds_nothing(vault):
    with FakeOllama(hold_at=5) as server:
        first = start(vault, server.url, "--checkpoint-seconds", 1000)
        server.wait_for_embeds(5)
        second = start(vault, server.url)
        read_until(second.stderr, "another demo_rag run is updating this index: waiting for it")
        assert len(server.of("/api/embed")) == 5          # the second asks nothing meanwhile
        server.release()
        outs = [p.communicate(timeout=60) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outs
    assert chunk_texts_sent(server) == CHUNKS                # each chunk once, by the first
    assert "Top sources:" in outs[1][0] and "100 unchanged (0 chunks embedded)" in outs[1][1]
    assert texts_the_next_run_embeds(vault) == 0
    assert not list((vault.parent / "cache").glob("*.lock"))    # each run deletes it


def test_a_run_that_waited_locks_the_file_named_now_not_the_one_its_holder_deleted(tmp_path):
    import fcntl
    cache, said, inside = tmp_path / "c.pkl", threading.Event(), threading.Event()

    def second() -> None:
        with rag.building_alone(cache, lambda line: said.set()):
            inside.set()
            time.sleep(0.5)
    with rag.building_alone(cache, print):
        waiting = threading.Thread(target=second)
        waiting.start()
        assert said.wait(10)
    assert inside.wait(10)                                 # the second holds it now...
    with open(f"{cache}.lock", "a") as third:              # ...so a third cannot take it
        with pytest.raises(BlockingIOError):
            fcntl.flock(third.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    waiting.join()


def test_a_killed_build_loses_only_what_came_after_the_last_checkpoint(vault):
    with FakeOllama(hold_at=5) as server:
        p = start(vault, server.url, "--checkpoint-seconds", 0)     # a checkpoint after every batch
        server.wait_for_embeds(5)
        p.kill()
        p.communicate(timeout=30)
        server.release()
    # no temp file left behind; the lock, which the kernel released, is the next run's to delete
    cache, lock = sorted((vault.parent / "cache").iterdir())
    assert lock.name == cache.name + ".lock"
    index, reason = rag.load_index(cache)
    assert reason == "" and int(index.has_vector.sum()) == 4 * PER_REQUEST
    assert texts_the_next_run_embeds(vault) == CHUNKS - 4 * PER_REQUEST
    assert list((vault.parent / "cache").iterdir()) == [cache]


def test_ollama_failing_mid_build_keeps_the_batches_that_arrived(vault):
    with FakeOllama(fail_after=4) as server:
        out = run_cli(*args_for(vault), host=server.url)
    assert out.returncode == 0 and "Traceback" not in out.stderr
    assert "searching by keywords (BM25) only" in out.stderr and "Top sources (keywords only)" in out.stdout
    assert texts_the_next_run_embeds(vault) == CHUNKS - 4 * PER_REQUEST


def test_two_processes_building_at_once_both_finish_and_nothing_is_embedded_again(vault):
    with FakeOllama(embed_delay=0.02) as server:
        procs = [start(vault, server.url, "--checkpoint-seconds", 0) for _ in range(2)]
        results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    assert texts_the_next_run_embeds(vault) == 0


def test_a_first_build_stopped_after_one_request_has_embedded_the_small_notes_not_the_log(tmp_path):
    # A log of 80 chunks named to come first, and ten notes of one chunk: the first request's
    # 32 texts are the ten notes and the log's start, and the index is laid out as it would be.
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a-log.md").write_text("".join(f"## Entry {i}\n\n" + f"Log line {i} of the server, "
                                            "nothing to see here. " * 5 + "\n\n" for i in range(80)))
    for i in range(10):
        (vault / f"note-{i}.md").write_text(f"Note {i} holds the one fact {i * 7} about kites.\n")
    with FakeOllama(die_after_embeds=1) as server:
        out = run_cli(*args_for(vault), host=server.url)
    assert out.returncode == 0 and "Top sources (keywords only)" in out.stdout, out.stderr
    (cache,) = (tmp_path / "cache").iterdir()
    index, _ = rag.load_index(cache)
    assert int(index.has_vector.sum()) == PER_REQUEST
    for i in range(10):
        rec = index.files[f"note-{i}.md"]
        assert index.has_vector[rec.start:rec.stop].all(), f"note-{i}.md has no vector"
    assert [c.source for c in index.chunks] == ["a-log.md"] * 80 + [f"note-{i}.md" for i in range(10)]
    # resumed, it holds what a build never stopped holds, row for row
    assert texts_the_next_run_embeds(vault) == 90 - PER_REQUEST
    with FakeOllama() as server:
        assert run_cli(*args_for(vault, "--cache", tmp_path / "whole"), host=server.url).returncode == 0
    resumed, whole = (rag.load_index(next(folder.iterdir()))[0]
                      for folder in (tmp_path / "cache", tmp_path / "whole"))
    assert list(resumed.chunks) == list(whole.chunks) and resumed.complete and whole.complete
    assert np.array_equal(resumed.vectors, whole.vectors)


# ---- a cache that cannot be written -----------------------------------------------------

def file_size_limit(limit):
    """A file system that refuses bigger files, as a full disk would (Python ignores SIGXFSZ)."""
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.parametrize("case", ["parent is a file", "writes refused", "long folder name"])
def test_a_cache_that_cannot_be_written_costs_a_warning_not_the_answer(tmp_path, server, case):
    name = "长" * 80 if case == "long folder name" else "vault"        # 240 bytes of UTF-8
    vault = make_vault(tmp_path / name, 20)
    cache, kw = tmp_path / "cache", {}
    if case == "parent is a file":
        cache.write_text("not a folder")
        cache = cache / "sub"
    if case == "writes refused":
        kw = {"preexec_fn": file_size_limit(20_000)}
    cmd = [*SCRIPT_COMMAND, "kites", "--notes", str(vault), "--cache", str(cache),
           "--chunk-size", "300", "--chunk-overlap", "0", "--checkpoint-seconds", "0"]
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=60,
                         env=user_env(server.url), **kw)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "Answer:" in out.stdout
    warnings = [line for line in out.stderr.splitlines() if "cache not saved" in line]
    if case == "long folder name":                # the name is cut to fit: saved, and reused
        assert warnings == []
        again = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=60,
                               env=user_env(server.url))
        assert "(0 chunks embedded)" in again.stderr
    else:
        assert len(warnings) == 1 and warnings[0].startswith("warning: cache not saved ("), out.stderr


# ---- no run destroys vectors it cannot replace ------------------------------------------

@pytest.mark.parametrize("bad", [["--embed-model", "qwen3-embedding:0.6bb"], ["--rebuild", "dead host"]])
def test_a_run_that_embeds_nothing_keeps_the_vectors(vault, server, bad, dead_host):
    assert run_cli(*args_for(vault), host=server.url).returncode == 0
    host = dead_host if "dead host" in bad else server.url
    out = run_cli(*args_for(vault, *[b for b in bad if b != "dead host"]), host=host)
    assert out.returncode == 0 and "Traceback" not in out.stderr and "keywords" in out.stderr
    assert texts_the_next_run_embeds(vault) == 0


# ---- the embedder's vector size changes under the same name -----------------------------

def test_a_question_vector_of_another_size_is_an_error_that_says_rebuild(vault):
    # Two servers behind one address would make every run re-embed everything: one error instead.
    with FakeOllama(dim=256) as server:
        assert run_cli(*args_for(vault), host=server.url).returncode == 0
    with FakeOllama(dim=128) as server:
        out = run_cli(*args_for(vault), host=server.url)
        assert out.returncode == 3 and "Traceback" not in out.stderr, out.stderr
        assert ("error: qwen3-embedding:0.6b returned 128 numbers for the question where the index's vectors "
                "have 256") in out.stderr and "--rebuild re-embeds the notes" in out.stderr
        assert chunk_texts_sent(server) == 0             # nothing re-embedded behind the user's back
        out = run_cli(*args_for(vault), "--rebuild", host=server.url)
        assert out.returncode == 0 and "Top sources:" in out.stdout and "keywords only" not in out.stdout
        assert chunk_texts_sent(server) == CHUNKS
        assert run_cli(*args_for(vault), host=server.url).returncode == 0
        assert chunk_texts_sent(server) == CHUNKS        # and the next run embeds nothing


def test_vectors_of_two_sizes_in_one_build_stop_it_with_one_line_and_keep_what_was_saved(vault):
    with FakeOllama() as server:
        server.embed_sizes(256, 128)                         # two servers behind one address, in turn
        out = run_cli(*args_for(vault), host=server.url, timeout=120)
        assert out.returncode == 3, out.stderr
        assert out.stderr.count("error:") == 1 and "Traceback" not in out.stderr and "rebuilding" not in out.stderr
        assert (f"returned vectors of 256 numbers, then of 128, for '{rag.EMBED_MODEL}' in one build: two "
                "different models answer there") in out.stderr and "keeps the 32 vectors it holds" in out.stderr
        assert len(server.of("/api/embed")) == 2
    assert texts_the_next_run_embeds(vault) == CHUNKS - PER_REQUEST   # the first batch was saved


def test_a_size_change_then_another_in_one_update_keeps_the_old_cache_whole(vault):
    with FakeOllama() as server:
        assert run_cli(*args_for(vault), host=server.url).returncode == 0
        note = vault / "note-042.md"
        note.write_text(note.read_text().replace("part 1 explains", "part 1 now explains"))
        server.embed_sizes(128, 256, 128)     # the changed chunk: 128, so all again; then 256, then 128
        before = len(server.of("/api/embed"))
        out = run_cli(*args_for(vault), host=server.url)
        assert out.returncode == 3 and out.stderr.count("error:") == 1 and "Traceback" not in out.stderr
        assert "rebuilding index: vector size changed (256 -> 128)" in out.stderr
        assert "then of 128" in out.stderr and "keeps the 300 vectors it holds" in out.stderr
        assert len(server.of("/api/embed")) - before == 3
    assert texts_the_next_run_embeds(vault) == 1           # the old vectors, and only the edit to embed


# ---- another build of the model under the same name ------------------------------------

def test_another_build_under_the_same_name_is_re_embedded_with_the_reason(vault):
    model = rag.EMBED_MODEL
    with FakeOllama() as server:
        assert run_cli(*args_for(vault), host=server.url).returncode == 0
        first, tags = server.digest(model), len(server.of("/api/tags"))
        server.digests[model] = "9" * 64                       # pulled again: new weights, the same name
        out = run_cli(*args_for(vault), host=server.url)
        assert out.returncode == 0, out.stderr
        assert (f"rebuilding index: '{model}' is another build under the same name (ID {first[:12]} -> "
                "999999999999, as `ollama list` shows it); re-embedding all") in out.stderr
        assert chunk_texts_sent(server) == 2 * CHUNKS and "Top sources:" in out.stdout
        out = run_cli(*args_for(vault), host=server.url)       # recorded: the next run embeds nothing
        assert out.returncode == 0 and "another build" not in out.stderr and chunk_texts_sent(server) == 2 * CHUNKS
        assert len(server.of("/api/tags")) == tags + 2          # one cheap request a run


def test_an_ollama_that_does_not_say_which_build_it_runs_is_warned_of_once(vault):
    model = rag.EMBED_MODEL
    with FakeOllama() as server:
        server.errors["/api/tags"] = (404, "404 page not found")
        runs = [run_cli(*args_for(vault), host=server.url) for _ in range(2)]
        assert all(out.returncode == 0 for out in runs), runs[0].stderr
        said = [out.stderr.count(f"does not say which build of '{model}' it runs") for out in runs]
        assert said == [1, 0] and chunk_texts_sent(server) == CHUNKS
        del server.errors["/api/tags"]                           # it says now: taken as the index's build
        assert "another build" not in run_cli(*args_for(vault), host=server.url).stderr
        server.digests[model] = "8" * 64                         # and a change from there is seen
        out = run_cli(*args_for(vault), host=server.url)
        assert "is another build under the same name" in out.stderr and chunk_texts_sent(server) == 2 * CHUNKS


# ---- a loaded cache is checked as strictly as it is unpickled ---------------------------

def rewrite_cache(path, change_dict=lambda d: None, change_vectors=lambda v: None):
    d, vectors = read_cache(path)
    change_dict(d)
    change_vectors(vectors)
    write_cache(path, d, vectors)


def set_rows(d, note, start, stop):
    """Give the note-th file record these chunk rows."""
    rows = np.frombuffer(d["files"]["rows"][2], "<i8").reshape(-1, 2).copy()
    rows[note] = (start, stop)
    d["files"]["rows"] = ("<i8", rows.shape, rows.tobytes())


def replace_array(d, key, dtype, values):
    d[key] = (dtype, (len(values),), np.asarray(values, dtype=dtype).tobytes())


def offsets(d, key):
    return np.frombuffer(d["chunks"][key][1][2], "<i8").copy()


DAMAGE = {
    "texts that are not text": (lambda d: d["chunks"].__setitem__("texts", (12345, d["chunks"]["texts"][1])), None),
    "a page column one short": (lambda d: replace_array(d["chunks"], "pages", "<i8", [-1] * 299), None),
    "a text cut mid-character": (lambda d: d["chunks"].__setitem__("texts", (
        "é".encode() + d["chunks"]["texts"][0][2:],
        ("<i8", (301,), np.r_[0, 1, offsets(d, "texts")[2:]].astype("<i8").tobytes()))), None),
    "a source name that is a number": (lambda d: d["chunks"]["names"].__setitem__(0, 7), None),
    "a source past the names": (lambda d: replace_array(d["chunks"], "source_ids", "<i4", [10**6] * 300), None),
    "a page below -1": (lambda d: replace_array(d["chunks"], "pages", "<i8", [-5] * 300), None),
    "rows past the end": (lambda d: set_rows(d, 3, 9, 10**6), None),
    "rows before the start": (lambda d: set_rows(d, 3, -5, 9), None),
    "rows that end before they start": (lambda d: set_rows(d, 3, 12, 9), None),
    "file stats that are not integers": (lambda d: d["files"].__setitem__("stats", ("<f8",) + d["files"]["stats"][1:]), None),
    "one file name too few": (lambda d: d["files"].__setitem__("names", (d["files"]["names"][0], (
        "<i8", (100,), np.frombuffer(d["files"]["names"][1][2], "<i8")[:100].tobytes()))), None),
    "files not a dict": (lambda d: d.__setitem__("files", [1, 2]), None),
    "postings past the end": (lambda d: d.__setitem__("lexicon", d["lexicon"][:2] + (
        ("<i4", (len(np.frombuffer(d["lexicon"][2][2], "<i4")),),
         np.full(len(np.frombuffer(d["lexicon"][2][2], "<i4")), 10**6, "<i4").tobytes()),) + d["lexicon"][3:]), None),
    "has_vector as floats": (lambda d: d.__setitem__("has_vector", ("<f4", (300,), bytes(1200))), None),
    "a NaN vector": (None, lambda v: v.__setitem__((7, 3), np.nan)),
    "an infinite vector": (None, lambda v: v.__setitem__((0, 0), np.inf)),
}


@pytest.fixture
def built(vault, server):
    """The vault indexed once (in-process), and its cache file."""
    s = rag.Settings(notes_dir=vault, cache_dir=vault.parent / "cache", chunk_size=300, chunk_overlap=0)
    rag.open_index(s, ollama.Client(host=server.url))
    return rag.cache_path(s)


@pytest.mark.parametrize("damage", DAMAGE)
def test_an_inconsistent_cache_is_refused(built, damage):
    change_dict, change_vectors = DAMAGE[damage]
    rewrite_cache(built, change_dict or (lambda d: None), change_vectors or (lambda v: None))
    index, reason = rag.load_index(built)
    assert index is None and reason.startswith("cache is damaged"), reason


def test_a_nan_vector_makes_a_rebuild_not_a_silent_not_found(vault, server, built):
    rewrite_cache(built, change_vectors=lambda v: v.__setitem__((7, 3), np.nan))
    out = run_cli(*args_for(vault), host=server.url)
    assert out.returncode == 0 and "Traceback" not in out.stderr
    assert "rebuilding index: cache is damaged" in out.stderr and "(300 chunks embedded)" in out.stderr
    assert "Top sources:" in out.stdout and "note-" in out.stdout


# ---- progress --------------------------------------------------------------------------------

def stderr_lines_with_times(p) -> list[tuple[float, str]]:
    lines = []
    for line in p.stderr:
        lines.append((time.monotonic(), line.rstrip("\n")))
    return lines


def test_progress_off_a_terminal_is_a_line_every_interval_and_a_summary(vault):
    with FakeOllama(embed_delay=0.15) as server:      # ten requests: about 1.5 s of embedding
        p = start(vault, server.url, "--progress-seconds", 0.4, "--json")
        got = []
        reader = threading.Thread(target=lambda: got.extend(stderr_lines_with_times(p)))
        reader.start()
        stdout = p.stdout.read()
        p.wait(timeout=60)
        reader.join()
    assert p.returncode == 0
    json.loads(stdout)                               # --json: stdout holds the object alone
    progress = [(t, line) for t, line in got if line.startswith("  embedding ")]
    assert 2 <= len(progress) <= 5, got
    assert all(b - a >= 0.3 for (a, _), (b, _) in itertools.pairwise(progress))
    # before the first batch, at most one line that waits for it; then the batches' rate
    assert all("chunks/s" in line for _, line in progress[1:]), progress
    assert "chunks/s" in progress[-1][1] and " left · note-" in progress[-1][1]
    assert got[-1][1].startswith("  embedded 300 chunks in") and "\r" not in "".join(line for _, line in got)
    # with a long interval, a short build prints the summary alone
    with FakeOllama() as server:
        (vault.parent / "cache").rename(vault.parent / "old-cache")
        out = run_cli(*args_for(vault, "--progress-seconds", 1000), host=server.url)
    lines = [line for line in out.stderr.splitlines() if line.startswith("  embedd")]
    assert len(lines) == 1 and lines[0].startswith("  embedded 300 chunks in"), out.stderr


@pytest.mark.parametrize("where", ["pipe", "pipe --json", "terminal"])
def test_a_first_build_says_what_it_embeds_at_once_and_its_line_moves_while_a_batch_is_out(
        tmp_path, where):
    import pty
    vault = make_vault(tmp_path / "vault", n=10)     # 30 chunks: one request
    args = args_for(vault, "--progress-seconds", 0.3, *["--json"] * ("json" in where))
    with FakeOllama() as server:
        batch = server.hold("/api/embed")            # the first batch stays out until set
        if where == "terminal":
            leader, follower = pty.openpty()
            p = subprocess.Popen([*SCRIPT_COMMAND, *map(str, args)], stdin=follower,
                                 stdout=follower, stderr=follower,
                                 env=user_env(server.url, {"COLUMNS": "200"}))
            os.close(follower)
            err = open(leader, "rb", buffering=0)
        else:
            p = start(vault, server.url, *args[len(args_for(vault)):])
            err = p.stderr
        try:
            said = read_until(err, "0/30 chunks · 1s elapsed · waiting", timeout=15)
            assert not server.records("/api/embed")[0]["done"]      # said while it is out
            batch.set()
            rest = read_terminal(leader) if where == "terminal" else p.communicate(timeout=60)
        finally:
            batch.set()
            p.kill()
            p.wait(timeout=30)
    assert p.returncode in (0, -9), rest
    waiting = said.count("0/30 chunks · ")
    assert waiting >= 2, said                        # two lines at least, a second apart or less
    announced = "embedding 30 chunks of 10 note(s) with qwen3-embedding:0.6b"
    if where == "pipe --json":                       # quiet: no message, progress on stderr only
        assert announced not in said and " elapsed" not in rest[0]
        assert json.loads(rest[0])["sources"]
    else:
        assert said.index(announced) < said.index("  embedding 0/30 chunks · 0s elapsed")


def test_progress_on_a_terminal_is_one_line_rewritten_in_place(vault):
    import pty
    with FakeOllama(embed_delay=0.15) as server:
        leader, follower = pty.openpty()            # stderr is a terminal, as in a user's shell
        p = subprocess.Popen([*SCRIPT_COMMAND, *map(str, args_for(vault))],
                             stdin=follower, stdout=follower, stderr=follower,
                             env=user_env(server.url, {"COLUMNS": "200"}))
        os.close(follower)
        try:
            received = read_terminal(leader)
            p.wait(timeout=60)
        finally:
            p.kill()
            os.close(leader)
    out = received.decode("utf-8", "replace")
    assert p.returncode == 0, out
    rewrites = out.count("\r\x1b[K  embedding ")
    assert rewrites >= 2 and "chunks/s" in out and " left · note-" in out
    assert "\r\x1b[K  embedded 300 chunks in" in out              # the summary replaces the line
    summary_line = out[out.index("  embedded 300 chunks in"):].split("\n")[0]
    assert "embedding" not in summary_line
