#!/usr/bin/env python3
"""How far any simple floor on the two pieces of evidence could go: an upper bound, per vault and embedder.

A run declines a question when its confidence, words found + meaning found (confidence()),
is below the floor calibrated on the index. This asks whether another rule on those two
numbers would do better, in two families:

  weighted sums   decline when w·words + (1 − w)·meaning < t, for w from 0 (meaning alone) to 1
                  (words alone);
  both low        decline when words < a and meaning < b;
  any monotone    any rule at all that never answers a question while declining one with at least
                  as much of both (the loosest family: the two above are in it).

For each rule it takes the thresholds that decline no more answerable questions than allowed
(1 in 20) and counts the off-topic questions declined. The rules and thresholds are fitted on
the very questions they are judged on, so each count is an upper bound for its family: no
floor of that kind, calibrated or not, declines more off-topic questions here without
declining more answerable ones.

Vaults and question sets as in bench/floor_eval.py (docs: bench/paraphrase-eval.jsonl's English
questions and bench/offtopic-en.jsonl; zh-news: bench/zh-news-eval.jsonl and bench/offtopic-zh.jsonl).

    python bench/floor_bound.py --embedder e5 --docs ../shared/data/ollama-docs --zh-news /tmp/zh-news

Numbers are for the stand-in's embedder (all-MiniLM-L6-v2 or multilingual-e5-small), not qwen3-embedding.
"""
import argparse
import itertools
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from eval_paraphrase import EMBEDDERS, HERE, PROJECT, standin
from floor_eval import language, read

sys.path.insert(0, str(PROJECT))
ALLOWED_ANSWERABLE = 1 / 20


def evidence(rag, client, settings, questions: list[str]) -> list[tuple[float, float, bool]]:
    """Per question: words found, meaning found (the two halves of its confidence), and whether
    a run declines it (below the calibrated floor)."""
    index = rag.open_index(settings, client)[0]
    qvecs = rag.embed_checked(client, settings.embed_model, [rag.query_text(q, settings) for q in questions])
    rows = []
    for q, qvec in zip(questions, qvecs):
        r = rag.rank(index, q, qvec, settings)
        words = max((rag.coverage(r.terms, h.row) for h in r.candidates), default=0.0)
        meaning = r.confidence - words if r.dense is not None else float("nan")   # NaN: keywords only
        rows.append((words, meaning, not r.found))
    return rows


def best_sum(answerable: np.ndarray, off_topic: np.ndarray) -> tuple[int, list[float]]:
    """The most off-topic questions a weighted sum w·words + (1 − w)·meaning >= t declines while
    declining at most ALLOWED_ANSWERABLE of the answerable ones, and every w (0.01 apart) that does."""
    allowed = int(len(answerable) * ALLOWED_ANSWERABLE)
    counts = {}
    for w in np.round(np.linspace(0, 1, 101), 2):
        t = np.sort(w * answerable[:, 0] + (1 - w) * answerable[:, 1])[allowed]   # declines `allowed`, no more
        counts[float(w)] = int(np.sum(w * off_topic[:, 0] + (1 - w) * off_topic[:, 1] < t))
    most = max(counts.values())
    return most, [w for w, c in counts.items() if c == most]


def best_both_low(answerable: np.ndarray, off_topic: np.ndarray) -> int:
    """The most off-topic questions "words < a and meaning < b" declines while declining at most
    ALLOWED_ANSWERABLE of the answerable ones (a, b tried at every value the questions take)."""
    allowed = int(len(answerable) * ALLOWED_ANSWERABLE)
    cuts = np.unique(np.concatenate([answerable, off_topic]), axis=0)
    best = 0
    for a in np.append(np.unique(cuts[:, 0]), np.inf):
        for b in np.append(np.unique(cuts[:, 1]), np.inf):
            if np.sum((answerable[:, 0] < a) & (answerable[:, 1] < b)) <= allowed:
                best = max(best, int(np.sum((off_topic[:, 0] < a) & (off_topic[:, 1] < b))))
    return best


def best_monotone(answerable: np.ndarray, off_topic: np.ndarray) -> int:
    """The most off-topic questions any monotone rule declines while declining at most
    ALLOWED_ANSWERABLE of the answerable ones. An off-topic question can be declined only if
    every answerable one with no more of both evidence is declined too; so try every way of
    giving up `allowed` answerable ones among those that stand below some off-topic one."""
    allowed = int(len(answerable) * ALLOWED_ANSWERABLE)
    below = [i for i, a in enumerate(answerable) if np.any((a[0] <= off_topic[:, 0]) & (a[1] <= off_topic[:, 1]))]
    best = 0
    for given_up in itertools.combinations(below, min(allowed, len(below))):
        kept = np.delete(answerable, list(given_up), axis=0)
        best = max(best, sum(not np.any((kept[:, 0] <= o[0]) & (kept[:, 1] <= o[1])) for o in off_topic))
    return best


def spans(ws: list[float]) -> str:
    """[0.0, 0.01, 0.02, 0.5] -> "0–0.02, 0.5"."""
    out, start = [], ws[0]
    for prev, w in zip(ws, ws[1:] + [None]):
        if w is None or round(w - prev, 2) > 0.01:
            out.append(f"{start:g}–{prev:g}" if prev != start else f"{start:g}")
            start = w
    return ", ".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--embedder", choices=["minilm", "e5"], default="minilm")
    p.add_argument("--docs", type=Path, required=True, help="the Ollama documentation folder")
    p.add_argument("--zh-news", type=Path, required=True, help="the folder bench/zh_news_vault.py wrote")
    p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "floor-eval-cache")
    args = p.parse_args()
    model, flags = EMBEDDERS[args.embedder]
    english = [it for it in read(HERE / "paraphrase-eval.jsonl") if it["answers"] and language(it["question"]) == "en"]
    sets = {"docs": (args.docs, english, read(HERE / "offtopic-en.jsonl")),
            "zh-news": (args.zh_news, read(HERE / "zh-news-eval.jsonl"), read(HERE / "offtopic-zh.jsonl"))}
    print(f"embedder: {args.embedder} (stand-in, served as {model!r})\n")
    print("| vault | answerable | declined by a run: off-topic · answerable | the most a weighted sum declines "
          "(answerable ≤ 1 in 20), at w | both low | any monotone rule |")
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
            if not np.isfinite(np.array(rows, dtype=float)).all():
                print(f"| {name} | searched by keywords only (Ollama could not embed): not measured |", flush=True)
                continue
            most, ws = best_sum(ans[:, :2], off[:, :2])
            print(f"| {name} | {len(ans)} | {int(off[:, 2].sum())}/{len(off)} · {int(ans[:, 2].sum())}/{len(ans)} "
                  f"| {most}/{len(off)} at w {spans(ws)} | {best_both_low(ans[:, :2], off[:, :2])}/{len(off)} "
                  f"| {best_monotone(ans[:, :2], off[:, :2])}/{len(off)} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
