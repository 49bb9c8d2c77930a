#!/usr/bin/env python3
"""Prompt tokens and evidence: what the chat model is sent for each answerable question.

For each evaluation set, with one embedder served by the shared stand-in for Ollama
(ollama_standin.py, started here on a free port), it searches every answerable
question as the command line does and compares two prompts:

  all top-k   the --top-k candidates, each chunk in full (what was sent before the cut)
  sent        Retrieval.hits: the candidates close to the best (close_to_best())

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


def measure(settings: rag.Settings, items: list[dict]) -> dict:
    client = rag.ollama_client()
    index, report = rag.open_index(settings, client)
    if report.embed_error:
        raise SystemExit(f"cannot embed: {report.embed_error}")
    rows = {"all top-k": [], "sent": []}
    for item in (it for it in items if it["answers"]):
        r = rag.search(client, index, item["question"], settings)
        for name, hits in (("all top-k", r.candidates), ("sent", r.hits)):
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
            for prompt, rows in measure(settings, rag.load_eval_set(eval_set)).items():
                print(f"| {name} | {prompt} | {summary(rows)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
