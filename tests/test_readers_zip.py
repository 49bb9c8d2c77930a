"""Word, OpenDocument, EPUB and Jupyter notes: read as their owners wrote them (headings as the
heading path, an e-book's chapters and a notebook's cells as the place cited, what is not the
author's text left out), and a hostile one (a zip bomb, a billion laughs, a damaged file) named
and skipped, as a scanned PDF is, while the other notes are indexed."""
from __future__ import annotations

import json
import shutil
import struct
import time
import tracemalloc
import zipfile

import ollama
import pytest
from conftest import ROOT
from office_files import make_docx, make_epub, make_libreoffice_epub, make_notebook, make_odt
from test_mcp import Mcp

import demo_rag as rag

OFFICE = ROOT / "tests" / "office"          # written by pandoc from the same Markdown, and
                                            # kettle-libreoffice.epub by LibreOffice 7.4 from kettle.odt
CLAIMS = "The warranty lasts 24 months from the date of purchase; keep the receipt for any zeppelin claim."
QUESTION = "Must I keep the receipt for a zeppelin?"
TEA = "# Tea\n\nGreen tea wants water at about 80 degrees, never boiling."
BLOCKS = [("toc", "Safety 1"), ("h1", "Safety"), ("p", "Never fill the kettle above the MAX line."),
          ("p", "# 1 is not a heading here"), ("li", "unplug it first"),
          ("h1", "Warranty"), ("h2", "Claims"), ("p", CLAIMS)]
CELLS = [("markdown", "# Kettles\n\nWe read the kettle receipts."),
         ("code", "# Claims: not a heading, a comment\nimport pandas as pd\nreceipts = pd.read_csv('r.csv')"),
         ("markdown", "## Claims\n\nA zeppelin claim needs the receipt.![plot](attachment:plot.png)"),
         ("code", "zeppelin_claims = receipts[receipts.months <= 24]  # the warranty's 24 months")]


def folder_with(tmp_path, name: str):
    """A notes folder holding one file of each kind under test, and a Markdown note."""
    notes = tmp_path / "notes"
    notes.mkdir(exist_ok=True)
    (notes / "tea.md").write_text(TEA)
    return notes


@pytest.mark.parametrize("name, make, place, section", [
    ("kettle.docx", lambda p: shutil.copy(OFFICE / "kettle.docx", p), None, "# Warranty › ## Claims"),
    ("kettle.odt", lambda p: shutil.copy(OFFICE / "kettle.odt", p), None, "# Warranty › ## Claims"),
    ("kettle.epub", lambda p: shutil.copy(OFFICE / "kettle.epub", p), "chapter 4", "# Warranty › ## Claims"),
    ("kettle-libreoffice.epub", lambda p: shutil.copy(OFFICE / "kettle-libreoffice.epub", p), "chapter 4",
     "# Warranty"),                       # its headings, styled paragraphs, named by its table of contents
    ("writer.epub", lambda p: make_libreoffice_epub(p, [("Safety", ["Never fill it above MAX."]),
                                                        ("Warranty", [CLAIMS])], version=2), "chapter 2",
     "# Warranty"),                       # EPUB 2: the table of contents is toc.ncx
    ("word.docx", lambda p: make_docx(p, BLOCKS), None, "# Warranty › ## Claims"),
    ("deutsch.docx", lambda p: make_docx(p, BLOCKS, "de"), None, "# Warranty › ## Claims"),
    ("office.odt", lambda p: make_odt(p, BLOCKS), None, "# Warranty › ## Claims"),
    ("book.epub", lambda p: make_epub(p, [("Safety", ["Never fill it above MAX."]),
                                         ("Warranty", [CLAIMS])]), "chapter 2", "# Warranty"),
    ("claims.ipynb", lambda p: make_notebook(p, CELLS, outputs="zeppelin " * 50), "cell 3",
     "# Kettles › ## Claims"),
    ("walkthrough.ipynb", lambda p: shutil.copy(ROOT / "examples" / "walkthrough.ipynb", p), "cell 19",
     "# RAG, one step at a time › ## 9. Part II: the pipeline the command line runs")])
def test_each_type_is_found_by_its_last_section_and_cited_there(tmp_path, cli, name, make, place, section):
    notes = folder_with(tmp_path, name)
    make(notes / name)
    question = QUESTION if name != "walkthrough.ipynb" else \
        "Which follow-up is first rewritten into a standalone search query?"    # Jupyter's own notebook
    out = cli(question, "--notes", notes, "--json", "--retrieve-only")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    top = json.loads(out.stdout)["sources"][0]
    assert (top["source"], top["place"], top["section"]) == (name, place, section)
    assert top["line"] is None and ("zeppelin" in top["text"] or "standalone" in top["text"])
    shown = cli(question, "--notes", notes, "--retrieve-only").stdout
    assert f"[1] {' › '.join(filter(None, [name, place, section]))}" in shown


