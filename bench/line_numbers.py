#!/usr/bin/env python3
"""How true the sources' lines and sections are (locate_passage), on demo-data/ and the Ollama docs.

Part 1 needs no model: every chunk of both folders, at two chunk sizes, with and without a
searched word (the chunk's last long word): does the file's line `line` hold the passage's
first words (and the word), `start_line` the chunk's first and `end_line` its last? And is the
passage's section the one the whole note's outline has at that line?

Part 2 asks an Ollama (or the stand-in) at OLLAMA_HOST to embed: for each question of an eval
set, the top source is cited two ways, by its chunk (its first line and first section, as the
citation was before, with the first line past its headings) and by its passage (locate_passage
with the search's terms). It counts how often the cited line holds one of the item's answers,
and, for items that name a section, how often the cited section is that one.

    STANDIN_PORT=11511 STANDIN_EMBED=minilm python ../shared/tools/ollama_standin.py &
    OLLAMA_HOST=http://127.0.0.1:11511 python bench/line_numbers.py ../shared/data/ollama-docs
"""
import json
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = Path(tempfile.gettempdir()) / "demo_rag-bench-lines"    # Part 2's indexes: a rerun embeds nothing
sys.path.insert(0, str(HERE.parent))
import demo_rag as rag  # noqa: E402


def file_lines(path: Path) -> list[str]:
    """The file's lines, a callout's `> [!type] title` line as the reader shows it (`> title`, or
    its type): the line is the same, its first words are not."""
    text, _ = rag.decode_note(path.read_bytes())
    text = rag.Obsidian.CALLOUT.sub(lambda m: m.group(1) + (m.group(3) or m.group(2).strip().capitalize()), text)
    return re.split(r"\r\n|\r|\n", text.lstrip("\ufeff"))


def starts_on(line: str, text: str) -> bool:
    first = text.split("\n")[0].rstrip()
    return line.rstrip().endswith(first) if "\n" in text else first in line


def every_chunk(folder: Path, chunk_size: int) -> dict:
    splitter = rag.make_splitter(chunk_size, rag.CHUNK_OVERLAP)
    n = wrong_line = wrong_section = chunks = 0
    for path in sorted(p for p in folder.rglob("*") if p.suffix in rag.NOTE_SUFFIXES):
        rel = path.relative_to(folder).as_posix()
        (section,), _ = rag.read_text(path)
        lines, outline = file_lines(path), rag.heading_outline(section.text)
        line_starts = [0] + [m.end() for m in re.finditer("\n", section.text)]
        for c in rag.chunk_sections(rel, [section], splitter):
            chunks += 1
            words = re.findall(r"[^\W_]{6,}", c.text[rag.LEADING_HEADINGS.match(c.text).end():])
            for terms in ([], [(words[-1].lower(), 1.0)] if words else []):
                n += 1
                p = rag.locate_passage(c, terms)
                wrong_line += not (starts_on(lines[p.line - 1], c.text[p.offset:])
                                   and (not terms or terms[0][0] in lines[p.line - 1].lower())
                                   and starts_on(lines[p.start_line - 1], c.text)
                                   and c.text.split("\n")[-1].strip() in lines[p.end_line - 1])
                wrong_section += p.heading != rag.heading_paths(outline, [line_starts[p.line - section.line]])[0]
    return {"chunks": chunks, "passages": n, "wrong_line": wrong_line, "wrong_section": wrong_section}


def cited(folder: Path, eval_set: Path) -> dict:
    s = rag.Settings(notes_dir=folder, cache_dir=CACHE)
    client = rag.ollama_client()
    index, _ = rag.open_index(s, client)
    items = [json.loads(line) for line in eval_set.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = {"questions": 0, "line_holds_answer": [0, 0], "with_section": 0, "section_is_gold": [0, 0]}
    for item in items:
        if not item.get("answers"):
            continue
        r = rag.search(client, index, item["question"], s)
        if not r.hits:
            continue
        out["questions"] += 1
        h = r.hits[0]
        chunk, passage = rag.locate_passage(h.chunk), rag.locate_passage(h.chunk, rag.preview_terms(r.terms))
        lines = file_lines(folder / h.chunk.source)
        for k, line in enumerate((chunk.line, passage.line)):
            out["line_holds_answer"][k] += any(a.lower() in lines[line - 1].lower() for a in item["answers"])
        if item.get("heading") and item.get("source") == h.chunk.source:
            out["with_section"] += 1
            want = rag.heading_titles(item["heading"])
            for k, heading in enumerate((h.chunk.heading, passage.heading)):
                out["section_is_gold"][k] += rag.heading_titles(heading)[-len(want):] == want
    return out


def main() -> None:
    docs = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parent.parent / "shared" / "data" / "ollama-docs"
    folders = {"demo-data": HERE.parent / "demo-data", "ollama-docs": docs}
    print("| folder | chunk size | chunks | passages | line wrong | section wrong |\n|---|---|---|---|---|---|")
    for name, folder in folders.items():
        for size in (1500, 300):
            r = every_chunk(folder, size)
            print(f"| {name} | {size} | {r['chunks']} | {r['passages']} | {r['wrong_line']} | {r['wrong_section']} |")
    print()
    print("| set | questions | top source's line holds an answer: chunk's first text line · passage's line "
          "| items naming a section, top source in that note | section cited is that one: chunk's · passage's |")
    print("|---|---|---|---|---|")
    for name, folder, eval_set in (("demo-data/eval.jsonl", folders["demo-data"], HERE.parent / "demo-data" / "eval.jsonl"),
                                   ("bench/paraphrase-eval.jsonl", docs, HERE / "paraphrase-eval.jsonl")):
        r = cited(folder, eval_set)
        a, b = r["line_holds_answer"]
        c, d = r["section_is_gold"]
        print(f"| {name} | {r['questions']} | {a} · {b} | {r['with_section']} | {c} · {d} |")


if __name__ == "__main__":
    main()
