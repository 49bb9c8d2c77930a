#!/usr/bin/env python3
"""What the readers of Word, OpenDocument, EPUB and Jupyter files keep and drop, on real documents.

Documents: this project's README.md and two bench reports, written by pandoc as .docx, .odt and
.epub (pandoc cuts an EPUB into chapters at its level-1 headings); LibreOffice's styles.odt that
docutils ships (when installed); the notebook examples/walkthrough.ipynb, saved by Jupyter, and
the same notebook with outputs added as Jupyter stores them (a stream, a table as text/plain and
text/html, an image). For each: the words kept (of the Markdown source's words, as BM25 counts
them, the share found in the text read), the words that are no source word (noise), the headings
kept (of the source's, the share found as headings, in order), its numbered places and chunks,
and the last chunk's citation. Then the hostile files: the time and the peak memory
(tracemalloc) to refuse a zip bomb, a zip whose sizes lie, and a billion laughs (an e-book's
chapter is read without expanding them). When LibreOffice is installed (soffice), the e-books it
exports from pandoc's .odt files too: their headings are styled paragraphs, named by the table of
contents.

    pip install --target /tmp/pp pypandoc_binary            # a pandoc, for this study only
    PANDOC=/tmp/pp/pypandoc/files/pandoc python bench/readers_office.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests")]
import demo_rag as rag  # noqa: E402
from test_readers_zip import billion_laughs, laughing_epub, zip_bomb  # noqa: E402

SOURCES = [HERE.parent / "README.md", HERE / "fusion-study.md", HERE / "obsidian.md"]
STYLES_ODT = Path(__import__("docutils").__file__).parent / "writers/odf_odt/styles.odt" \
    if __import__("importlib").util.find_spec("docutils") else None


LIBREOFFICE = shutil.which("soffice")      # its e-books' headings are styled paragraphs


def from_libreoffice(odt: Path, work: Path) -> Path | None:
    """The e-book LibreOffice exports from `odt` (as Writer's File › Export as › EPUB does)."""
    out = work / "libreoffice"
    subprocess.run([LIBREOFFICE, "--headless", "--convert-to", "epub", "--outdir", str(out), str(odt)],
                   check=True, capture_output=True, timeout=300)
    made = out / f"{odt.stem}.epub"
    return made.rename(work / f"{odt.stem}-libreoffice.epub") if made.exists() else None


def words(text: str) -> Counter:
    return Counter(rag.tokenize(text))


def markdown_headings(text: str) -> list[str]:
    return [" ".join(title.replace("`", "").split()) for _, _, title in rag.heading_outline(text)]


def with_outputs(notebook: Path, out: Path) -> Path:
    """The notebook with outputs on its code cells, as Jupyter stores them."""
    nb = json.loads(notebook.read_text())
    for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        cell["execution_count"] = i + 1
        cell["outputs"] = [
            {"name": "stdout", "output_type": "stream", "text": [f"indexed {i} notes in 0.{i}s\n"] * 5},
            {"data": {"text/plain": ["   score  source\n", "0  0.91  bm25.md\n"] * 10,
                      "text/html": ["<table><tr><td>0.91</td><td>bm25.md</td></tr></table>"] * 10},
             "execution_count": i + 1, "metadata": {}, "output_type": "execute_result"},
            {"data": {"image/png": "iVBORw0KGgo" * 2000}, "metadata": {}, "output_type": "display_data"}]
    out.write_text(json.dumps(nb, indent=1))
    return out


def study(path: Path, source: str | None) -> dict:
    reader = rag.NOTE_TYPES[path.suffix.lower()]
    started = time.perf_counter()
    sections, warning = reader.read(path, None)
    took = time.perf_counter() - started
    text = "\n\n".join(s.text for s in sections)
    chunks = rag.chunk_sections(path.name, sections, rag.make_splitter())
    row = {"file": path.name, "KB": path.stat().st_size / 1024, "ms": took * 1000,
           "places": sum(s.page is not None for s in sections), "chunks": len(chunks),
           "chars": len(text), "last": rag.passage_citation(chunks[-1], rag.locate_passage(chunks[-1])),
           "warning": warning}
    if source is not None:
        want, got = words(source), words(text)
        row["kept"] = sum((want & got).values()) / sum(want.values())
        row["noise"] = sum((got - want).values()) / max(sum(got.values()), 1)
        heads, found = markdown_headings(source), markdown_headings(text)
        row["headings"] = f"{sum(h in found for h in heads)}/{len(heads)}"
    return row


def main() -> None:
    pandoc = os.environ.get("PANDOC") or shutil.which("pandoc")
    work = Path(tempfile.mkdtemp(prefix="readers-"))
    rows = []
    for md in SOURCES if pandoc else []:
        source = md.read_text(encoding="utf-8")
        for suffix in (".docx", ".odt", ".epub"):
            out = work / (md.stem + suffix)
            subprocess.run([pandoc, str(md), "-f", "gfm", "-o", str(out),
                            "--metadata", f"title={md.stem}"], check=True)
            rows.append(study(out, source))
        if LIBREOFFICE and (libre := from_libreoffice(work / f"{md.stem}.odt", work)):
            rows.append(study(libre, source))
    if STYLES_ODT and STYLES_ODT.exists():
        rows.append(study(STYLES_ODT, None))
    notebook = HERE.parent / "examples" / "walkthrough.ipynb"
    cells = json.loads(notebook.read_text())["cells"]
    source = "\n\n".join("".join(c["source"]) for c in cells)
    rows.append(study(notebook, source))
    rows.append(study(with_outputs(notebook, work / "walkthrough-run.ipynb"), source))
    print("| file | KB | read ms | places | chunks | chars | words kept | noise | headings | last chunk cited |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|---|")
    for r in rows:
        kept = f"{r['kept']:.1%}" if "kept" in r else "–"
        noise = f"{r['noise']:.1%}" if "noise" in r else "–"
        print(f"| {r['file']} | {r['KB']:.0f} | {r['ms']:.0f} | {r['places']} | {r['chunks']} | {r['chars']:,} "
              f"| {kept} | {noise} | {r.get('headings', '–')} | {r['last']} |")
    print()
    for name, make in [("bomb.docx (200 MB of zeros)", zip_bomb),
                       ("lying.docx (declares 1 KB)", lambda p: zip_bomb(p, declared=1000)),
                       ("laughs.docx (billion laughs)", billion_laughs),
                       ("laughs.epub (billion laughs in a chapter)", laughing_epub)]:
        path = make(work / name.split()[0])
        tracemalloc.start()
        started = time.perf_counter()
        try:
            rag.NOTE_TYPES[path.suffix].read(path, None)
            said = "read!"
        except ValueError as e:
            said = str(e)
        took, peak = time.perf_counter() - started, tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"| {name} | {path.stat().st_size / 1024:.0f} KB | {took * 1000:.0f} ms | "
              f"{peak / 2**20:.2f} MB | {said} |")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