def test_word_keeps_its_headings_and_text_and_leaves_out_what_word_does_not_show(tmp_path):
    body = ('<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Kept</w:t></w:r></w:p>'
            '<w:p><w:r><w:t xml:space="preserve">now </w:t></w:r><w:del><w:r><w:delText>gone '
            '</w:delText></w:r></w:del><w:r><w:instrText>PAGE</w:instrText><w:tab/><w:t>here</w:t></w:r></w:p>'
            '<w:p><w:pPr><w:outlineLvl w:val="1"/></w:pPr><w:r><w:t>By its outline</w:t></w:r></w:p>'
            '<w:tbl><w:tr><w:tc><w:p><w:r><w:t>a</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>b</w:t></w:r>'
            '</w:p></w:tc></w:tr></w:tbl><w:p><w:r><mc:AlternateContent><mc:Choice><w:t>shape</w:t></mc:Choice>'
            '<mc:Fallback><w:t>shape again</w:t></mc:Fallback></mc:AlternateContent></w:r></w:p>'
            '<w:p><w:r><w:t>ls -l</w:t><w:br/><w:t>cd /tmp</w:t></w:r></w:p>')     # a code block's lines
    document = (f'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
                f'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"><w:body>{body}'
                f'</w:body></w:document>')
    (section,), warning = rag.read_docx(make_docx(tmp_path / "w.docx", [], document=document))
    assert section.text == "# Kept\n\nnow here\n\n## By its outline\n\na | b\n\nshape\n\nls -l\n\ncd /tmp"
    assert warning is None and (section.page, section.line) == (None, None)
    (section,), _ = rag.read_docx(make_docx(tmp_path / "de.docx", BLOCKS, "de"))
    assert section.text.startswith("# Safety\n\nNever fill")            # its table of contents left out
    assert [h[2] for h in rag.heading_outline(section.text)] == ["Safety", "Warranty", "Claims"]
    assert "\n # 1 is not a heading here\n\n- unplug it first" in section.text


def test_a_notebook_is_its_cells_without_outputs_and_its_code_has_no_headings(tmp_path):
    sections, warning = rag.read_notebook(make_notebook(tmp_path / "n.ipynb", CELLS, outputs="OUTPUT TEXT"))
    assert [s.page for s in sections] == [1, 2, 3, 4] and warning is None
    text = "\n".join(s.text for s in sections)
    assert "OUTPUT" not in text and "Figure" not in text and "iVBOR" not in text and "attachment" not in text
    assert sections[1].text.startswith("```python\n# Claims: not a heading")
    assert [h[2] for h in rag.heading_outline(text)] == ["Kettles", "Claims"]
    chunks = rag.chunk_sections("n.ipynb", sections, rag.make_splitter())
    assert [c.heading for c in chunks] == ["# Kettles", "# Kettles", "# Kettles › ## Claims",
                                           "# Kettles › ## Claims"]
    # Jupyter's own notebook: every cell read but its outputs, numbered as Jupyter orders them
    walkthrough = json.loads((ROOT / "examples" / "walkthrough.ipynb").read_text())
    sections, _ = rag.read_notebook(ROOT / "examples" / "walkthrough.ipynb")
    assert [s.page for s in sections] == [i for i, c in enumerate(walkthrough["cells"], 1) if c["source"]]
    assert sections[0].text.startswith("# RAG, one step at a time")


def test_an_older_notebook_v3_reads_its_worksheets(tmp_path):
    v3 = {"nbformat": 3, "metadata": {}, "worksheets": [{"cells": [
        {"cell_type": "heading", "level": 2, "source": ["Setup"]},
        {"cell_type": "code", "language": "python", "input": ["# a comment\n", "x = 1"], "outputs": []}]}]}
    (tmp_path / "old.ipynb").write_text(json.dumps(v3))
    sections, _ = rag.read_notebook(tmp_path / "old.ipynb")
    assert [(s.page, s.text) for s in sections] == [(1, "## Setup"), (2, "```\n# a comment\nx = 1\n```")]


