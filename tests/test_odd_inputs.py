"""Issue 15: what real folders and users throw at the script (odd files, odd names,
old encodings, bad flags, a broken environment). Each case as a user meets it: the
script as a subprocess, in a temporary folder, against the stand-in Ollama server."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading

import pytest

import demo_rag as rag
from conftest import SCRIPT, run_cli
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


# ---- item 3: FIFOs and devices named like notes --------------------------------

def test_a_fifo_or_device_named_like_a_note_is_skipped_not_waited_on(cli, tmp_path):
    folder = folder_with(tmp_path)
    os.mkfifo(folder / "note.md")
    os.symlink("/dev/zero", folder / "zero.md")
    out = cli("kite wind", "--notes", folder, "--retrieve-only", timeout=30)
    assert out.returncode == 0, out.stderr
    assert "skipped note.md: not a regular file" in out.stderr
    assert "skipped zero.md: not a regular file" in out.stderr
    assert "[1] kites.md" in out.stdout


# ---- item 4: file names that are not UTF-8 --------------------------------------

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
    assert rag.readable_name("café.md") == "café.md"
    assert rag.readable_name(os.fsdecode(b"sub/caf\xe9.md")) == "sub/caf\\xe9.md"
