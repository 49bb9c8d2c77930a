"""Write Word, OpenDocument, EPUB and Jupyter files as their tools lay them out (the real part
names, namespaces and JSON), with the standard library alone, so the tests need none of those
tools. tests/office/ holds the same kinds of file written by pandoc itself."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
# (style id, name): Word's English ids, and a German Word's, whose names stay "heading N".
WORD_STYLES = {"en": {1: ("Heading1", "heading 1"), 2: ("Heading2", "heading 2")},
               "de": {1: ("berschrift1", "heading 1"), 2: ("berschrift2", "heading 2")}}


def word_paragraph(kind: str, text: str, styles: dict) -> str:
    """One w:p: kind is "h1", "h2", "p", "li" (a numbered list item) or "toc" (a table of
    contents line); "\\n" in text is a line break (w:br). Kind "xml": `text` is the body's XML."""
    if kind == "xml":
        return text
    runs = "<w:r><w:br/></w:r>".join(f'<w:r><w:t xml:space="preserve">{escape(t)}</w:t></w:r>'
                                      for t in text.split("\n"))
    props = {"h1": f'<w:pStyle w:val="{styles[1][0]}"/>', "h2": f'<w:pStyle w:val="{styles[2][0]}"/>',
             "li": '<w:pStyle w:val="ListParagraph"/><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr>',
             "toc": '<w:pStyle w:val="TOC1"/>', "p": ""}[kind]
    return f"<w:p><w:pPr>{props}</w:pPr>{runs}</w:p>"


def make_docx(path: Path, blocks: list[tuple[str, str]], language: str = "en",
              document: str | None = None, footnotes: list[str] = (), styles_xml: str = "") -> Path:
    """A .docx shaped like Word's: [Content_Types].xml, _rels/.rels, word/document.xml and
    word/styles.xml, whose heading styles have `language`'s ids (and `styles_xml`'s), and
    word/footnotes.xml when there are `footnotes` (each referenced from the first paragraph).
    `document` replaces document.xml's text (a hostile one)."""
    styles = WORD_STYLES[language]
    body = "".join(word_paragraph(kind, text, styles) for kind, text in blocks)
    notes = "".join(f'<w:footnote w:id="{i}"><w:p><w:r><w:footnoteRef/></w:r><w:r><w:t xml:space="preserve"> '
                    f'{escape(note)}</w:t></w:r></w:p></w:footnote>' for i, note in enumerate(footnotes, 1))
    body = body.replace("</w:t></w:r></w:p>", "</w:t></w:r>" + "".join(
        f'<w:r><w:footnoteReference w:id="{i}"/></w:r>' for i in range(1, len(footnotes) + 1)) + "</w:p>", 1)
    document = document or (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
                            f'<w:document xmlns:w="{W}"><w:body>{body}<w:sectPr/></w:body></w:document>')
    style_xml = "".join(f'<w:style w:type="paragraph" w:styleId="{sid}"><w:name w:val="{name}"/>'
                        f'<w:basedOn w:val="Normal"/><w:pPr><w:outlineLvl w:val="{lv - 1}"/></w:pPr></w:style>'
                        for lv, (sid, name) in styles.items())
    style_xml += ('<w:style w:type="paragraph" w:styleId="TOC1"><w:name w:val="toc 1"/></w:style>'
                  '<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/></w:style>'
                  + styles_xml)

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml",
                   '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/'
                   'package/2006/content-types"><Override PartName="/word/document.xml" ContentType="application/'
                   'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
        z.writestr("_rels/.rels",
                   '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/'
                   'package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/'
                   'officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>')
        z.writestr("word/document.xml", document)
        if footnotes:
            z.writestr("word/footnotes.xml", f'<w:footnotes xmlns:w="{W}"><w:footnote w:type="separator" w:id="-1">'
                                             f'<w:p><w:r><w:separator/></w:r></w:p></w:footnote>{notes}</w:footnotes>')
        z.writestr("word/styles.xml", f'<?xml version="1.0" encoding="UTF-8"?><w:styles xmlns:w="{W}">'
                                      f'{style_xml}</w:styles>')
    return path


