"""What the web page, Org and reST readers keep and drop, on real documents found on this machine.

    python bench/readers_text.py            # prints the table bench/readers.md quotes

For each document: its size; the time to read it; the headings the reader found (the chunker cuts
at and cites them) against a reference reading by another tool (HTML: the standard library's
html.parser, every <h1>-<h6>; reST: docutils' sections; Org: pandoc's headers); the share of the
reader's headings whose line in the file holds the heading's words (what a citation opens); and
the characters of text kept against the reference's visible text. Documents not on this machine
are passed over; two pages are written by docutils' HTML5 writer from reST found here, and the
Org ones (and one page) by pandoc when pypandoc_binary is installed (`pip install
pypandoc_binary`; the suite never needs it).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import demo_rag as rag  # noqa: E402

RUST = Path.home() / ".rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html"
CMAKE = Path("/usr/share/cmake-3.25/Help/manual/cmake-buildsystem.7.rst")
CMAKE_LANGUAGE = CMAKE.with_name("cmake-language.7.rst")      # five notes, as <aside>s in HTML5
AWSCLI_TOPICS = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}." \
    f"{sys.version_info.minor}" / "site-packages/awscli/topics"
SITE = Path(rag.__file__).resolve().parent   # this project (its README, for pandoc's Org)
DOCUMENTS = [
    ("mdBook chapter (the Rust book)", RUST / "book/ch03-02-data-types.html"),
    ("rustdoc page (std's Vec)", RUST / "std/vec/struct.Vec.html"),
    ("texinfo manual page (libffi)", Path("/usr/share/doc/libffi8/html/The-Basics.html")),
    ("DocBook page (Debian's users and groups)",
     Path("/usr/share/doc/base-passwd/users-and-groups.html")),
    ("Sphinx source (CMake's buildsystem manual)", CMAKE),
    ("awscli topic", AWSCLI_TOPICS / "s3-config.rst"),
    ("numpy.ma README", Path(rag.np.__file__).parent / "ma/README.rst"),
]


def pandoc() -> str | None:
    try:
        import pypandoc
        return pypandoc.get_pandoc_path()
    except (ImportError, OSError):
        return None


def converted(tool: str, source: Path, to: str, folder: Path) -> Path:
    """`source` converted by pandoc to `to` ("html" with -s, "org"), in `folder`."""
    out = folder / f"{source.stem}.{to}"
    subprocess.run([tool, "-s", str(source), "-o", str(out)], check=True)
    return out


def docutils_page(source: Path, folder: Path) -> Path:
    """`source` written as HTML5 by docutils (its notes, warnings, sidebars and footnotes are
    <aside>s), without its style sheet."""
    import docutils.core
    out = folder / f"{source.stem}.html"
    out.write_bytes(docutils.core.publish_string(source.read_text(encoding="utf-8"), writer_name="html5",
                                                 settings_overrides={"report_level": 5, "halt_level": 5,
                                                                     "output_encoding": "utf-8",
                                                                     "embed_stylesheet": False,
                                                                     "stylesheet_path": ""}))
    return out


class Reference(HTMLParser):
    """The headings and text the standard library's parser sees outside scripts and styles."""

    def __init__(self):
        super().__init__()
        self.headings, self.chars, self.skip, self.inside = [], 0, 0, None

    def handle_starttag(self, tag, attrs):
        self.skip += tag in ("script", "style")
        if re.fullmatch(r"h[1-6]", tag):
            self.inside = []

    def handle_endtag(self, tag):
        self.skip -= tag in ("script", "style") and self.skip > 0
        if re.fullmatch(r"h[1-6]", tag) and self.inside is not None:
            self.headings.append(" ".join("".join(self.inside).split()))
            self.inside = None

    def handle_data(self, data):
        if not self.skip:
            self.chars += len("".join(data.split()))
            if self.inside is not None:
                self.inside.append(data)


def reference(path: Path, tool: str | None) -> tuple[list[str], int] | None:
    """Another tool's reading of `path`: its headings and the characters of its text (no spaces)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".html":
        parser = Reference()
        parser.feed(text)
        return parser.headings, parser.chars
    if path.suffix == ".rst":
        import docutils.core
        import docutils.nodes
        tree = docutils.core.publish_doctree(text, settings_overrides={
            "report_level": 5, "halt_level": 5, "doctitle_xform": False})
        for message in list(tree.findall(docutils.nodes.system_message)):
            message.parent.remove(message)        # an unknown directive's error quotes its source
        titles = [s[0].astext() for s in tree.findall(docutils.nodes.section)]
        return titles, len("".join(tree.astext().split()))
    if tool:
        blocks = json.loads(subprocess.run([tool, "-f", "org", "-t", "json", str(path)],
                                           capture_output=True, text=True, check=True).stdout)
        plain = subprocess.run([tool, "-f", "org", "-t", "plain", str(path)],
                               capture_output=True, text=True, check=True).stdout
        return ([json.dumps(b["c"][2]) for b in blocks["blocks"] if b["t"] == "Header"],
                len("".join(plain.split())))
    return None


def study(label: str, path: Path, tool: str | None) -> str:
    started = time.perf_counter()
    (section,), _ = rag.NOTE_TYPES[path.suffix].read(path, None)
    took = time.perf_counter() - started
    lines = rag.note_lines(rag.NoteFile(path.name, str(path), path.stat().st_size, 0, 0,
                                        path.stat().st_ino), rag.MAX_NOTE_MB)
    outline = rag.heading_outline(section.text)
    at = [section.text.count("\n", 0, offset) for offset, _, _ in outline]
    placed = sum(1 for n, (_, _, title) in zip(at, outline)
                 if re.split(r"\W+", title.strip("§ "))[0].lower() in lines[n].lower())
    kept = len("".join(section.text.replace("#", "").split()))
    ref = reference(path, tool)
    ref_headings, ref_chars = ref if ref else ([], 0)
    levels = "".join(str(level) for _, level, _ in outline[:12])
    return (f"| {label} | `{path.name}` | {path.stat().st_size // 1024} KB | {took * 1000:.0f} ms "
            f"| {len(outline)} / {len(ref_headings) if ref else '?'} | {levels}"
            f"{'…' if len(outline) > 12 else ''} | {placed}/{len(outline)} "
            f"| {kept:,} / {ref_chars:,} |" if ref else "| ? |")


def main() -> None:
    tool = pandoc()
    print("| document | file | size | read in | headings (reader / reference) | first levels "
          "| headings on their line | characters kept / reference |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        documents = [d for d in DOCUMENTS if d[1].is_file()]
        documents += [(label, docutils_page(source, Path(tmp))) for label, source in [
            ("docutils HTML5 page (CMake's language manual)", CMAKE_LANGUAGE),
            ("docutils HTML5 page (an awscli topic)", AWSCLI_TOPICS / "config-vars.rst")]
            if source.is_file()]
        if tool and CMAKE.is_file():
            documents += [("pandoc -s page (CMake's manual)", converted(tool, CMAKE, "html",
                                                                          Path(tmp))),
                          ("pandoc Org (CMake's manual)", converted(tool, CMAKE, "org", Path(tmp))),
                          ("pandoc Org (this README)", converted(tool, SITE / "README.md", "org",
                                                                 Path(tmp)))]
        for label, path in documents:
            print(study(label, path, tool), flush=True)


if __name__ == "__main__":
    main()
