"""A hostile pass beyond the eleven classes of folder blinks: a wrong answer the citation
check must not pass, and a cache that must not lose what it kept."""
from __future__ import annotations

import shutil

import demo_rag as rag


def cache_files(cache) -> list:
    return sorted(p for p in cache.glob("*.pkl"))


def test_a_second_loss_keeps_the_copy_from_before_the_first(cli, server, notes, tmp_path):
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    away = tmp_path / "away"
    away.mkdir()
    kept = sorted(p for p in notes.iterdir() if p.suffix in (".md", ".txt"))
    for p in kept[:6]:                                    # a sync half done: 6 of 10 gone
        shutil.move(p, away / p.name)
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    for p in kept[6:9]:                                   # ...then 3 of the 4 left
        shutil.move(p, away / p.name)
    out = cli("--notes", notes, "--retrieve-only", "coffee ratio")
    assert "Traceback" not in out.stderr
    for p in away.iterdir():                              # all back
        shutil.copy(p, notes / p.name)
    embedded = len(server.embedded_texts())
    out = cli("--notes", notes, "--retrieve-only", "coffee ratio")
    assert out.returncode == 0, out.stderr
    assert len(server.embedded_texts()) - embedded == 1   # the question, no chunk


def test_a_folder_empty_after_losing_most_notes_keeps_the_copy(cli, server, notes, tmp_path):
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    away = tmp_path / "away"
    away.mkdir()
    kept = sorted(p for p in notes.iterdir() if p.suffix in (".md", ".txt"))
    for p in kept[:6]:                                    # a sync half done: 6 of 10 gone
        shutil.move(p, away / p.name)
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    for p in kept[6:]:                                    # ...then the folder empty
        shutil.move(p, away / p.name)
    out = cli("--notes", notes, "--retrieve-only", "coffee ratio")
    assert out.returncode == rag.EXIT_USAGE and "Traceback" not in out.stderr
    for p in away.iterdir():                              # all back
        shutil.copy(p, notes / p.name)
    embedded = len(server.embedded_texts())
    out = cli("--notes", notes, "--retrieve-only", "coffee ratio")
    assert out.returncode == 0, out.stderr
    assert len(server.embedded_texts()) - embedded == 1   # the question, no chunk
