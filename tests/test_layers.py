"""The file's layers: Part I is a complete pipeline that calls nothing below it, and it
ranks as the command line does when the command line is set to Part I's choices."""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys

import numpy as np
import ollama
import pytest

from conftest import ROOT, SCRIPT, SCRIPT_COMMAND

import demo_rag as rag

SOURCE = SCRIPT.read_text(encoding="utf-8")
LINES = SOURCE.splitlines()


def banner(title: str) -> int:
    """1-based line number of the `# ====` line that opens the part titled `title`."""
    at = next(i for i, line in enumerate(LINES) if re.match(rf"# {title} · ", line))
    assert LINES[at - 1].startswith("# ====="), f"{title} has no banner"
    return at                             # the 0-based index of the title is the banner's 1-based number


PART_I, PART_II, PART_III = banner("PART I"), banner("PART II"), banner("PART III")


def defined(stmt: ast.stmt) -> set[str]:
    """The module-level names a top-level statement defines."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] \
        if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def globals_read(node: ast.AST, local: frozenset[str] = frozenset()) -> set[str]:
    """The names `node` reads that are not local to a function around them: module-level names."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = node.args
        params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg] if a}
        body = node.body if isinstance(node.body, list) else [node.body]
        stored = {n.id for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Name)
                  and isinstance(n.ctx, ast.Store)}
        outside = [*getattr(node, "decorator_list", []), *args.defaults, *args.kw_defaults,
                   *([node.returns] if getattr(node, "returns", None) else [])]
        inner = local | params | stored
        return {name for n in outside if n for name in globals_read(n, local)} | \
            {name for stmt in body for name in globals_read(stmt, inner)}
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        return set() if node.id in local else {node.id}
    return {name for child in ast.iter_child_nodes(node) for name in globals_read(child, local)}


def names_by_part() -> dict[str, tuple[set[str], set[str]]]:
    """For each part: (the module-level names it defines, the module-level names its code reads)."""
    parts = {"preamble": (0, PART_I), "I": (PART_I, PART_II), "II": (PART_II, PART_III), "III": (PART_III, 10**9)}
    out = {name: (set(), set()) for name in parts}
    for stmt in ast.parse(SOURCE).body:
        part = next(name for name, (a, b) in parts.items() if a <= stmt.lineno < b)
        out[part][0].update(defined(stmt))
        out[part][1].update(globals_read(stmt))
    return out


def test_part_one_uses_no_name_defined_below_it():
    parts = names_by_part()
    below = parts["II"][0] | parts["III"][0]
    assert not parts["I"][1] & below, f"Part I uses names defined below it: {sorted(parts['I'][1] & below)}"


def test_part_two_uses_no_name_of_part_three():
    parts = names_by_part()
    assert not parts["II"][1] & parts["III"][0], sorted(parts["II"][1] & parts["III"][0])


def test_no_part_redefines_a_name_of_another():
    parts = names_by_part()
    seen: dict[str, str] = {}
    for part, (names, _) in parts.items():
        for name in names:
            assert name not in seen, f"{name} is defined in Part {seen[name]} and again in Part {part}"
            seen[name] = part


def test_the_check_itself_catches_a_forward_reference(monkeypatch):
    # The same parse over a file whose Part I calls a Part II function must fail.
    broken = SOURCE.replace("    client = client or ollama.Client(trust_env=False, follow_redirects=False)",
                            "    client = client or ollama_client()", 1)
    assert broken != SOURCE
    monkeypatch.setattr(sys.modules[__name__], "SOURCE", broken)
    parts = names_by_part()
    assert "ollama_client" in parts["I"][1] & parts["II"][0]


def test_part_one_reads_in_one_sitting():
    assert PART_II - PART_I <= 455, f"Part I is {PART_II - PART_I} lines"
    the_map = MAP.count("\n") + 2                          # with the blank line before it
    assert PART_I - 1 - the_map <= 120, f"{PART_I - 1 - the_map} lines besides the map come before Part I"


# The map of Parts II and III in the module docstring: a section a line, named by the marker its
# banner carries ("§citation-check"), so that a search for the marker goes from one to the other.
MAP = rag.__doc__[rag.__doc__.index("The map of Parts II and III"):]
BANNER = re.compile(r"# (?:(§[\w-]+) )?-{20,}")