def make_odt(path: Path, blocks: list[tuple[str, str]]) -> Path:
    """An .odt shaped like LibreOffice's: an uncompressed mimetype first, META-INF/manifest.xml
    and content.xml, headings as text:h with text:outline-level; a block of kind "xml" is its
    text, as XML."""
    def block(kind: str, text: str) -> str:
        if kind == "xml":
            return text
        if kind in ("h1", "h2"):
            return f'<text:h text:outline-level="{kind[1]}">{escape(text)}</text:h>'
        if kind == "li":
            return f"<text:list><text:list-item><text:p>{escape(text)}</text:p></text:list-item></text:list>"
        return f"<text:p>{escape(text)}</text:p>"
    content = ('<?xml version="1.0" encoding="UTF-8"?><office:document-content '
               'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
               'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.3">'
               '<office:body><office:text>' + "".join(block(k, t) for k, t in blocks) +
               '</office:text></office:body></office:document-content>')
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.text", zipfile.ZIP_STORED)
        z.writestr("META-INF/manifest.xml",
                   '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:'
                   'opendocument:xmlns:manifest:1.0"><manifest:file-entry manifest:full-path="content.xml" '
                   'manifest:media-type="text/xml"/></manifest:manifest>')
        z.writestr("content.xml", content)
    return path


def make_epub(path: Path, chapters: list[tuple[str, list[str]]], nav: bool = False) -> Path:
    """An EPUB 2 as Calibre and Sigil write one: mimetype, META-INF/container.xml, OEBPS/content.opf
    and a chapter file each, XHTML 1.1 with its DOCTYPE (&nbsp; is the outside DTD's), plus a cover
    the spine marks linear="no"; `nav`: EPUB 3's table of contents too, first in the spine."""
    def page(title: str, paragraphs: list[str]) -> str:
        body = f"<h1>{escape(title)}</h1>" + "".join(f"<p>{escape(p)}&nbsp;</p>" for p in paragraphs)
        return ('<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" '
                '"http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd">\n<html xmlns="http://www.w3.org/1999/xhtml">'
                f"<head><title>{escape(title)}</title><style>p {{ margin: 0 }}</style></head>"
                f"<body>{body}</body></html>")
    items = "".join(f'<item id="c{i}" href="Text/chapter%20{i}.xhtml" media-type="application/xhtml+xml"/>'
                    for i in range(1, len(chapters) + 1))
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(1, len(chapters) + 1))
    if nav:
        items += '<item id="nav" href="Text/nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
        spine = '<itemref idref="nav"/>' + spine
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("mimetype", "application/epub+zip", zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml",
                   '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:'
                   'container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/'
                   'oebps-package+xml"/></rootfiles></container>')
        z.writestr("OEBPS/content.opf",
                   '<?xml version="1.0" encoding="utf-8"?><package xmlns="http://www.idpf.org/2007/opf" '
                   'version="2.0" unique-identifier="id"><metadata/><manifest>'
                   '<item id="cover" href="Text/cover.xhtml" media-type="application/xhtml+xml"/>'
                   f'{items}</manifest><spine><itemref idref="cover" linear="no"/>{spine}</spine></package>')
        z.writestr("OEBPS/Text/cover.xhtml", page("Cover", ["The cover page, never read."]))
        z.writestr("OEBPS/Text/nav.xhtml", page("Contents", [title for title, _ in chapters]))
        for i, (title, paragraphs) in enumerate(chapters, 1):
            z.writestr(f"OEBPS/Text/chapter {i}.xhtml", page(title, paragraphs))
    return path