def test_an_e_book_is_its_chapters_in_reading_order(tmp_path):
    sections, warning = rag.read_epub(make_epub(tmp_path / "b.epub", [("One", ["first"]), ("Two", ["second"])],
                                                nav=True))
    assert [(s.page, s.text) for s in sections] == [(1, "# One\n\nfirst"), (2, "# Two\n\nsecond")]
    assert warning is None                # the cover (linear="no"), the contents and the <head> left out


# ---- hostile files ------------------------------------------------------------------------

def with_parts(book, path, parts: dict[str, str | bytes]):
    """A copy of the zip `book` at `path` whose parts named in `parts` hold what it gives."""
    with zipfile.ZipFile(book) as z, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as copy:
        for name in z.namelist():
            copy.writestr(name, parts.get(name, z.read(name)))
    return path


def zip_bomb(path, declared: int | None = None, megabytes: int = 200):
    """A .docx whose document.xml is `megabytes` of zeros (about 200 KB zipped); `declared`:
    the size its headers give instead of the true one (a lie)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z, z.open("word/document.xml", "w") as f:
        for _ in range(megabytes):
            f.write(bytes(2**20))
    if declared is not None:              # the local header's and the central directory's sizes
        data = bytearray(path.read_bytes())
        real = struct.pack("<I", megabytes * 2**20)
        for at in (data.find(b"PK\x03\x04") + 22, data.find(b"PK\x01\x02") + 24):
            assert data[at:at + 4] == real
            data[at:at + 4] = struct.pack("<I", declared)
        path.write_bytes(bytes(data))
    return path


def two_big_parts(path):
    """A .docx whose styles.xml and document.xml unzip to 60 MB each: well-formed styles, blank."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("word/styles.xml", "w") as f:
            f.write(b"<styles>")
            for _ in range(60):
                f.write(b" " * 2**20)
            f.write(b"</styles>")
        with z.open("word/document.xml", "w") as f:
            for _ in range(60):
                f.write(bytes(2**20))
    return path


def billion_laughs(path):
    lol = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    return make_docx(path, [], document=f'<?xml version="1.0"?><!DOCTYPE w [<!ENTITY l0 "lol">{lol}]>'
                                        '<w:document xmlns:w="x"><w:body>&l9;</w:body></w:document>')


def many_members(path):
    make_docx(path, [("p", CLAIMS)])
    with zipfile.ZipFile(path, "a") as z:
        for i in range(rag.Unzipped.MAX_MEMBERS):
            z.writestr(f"word/media/{i}.png", b"")
    return path


