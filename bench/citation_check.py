"""How often the citation check (demo_rag.check_citations) flags right and wrong sentences.

    python bench/citation_check.py [--docs /work/shared/data/ollama-docs] [--misses]

Reads bench/citation-check.jsonl: answers written by hand, each with the passages it was
written from (a file and a heading, or a line range; "ollama-docs/..." is read from --docs at
run time, so none of that text is kept here; idf comes from the folder a file is in) and the
indices of its wrong sentences ("bad").
Every other sentence is correct. A sentence is flagged when its verdict is unsupported, wrong
or uncited. For each language it prints the share of correct sentences flagged (want at most
2%) and of wrong ones flagged (want at least 96%), over a sweep of the support
threshold, with idf from the notes' index (as the command line checks) and from the sources alone.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import demo_rag as rag  # noqa: E402

FLAGGED = (rag.UNSUPPORTED, rag.WRONG, rag.UNCITED)
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)


def section(text: str, heading: str) -> str:
    """The lines from `heading` to the next heading of its level or above (fences aside)."""
    lines, level, out, fence = text.splitlines(), len(heading) - len(heading.lstrip("#")), [], False
    for line in lines:
        if out and not fence and re.match(rf"#{{1,{level}}}\s", line):
            break
        if out or line.strip() == heading:
            out.append(line)
            fence ^= line.lstrip().startswith(("```", "~~~"))
    if not out:
        raise KeyError(heading)
    return "\n".join(out)


def corpus_of(file: str, docs: Path) -> Path:
    """The notes folder a source's idf comes from: the Ollama docs, or the folder it is in."""
    return docs if file.startswith("ollama-docs/") else (ROOT / file).parent


def path_of(file: str, docs: Path) -> Path:
    return docs / file.removeprefix("ollama-docs/") if file.startswith("ollama-docs/") else ROOT / file


def passage(src: dict, docs: Path) -> str:
    text = path_of(src["file"], docs).read_text(encoding="utf-8")
    if "lines" in src:
        first, last = src["lines"]
        return "\n".join(text.splitlines()[first - 1:last])
    return section(text, src["heading"])


def lexicon_of(folder: Path) -> rag.Lexicon:
    """The folder's chunks' lexicon, chunked as Part I chunks (the idf the command line would use)."""
    splitter, texts = rag.make_splitter(), []
    for note in rag.list_notes(folder):
        text = rag.strip_front_matter(Path(note.path).read_text(encoding="utf-8"))
        texts += [c.text for c in rag.chunk_note(note.rel, text, splitter)]
    return rag.lexicon_from_texts(texts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=Path, default=Path("/work/shared/data/ollama-docs"))
    ap.add_argument("--set", type=Path, default=ROOT / "bench" / "citation-check.jsonl")
    ap.add_argument("--misses", action="store_true", help="print each misjudged sentence")
    args = ap.parse_args()
    items = [json.loads(line) for line in args.set.read_text(encoding="utf-8").splitlines() if line.strip()]
    usable = [it for it in items if all(path_of(s["file"], args.docs).exists() for s in it["sources"])]
    print(f"{len(usable)} of {len(items)} answers usable ({len(items) - len(usable)} need files that are absent)")
    lexicons = {folder: lexicon_of(folder) for folder in {corpus_of(s["file"], args.docs)
                                                          for it in usable for s in it["sources"]}}
    counts = {k: 0 for k in ("items", "sentences")}
    # (idf mode, threshold, lang, good/bad) -> [flagged, of]
    table: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for it in usable:
        sources = [passage(s, args.docs) for s in it["sources"]]
        lex = lexicons[corpus_of(it["sources"][0]["file"], args.docs)]
        counts["items"] += 1
        for mode, lexicon in (("index", lex), ("sources", None)):
            for t in THRESHOLDS:
                check = rag.check_citations(it["answer"], sources, lexicon, support_min=t)
                assert all(b < len(check.sentences) for b in it["bad"]), (it["id"], check.sentences)
                for i, s in enumerate(check.sentences):
                    truth = "bad" if i in it["bad"] else "good"
                    cell = table[mode, t, it["lang"], truth]
                    flagged = s.verdict in FLAGGED
                    cell[0] += flagged
                    cell[1] += 1
                    if args.misses and mode == "index" and t == rag.SUPPORT_MIN and flagged != (truth == "bad"):
                        print(f"  {it['id']} {it['kind']} {truth} -> {s.verdict} ({s.support:.2f}, best "
                              f"[{s.best}] {s.best_support:.2f}): {s.text}")
    print("\n| idf from | support threshold | lang | correct sentences flagged | wrong sentences flagged |")
    print("|---|---|---|---|---|")
    for mode in ("index", "sources"):
        for t in THRESHOLDS:
            for lang in ("en", "zh"):
                good, bad = table[mode, t, lang, "good"], table[mode, t, lang, "bad"]
                mark = " **(default)**" if mode == "index" and t == rag.SUPPORT_MIN else ""
                print(f"| {mode} | {t}{mark} | {lang} | {good[0]}/{good[1]} ({good[0] / max(good[1], 1):.1%}) | "
                      f"{bad[0]}/{bad[1]} ({bad[0] / max(bad[1], 1):.1%}) |")


if __name__ == "__main__":
    main()
