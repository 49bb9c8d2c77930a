"""Web pages, Org-mode and reStructuredText notes, in the shapes the tools people use write them:
each found by a question about its last section and cited at the file's own line, with what is
not the author's text (scripts, navigation, drawers, settings, comments) left out, and hostile
files named and skipped in one line, never a traceback or a run that does not end."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

import demo_rag as rag

# "Save page as" (Chrome, "Webpage, HTML only"): the page as the site served it, with the mark of
# the web comment the browser adds; scripts, a site header and menus, a sidebar, a footer.
SAVED_PAGE = """<!DOCTYPE html>
<!-- saved from url=(0041)https://kettles.example.org/care/kettle -->
<html lang="en" class="no-js"><head><meta http-equiv="Content-Type" content="text/html; charset=UTF-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Kettle care · Kettles &amp; Co</title>
<link rel="stylesheet" href="./Kettle care_files/site.css">
<style>.menu { display: flex } /* STYLEWORD */</style>
<script async="" src="./Kettle care_files/analytics.js"></script>
<script>window.dataLayer = []; var s = "</div><h2>SCRIPTWORD</h2>"; if (a < b) { go(); }</script>
</head>
<body class="page">
<header class="site-header" role="banner"><a class="logo" href="https://kettles.example.org/">Kettles &amp; Co BANNERWORD</a>
<nav class="menu"><ul><li><a href="https://kettles.example.org/shop">Shop NAVWORD</a></li><li><a href="https://kettles.example.org/care">Care</a></li></ul></nav>
</header>
<main id="content">
<article>
<h1>Kettle care</h1>
<p>Fill the kettle to the <em>MAX</em> line,
never above it &mdash; it boils over.</p>
<h2 id="descaling">Descaling</h2>
<p>Descale every month with citric acid:</p>
<pre><code># two spoons of acid
boil --twice
</code></pre>
<h2 id="warranty">Warranty</h2>
<p>The warranty lasts 24 months from the date of purchase;
keep the zeppelin-shaped receipt in the drawer.</p>
</article>
<aside class="sidebar"><h3>Related SIDEWORD</h3><ul><li><a href="https://kettles.example.org/teapots">Teapots for every season</a></li><li><a href="https://kettles.example.org/cups">Cups and saucers</a></li></ul></aside>
</main>
<footer class="site-footer"><p>&copy; 2024 Kettles &amp; Co FOOTWORD</p></footer>
<noscript><img src="https://pixel.example.org/p.gif" alt="">NOSCRIPTWORD</noscript>
</body></html>
"""

# `pandoc -s --toc kettle.md -o kettle.html` (pandoc 3.9), its long style sheet cut short.
PANDOC_PAGE = """<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" lang="" xml:lang="">
<head>
  <meta charset="utf-8" />
  <meta name="generator" content="pandoc" />
  <meta name="viewport" content="width=device-width, initial-scale=1.0, user-scalable=yes" />
  <title>Kettle care</title>
  <style>
    html { color: #1a1a1a; background-color: #fdfdfd; }
    code span.co { color: #60a0b0; font-style: italic; } /* Comment STYLEWORD */
  </style>
</head>
<body>
<header id="title-block-header">
<h1 class="title">Kettle care</h1>
</header>
<nav id="TOC" role="doc-toc">
<ul>
<li><a href="#filling" id="toc-filling">Filling NAVWORD</a></li>
<li><a href="#descaling" id="toc-descaling">Descaling</a></li>
<li><a href="#warranty" id="toc-warranty">Warranty</a></li>
</ul>
</nav>
<h1 id="filling">Filling</h1>
<p>Fill the kettle to the MAX line, never above it.</p>
<h1 id="descaling">Descaling</h1>
<p>Descale every month with citric acid:</p>
<div class="sourceCode" id="cb1"><pre class="sourceCode sh"><code class="sourceCode bash"><span id="cb1-1"><a href="#cb1-1" aria-hidden="true" tabindex="-1"></a><span class="co"># two spoons of acid</span></span>
<span id="cb1-2"><a href="#cb1-2" aria-hidden="true" tabindex="-1"></a><span class="ex">boil</span> <span class="at">--twice</span></span></code></pre></div>
<h1 id="warranty">Warranty</h1>
<p>The warranty lasts 24 months from the date of purchase; keep the
zeppelin-shaped receipt in the drawer.</p>
</body>
</html>
"""

# `pandoc kettle.md -o kettle.html` (pandoc 3.9, no -s): a fragment, its sections all <h1>.
PANDOC_FRAGMENT = PANDOC_PAGE[PANDOC_PAGE.index('<h1 id="filling">'):PANDOC_PAGE.index("</body>")]

# Written in Emacs: a capture template's property drawer, a TODO with a priority and tags, a
# scheduled date, a logbook, a source block, a comment, and #+ settings.
EMACS_ORG = """#+TITLE: Kettle care
#+AUTHOR: Ann
#+FILETAGS: :home:
#+STARTUP: overview SETTINGWORD
:PROPERTIES:
:ID:       6f1c2a4e-PROPWORD
:END:

* Filling
Fill the kettle to the MAX line, never above it.
* TODO [#A] Descaling                                              :chores:
SCHEDULED: <2024-03-06 Wed +1m>
:LOGBOOK:
- State "DONE"       from "TODO"       [2024-02-06 Tue 09:12] LOGWORD
:END:
Descale every month with citric acid:
#+BEGIN_SRC sh
# two spoons of acid
boil --twice
#+END_SRC
# remember to buy acid COMMENTWORD
* Warranty
:PROPERTIES:
:CREATED:  [2024-01-02 Tue 10:00]
:END:
The warranty lasts 24 months from the date of purchase; keep the
zeppelin-shaped receipt in the drawer.
"""

# `pandoc -s kettle.md -t org` (pandoc 3.9): a CUSTOM_ID drawer under every headline.
PANDOC_ORG = """#+title: Kettle care

* Filling
:PROPERTIES:
:CUSTOM_ID: filling
:END:
Fill the kettle to the MAX line, never above it.

* Descaling
:PROPERTIES:
:CUSTOM_ID: descaling PROPWORD
:END:
Descale every month with citric acid:

#+begin_src sh
# two spoons of acid
boil --twice
#+end_src

* Warranty
:PROPERTIES:
:CUSTOM_ID: warranty
:END:
The warranty lasts 24 months from the date of purchase; keep the
zeppelin-shaped receipt in the drawer.
"""

# A Sphinx project's page: a field list, a table of contents, roles, a note, a code block, a
# comment, a link target, sections underlined in the order Sphinx's style guide gives.
SPHINX_RST = """:orphan:

.. _kettle-care:

###########
Kettle care
###########

.. toctree::
   :maxdepth: 2

   TOCWORD-page

Fill the kettle to the :term:`MAX line <max>`, never above it.

Descaling
=========

Descale every month with citric acid (see :ref:`acids`)::

   # two spoons of acid
   boil --twice

.. note::
   Let it cool first.

.. This is a comment: COMMENTWORD

.. code-block:: sh
   :linenos:

   # rinse
   rinse --three-times

Warranty
========

The warranty lasts 24 months from the date of purchase; keep the
zeppelin-shaped receipt in the drawer (`terms <https://example.org/terms>`_).
"""

# `pandoc -s kettle.md -t rst` (pandoc 3.9).
PANDOC_RST = """===========
Kettle care
===========

Filling
=======

Fill the kettle to the MAX line, never above it.

Descaling
=========

Descale every month with citric acid:

.. code:: sh

   # two spoons of acid
   boil --twice

Warranty
========

The warranty lasts 24 months from the date of purchase; keep the
zeppelin-shaped receipt in the drawer.
"""

# (file name, its text, the heading path its last section is cited under)
SAMPLES = [
    ("kettle-saved.html", SAVED_PAGE, "# Kettle care › ## Warranty"),
    ("kettle-pandoc.html", PANDOC_PAGE, "# Kettle care › ## Warranty"),
    ("kettle-fragment.html", PANDOC_FRAGMENT, "## Warranty"),
    ("kettle-emacs.org", EMACS_ORG, "# Kettle care › ## Warranty"),
    ("kettle-pandoc.org", PANDOC_ORG, "# Kettle care › ## Warranty"),
    ("kettle-sphinx.rst", SPHINX_RST, "# Kettle care › ## Warranty"),
    ("kettle-pandoc.rst", PANDOC_RST, "# Kettle care › ## Warranty"),
]
LEFT_OUT = ("SCRIPTWORD", "STYLEWORD", "NAVWORD", "BANNERWORD", "SIDEWORD", "FOOTWORD",
            "NOSCRIPTWORD", "PROPWORD", "SETTINGWORD", "LOGWORD", "COMMENTWORD", "TOCWORD")
OTHER_NOTE = "# Tea\n\nGreen tea wants water at about 80 degrees, never boiling, for two minutes.\n"


def line_of(text: str, words: str) -> int:
    """The 1-based number of the only line of `text` that holds `words`."""
    (n,) = [i for i, line in enumerate(text.split("\n"), 1) if words in line]
    return n


def note_file(path: Path) -> rag.NoteFile:
    st = path.stat()
    return rag.NoteFile(path.name, str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


@pytest.mark.parametrize("name, text, heading", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_the_last_section_is_found_and_cited_at_the_file_s_line(cli, tmp_path, name, text, heading):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / name).write_text(text, encoding="utf-8")
    (folder / "tea.md").write_text(OTHER_NOTE, encoding="utf-8")
    out = cli("How long is the warranty? Where is the zeppelin-shaped receipt kept?",
              "--notes", folder, "--retrieve-only", "--json")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "skipped" not in out.stderr, out.stderr
    top = json.loads(out.stdout)["sources"][0]
    line = line_of(text, "zeppelin-shaped")
    assert (top["source"], top["line"], top["section"]) == (name, line, heading), top
    # --mcp's read_note shows the file's own lines: the cited line is the one holding the words
    lines = rag.note_lines(note_file(folder / name), rag.MAX_NOTE_MB)
    assert len(lines) == text.count("\n") and "zeppelin-shaped" in lines[line - 1]
    printed = cli("zeppelin-shaped receipt warranty", "--notes", folder, "--retrieve-only").stdout
    assert f"[1] {name}:{line} › {heading}" in printed, printed


@pytest.mark.parametrize("name, text, heading", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_what_is_not_the_author_s_text_is_left_out_and_every_line_stays_in_place(
        tmp_path, name, text, heading):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    (section,), warning = rag.NOTE_TYPES[path.suffix].read(path, None)
    assert warning is None and section.line == 1
    assert section.text.count("\n") == text.count("\n")      # line N is the file's line N
    assert not [w for w in LEFT_OUT if w in section.text], section.text
    for words in ("MAX", "citric acid", "--twice", "24 months", "zeppelin-shaped"):
        assert words in section.text.split("\n")[line_of(text, words) - 1], words
    # code keeps its "# comment" as text, never as a heading the chunker would cut at
    assert [h[2] for h in rag.heading_outline(section.text)][-1] == "Warranty"
    assert "two spoons of acid" not in {h[2] for h in rag.heading_outline(section.text)}


# `docutils --writer=html5 kettle.rst` (docutils 0.22): a note, a sidebar, a topic, a warning,
# a tip and a footnote, each an <aside>; the table of contents a <nav>. Its style sheet cut.
DOCUTILS_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8" />
<title>Kettle care</title>
</head>
<body class="with-toc">
<main id="kettle-care">
<h1 class="title">Kettle care</h1>

<nav class="contents" id="contents" role="doc-toc">
<p class="topic-title"><a class="reference internal" href="#top">Contents NAVWORD</a></p>
<ul class="simple">
<li><p><a class="reference internal" href="#filling" id="toc-entry-1">Filling</a></p></li>
</ul>
</nav>
<aside class="admonition note">
<p class="admonition-title">Note</p>
<p>Let it cool before you descale it.</p>
</aside>
<section id="filling">
<h2><a class="toc-backref" href="#toc-entry-1" role="doc-backlink">Filling</a></h2>
<p>Fill the kettle to the MAX line <a class="brackets" href="#f1" id="footnote-reference-1" role="doc-noteref"><span class="fn-bracket">[</span>1<span class="fn-bracket">]</span></a>, never above it.</p>
<aside class="sidebar">
<p class="sidebar-title">Why MAX</p>
<p>Above it the water boils over the spout.</p>
</aside>
<aside class="topic">
<p class="topic-title">Acids</p>
<p>Citric acid works best.</p>
</aside>
<aside class="admonition warning">
<p class="admonition-title">Warning</p>
<p>Never descale while hot.</p>
</aside>
<aside class="admonition tip">
<p class="admonition-title">Tip</p>
<p>Rinse three times.</p>
</aside>
<aside class="footnote-list brackets">
<aside class="footnote brackets" id="f1" role="doc-footnote">
<span class="label"><span class="fn-bracket">[</span><a role="doc-backlink" href="#footnote-reference-1">1</a><span class="fn-bracket">]</span></span>
<p>The MAX line is on the inside.</p>
</aside>
</aside>
</section>
</main>
</body>
</html>
"""

# `sphinx-build -b html` (Sphinx 9.0, its default theme, alabaster) on the same file: admonitions
# are <div>s, the sidebar and the topic <aside>s; the site's sidebar is role="navigation".
SPHINX_PAGE = """<!DOCTYPE html>
<html lang="en" data-content_root="./">
  <head>
    <meta charset="utf-8" />
    <title>Kettle care &#8212; Kettle  documentation</title>
    <script src="_static/documentation_options.js?v=5929fcd5"></script>
  </head><body>
    <div class="document">
      <div class="documentwrapper">
        <div class="bodywrapper">
          <div class="body" role="main">
  <section id="kettle-care">
<h1>Kettle care<a class="headerlink" href="#kettle-care" title="Link to this heading">¶</a></h1>
<div class="admonition note">
<p class="admonition-title">Note</p>
<p>Let it cool before you descale it.</p>
</div>
<section id="filling">
<h2>Filling<a class="headerlink" href="#filling" title="Link to this heading">¶</a></h2>
<p>Fill the kettle to the MAX line <a class="footnote-reference brackets" href="#f1" id="id1" role="doc-noteref"><span class="fn-bracket">[</span>1<span class="fn-bracket">]</span></a>, never above it.</p>
<aside class="sidebar">
<p class="sidebar-title">Why MAX</p>
<p>Above it the water boils over the spout.</p>
</aside>
<aside class="topic">
<p class="topic-title">Acids</p>
<p>Citric acid works best.</p>
</aside>
<div class="admonition warning">
<p class="admonition-title">Warning</p>
<p>Never descale while hot.</p>
</div>
<aside class="footnote-list brackets">
<aside class="footnote brackets" id="f1" role="doc-footnote">
<span class="label"><span class="fn-bracket">[</span><a role="doc-backlink" href="#id1">1</a><span class="fn-bracket">]</span></span>
<p>The MAX line is on the inside.</p>
</aside>
</aside>
</section>
</section>
          </div>
        </div>
      </div>
      <div class="sphinxsidebar" role="navigation" aria-label="Main">
        <div class="sphinxsidebarwrapper">
<h1 class="logo"><a href="#">Kettle</a></h1>
<h3>Navigation</h3>
<div class="relations">
<h3>Related Topics</h3>
<ul>
  <li><a href="#">Documentation overview NAVWORD</a><ul>
  </ul></li>
</ul>
</div>
        </div>
      </div>
      <div class="clearer"></div>
    </div>
    <div class="footer">
      &#169;.
    </div>
  </body>
</html>
"""


@pytest.mark.parametrize("page", [DOCUTILS_PAGE, SPHINX_PAGE], ids=["docutils", "sphinx"])
def test_asides_that_hold_prose_are_kept_and_those_of_links_left_out(page):
    (section,), _ = rag.read_html(Path("kettle.html"), page.encode())
    lines = section.text.split("\n")
    for words in ("Let it cool", "boils over the spout", "Citric acid works best", "Never descale while hot",
                  "The MAX line is on the inside"):
        assert words in lines[line_of(page, words) - 1], words
    assert "NAVWORD" not in section.text and "Related Topics" not in section.text
    assert [h[2] for h in rag.heading_outline(section.text)] == ["Kettle care", "Filling"]
    # an aside of links is navigation, nested or not: left out, its heading too
    related = ('<aside class="sidebar"><h2>Related</h2><ul><li><a href="a.html">Teapots for every season</a></li>'
               '<li><a href="b.html">Cups</a></li></ul></aside>')
    (section,), _ = rag.read_html(Path("p.html"), f"<h2>Tea</h2>\n<p>Brew it.</p>\n{related}\n".encode())
    assert section.text == "# Tea\nBrew it.\n\n"


def test_a_note_s_card_takes_its_title_and_tags_from_the_file():
    page = rag.read_html(Path("p.html"), SAVED_PAGE.encode())[0][0]
    org = rag.read_org(Path("k.org"), EMACS_ORG.encode())[0][0]
    assert page.meta.title == "Kettle care · Kettles & Co"
    assert (org.meta.title, org.meta.tags) == ("Kettle care", ("chores", "home"))
    assert "TODO" not in org.text and "[#A]" not in org.text and ":chores:" not in org.text


def test_html_text_is_decoded_and_placed_as_a_browser_shows_it():
    page = ("<p>caf&eacute; &amp; t&#233;a&#10;on one line</p>\n"
            "<p>one</p><p>two</p>\n<table><tr><td>Model</td><td>K1</td></tr></table>\n"
            "<h2>A\nlong title</h2>\n<h2>C#</h2>\n<p>x</p>\n")
    lines = rag.read_html(Path("p.html"), page.encode())[0][0].text.split("\n")
    assert lines[:3] == ["café & téa on one line", "one two", "Model | K1"]
    assert lines[3:6] == ["## A long title", "", "## C#"]


@pytest.mark.parametrize("title", ["Title\n=====", "=====\nTitle\n=====", "Title\n~~~~~", "Title\n####"])
def test_rst_titles_take_their_level_from_the_order_their_style_first_appears(title):
    text = f"{title}\n\nIntro.\n\nFirst\n-----\n\nOne.\n\nSecond\n------\n\nTwo.\n"
    lines = rag.read_rst(Path("t.rst"), text.encode())[0][0].text.split("\n")
    headings = [ln for ln in lines if ln.startswith("#")]
    assert headings == ["# Title", "## First", "## Second"], lines


def test_org_drawers_and_blocks_never_closed_are_text_as_in_org():
    text = "* A\n:PROPERTIES:\nkept words\n* B\n#+BEGIN_SRC sh\nalso kept\n"
    lines = rag.read_org(Path("o.org"), text.encode())[0][0].text.split("\n")
    assert lines[:6] == ["## A", ":PROPERTIES:", "kept words", "## B", "", "also kept"], lines


def test_an_org_headline_over_the_heading_bound_is_text():
    long, bound = "coffee " * 40, "t" * rag.HEADING_MAX_CHARS          # 280 characters, and 200
    text = f"* {bound}\n* {long}:tea:\nbody\n"
    (section,), _ = rag.read_org(Path("o.org"), text.encode())
    assert section.text.split("\n")[:2] == [f"## {bound}", f"* {long}:tea:"]
    assert section.meta.tags == ()                                     # a line of text has no tags


# ---- hostile files: one warning each, the run goes on, and it ends soon ------------------------

HOSTILE = {
    "unclosed-attribute.html": b"<a title='" + b"x" * 2_000_000,
    "only-scripts.html": b"<html><head><script>" + b"var a = 1;\n" * 1000 + b"</script></head></html>",
    "nul.html": b"<p>text\0" + b"\0" * 100 + b"</p>",
    "nul.org": b"* A\n\0\0\0binary",
    "nul.rst": b"Title\n=====\n\0\0\0",
    "unclosed-lt.html": b"<a" * 1_000_000,
    "quoted-lt.html": b"<a '" * 500_000,
}


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_file_is_named_in_one_warning_and_skipped(cli, tmp_path, name):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "tea.md").write_text(OTHER_NOTE, encoding="utf-8")
    (folder / name).write_bytes(HOSTILE[name])
    started = time.perf_counter()
    out = cli("green tea", "--notes", folder, "--retrieve-only", timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert time.perf_counter() - started < 30                      # html.parser: hours on some
    said = [ln for ln in out.stderr.splitlines() if name in ln]
    assert len(said) == 1 and said[0].startswith(f"warning: skipped {name}: "), out.stderr
    assert "[1] tea.md" in out.stdout


@pytest.mark.parametrize("name, data", [
    ("unclosed.html", "<html><body><h1>Kettle<p>Fill it to the MAX line.<ul><li>Descale"
                      "<li>Rinse three times, the zeppelin way<div><div><span>"),
    ("unclosed-attribute.html", "<p>The zeppelin kettle.</p><a title='" + "x\n" * 500_000),
    ("deep.html", "<div>" * 100_000 + "<p>The zeppelin-shaped kettle, nested deep.</p>"),
    ("long-line.html", "<p>" + "Tea and kettles. " * 120_000 + "The zeppelin word.</p>"),
    ("entities.html", "<p>" + "&amp;&#" * 300_000 + " zeppelin</p>"),
    ("many-headings.html", "<h2>Part\n" * 50_000 + "<p>zeppelin"),
    ("stars.org", "* x\n" * 100_000 + "zeppelin\n"),
    ("colons.rst", ":a" * 500_000 + "\n\nzeppelin\n"),
    ("adornments.rst", "==\n" * 300_000 + "\nzeppelin\n"),
])
def test_a_page_a_browser_would_show_is_read_in_linear_time(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(data, encoding="utf-8")
    started = time.perf_counter()
    (section,), _ = rag.NOTE_TYPES[path.suffix].read(path, None)
    assert time.perf_counter() - started < 20, name
    assert "zeppelin" in section.text and section.text.count("\n") == data.count("\n")


def test_help_and_the_looked_for_message_name_every_type_of_the_table(cli, tmp_path):
    helped = cli("--help").stdout
    assert all(suffix in helped for suffix in (".html", ".htm", ".org", ".rst"))
    assert re.search(r"\.md, .*\.rst files", " ".join(helped.split())), helped
    empty = tmp_path / "empty"
    empty.mkdir()
    out = cli("tea", "--notes", empty)
    assert out.returncode == 2 and f"looked for {', '.join(rag.NOTE_TYPES)}" in out.stderr
    assert ".html, .htm, .org, .rst" in out.stderr, out.stderr


def test_the_readme_names_every_type_of_the_table():
    readme = (Path(rag.__file__).parent / "README.md").read_text(encoding="utf-8")
    for suffix in rag.NOTE_TYPES:
        assert f"`{suffix}`" in readme, suffix



def test_a_page_s_declared_charset_decides_where_its_bytes_alone_would_be_a_guess():
    body = "<p>Grüße aus Köln, sagt die Teekanne.</p>\n"
    said = ('<meta charset="windows-1252">\n' + body).encode("cp1252")
    (section,), warning = rag.read_html(Path("p.html"), said)
    assert (section.text.split("\n")[1], warning) == ("Grüße aus Köln, sagt die Teekanne.", None)
    _, guessed = rag.read_html(Path("p.html"), body.encode("cp1252"))
    assert guessed and "a guess" in guessed
    # a charset that would change the file's lines (UTF-16 without a BOM) is not taken
    data = b'<meta charset="utf-16">\n<p>\xe9t\xe9 au caf\xe9!</p>\n'
    assert len(data) % 2 == 0 and data.decode("utf-16").count("\n") != data.count(b"\n")
    (section,), _ = rag.read_html(Path("p.html"), data)
    assert section.text.count("\n") == 2 and "caf" in section.text


# ---- what the readers kept or dropped wrongly ---------------------------------------------------

CSV_RST = """csv --- CSV File Reading and Writing
=====================================

.. module:: csv

Module Contents
---------------

.. class:: DictReader(f, fieldnames=None, restkey=None, restval=None, dialect='excel', *args, **kwds)

   Create an object that operates like a regular reader but maps the information in each row to a
   :class:`dict` whose keys are given by the optional *fieldnames* parameter. If a row has more
   fields than fieldnames, the remaining data is put in a list and stored with the fieldname
   specified by *restkey* (which defaults to ``None``).

   .. method:: DictReader.fieldnames

      The field names, read from the first row of the file when not given.

.. class:: special

   A docutils class directive: its content is text as well.
"""


def test_rst_class_directives_keep_their_signature_and_body(cli, tmp_path):
    (section,), _ = rag.read_rst(Path("csv.rst"), CSV_RST.encode())
    lines = section.text.split("\n")
    for words in ("DictReader(f, fieldnames=None, restkey=None", "stored with the fieldname",
                  "specified by *restkey*", "The field names, read from the first row",
                  "A docutils class directive"):
        assert any(words in line for line in lines), (words, lines)
    assert lines[CSV_RST.split("\n").index("   specified by *restkey* (which defaults to ``None``).")] \
        .endswith("(which defaults to None).")                    # on the file's line
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "csv.rst").write_text(CSV_RST, encoding="utf-8")
    (folder / "tea.md").write_text(OTHER_NOTE, encoding="utf-8")
    out = cli("Where does DictReader put the extra fields, restkey?", "--notes", folder,
              "--retrieve-only", "--json")
    top = json.loads(out.stdout)["sources"][0]
    assert top["source"] == "csv.rst" and "restkey" in top["text"], top


def test_org_drawers_keep_their_text_but_properties_and_logbook_and_fixed_width_lines_stay_as_written():
    text = ("#+TITLE: Magit\n* Introduction\n:PREAMBLE:\nMagit is an interface to the version control "
            "system Git.\n:END:\n:PROPERTIES:\n:CUSTOM_ID: intro\n:END:\n:LOGBOOK:\nCLOCK: [2026-01-02]\n"
            ":END:\n: [[https://magit.vc][the manual]] *not bold*\n:\nDone.\n")
    (section,), _ = rag.read_org(Path("magit.org"), text.encode())
    assert section.text.split("\n") == [
        "# Magit", "## Introduction", "", "Magit is an interface to the version control system Git.", "",
        "", "", "", "", "", "", "[[https://magit.vc][the manual]] *not bold*", "", "Done.", ""]


def test_rst_code_blocks_stay_as_written_with_their_caption_and_references_lose_their_underscore():
    text = ("Read reStructuredText_ and Sphinx_\n==================================\n\n"
            ".. code-block:: rst\n   :caption: A title in reST\n   :linenos:\n\n   Title\n   =====\n\n"
            "   See :ref:`intro` and `Python <https://python.org>`_.\n\nAfter the block, Python_, "
            "``keep_`` and *r_*.\n\n.. _reStructuredText: https://docutils.sourceforge.io/rst.html\n")
    (section,), _ = rag.read_rst(Path("r.rst"), text.encode())
    lines = section.text.split("\n")
    assert lines[0] == "# Read reStructuredText and Sphinx" and lines[1] == ""
    assert lines[4] == "A title in reST" and lines[7:12] == [
        "   Title", "   =====", "", "   See :ref:`intro` and `Python <https://python.org>`_.", ""], lines
    assert lines[12] == "After the block, Python, keep_ and *r_*." and "docutils" not in section.text


# A Sphinx page (alabaster, the default theme: its footer is a div of class "footer") and
# docutils' pages (HTML5: the .. header:: directive's <header>; HTML4: div of class "header").
CHROME_PAGES = {
    "sphinx.html": '<html><head><title>Kettle</title></head><body>\n<div class="document"><div '
                   'class="documentwrapper"><div class="body" role="main">\n<h1>Kettle</h1>\n<p>Descale it '
                   'monthly with citric acid.</p>\n</div></div></div>\n<div class="footer">&copy;2026, Ann. | '
                   'Powered by <a href="https://www.sphinx-doc.org/">Sphinx 7.2.6</a> &amp; <a href="https:'
                   '//alabaster.readthedocs.io">Alabaster 0.7.16</a> | <a href="_sources/index.rst.txt">Page '
                   'source</a></div></body></html>',
    "docutils5.html": '<html><body>\n<header>\n<p>Draft of the kettle notes, CHROMEWORD</p>\n</header>\n'
                      '<main id="kettle">\n<h1 class="title">Kettle</h1>\n<p>Descale it monthly with citric '
                      'acid.</p>\n</main>\n<footer>\n<p>Page CHROMEWORD</p>\n</footer>\n</body></html>',
    "docutils4.html": '<html><body>\n<div class="header">\nDraft of the kettle notes, CHROMEWORD\n<hr '
                      'class="header"/>\n</div>\n<div class="document" id="kettle">\n<h1 class="title">'
                      'Kettle</h1>\n<p>Descale it monthly with citric acid.</p>\n</div>\n<div class="footer">'
                      '\n<hr class="footer" />\nGenerated by Docutils CHROMEWORD\n</div>\n</body></html>',
    "pandoc.html": '<html><body>\n<header id="title-block-header">\n<h1 class="title">Kettle</h1>\n'
                   '</header>\n<p>Descale it monthly with citric acid.</p>\n</body></html>',
}


@pytest.mark.parametrize("name", CHROME_PAGES)
def test_a_site_s_header_and_footer_around_the_page_are_left_out_but_a_title_in_one_kept(name):
    (section,), _ = rag.read_html(Path(name), CHROME_PAGES[name].encode())
    assert "Descale it monthly with citric acid." in section.text
    assert not re.search(r"CHROMEWORD|Sphinx|Alabaster|Page source|Draft", section.text), section.text
    assert [h[2] for h in rag.heading_outline(section.text)] == ["Kettle"], section.text


# Shapes a pattern could try from every one of their characters (quadratic: a minute or more
# here), each read by its reader and then cut by the chunker; read linearly, in a second or two.
SLOW_SHAPES = [
    ("tags.org", "* Tea" + " " * 400_000 + "x\nzeppelin\n"),
    ("tabs.org", "* Tea :a:" + "\t" * 400_000 + "x\nzeppelin\n"),
    ("target.rst", "`a" + " " * 300_000 + "b <x>`_ zeppelin\n"),
    ("references.rst", "a-" * 40_000 + "_ zeppelin\n"),
    ("dots.rst", "a." * 40_000 + "x zeppelin\n"),
    ("heading.md", "# Tea" + " " * 100_000 + "x\n\nzeppelin\n"),
    ("hashes.md", "# Tea" + " #" * 40_000 + "x\n\nzeppelin\n"),
    ("heading.html", "<h2>Tea" + " " * 100_000 + "x</h2><p>zeppelin</p>"),
    ("spaces.txt", "zeppelin" + " " * 400_000 + "x\n"),
    ("colons.txt", "zeppelin " + ": " * 200_000 + "\n"),
    ("todo.org", "#+TODO: " + "(" * 300_000 + "\n* TODO zeppelin\n"),
]


@pytest.mark.parametrize("name, data", SLOW_SHAPES, ids=[s[0] for s in SLOW_SHAPES])
def test_runs_of_one_character_are_read_and_chunked_in_linear_time(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(data, encoding="utf-8")
    started = time.perf_counter()
    sections, _ = rag.NOTE_TYPES[path.suffix].read(path, None)
    chunks = rag.chunk_sections(name, sections, rag.make_splitter())
    assert time.perf_counter() - started < 20, name
    assert any("zeppelin" in c.text for c in chunks)