def truncated(path):
    data = make_docx(path, BLOCKS).read_bytes()
    path.write_bytes(data[:len(data) // 2])
    return path


def encrypted(path):
    make_odt(path, BLOCKS)
    data = bytearray(path.read_bytes())   # each part's flags say: locked with a password
    for header, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        for start in [i for i in range(len(data)) if data.startswith(header, i)]:
            data[start + at] |= 0x1
    path.write_bytes(bytes(data))
    return path


HOSTILE = [
    ("bomb.docx", zip_bomb, "a zip bomb? word/document.xml would unzip to 200 MB (a note's parts "
                            "may unzip to 100 MB in all)"),
    ("two.docx", two_big_parts, "a zip bomb? word/document.xml would unzip to 60 MB (a note's parts "
                                "may unzip to 100 MB in all)"),
    ("lying.docx", lambda p: zip_bomb(p, declared=1000), "not a readable Word file: a damaged zip (Bad CRC-32"),
    ("many.docx", many_members, "a zip bomb? it holds 10,004 files, over 10,000"),
    ("laughs.docx", billion_laughs, "its XML declares entities (a billion laughs?): refused"),
    ("cut.docx", truncated, "not a readable Word file: a damaged zip (File is not a zip file)"),
    ("locked.odt", encrypted, "encrypted OpenDocument file"),
    ("bad.ipynb", lambda p: p.write_text('{"cells": [{"cell_type": "markdown", "source": "# A'),
     "not a notebook: its JSON does not parse (Unterminated string"),
    ("list.ipynb", lambda p: p.write_text("[1, 2]"), "not a notebook: its JSON holds no cells"),
    ("bad.epub", lambda p: make_epub(p, []), "no text found in this EPUB file"),
    ("big.epub", lambda p: with_parts(make_epub(p.parent.parent / "b.epub", [("One", [])]), p, {
        "OEBPS/Text/chapter 1.xhtml": "<p>" + " " * 6 * 2**20}),
     "left out 1 chapter(s) it could not read (OEBPS/Text/chapter 1.xhtml: its XHTML unzips past 5 MB)"),
    ("empty.docx", lambda p: zipfile.ZipFile(p, "w").close(),
     "it has no word/document.xml, which every Word file has")]


@pytest.mark.parametrize("name, make, reason", HOSTILE)
def test_a_hostile_file_is_named_and_skipped_and_the_others_indexed(tmp_path, cli, name, make, reason):
    notes = folder_with(tmp_path, name)
    make(notes / name)
    out = cli("green tea", "--notes", notes, "--retrieve-only")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    said = [line for line in out.stderr.splitlines() if name in line]
    assert len(said) == 1 and said[0].startswith(f"warning: skipped {name}: {reason}"), said
    assert "indexed 1 note" in out.stderr and "[1] tea.md" in out.stdout


@pytest.mark.parametrize("make", [zip_bomb, lambda p: zip_bomb(p, declared=1000)], ids=["bomb", "lying"])
def test_a_zip_bomb_is_refused_within_bounded_memory(tmp_path, make):
    path = make(tmp_path / "bomb.docx")
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="zip bomb|damaged zip"):
            rag.read_docx(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * path.stat().st_size + 4 * 2**20, peak


# pandoc's chapter for "# Two" and a "## " heading whose text is a form feed, which XML forbids
PANDOC_FORM_FEED = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" lang="C" xml:lang="C">
<head>
  <meta charset="utf-8" />
  <meta name="generator" content="pandoc" />
  <title>ch002.xhtml</title>
</head>
<body epub:type="bodymatter">
<section id="two" class="level1">
<h1>Two</h1>
<p>second</p>
<section id="section" class="level2">
<h2>\f</h2>
<p>A zeppelin claim needs the receipt.</p>
</section>
</section>
</body>
</html>
"""


def test_a_chapter_that_is_not_well_formed_xml_is_read_as_a_web_page_is_and_one_that_is_no_text_named(tmp_path):
    book = make_epub(tmp_path / "b.epub", [("One", ["first"]), ("Two", []), ("Three", []), ("Four", [])])
    path = with_parts(book, tmp_path / "broken.epub", {"OEBPS/Text/chapter 2.xhtml": PANDOC_FORM_FEED,
                                                       "OEBPS/Text/chapter 3.xhtml": "<html><p>never closed</html>",
                                                       "OEBPS/Text/chapter 4.xhtml": b"\0PNG" * 10})
    sections, warning = rag.read_epub(path)
    assert [s.text for s in sections] == ["# One\n\nfirst", "# Two\n\nsecond\n\nA zeppelin claim needs the receipt.",
                                          "never closed"]
    assert [s.page for s in sections] == [1, 2, 3]
    assert warning == "left out 1 chapter(s) it could not read (OEBPS/Text/chapter 4.xhtml: looks binary, not text)"


def test_a_chapter_is_read_by_the_web_page_reader_and_laid_out_by_its_blocks(tmp_path):
    chapter = ('<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml" '
               'xmlns:epub="http://www.idpf.org/2007/ops"><head><title>Kettle</title></head><body>'
               '<h1>Kettle</h1><p>Fill   it to\nthe <em>MAX</em>&#160;line.</p><ul><li><p>unplug it</p></li>'
               '<li>let it cool</li></ul><table><tr><th>Water</th><th>Descale</th></tr><tr><td><p>Soft</p></td>'
               '<td>every 3 months</td></tr></table><pre><code># two spoons\n  boil</code></pre>'
               '<aside epub:type="footnote"><p>Citric acid, not vinegar.</p></aside>'
               '<nav epub:type="landmarks"><a href="x.xhtml">NAVWORD</a></nav><p># not a heading</p>'
               '<script>SCRIPTWORD</script></body></html>')
    book = make_epub(tmp_path / "b.epub", [("Kettle", [])])
    (section,), _ = rag.read_epub(with_parts(book, tmp_path / "k.epub", {"OEBPS/Text/chapter 1.xhtml": chapter}))
    assert section.text == ("# Kettle\n\nFill it to the MAX line.\n\n- unplug it\n\n- let it cool\n\n"
                            "Water | Descale\n\nSoft | every 3 months\n\n```\n# two spoons\n  boil\n```\n\n"
                            "Citric acid, not vinegar.\n\n # not a heading")


def laughing_epub(path):
    """An e-book whose chapter's DTD declares a billion laughs, and &nbsp; (as some e-books do)."""
    lol = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    chapter = (f'<?xml version="1.0"?><!DOCTYPE html [<!ENTITY nbsp "&#160;"><!ENTITY l0 "lol">{lol}]>'
               '<html><body><h1>Laughs</h1><p>&l9; zeppelin&nbsp;kettle</p></body></html>')
    book = make_epub(path.with_name(f"plain-{path.name}"), [("Laughs", [])])
    return with_parts(book, path, {"OEBPS/Text/chapter 1.xhtml": chapter})


def test_an_e_book_s_entities_are_never_expanded_nor_its_dtd_read_as_text(tmp_path):
    path = laughing_epub(tmp_path / "laughs.epub")
    tracemalloc.start()
    try:
        (section,), warning = rag.read_epub(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (section.text, warning) == ("# Laughs\n\n&l9; zeppelin kettle", None)
    assert peak < 4 * 2**20, peak


def test_a_chapter_with_no_headings_takes_them_from_the_table_of_contents(tmp_path):
    chapters = [("Safety", ["Never fill it above MAX.", "Children"]), ("Warranty", ["It lasts 24 months."])]
    for version in (3, 2):
        sections, _ = rag.read_epub(make_libreoffice_epub(tmp_path / f"{version}.epub", chapters, version))
        assert [s.text for s in sections] == ["# Safety\n\nNever fill it above MAX.\n\nChildren",
                                              "# Warranty\n\nIt lasts 24 months."], version
    # a chapter's own headings win; entries that go to an id are placed there
    nav = ('<nav epub:type="toc"><ol><li><a href="chapter%201.xhtml">Book</a><ol>'
           '<li><a href="chapter%201.xhtml#b">Brewing</a></li><li><a href="chapter%201.xhtml#c">Cups</a>'
           '</li></ol></li><li><a href="chapter%202.xhtml">Ignored</a></li></ol></nav>')
    book = make_epub(tmp_path / "b.epub", [("", []), ("Own", ["kept"])], nav=True)
    chapter = ('<html><body><p>Tea.</p><div id="b"><p>Brewing</p><p>Hot.</p></div><p>Warm.</p>'
               '<p id="c">Cold.</p></body></html>')
    sections, _ = rag.read_epub(with_parts(book, tmp_path / "n.epub", {"OEBPS/Text/nav.xhtml": nav,
                                                                        "OEBPS/Text/chapter 1.xhtml": chapter}))
    assert [s.text for s in sections] == ["# Book\n\nTea.\n\n## Brewing\n\nHot.\n\nWarm.\n\n## Cups\n\nCold.",
                                          "# Own\n\nkept"]


# ---- everywhere a note is read ------------------------------------------------------------

def test_mcp_read_note_gives_a_documents_text_with_its_places_never_its_zip(tmp_path, server):
    notes = folder_with(tmp_path, "")
    for name in ("kettle.docx", "kettle.epub"):
        shutil.copy(OFFICE / name, notes / name)
    make_notebook(notes / "claims.ipynb", CELLS, outputs="OUTPUT")
    m = Mcp(["--notes", notes, "--cache", tmp_path / "cache"], server.url)
    try:
        docx = m.call("read_note", path="kettle.docx")["structuredContent"]
        assert docx["text"].startswith("The ACME kettle\n\n# Safety") and "PK" not in docx["text"]
        epub = m.call("read_note", path="kettle.epub")["structuredContent"]["text"].split("\n")
        assert epub[epub.index("--- chapter 4 ---") + 1] == "# Warranty"
        cells = m.call("read_note", path="claims.ipynb")["structuredContent"]["text"]
        assert "--- cell 4 ---\n```python\nzeppelin_claims" in cells and "OUTPUT" not in cells
        found = m.call("search_notes", query=QUESTION)["structuredContent"]["sources"][0]
        assert (found["path"], found["place"]) in {("kettle.epub", "chapter 4"), ("kettle.docx", None),
                                                   ("claims.ipynb", "cell 4")}
    finally:
        m.p.kill()
        m.p.wait(timeout=30)


def test_an_unchanged_document_is_not_read_again_when_renamed(tmp_path, server, monkeypatch):
    notes = folder_with(tmp_path, "")
    shutil.copy(OFFICE / "kettle.docx", notes / "kettle.docx")
    s = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache")
    client = ollama.Client(host=server.url)
    rag.open_index(s, client)
    (notes / "kettle.docx").rename(notes / "boiler.docx")
    monkeypatch.setitem(rag.NOTE_TYPES, ".docx",
                        rag.NOTE_TYPES[".docx"]._replace(read=lambda *a: pytest.fail("read again")))
    index, _ = rag.open_index(s, client)
    assert {c.source for c in index.chunks} == {"boiler.docx", "tea.md"}


def test_word_s_lock_file_beside_an_open_document_is_no_note(tmp_path, cli):
    notes = folder_with(tmp_path, "")
    shutil.copy(OFFICE / "kettle.docx", notes / "kettle.docx")
    (notes / "~$kettle.docx").write_bytes(b"\x0bJane Doe" + bytes(150))    # as Word writes it
    out = cli(QUESTION, "--notes", notes, "--retrieve-only")
    assert out.returncode == 0 and "~$" not in out.stderr + out.stdout, out.stderr
    assert "indexed 2 notes" in out.stderr


def test_the_types_are_named_from_the_table(tmp_path, cli):
    empty = tmp_path / "empty"
    empty.mkdir()
    out = cli("anything", "--notes", empty)
    assert ".pdf, .docx, .odt, .epub, .ipynb, " in out.stderr
    assert ".docx, .odt, .epub, .ipynb, " in " ".join(cli("--help").stdout.split())


# ---- a document whose text passes --max-note-mb, however small its file ------------------------

SENTENCE = "The zeppelin kettle boils at noon; descale it with citric acid. "


def big_docx(path, language: str = "en"):
    """2 MB of text (0.6 M Chinese characters, 1.8 MB in UTF-8) in a Word file of a few KB."""
    text = "齐柏林水壶中午烧开，用柠檬酸除垢。" * 40 if language == "zh" else SENTENCE * 40
    count = int(2 * 2**20 / len(text.encode())) if language == "en" else int(0.6e6 / len(text))
    return make_docx(path, [("p", text)] * count)


def spaced_odt(path):
    """An .odt of <text:s text:c="80"/> (80 spaces in 21 bytes) between words: 13 MB of text read
    as 80 spaces each, 1.35 MB laid out as one."""
    return make_odt(path, [("xml", "<text:p>" + '<text:s text:c="80"/>zeppelin' * 150_000 + "</text:p>")])


def big_epub(path):
    """Twelve chapters of 0.15 MB, each well under the bound, 1.8 MB together."""
    return make_epub(path, [(f"Part {i}", [SENTENCE * 40] * 60) for i in range(12)])


def fenced_notebook(path):
    """A notebook under 1 MB whose 28,000 one-letter code cells, each fenced with its 40-letter
    language, make 1.4 MB of text."""
    cells = ",".join(['{"cell_type":"code","source":"x"}'] * 28_000)
    path.write_text('{"metadata":{"language_info":{"name":"%s"}},"nbformat":4,"cells":[%s]}'
                    % ("zeppelinkettle" * 2 + "python" * 2, cells))
    return path


TOO_MUCH_TEXT = [("big.docx", big_docx), ("big-zh.docx", lambda p: big_docx(p, "zh")),
                 ("spaced.odt", spaced_odt), ("big.epub", big_epub), ("cells.ipynb", fenced_notebook),
                 ("headings.html", lambda p: p.write_text("# a\n" * 240_000)),     # " # a": a space more
                 ("stars.org", lambda p: p.write_text("* a\n" * 240_000))]


@pytest.mark.parametrize("name, make", TOO_MUCH_TEXT, ids=[n for n, _ in TOO_MUCH_TEXT])
def test_a_note_whose_text_passes_the_bound_is_named_and_skipped(tmp_path, cli, name, make):
    notes = folder_with(tmp_path, name)
    make(notes / name)
    assert (notes / name).stat().st_size < 2**20          # its file is within --max-note-mb 1
    out = cli("green tea", "--notes", notes, "--retrieve-only", "--max-note-mb", "1", timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    said = [line for line in out.stderr.splitlines() if name in line]
    assert len(said) == 1 and said[0].startswith(f"warning: skipped {name}: its text: "), out.stderr
    assert said[0].endswith("MB is over the 1 MB limit (--max-note-mb)"), said
    assert "indexed 1 note" in out.stderr and "[1] tea.md" in out.stdout


@pytest.mark.parametrize("suffix, make", [("docx", big_docx), ("odt", spaced_odt), ("epub", big_epub)])
def test_a_document_s_text_stops_at_the_bound_without_being_made_whole_first(tmp_path, suffix, make):
    path = make(tmp_path / f"big.{suffix}")
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"its text: .* over the 0.5 MB limit"):
            rag.NOTE_TYPES[path.suffix].read(path, None, 0.5)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 24 * 2**20, peak                       # not the whole text (2 MB+) and its runs


def test_the_unzip_bound_follows_the_bound_on_a_note(tmp_path, cli):
    notes = folder_with(tmp_path, "zeros.docx")
    zip_bomb(notes / "zeros.docx", megabytes=30)
    out = cli("green tea", "--notes", notes, "--retrieve-only", "--max-note-mb", "1")
    assert "warning: skipped zeros.docx: a zip bomb? word/document.xml would unzip to 30 MB (a note's " \
           "parts may unzip to 20 MB in all)" in out.stderr, out.stderr


def test_a_skipped_document_is_not_read_again_by_a_run_or_by_mcp(tmp_path, server, monkeypatch):
    notes = folder_with(tmp_path, "")
    big_docx(notes / "big.docx")
    s = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache", max_note_mb=1)
    client = ollama.Client(host=server.url)
    _, report = rag.open_index(s, client)
    assert report.skipped["big.docx"].why.startswith("its text: ")
    with monkeypatch.context() as m:
        m.setitem(rag.NOTE_TYPES, ".docx", rag.NOTE_TYPES[".docx"]._replace(
            read=lambda *a: pytest.fail("read again")))
        index, report = rag.open_index(s, client)
    assert "big.docx" in report.skipped and "big.docx" not in index.files
    mcp = Mcp(["--notes", notes, "--cache", tmp_path / "cache", "--max-note-mb", "1"], server.url)
    try:
        for start in (1, 50):
            started = time.perf_counter()
            said = mcp.call("read_note", path="big.docx", start_line=start)
            assert said["isError"] and "not a note of the index" in said["content"][0]["text"], said
            assert time.perf_counter() - started < 5
        assert mcp.call("read_note", path="tea.md")["structuredContent"]["text"].startswith("# Tea")
    finally:
        mcp.p.kill()
        mcp.p.wait(timeout=30)


# ---- a reader that meets what it does not expect skips that note, never the folder -------------

ODD_NOTEBOOKS = {
    "info-number.ipynb": {"metadata": {"language_info": 5, "kernelspec": "python"}, "cells": [
        {"cell_type": "code", "source": "zeppelin = 1"}]},
    "info-list.ipynb": {"metadata": {"language_info": {"name": ["python"]}, "kernelspec": [1]}, "cells": [
        {"cell_type": "code", "source": "zeppelin = 1"}]},
    "worksheets-number.ipynb": {"worksheets": 3, "cells": None},
    "worksheet-cells-bool.ipynb": {"worksheets": [{"cells": True}, 7, {"cells": [
        {"cell_type": "markdown", "source": "# Zeppelin"}]}]},
    "odd-cells.ipynb": {"cells": [1, None, "x", {"cell_type": ["code"], "source": 5},
                                  {"cell_type": "heading", "level": "two", "source": ["Zeppelin", 3]}]},
}


@pytest.mark.parametrize("name", ODD_NOTEBOOKS)
def test_an_odd_notebook_is_read_for_what_it_holds_or_skipped_never_the_folder(tmp_path, cli, name):
    notes = folder_with(tmp_path, name)
    (notes / name).write_text(json.dumps(ODD_NOTEBOOKS[name]))
    out = cli("green tea", "--notes", notes, "--retrieve-only")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "[1] tea.md" in out.stdout
    said = [line for line in out.stderr.splitlines() if name in line and line.startswith("warning")]
    assert said == [] or said == [f"warning: skipped {name}: no text found in this notebook file"] \
        or said[0].startswith(f"warning: skipped {name}: under "), said
    if "zeppelin" in json.dumps(ODD_NOTEBOOKS[name]).lower():
        sections, _ = rag.read_notebook(notes / name)
        assert "zeppelin" in "\n".join(s.text for s in sections).lower()


def test_a_reader_s_own_fault_skips_its_note_with_the_reason(tmp_path, server, monkeypatch):
    notes = folder_with(tmp_path, "")
    make_notebook(notes / "claims.ipynb", CELLS)

    def faulty(*_):
        raise TypeError("'int' object is not iterable")
    monkeypatch.setitem(rag.NOTE_TYPES, ".ipynb", rag.NOTE_TYPES[".ipynb"]._replace(read=faulty))
    s = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache")
    index, report = rag.open_index(s, ollama.Client(host=server.url))
    assert report.skipped["claims.ipynb"].why == "its reader failed (TypeError: 'int' object is not iterable)"
    assert "tea.md" in index.files


def test_an_mcp_call_still_answers_beside_a_notebook_a_reader_would_fail_on(tmp_path, server):
    notes = folder_with(tmp_path, "")
    (notes / "odd.ipynb").write_text(json.dumps(ODD_NOTEBOOKS["worksheets-number.ipynb"]))
    m = Mcp(["--notes", notes, "--cache", tmp_path / "cache"], server.url)
    try:
        assert m.call("read_note", path="tea.md")["structuredContent"]["text"].startswith("# Tea")
        assert m.call("search_notes", query="green tea")["structuredContent"]["sources"][0]["path"] == "tea.md"
    finally:
        m.p.kill()
        m.p.wait(timeout=30)


# ---- one odd value is passed over, not the document ----------------------------------------------

DIGITS = "1" * 5_000
ODD_VALUES = [
    ("superscript.odt", lambda p: make_odt(p, [("xml", '<text:h text:outline-level="²">Kettle</text:h>'),
                                               ("p", CLAIMS)])),
    ("digits.odt", lambda p: make_odt(p, [("xml", f'<text:h text:outline-level="{DIGITS}">Kettle</text:h>'),
                                          ("p", CLAIMS)])),
    ("superscript.docx", lambda p: make_docx(p, [("xml", '<w:p><w:pPr><w:outlineLvl w:val="²"/></w:pPr><w:r>'
                                                         '<w:t>Kettle</w:t></w:r></w:p>'), ("p", CLAIMS)])),
    ("digits.docx", lambda p: make_docx(p, [("xml", '<w:p><w:pPr><w:pStyle w:val="Odd"/></w:pPr><w:r>'
                                                    '<w:t>Kettle</w:t></w:r></w:p>'), ("p", CLAIMS)],
                                        styles_xml=f'<w:style w:type="paragraph" w:styleId="Odd"><w:name '
                                                   f'w:val="Odd"/><w:pPr><w:outlineLvl w:val="{DIGITS}"/>'
                                                   f'</w:pPr></w:style>')),
    ("undefined.html", lambda p: p.write_bytes(f'<meta charset="undefined">\n<p>{CLAIMS} Grüße</p>\n'
                                               .encode("cp1252"))),
    ("idna.html", lambda p: p.write_bytes(f'<meta charset="idna">\n<p>{CLAIMS} {"é" * 80}</p>\n'
                                          .encode("cp1252"))),
    ("digits.ipynb", lambda p: p.write_text('{"cells": [{"cell_type": "markdown", "execution_count": %s, '
                                            '"source": "%s"}]}' % (DIGITS, CLAIMS))),
]


@pytest.mark.parametrize("name, make", ODD_VALUES, ids=[n for n, _ in ODD_VALUES])
def test_a_document_with_one_odd_value_is_read_the_value_passed_over(tmp_path, cli, name, make):
    notes = folder_with(tmp_path, name)
    make(notes / name)
    out = cli(QUESTION, "--notes", notes, "--retrieve-only", "--json")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert f"skipped {name}" not in out.stderr, out.stderr
    assert json.loads(out.stdout)["sources"][0]["source"] == name


# ---- footnotes and links are text; raw HTML is not -------------------------------------------------

def test_word_and_opendocument_footnotes_are_read(tmp_path):
    (section,), _ = rag.read_docx(make_docx(tmp_path / "f.docx", [("h1", "Kettle"), ("p", CLAIMS)],
                                            footnotes=["Citric acid, not vinegar."]))
    assert section.text == f"# Kettle\n\n{CLAIMS}\n\nCitric acid, not vinegar."
    note = ('<text:p>Descale it.<text:note text:note-class="footnote"><text:note-citation>1</text:note-citation>'
            '<text:note-body><text:p>Citric acid, not vinegar.</text:p></text:note-body></text:note></text:p>')
    (section,), _ = rag.read_odt(make_odt(tmp_path / "f.odt", [("h1", "Kettle"), ("xml", note)]))
    assert section.text == "# Kettle\n\nCitric acid, not vinegar.\n\nDescale it."


def test_a_notebook_s_markdown_is_read_as_jupyter_shows_it(tmp_path):
    cell = ('<div align="center"><img src="logo.png" alt="ALTWORD"></div>\n\n# Kettles\n\nSee [the warranty]'
            '(https://example.org/TARGETWORD_(terms)) <!-- COMMENTWORD --> and `<b>` in code.\n\n'
            '![a receipt](attachment:receipt.png)\n\n[1]: https://example.org/REFWORD "Title"\n')
    sections, _ = rag.read_notebook(make_notebook(tmp_path / "n.ipynb", [("markdown", cell)]))
    assert sections[0].text == ("\n\n# Kettles\n\nSee the warranty  and `<b>` in code.\n\na receipt\n\n\n")