def map_markers() -> list[str]:
    return [line.split()[0] for line in MAP.splitlines() if re.match(r"    \S", line)]


def sections() -> list[tuple[str, int, int]]:
    """Every section banner of Parts II and III: (its marker or "", first line, last line)."""
    starts = [(i + 2, m.group(1) or "") for i in range(PART_II, len(LINES) - 1)
              if (m := BANNER.fullmatch(LINES[i]))]
    ends = [n - 1 for n, _ in starts[1:]] + [len(LINES)]
    return [(marker, n, end) for (n, marker), end in zip(starts, ends)]


def test_every_section_has_a_marker_the_map_names_once_in_order():
    markers = [marker for marker, _, _ in sections()]
    assert len(markers) >= 25 and all(markers), markers
    assert map_markers() == markers, (map_markers(), markers)
    assert all(len(re.findall(rf"{m}(?![\w-])", MAP)) == 1 for m in markers), MAP


def test_the_map_test_sees_a_section_added_or_renamed(monkeypatch):
    at = next(i for i, line in enumerate(LINES) if line.startswith("# §opening "))
    for changed in (LINES[:at] + ["# §opened " + "-" * 68] + LINES[at + 1:],
                    LINES[:at] + ["# " + "-" * 76, "# A new section: here"] + LINES[at:]):
        monkeypatch.setattr(sys.modules[__name__], "LINES", changed)
        markers = [marker for marker, _, _ in sections()]
        assert map_markers() != markers or not all(markers)


def test_no_section_outgrows_its_banner():
    sizes = {title: end - start + 1 for title, start, end in sections()}
    assert max(sizes.values()) <= 600, sizes


def test_no_line_is_over_100_characters_but_a_url():
    long = [(n, line) for n, line in enumerate(LINES, 1) if len(line) > 100 and not re.search(r"https?://\S", line)]
    assert not long, long[:5]


def used_above_definition() -> dict[str, set[str]]:
    """For Parts II and III: the module-level names of the part that a statement above their
    definition reads (a function's body included: the reader meets the name there first)."""
    tree = ast.parse(SOURCE)
    defined_at = {}
    for stmt in tree.body:
        for name in defined(stmt):
            defined_at.setdefault(name, stmt.lineno)
    bounds = {"II": (PART_II, PART_III), "III": (PART_III, 10**9)}
    out = {part: set() for part in bounds}
    for stmt in tree.body:
        for part, (a, b) in bounds.items():
            if a <= stmt.lineno < b:
                out[part] |= {n for n in globals_read(stmt)
                              if a <= defined_at.get(n, 0) < b and defined_at[n] > stmt.lineno}
    return out


def test_parts_two_and_three_define_names_before_they_use_them_but_where_the_map_says():
    said = MAP[MAP.index("Named above their definition"):]
    for part, names in used_above_definition().items():
        assert len(names) <= 30, (part, sorted(names))
        unsaid = {n for n in names if not re.search(rf"\b{n}\b", said)}
        assert not unsaid, f"Part {part} uses {sorted(unsaid)} above their definition: say why in the map"


def test_each_mode_s_run_function_and_mode_sit_in_one_section_of_part_three():
    tree = ast.parse(SOURCE)
    where = {name: stmt.lineno for stmt in tree.body for name in defined(stmt)}
    def section_of(line: int) -> str:
        return next(title for title, start, end in sections() if start <= line <= end)
    for mode_name in ("QUESTION", "CHAT", "EXPLAIN", "EVAL", "MAKE_EVAL", "TUNE", "GAPS", "MCP",
                      "SERVE"):
        mode = getattr(rag, mode_name)
        assert mode in rag.MODES
        assert section_of(where[mode_name]) == section_of(where[mode.run.__name__]), mode_name
    assert len(rag.MODES) == 9                              # ...and no mode is left out of the list


