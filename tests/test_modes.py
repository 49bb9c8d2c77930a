"""Every mode opens the index through one set-up (open_for_mode): the progress settings,
the usable-notes check and the --source check hold for all of them, through the CLI."""
from __future__ import annotations

import json
import re

import ollama
import pytest

import demo_rag as rag

PROGRESS = re.compile(r"embedding \d+/\d+ chunks · ")


@pytest.fixture
def eval_set(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"question": "What is BM25?", "answers": ["ranking"], "source": "bm25.md"}) + "\n",
                    encoding="utf-8")
    return path


MODES = {"question": ["What is BM25?", "--retrieve-only"], "--chat": ["--chat"],
         "--explain": ["--explain", "What is BM25?"], "--eval": ["--eval", "{set}"],
         "--tune": ["--tune", "{set}"], "--make-eval": ["--make-eval", "{new}", "--questions", "2"]}


def mode_args(mode: str, eval_set, tmp_path) -> list[str]:
    return [a.format(set=eval_set, new=tmp_path / "new.jsonl") for a in MODES[mode]]


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_reports_embedding_progress_as_often_as_asked(cli, notes, eval_set, tmp_path, mode):
    # Not a terminal: a progress line every --progress-seconds (0: every batch) on a cold build.
    out = cli("--notes", notes, *mode_args(mode, eval_set, tmp_path), "--progress-seconds", 0, stdin="")
    assert out.returncode == 0, out.stderr
    assert PROGRESS.search(out.stderr), out.stderr


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_refuses_a_folder_without_usable_notes(cli, tmp_path, eval_set, mode):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "stub.md").write_text("# too short")
    out = cli("--notes", empty, *mode_args(mode, eval_set, tmp_path), stdin="")
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert f"no usable notes in {empty}" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_refuses_a_source_pattern_that_matches_nothing(cli, notes, eval_set, tmp_path, mode):
    out = cli("--notes", notes, "--source", "recipes/*.md", *mode_args(mode, eval_set, tmp_path), stdin="")
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "no note matches --source 'recipes/*.md'" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "new.jsonl").exists()          # --make-eval wrote nothing


def test_a_notebook_s_top_k_is_capped_as_the_command_line_s(server, tmp_path):
    # More sources than fit in the largest context are never put in a prompt, whoever asks.
    notes = tmp_path / "kites"
    notes.mkdir()
    for i in range(40):
        (notes / f"kite-{i:02d}.md").write_text(f"# Kite {i}\n\nKite number {i} flies on a long string in wind.")
    s = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache", top_k=100)
    client = ollama.Client(host=server.url)
    index, _ = rag.open_index(s, client)
    r = rag.search(client, index, "kite string wind", s)
    assert len(index.chunks) == 40 and len(r.hits) == rag.top_k_limit(s.chunk_size) == 20
