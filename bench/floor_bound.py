#!/usr/bin/env python3
"""How far any floor on the two pieces of evidence could go: an upper bound, per vault and embedder.

A run declines a question when its confidence, words found + meaning found (confidence()),
is below the floor calibrated on the index. This asks whether *any* rule on those two
numbers would do better: for every weighting w·words + (1 − w)·meaning (w from 0, meaning
alone, to 1, words alone) it takes the highest threshold that declines no more answerable
questions than allowed (1 in 20), and counts the off-topic questions it declines. The rule
and threshold are fitted on the very questions they are judged on, so the count is an upper
bound: no floor on these two numbers, calibrated or not, declines more off-topic questions
here without declining more answerable ones.

Vaults and question sets as in bench/floor_eval.py (docs: bench/paraphrase-eval.jsonl's English
questions and bench/offtopic-en.jsonl; zh-news: bench/zh-news-eval.jsonl and bench/offtopic-zh.jsonl).

    python bench/floor_bound.py --embedder e5 --docs ../shared/data/ollama-docs --zh-news /tmp/zh-news

Numbers are for the stand-in's embedder (all-MiniLM-L6-v2 or multilingual-e5-small), not qwen3-embedding.
"""
import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from eval_paraphrase import EMBEDDERS, HERE, PROJECT, standin

sys.path.insert(0, str(PROJECT))
ALLOWED_ANSWERABLE = 1 / 20


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def evidence(rag, client, settings, questions: list[str]) -> list[tuple[float, float, bool]]:
    """Per question: words found, meaning found (the two halves of its confidence), and whether
    a run declines it (below the calibrated floor)."""
    index = rag.open_index(settings, client)[0]
    qvecs = rag.embed_checked(client, settings.embed_model, [rag.query_text(q, settings) for q in questions])
    rows = []
    for q, qvec in zip(questions, qvecs):
        r = rag.rank_chunks(index, q, qvec, settings)
        words = max((rag.coverage(r.terms, h.row) for h in r.candidates), default=0.0)
        meaning = r.confidence - words
        rows.append((words, meaning, not r.found))
    return rows


def best_rule(answerable: np.ndarray, off_topic: np.ndarray) -> tuple[int, float, float]:
    """The most off-topic questions any w·words + (1 − w)·meaning >= t declines while declining at
    most ALLOWED_ANSWERABLE of the answerable ones; with its w and t."""
    allowed = int(len(answerable) * ALLOWED_ANSWERABLE)
    best = (-1, 0.0, 0.0)
    for w in np.linspace(0, 1, 101):
        a = np.sort(w * answerable[:, 0] + (1 - w) * answerable[:, 1])
        t = a[allowed]                    # declines the `allowed` lowest answerable ones, no more
        declined = int(np.sum(w * off_topic[:, 0] + (1 - w) * off_topic[:, 1] < t))
        if declined > best[0]:
            best = (declined, float(w), float(t))
    return best


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--embedder", choices=["minilm", "e5"], default="minilm")
    p.add_argument("--docs", type=Path, required=True, help="the Ollama documentation folder")
    p.add_argument("--zh-news", type=Path, required=True, help="the folder bench/zh_news_vault.py wrote")
    p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "floor-eval-cache")
    args = p.parse_args()
    model, flags = EMBEDDERS[args.embedder]
    english = [it for it in read(HERE / "paraphrase-eval.jsonl") if it["answers"] and not any("\u4e00" <= ch <= "\u9fff" for ch in it["question"])]
    sets = {"docs": (args.docs, english, read(HERE / "offtopic-en.jsonl")),
            "zh-news": (args.zh_news, read(HERE / "zh-news-eval.jsonl"), read(HERE / "offtopic-zh.jsonl"))}
    print(f"embedder: {args.embedder} (stand-in, served as {model!r})\n")
    print("| vault | answerable | off-topic declined by a run | answerable declined by a run "
          "| the most off-topic any rule declines (answerable declined ≤ 1 in 20) | its w · t |")
    print("|---|---|---|---|---|---|")
    with standin(args.embedder, model) as url:
        os.environ["OLLAMA_HOST"] = url
        import demo_rag as rag
        client = rag.ollama_client()
        for name, (notes, answerable, off_topic) in sets.items():
            settings = rag.Settings(notes_dir=notes, cache_dir=args.cache / args.embedder / name, embed_model=model,
                                    query_instruction=flags[1] if flags else None)
            rows = evidence(rag, client, settings, [it["question"] for it in answerable + off_topic])
            ans, off = np.array(rows[:len(answerable)]), np.array(rows[len(answerable):])
            declined, w, t = best_rule(ans[:, :2], off[:, :2])
            print(f"| {name} | {len(ans)} | {int(off[:, 2].sum())}/{len(off)} | {int(ans[:, 2].sum())}/{len(ans)} "
                  f"| {declined}/{len(off)} | {w:.2f} · {t:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