def test_part_one_answers_a_question_end_to_end(server, notes, tmp_path):
    client = ollama.Client(host=server.url)
    hits, pieces = rag.answer_question("How many grams of coffee for 240 g of water?", notes, client,
                                       cache_dir=tmp_path / "c")
    assert hits[0].chunk.source == "coffee-brewing.md"
    assert "".join(pieces).startswith("According to the notes")
    chat = [r["body"] for r in server.requests if r["path"] == "/api/chat"][-1]
    assert chat["messages"][0]["content"] == rag.RULES and "[1] coffee-brewing.md" in chat["messages"][1]["content"]


def test_part_one_caches_its_vectors_and_notices_an_edit(server, notes, tmp_path):
    client = ollama.Client(host=server.url)
    first = rag.index_notes(notes, client, cache_dir=tmp_path / "c")
    embedded = len(server.embedded_texts())
    again = rag.index_notes(notes, client, cache_dir=tmp_path / "c")
    assert len(server.embedded_texts()) == embedded                       # the fingerprint matched
    assert again.chunks == first.chunks and (again.vectors == first.vectors).all()
    (notes / "bm25.md").write_text("# BM25\n\nRewritten: k1 and b are the two knobs of BM25 ranking.")
    edited = rag.index_notes(notes, client, cache_dir=tmp_path / "c")
    assert len(server.embedded_texts()) == embedded + len(edited.chunks)   # Part I re-embeds everything
    assert any("Rewritten" in c.text for c in edited.chunks)


def test_part_one_cuts_again_the_notes_of_a_cache_from_before_headings_joined_their_text(server, notes, tmp_path):
    client = ollama.Client(host=server.url)
    first = rag.index_notes(notes, client, cache_dir=tmp_path)
    cache = next(tmp_path.glob("part1-*.pkl"))
    # Its stamp names the notes and the model only; one of its chunks is a heading alone.
    stale = [("bm25.md", "# BM25", "# BM25"), *map(tuple, first.chunks)]
    vectors = np.vstack([first.vectors[:1], first.vectors]).astype("<f4").tobytes()
    stamp = f"{rag.fingerprint(rag.list_notes(notes))} {rag.EMBED_MODEL}"
    rag.save_cache(cache, {"stamp": stamp, "chunks": stale, "vectors": vectors})
    again = rag.index_notes(notes, client, cache_dir=tmp_path)
    assert again.chunks == first.chunks and (again.vectors == first.vectors).all()


def test_part_one_declines_what_the_notes_do_not_hold(server, notes, tmp_path):
    client = ollama.Client(host=server.url)
    hits, pieces = rag.answer_question("Who won the 1998 football World Cup?", notes, client, cache_dir=tmp_path)
    assert list(pieces) == [rag.NOT_FOUND]
    assert not [r for r in server.requests if r["path"] == "/api/chat"]


def test_part_one_never_unpickles_code(server, notes, tmp_path):
    client = ollama.Client(host=server.url)
    rag.index_notes(notes, client, cache_dir=tmp_path)
    cache = next(tmp_path.glob("part1-*.pkl"))
    marker = tmp_path / "ran"
    cache.write_bytes(b"cos\nsystem\n(V touch " + str(marker).encode() + b"\ntR.")
    index = rag.index_notes(notes, client, cache_dir=tmp_path)          # refused, so rebuilt
    assert not marker.exists() and index.chunks


def test_part_one_and_the_command_line_rank_the_same_top_source(server, notes, tmp_path):
    """Part I and `--fusion rrf` with Part II's additions turned off (the embedding prompts)
    must agree on the top source of every question of demo-data/eval.jsonl: every question
    through the command line's own settings and search(), two of them through the script."""
    client = ollama.Client(host=server.url)
    index = rag.index_notes(notes, client, cache_dir=tmp_path / "part1")
    questions = [json.loads(line)["question"] for line in (ROOT / "demo-data" / "eval.jsonl").read_text().splitlines()
                 if line.strip()]
    part_one = [rag.search_notes(index, q, client)[0][0].chunk.citation for q in questions]
    flags = ["--notes", notes, "--cache", tmp_path / "cli", "--fusion", "rrf", "--query-instruction", "",
             "--doc-instruction", "", "--retrieve-only", "--json"]
    settings = rag.settings_from(rag.parse_args([questions[0], *map(str, flags)]))
    big, _ = rag.open_index(settings, client)
    cli = [rag.search(client, big, q, settings).hits[0].chunk.citation for q in questions]
    for i in (0, -1):                                       # the same, printed by the script
        run = subprocess.run([*SCRIPT_COMMAND, questions[i], *map(str, flags)], capture_output=True,
                             text=True, env={"OLLAMA_HOST": server.url, "PATH": ""}, timeout=120)
        assert run.returncode == 0, run.stderr
        top = json.loads(run.stdout)["sources"][0]
        assert " › ".join(part for part in (top["source"], top["heading"]) if part) == cli[i]
    disagree = [(q, a, b) for q, a, b in zip(questions, part_one, cli) if a != b]
    assert not disagree, disagree
    assert len(set(part_one)) >= 8                          # the questions reach most notes: not a trivial match


