"""How often the citation check (demo_rag.check_citations) flags right and wrong sentences.

    python bench/citation_check.py [--set FILE ...] [--docs DIR] [--misses] [--lexicon sources]

Reads hand-written answer sets (bench/citation-check-five.jsonl and -seven.jsonl, see
bench/citation-sets.md, and the older bench/citation-check.jsonl): answers with the passages
they were written from (a file and a heading, or a line range; "ollama-docs/..." is read from
--docs at run time, so none of that text is kept here) and the indices of their wrong sentences
("bad"), each answer of a kind. A sentence is flagged when its verdict is unsupported or wrong;
every sentence not in "bad" is right. Prints, by language and by kind, how many wrong sentences
are flagged (caught) and how many right ones are (false alarms), with idf from the notes' folder
as the command line weighs words (or from the sources alone: --lexicon sources), and the time.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import demo_rag as rag  # noqa: E402

FLAGGED = (rag.UNSUPPORTED, rag.WRONG, getattr(rag, "JUDGED", "judged"))
SETS = ["citation-check-five.jsonl", "citation-check-seven.jsonl", "citation-check.jsonl"]


def section(text: str, heading: str) -> tuple[int, str]:
    """The line `heading` is on (from 1) and the lines from it to the next heading of its level
    or above (fences aside)."""
    lines, level, out, fence, first = text.splitlines(), len(heading) - len(heading.lstrip("#")), \
        [], False, 0
    for n, line in enumerate(lines, 1):
        if out and not fence and re.match(rf"#{{1,{level}}}\s", line):
            break
        if out or line.strip() == heading:
            first = first or n
            out.append(line)
            fence ^= line.lstrip().startswith(("```", "~~~"))
    if not out:
        raise KeyError(heading)
    return first, "\n".join(out)


def path_of(file: str, docs: Path) -> Path:
    return docs / file.removeprefix("ollama-docs/") if file.startswith("ollama-docs/") else ROOT / file


def passage(src: dict, docs: Path) -> rag.PlacedChunk:
    """A source as the command line sends one: a chunk of its file, placed at its first line."""
    text = path_of(src["file"], docs).read_text(encoding="utf-8")
    if "lines" in src:
        first, last = src["lines"]
        body = "\n".join(text.splitlines()[first - 1:last])
    else:
        first, body = section(text, src["heading"])
    title = next((line for line in text.splitlines() if line.startswith("# ")), "")
    return rag.PlacedChunk(src["file"], title, body, None, first)     # headed as a chunk is


def lexicon_of(folder: Path) -> rag.Lexicon:
    """The folder's chunks' lexicon, chunked as the command line chunks them."""
    files, _ = rag.scan_notes(folder)
    splitter, texts = rag.make_splitter(), []
    for f in files:
        sections, _ = rag.read_note(f)
        texts += [c.text for c in rag.chunk_sections(f.rel, sections, splitter)]
    return rag.lexicon_from_texts(texts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", type=Path, nargs="*", default=[ROOT / "bench" / s for s in SETS])
    ap.add_argument("--docs", type=Path, default=ROOT.parent / "shared" / "data" / "ollama-docs")
    ap.add_argument("--lexicon", choices=("index", "sources"), default="index")
    ap.add_argument("--misses", action="store_true", help="print each misjudged sentence")
    args = ap.parse_args()
    lexicons: dict[Path, rag.Lexicon] = {}
    by_lang, by_kind = defaultdict(lambda: [0, 0, 0, 0]), defaultdict(lambda: [0, 0, 0, 0])
    seconds = sentences = 0
    for path in args.set:
        items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                 if line.strip()]
        for it in items:
            if not all(path_of(s["file"], args.docs).exists() for s in it["sources"]):
                continue
            sources = [passage(s, args.docs) for s in it["sources"]]
            folder = path_of(it["sources"][0]["file"], args.docs).parent \
                if not it["sources"][0]["file"].startswith("ollama-docs/") else args.docs
            lexicon = None if args.lexicon == "sources" else \
                lexicons.setdefault(folder, lexicon_of(folder))
            t0 = time.perf_counter()
            check = rag.check_citations(it["answer"], sources, lexicon)
            seconds += time.perf_counter() - t0
            sentences += len(check.sentences)
            if any(b >= len(check.sentences) for b in it["bad"]):
                print(f"  {it['id']}: cut into {len(check.sentences)} sentences, bad {it['bad']}")
                continue
            for i, s in enumerate(check.sentences):
                bad = i in it["bad"]
                kind = it["kind"] if bad or not it["bad"] else "correct (beside a wrong one)"
                flagged = s.verdict in FLAGGED
                for table, key in ((by_lang, it["lang"]), (by_kind, kind)):
                    table[key][2 * bad] += flagged
                    table[key][2 * bad + 1] += 1
                if args.misses and flagged != bad:
                    print(f"  {it['id']} {kind} {'wrong' if bad else 'right'} -> {s.verdict} "
                          f"({s.support:.2f}; {getattr(s, 'why', '')}): {s.text}")
    print(f"{sentences} sentences checked in {seconds:.2f} s (idf from the {args.lexicon})\n")
    for title, table in (("language", by_lang), ("kind", by_kind)):
        print(f"| {title} | wrong sentences flagged | right sentences flagged |\n|---|---|---|")
        rows = sorted(table.items(), key=lambda kv: (-kv[1][3], -kv[1][1], kv[0]))
        for key, (rf, rn, wf, wn) in rows:
            print(f"| {key} | " + (f"{wf}/{wn} ({wf / wn:.0%})" if wn else "") + " | "
                  + (f"{rf}/{rn} ({rf / rn:.0%})" if rn else "") + " |")
        rf, rn, wf, wn = (sum(v[k] for v in table.values()) for k in range(4))
        print(f"| all | {wf}/{wn} ({wf / max(wn, 1):.1%}) | {rf}/{rn} ({rf / max(rn, 1):.1%}) |\n")


if __name__ == "__main__":
    main()