def make_notebook(path: Path, cells: list[tuple[str, str]], outputs: str = "") -> Path:
    """A notebook as Jupyter saves one (nbformat 4.5, one-space indents, sources as lists of
    lines, an id per cell); each code cell has `outputs` as a stream output and an image."""
    def lines(text: str) -> list[str]:
        return text.splitlines(keepends=True)
    nb_cells = []
    for i, (kind, text) in enumerate(cells):
        cell = {"cell_type": kind, "id": f"cell-{i}", "metadata": {}, "source": lines(text)}
        if kind == "code":
            cell.update(execution_count=i, outputs=[
                {"name": "stdout", "output_type": "stream", "text": lines(outputs)},
                {"data": {"image/png": "iVBORw0KGgo=", "text/plain": ["<Figure size 640x480>"]},
                 "metadata": {}, "output_type": "display_data"}] if outputs else [])
        nb_cells.append(cell)
    nb = {"cells": nb_cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                         "name": "python3"},
                                          "language_info": {"name": "python", "version": "3.11.7"}},
          "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def make_libreoffice_epub(path: Path, chapters: list[tuple[str, list[str]]], version: int = 3) -> Path:
    """An EPUB as LibreOffice's export (libepubgen) writes one: a section file per chapter, each
    on one line, its heading a styled paragraph (no <h1>), the chapters' titles in the table of
    contents only: toc.xhtml (EPUB 3's nav) and toc.ncx, or toc.ncx alone (`version` 2)."""
    def para(kind: int, text: str) -> str:
        return f'<p class="para{kind}"><span class="span{kind}">{escape(text)}</span></p>'
    names = [f"section{i:04d}.xhtml" for i in range(1, len(chapters) + 1)]
    items = "".join(f'<item href="sections/{n}" id="{n[:-6]}" media-type="application/xhtml+xml"/>' for n in names)
    nav = '<item href="toc.xhtml" id="toc.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
    points = "".join(f'<navPoint class="document" id="section{i}" playOrder="{i}"><navLabel><text>{escape(t)}</text>'
                     f'</navLabel><content src="sections/{n}"/></navPoint>'
                     for i, (n, (t, _)) in enumerate(zip(names, chapters), 1))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("mimetype", "application/epub+zip", zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml",
                   '<?xml version="1.0" encoding="UTF-8"?><container version="1.0" xmlns="urn:oasis:names:tc:'
                   'opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" '
                   'media-type="application/oebps-package+xml"/></rootfiles></container>')
        z.writestr("OEBPS/content.opf",
                   f'<?xml version="1.0" encoding="UTF-8"?><package unique-identifier="unique-identifier" '
                   f'version="{version}.0" xmlns="http://www.idpf.org/2007/opf"><metadata/><manifest>'
                   f'<item href="toc.ncx" id="toc.ncx" media-type="application/x-dtbncx+xml"/>'
                   f'{nav if version == 3 else ""}{items}</manifest><spine toc="toc.ncx">'
                   + "".join(f'<itemref idref="{n[:-6]}"/>' for n in names) + '</spine></package>')
        z.writestr("OEBPS/toc.ncx", '<?xml version="1.0" encoding="UTF-8"?><ncx version="2005-1" '
                   f'xmlns="http://www.daisy.org/z3986/2005/ncx/"><navMap>{points}</navMap></ncx>')
        if version == 3:
            z.writestr("OEBPS/toc.xhtml",
                       '<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml" '
                       'xmlns:epub="http://www.idpf.org/2007/ops"><head/><body><nav epub:type="toc"><ol>'
                       + "".join(f'<li><a href="sections/{n}">{escape(t)}</a></li>' for n, (t, _) in zip(names, chapters))
                       + "</ol></nav></body></html>")
        for name, (title, paragraphs) in zip(names, chapters):
            z.writestr(f"OEBPS/sections/{name}",
                       '<?xml version="1.0" encoding="UTF-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><head>'
                       '<meta content="text/html; charset=UTF-8" http-equiv="content-type"/></head>'
                       '<body class="body0">' + para(0, title) + "".join(para(1, p) for p in paragraphs)
                       + "</body></html>")
    return path