@pytest.mark.parametrize("question", ["What is BM25?", "泡龙井用多少度的水？"])
def test_part_two_replaces_part_one_s_ranking_only_where_it_says(server, notes, tmp_path, question):
    # With Part I's choices, the command line's own search() gives Part I's scores too.
    client = ollama.Client(host=server.url)
    index = rag.index_notes(notes, client, cache_dir=tmp_path / "part1")
    s = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cli", fusion="rrf", query_instruction="",
                     doc_instruction="")
    big, _ = rag.open_index(s, client)
    # Part II's BM25 also counts each note's title (aliases, tags) in its chunks, as it says (note_words).
    assert [c.text for c in big.chunks] == [c.text for c in index.chunks]
    index = rag.replace(index, words=[rag.Counter(rag.tokenize(text)) for text in rag.lexicon_texts(big)])
    hits, confidence = rag.search_notes(index, question, client)
    r = rag.search(client, big, question, s)
    assert [tuple(h.chunk[:3]) for h in r.candidates] == [tuple(h.chunk) for h in hits]   # Part I places no chunk
    assert [round(h.score, 6) for h in r.candidates] == [round(h.score, 6) for h in hits]
    assert [round(h.lexical, 5) for h in r.candidates] == [round(h.lexical, 5) for h in hits]
    assert r.hits == r.candidates[:len(r.hits)]             # the prompt gets the leading ones
    assert round(r.confidence, 5) == round(confidence, 5)


def test_the_inline_script_metadata_lists_what_requirements_txt_does():
    # PEP 723's reference regex; `uv run demo_rag.py` installs what this block names.
    block = re.search(r"(?m)^# /// script$\s(?P<content>(^#(| .*)$\s)+)^# ///$", SOURCE)
    assert block, "no '# /// script' block"
    tomllib = pytest.importorskip("tomllib")
    meta = tomllib.loads("".join(line[2:] if line.startswith("# ") else line[1:]
                                 for line in block["content"].splitlines(keepends=True)))
    required = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    assert sorted(meta["dependencies"]) == sorted(r for r in required if not r.startswith("pytest"))
    assert meta["requires-python"] == ">=3.10"


def test_the_docstring_s_map_names_exactly_part_one_s_functions():
    tree = rag.__doc__[rag.__doc__.index("answer_question(question)"):rag.__doc__.index("How to read this file")]
    lines = tree.splitlines()
    column = lines[1].index("the notes as chunks")          # where the descriptions start
    left = [line[:column] for line in lines]
    arguments = {"question", "notes_dir", "index", "hits", "vectors", "confidence"}
    named = {name for part in left for name in re.findall(r"[a-z_][a-z_0-9]{2,}", part)} - arguments
    functions = {stmt.name for stmt in ast.parse(SOURCE).body if isinstance(stmt, ast.FunctionDef)
                 and PART_I <= stmt.lineno < PART_II}
    assert named == functions, (sorted(named - functions), sorted(functions - named))


def test_the_docstring_s_notebook_question_is_answered_from_its_own_language(server, tmp_path):
    # Part I's example must not need a multilingual embedder: its note is in the question's language.
    question = re.search(r'answer_question\("([^"]+)"\)', rag.__doc__).group(1)
    client = ollama.Client(host=server.url)
    hits, _ = rag.answer_question(question, ROOT / "demo-data", client, cache_dir=tmp_path)
    source = (ROOT / "demo-data" / hits[0].chunk.source).read_text(encoding="utf-8")
    assert rag.question_language(question) == rag.question_language(source) == "en"
