"""How the citation check (demo_rag.check_citations) judges answers a real small model wrote.

    python bench/citation_real.py [--set FILE] [--misses]

Reads bench/citation-real-answers.jsonl: questions about the household notes in
bench/citation-real-notes/ (36 worded unlike the notes, batch 1; 24 plainer ones, batch 2),
each with the answer SmolLM2-135M-Instruct wrote through demo_rag.py and the sources the run
sent it (their texts, files, headings and first lines: the notes are this folder's own), and
"labels", one per sentence as demo_rag.answer_sentences() cuts the answer, given by a reader
before the check's verdicts were looked at: "supported" (every fact it states is in the sources
sent), "unsupported" (it states something they do not say or contradicts them) or "nothing"
(it states nothing checkable). A sentence is flagged when its verdict is unsupported or wrong.
Prints how many sentences cite a source ([n]); then, with idf from the notes' folder as the
command line weighs words and from the sources alone (lexicon=None), for batch 1 and for all,
how many unsupported sentences are flagged, how many supported ones are (false alarms) and
what the "nothing" sentences get, counting every sentence and counting a sentence an answer
repeats word for word once ("distinct"); --misses prints every misjudged sentence.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import demo_rag as rag  # noqa: E402
from citation_check import lexicon_of  # noqa: E402

FLAGGED = (rag.UNSUPPORTED, rag.WRONG)
NOTES = ROOT / "bench" / "citation-real-notes"


def sources_of(item: dict) -> list[rag.PlacedChunk]:
    """The chunks the run sent, as the command line hands them to the check."""
    return [rag.PlacedChunk(s["source"], s["heading"], s["text"], s.get("page"), s["start_line"])
            for s in item["sources"]]


def measure(items: list[dict], lexicon: rag.Lexicon | None, misses: bool,
            distinct: bool = False) -> dict:
    """Counts of flagged sentences by label, and the verdicts of the "nothing" ones; with
    `distinct`, a sentence an answer repeats word for word counts once (a looping answer
    would otherwise outweigh the rest)."""
    flagged, total, nothing, cut = Counter(), Counter(), Counter(), 0
    for it in items:
        seen = set()
        check = rag.check_citations(it["answer"], sources_of(it), lexicon)
        if len(check.sentences) != len(it["labels"]):
            print(f"  #{it['id']}: cut into {len(check.sentences)} sentences, "
                  f"{len(it['labels'])} labels")
            cut += 1
            continue
        for s, label in zip(check.sentences, it["labels"]):
            if distinct and s.text in seen:
                continue
            seen.add(s.text)
            total[label] += 1
            if label == "nothing":
                nothing[s.verdict] += 1
                continue
            flag = s.verdict in FLAGGED
            flagged[label] += flag
            if misses and flag != (label == "unsupported"):
                print(f"  #{it['id']} {label} -> {s.verdict} ({s.support:.2f}; {s.why}): "
                      f"{s.text}")
    return {"flagged": flagged, "total": total, "nothing": nothing, "cut": cut}


def share(n: int, m: int) -> str:
    return f"{n} of {m} ({n / m:.0%})" if m else "0 of 0"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", type=Path, default=ROOT / "bench" / "citation-real-answers.jsonl")
    ap.add_argument("--misses", action="store_true", help="print each misjudged sentence")
    args = ap.parse_args()
    items = [json.loads(line) for line in args.set.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    subsets = (("batch 1 (36)", [it for it in items if it.get("batch", 1) == 1]),
               (f"all ({len(items)})", items))
    for name, subset in subsets:
        labelled = [(s, label) for it in subset
                    for s, label in zip(rag.answer_sentences(it["answer"]), it["labels"])]
        citing = [label for s, label in labelled if rag.CITATION.search(s)]
        answers = sum(bool(rag.CITATION.search(it["answer"])) for it in subset)
        empty = sum(not it["answer"].strip() for it in subset)
        print(f"{name}: {len(labelled)} sentences, {len(citing)} cite a source ([n]), in "
              f"{answers} answers ({len(citing) - citing.count('nothing')} of them state a "
              f"fact); {empty} answers empty")
    print("\n| idf from | answers | sentences | unsupported sentences flagged "
          "| supported sentences flagged | \"nothing\" sentences: verdicts |\n"
          "|---|---|---|---|---|---|")
    for lexicon_name, lexicon in (("notes", lexicon_of(NOTES)), ("sources", None)):
        for name, subset in subsets:
            for distinct in (False, True):
                misses = args.misses and not distinct and subset is items
                if misses:
                    print(f"misses, idf from the {lexicon_name}:")
                r = measure(subset, lexicon, misses, distinct)
                f, t = r["flagged"], r["total"]
                verdicts = ", ".join(f"{v} {n}" for v, n in r["nothing"].most_common())
                print(f"| {lexicon_name} | {name} | {'distinct' if distinct else 'all'} "
                      f"| {share(f['unsupported'], t['unsupported'])} "
                      f"| {share(f['supported'], t['supported'])} | {t['nothing']}: {verdicts} |")


if __name__ == "__main__":
    main()
