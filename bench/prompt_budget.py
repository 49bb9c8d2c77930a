#!/usr/bin/env python3
"""Prompt tokens and evidence: what the chat model is sent for each answerable question.

For each evaluation set, with one embedder served by the shared stand-in for Ollama
(ollama_standin.py, started here on a free port), it searches every answerable
question as the command line does and compares two prompts:

  all top-k   the --top-k candidates, each chunk in full (what was sent before the cut)
  sent        Retrieval.hits: the candidates close to the best (close_to_best())

and, with --alternatives, the other ways of sending less that were measured against it:
  top 2, top 3          the first two or three candidates
  cut 0.6, cut 0.9      close_to_best() with SOURCE_CUT 0.6 or 0.9 instead of 0.5
  first + 500 chars     the first candidate whole, each other one cut to its 500 characters
                        (whole paragraphs) that hold most of the question's words, by idf

For each it reports the mean prompt tokens (estimate_tokens over the rules, the numbered
sources and the question: one per CJK character, one per 4 other characters, as the
stand-in counts) and how often the passage that answers the question is in the prompt:
by source and heading (is_hit, for items that name their source) and by answer string.

    python bench/prompt_budget.py ../shared/data/ollama-docs --embedder minilm
    python bench/prompt_budget.py ../shared/data/ollama-docs --embedder e5 --chunk-size 750

Numbers are for the stand-in's embedder (all-MiniLM-L6-v2 or multilingual-e5-small),
not for qwen3-embedding; no chat model is involved.
"""
import argparse
import os
import re
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from eval_paraphrase import EMBEDDERS, EVAL_SET, PROJECT, STANDIN, standin

sys.path.insert(0, str(PROJECT))
import demo_rag as rag  # noqa: E402


def prompt_tokens(question: str, hits: list) -> int:
    return sum(rag.estimate_tokens(m["content"]) for m in rag.build_messages(question, hits))


def evidence(item: dict, hits: list) -> tuple[bool | None, bool]:
    """Is the answer in the prompt: by source and heading (None: the item names no source), by string."""
    by_source = any(rag.is_hit(h.chunk, item) for h in hits) if item.get("source") else None
    by_string = any(a.lower() in h.chunk.text.lower() for h in hits for a in item["answers"])
    return by_source, by_string


def cut_at(share: float):
    def cut(r: rag.Retrieval) -> list:
        average, best = float(r.fused.mean()), r.candidates[0].score
        return [h for h in r.candidates if h.score - average >= share * (best - average)]
    return cut


def best_paragraphs(text: str, terms: list, budget: int) -> str:
    """The run of whole paragraphs, at most `budget` characters, around the one holding most of the terms' idf."""
    paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    if len(text) <= budget or not paragraphs:
        return text
    weight = [sum(t.idf for t in terms if t.text in set(rag.tokenize(p))) for p in paragraphs]
    lo = hi = max(range(len(paragraphs)), key=lambda i: (weight[i], -i))
    size = len(paragraphs[lo])
    while True:
        around = [(weight[j], j) for j in (lo - 1, hi + 1) if 0 <= j < len(paragraphs)]
        if not around:
            break
        _, j = max(around)
        if size + len(paragraphs[j]) > budget:
            break
        size += len(paragraphs[j])
        lo, hi = min(lo, j), max(hi, j)
    return "\n\n".join(paragraphs[lo:hi + 1])


def first_whole_rest_cut(r: rag.Retrieval) -> list:
    return r.candidates[:1] + [replace(h, chunk=h.chunk._replace(text=best_paragraphs(h.chunk.text, r.terms, 500)))
                               for h in r.candidates[1:]]


ALTERNATIVES = {"top 2": lambda r: r.candidates[:2], "top 3": lambda r: r.candidates[:3],
                "cut 0.6": cut_at(0.6), "cut 0.9": cut_at(0.9), "first + 500 chars": first_whole_rest_cut}


def measure(settings: rag.Settings, items: list[dict], alternatives: bool) -> dict:
    client = rag.ollama_client()
    index, report = rag.open_index(settings, client)
    if report.embed_error:
        raise SystemExit(f"cannot embed: {report.embed_error}")
    ways = {"all top-k": lambda r: r.candidates, "sent": lambda r: r.hits, **(ALTERNATIVES if alternatives else {})}
    rows = {name: [] for name in ways}
    for item in (it for it in items if it["answers"]):
        r = rag.search(client, index, item["question"], settings)
        for name, way in ways.items():
            hits = way(r)
            rows[name].append((prompt_tokens(item["question"], hits), len(hits), *evidence(item, hits)))
    return rows


def summary(rows: list[tuple]) -> str:
    n = len(rows)
    named = [src for _, _, src, _ in rows if src is not None]
    by_source = f"{sum(named)}/{len(named)}" if named else "—"
    return (f"{sum(t for t, *_ in rows) / n:7.0f} | {sum(k for _, k, *_ in rows) / n:4.1f} | "
            f"{by_source:>6} | {sum(s for *_, s in rows)}/{n}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("corpus", type=Path, help="the Ollama documentation folder (for the paraphrase set)")
    p.add_argument("--embedder", choices=sorted(EMBEDDERS), default="minilm")
    p.add_argument("--chunk-size", type=int, default=rag.CHUNK_SIZE)
    p.add_argument("--alternatives", action="store_true", help="also the other ways of sending less")
    args = p.parse_args()
    if not STANDIN.is_file():
        p.error(f"stand-in not found: {STANDIN} (set STANDIN=path)")
    model, flags = EMBEDDERS[args.embedder]
    query_instruction = flags[1] if flags else None
    sets = [("demo-data/eval.jsonl", PROJECT / "demo-data", PROJECT / "demo-data" / "eval.jsonl"),
            ("bench/paraphrase-eval.jsonl", args.corpus, EVAL_SET)]
    print(f"embedder: {args.embedder} (stand-in, served as {model!r}), chunk size {args.chunk_size}, "
          f"--top-k {rag.TOP_K}\n")
    print("| set | prompt | mean prompt tokens | sources | answer's section in it | answer string in it |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="prompt-budget-") as tmp, standin(args.embedder, model) as url:
        os.environ["OLLAMA_HOST"] = url
        for name, notes, eval_set in sets:
            settings = rag.Settings(notes_dir=notes, cache_dir=Path(tmp) / name.replace("/", "-"),
                                    embed_model=model, query_instruction=query_instruction,
                                    chunk_size=args.chunk_size)
            for prompt, rows in measure(settings, rag.load_eval_set(eval_set), args.alternatives).items():
                print(f"| {name} | {prompt} | {summary(rows)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
