"""PDF notes: page-level citations, cleaned text, and clear skips."""
from __future__ import annotations

import json
import os
import time

import ollama
import pytest

import demo_rag as rag
from conftest import run_cli
from pdfs import make_pdf

try:
    import pypdf
except ImportError:                       # optional: the tests that read PDFs skip, one by one
    pypdf = None
needs_pypdf = pytest.mark.skipif(pypdf is None, reason="reading PDFs needs `pip install pypdf`")

MANUAL = [
    ["ACME Kettle Manual", "Safety", "Never fill the kettle above the MAX line.", "1"],
    ["ACME Kettle Manual", "Descaling", "Descale every month with citric acid. Fill with water and", "two spoons of acid, boil, then rin-", "se three times.", "2"],
    ["ACME Kettle Manual", "Warranty", "The warranty lasts   24 months from the date of purchase.", "3"],
]


@pytest.fixture
def pdf_notes(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    make_pdf(folder / "manual.pdf", MANUAL)
    make_pdf(folder / "scan.pdf", [[], []])
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not really a pdf\n%%EOF")
    if pypdf is not None:
        writer = pypdf.PdfWriter()
        writer.add_blank_page(200, 200)
        writer.encrypt("secret")
        with open(folder / "locked.pdf", "wb") as f:
            writer.write(f)
    else:                                 # only its name matters to the test without pypdf
        make_pdf(folder / "locked.pdf", [["stand-in for an encrypted PDF"]])
    (folder / "note.md").write_text("# Tea\n\nGreen tea wants water at about 80 degrees, never boiling.")
    return folder


@needs_pypdf
def test_text_is_extracted_per_page_and_cleaned(pdf_notes):
    sections, _ = rag.read_pdf(pdf_notes / "manual.pdf")
    assert [s.page for s in sections] == [1, 2, 3]
    page2 = sections[1].text
    assert "ACME Kettle Manual" not in page2            # a header repeated on every page
    assert "rinse three times" in page2                  # a hyphenated line break joined
    assert "lasts 24 months" in sections[2].text           # runs of spaces collapsed
    assert not sections[2].text.endswith("3")              # the page number footer dropped


@needs_pypdf
def test_pdf_chunks_cite_their_page(pdf_notes, cli, server):
    out = cli("How do I descale it with citric acid?", "--notes", pdf_notes, "--retrieve-only")
    assert out.returncode == 0, out.stderr
    assert "[1] manual.pdf › p.2" in out.stdout
    data = json.loads(cli("How long is the warranty?", "--notes", pdf_notes, "--json").stdout)
    assert (data["sources"][0]["source"], data["sources"][0]["page"]) == ("manual.pdf", 3)


@needs_pypdf
def test_unusable_pdfs_are_reported_by_name_and_skipped(pdf_notes, cli):
    out = cli("descale", "--notes", pdf_notes, "--retrieve-only")
    assert "skipped scan.pdf: no extractable text (a scanned PDF?)" in out.stderr
    assert "skipped broken.pdf: malformed PDF" in out.stderr
    assert "skipped locked.pdf: encrypted PDF" in out.stderr
    assert "indexed 2 notes" in out.stderr and "Traceback" not in out.stderr


@needs_pypdf
def test_an_unchanged_pdf_is_not_re_embedded(pdf_notes, server, tmp_path):
    s = rag.Settings(notes_dir=pdf_notes, cache_dir=tmp_path / "cache")
    client = ollama.Client(host=server.url)
    rag.open_index(s, client)
    before = len(server.embedded_texts())
    os.utime(pdf_notes / "manual.pdf", ns=(10**18, 10**18))
    (pdf_notes / "manual.pdf").rename(pdf_notes / "kettle.pdf")
    index, report = rag.open_index(s, client)
    assert len(server.embedded_texts()) == before
    assert {c.citation for c in index.chunks if c.page == 2} == {"kettle.pdf › p.2"}


def test_without_pypdf_pdfs_are_skipped_once_with_the_install_command(pdf_notes, server, tmp_path):
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "pypdf.py").write_text("raise ImportError('pypdf is not installed')")
    env = {"PYTHONPATH": str(blocker)}
    out = run_cli("green tea", "--notes", pdf_notes, "--cache", tmp_path / "c", "--retrieve-only",
                  host=server.url, env=env)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if "pip install pypdf" in ln]
    assert lines == ["warning: skipped 4 PDFs (broken.pdf, locked.pdf, manual.pdf, scan.pdf): "
                     "PDF support needs `pip install pypdf`"]
    assert "[1] note.md" in out.stdout


@needs_pypdf
def test_a_pdf_whose_text_passes_the_bound_is_skipped_as_soon_as_it_does(tmp_path, server):
    # 12,000 pages that each draw the same stream of 6 KB of text: a 2.5 MB file, 70 MB of text
    lines = ["The zeppelin kettle boils at noon; descale it with citric acid monthly."] * 80
    path = make_pdf(tmp_path / "echo.pdf", [lines], shared=12_000)
    assert path.stat().st_size < 3 * 2**20
    started = time.perf_counter()
    with pytest.raises(ValueError, match=r"its text: .* over the 1 MB limit \(--max-note-mb\)"):
        rag.read_pdf(path, None, 1)
    assert time.perf_counter() - started < 30            # all its pages: several minutes
    folder = tmp_path / "notes"
    folder.mkdir()
    path.rename(folder / "echo.pdf")
    (folder / "tea.md").write_text("# Tea\n\nGreen tea wants water at about 80 degrees, never boiling.\n")
    out = run_cli("green tea", "--notes", folder, "--retrieve-only", "--max-note-mb", "3",
                  "--cache", tmp_path / "cache", host=server.url, timeout=120)
    assert out.returncode == 0 and "warning: skipped echo.pdf: its text: " in out.stderr, out.stderr
