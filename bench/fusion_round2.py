#!/usr/bin/env python3
"""Round 2 of the fusion study (bench/fusion-study.md): `evidence` with each ranker weighted
by its evidence to the power p, for several p, against the single rankers, plain RRF and
round 1's weights, on the paraphrase set and on demo-data/eval.jsonl.

Every score is demo_rag.py's own: the index comes from open_index() (cached in
bench/results/round2-<set>-<embedder>/), the question from embed_query(), BM25, coverage(),
meaning_found() and the judging (first_hit_rank) are the ones --eval uses, so the p = 6
row is what `--eval` prints as "fused".

    python bench/fusion_round2.py ../shared/data/ollama-docs                  # all four embedders
    python bench/fusion_round2.py ../shared/data/ollama-docs --embedders hash random

minilm and e5 are served by the shared stand-in (ollama_standin.py); hash and random are
the test suite's FakeOllama. None of these numbers are for qwen3-embedding.
"""
import argparse
import math
import sys
from pathlib import Path

import numpy as np
import ollama

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests"), str(HERE)]
import demo_rag as d  # noqa: E402
from eval_paraphrase import EVAL_SET  # noqa: E402
from fusion_study import server  # noqa: E402  (FakeOllama or the stand-in)

DEMO_SET = HERE.parent / "demo-data" / "eval.jsonl"
# embedder -> (model name served, --query-instruction); hash and random keep Qwen's template, as --eval does
EMBEDDERS = {"minilm": ("all-minilm", None), "e5": ("multilingual-e5-small", "query: {query}"),
             "hash": ("qwen3-embedding:0.6b", None), "random": ("qwen3-embedding:0.6b", None)}
POWERS = (1, 2, 3, 4, 5, 6, 8)


def questions(notes: Path, items: list[dict], embedder: str, url: str, name: str) -> tuple[d.Index, list[dict]]:
    """Index `notes` and score every question by both rankers, as retrieve() does."""
    model, template = EMBEDDERS[embedder]
    s = d.Settings(notes_dir=notes, cache_dir=HERE / "results" / f"round2-{name}-{embedder}",
                   embed_model=model, query_instruction=template)
    client = ollama.Client(host=url)
    index, _ = d.open_index(s, client)
    out = []
    for item in items:
        terms = d.query_postings(index.lexicon, item["question"])
        lexical = d.bm25_scores(index.lexicon, terms)
        words = d.coverage(terms, int(lexical.argmax())) if lexical.max() > 0 else 0.0
        out.append({"item": item, "dense": index.vectors @ d.embed_query(client, item["question"], s),
                    "lexical": lexical, "words": words})
    return index, out


def round1(q: dict) -> np.ndarray:
    """Round 1's weights: c² for BM25, Φ(standout) · (1 − c)² for the cosine."""
    c, dense = q["words"], q["dense"]
    chance = 0.5 * (1 + math.erf(d.standout(dense) / math.sqrt(2)))
    return d.weighted_z_scores({"dense": dense, "bm25": q["lexical"]},
                               {"dense": chance * (1 - c) ** 2, "bm25": c ** 2})[0]


def power(p: float):
    def fuse(q: dict) -> np.ndarray:
        m = d.meaning_found(float(q["dense"].max()), d.median(q["dense"]))
        return d.weighted_z_scores({"dense": q["dense"], "bm25": q["lexical"]},
                                   {"dense": m ** p, "bm25": q["words"] ** p})[0]
    return fuse


RULES = {"dense": lambda q: q["dense"], "BM25": lambda q: q["lexical"],
         "plain RRF (k=60)": lambda q: d.fuse(q["dense"], q["lexical"], 0.0, "rrf")[0],
         "round 1: c², Φ(standout)·(1−c)²": round1,
         **{f"c^{p} and m^{p}" + (" (default)" if p == d.EVIDENCE_POWER else ""): power(p) for p in POWERS}}


def score(index: d.Index, qs: list[dict], rule, by_strings: bool) -> str:
    ranks = []
    for q in qs:
        item = {"question": q["item"]["question"], "answers": q["item"]["answers"]} if by_strings else q["item"]
        if item["answers"]:
            ranks.append(d.first_hit_rank(index, d.top_k(rule(q), d.CANDIDATE_DEPTH), item))
    m = d.metrics(ranks)
    return f"{m['hit@1']:.2f} / {m['hit@5']:.2f} / {m['mrr']:.3f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("docs", type=Path, help="the Ollama documentation folder")
    p.add_argument("--embedders", nargs="+", choices=list(EMBEDDERS), default=list(EMBEDDERS))
    args = p.parse_args()
    cells, sets = {}, (("paraphrase", args.docs, EVAL_SET), ("demo", HERE.parent / "demo-data", DEMO_SET))
    for embedder in args.embedders:
        with server(embedder) as url:
            for name, notes, path in sets:
                if name == "paraphrase" and embedder in ("hash", "random"):
                    continue              # the study's cells: paraphrase with real embedders only
                print(f"  {name} x {embedder}", file=sys.stderr, flush=True)
                cells[f"{name} x {embedder}"] = questions(notes, d.load_eval_set(path), embedder, url, name)
    print("hit@1 / hit@5 / MRR@10; paraphrase cells judged by section, then (in brackets) by answer string\n")
    print("| fusion | " + " | ".join(cells) + " |\n|---|" + "---|" * len(cells))
    for rule_name, rule in RULES.items():
        row = [score(index, qs, rule, False) + (f" ({score(index, qs, rule, True)})" if cell.startswith("para") else "")
               for cell, (index, qs) in cells.items()]
        print(f"| {rule_name} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
