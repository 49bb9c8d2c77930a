#!/usr/bin/env python3
"""The relevance floor and the fusion, measured on three vaults with one embedder.

  demo     demo-data/ with demo-data/eval.jsonl (Chinese and English, 8 questions it cannot answer)
  docs     the Ollama documentation with bench/paraphrase-eval.jsonl (paraphrased questions, some
           in Chinese about the English docs) plus bench/offtopic-en.jsonl (20 off-topic questions)
  zh-news  a Chinese news vault (bench/zh_news_vault.py writes it) with bench/zh-news-eval.jsonl
           plus bench/offtopic-zh.jsonl (20 off-topic questions)

For each it runs `demo_rag.py --eval --json` twice (the default fusion, then --fusion rrf) and
prints, per question language, how many answerable questions the floor declines and how many
off-topic ones it declines, and the MRR (judged by source where the set names one) of the
default fusion, plain RRF and each ranker alone. The embedder is served by the shared stand-in
(ollama_standin.py), started here; indexes are cached in --cache so runs after the first are quick.

    python bench/zh_news_vault.py /tmp/zh-news
    python bench/floor_eval.py --embedder minilm --docs ../shared/data/ollama-docs --zh-news /tmp/zh-news
    python bench/floor_eval.py --embedder e5 ... -- --min-score 0.4      # flags after -- go to demo_rag.py

Numbers are for the stand-in's embedder (all-MiniLM-L6-v2 or multilingual-e5-small), not qwen3-embedding.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from eval_paraphrase import EMBEDDERS, HERE, PROJECT, standin

CJK = re.compile(r"[\u3400-\u9fff]")


def read(path: Path) -> list[dict]:
    """A JSON Lines question set."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def language(question: str) -> str:
    return "zh" if len(CJK.findall(question)) > len(question) / 4 else "en"


def evaluate(notes: Path, items: list[dict], cache: Path, model: str, flags: list[str], url: str) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as f:
        f.write("".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items))
    try:
        out = subprocess.run([sys.executable, str(PROJECT / "demo_rag.py"), "--notes", str(notes), "--cache", str(cache),
                              "--embed-model", model, *flags, "--eval", f.name, "--json"],
                             capture_output=True, text=True, encoding="utf-8", env=dict(os.environ, OLLAMA_HOST=url))
    finally:
        os.unlink(f.name)
    if out.returncode:
        raise SystemExit(f"demo_rag.py --eval failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def floor_row(result: dict, off_topic: set[str]) -> str:
    """Declined per question language: answerable · off-topic (bench/offtopic-*.jsonl) · the set's
    own unanswerable questions (which are about the notes' subject)."""
    def declined(rows):
        floor = result["floor"]["min_score"]      # a version without a floor per question
        return f"{sum(c['confidence'] < c.get('floor', floor) for c in rows)}/{len(rows)}" if rows else "—"
    cells = []
    for lang in ("en", "zh"):
        rows = [c for c in result["confidences"] if language(c["question"]) == lang]
        cells.append(f"{declined([c for c in rows if c['answerable']])} · "
                     f"{declined([c for c in rows if c['question'] in off_topic])} · "
                     f"{declined([c for c in rows if not c['answerable'] and c['question'] not in off_topic])}")
    return " | ".join(cells)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--embedder", choices=sorted(EMBEDDERS), default="minilm")
    p.add_argument("--docs", type=Path, required=True, help="the Ollama documentation folder")
    p.add_argument("--zh-news", type=Path, required=True, help="the folder bench/zh_news_vault.py wrote")
    p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "floor-eval-cache")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, rest = p.parse_args(argv[:cut]), argv[cut + 1:]
    model, flags = EMBEDDERS[args.embedder]

    sets = {"demo": (PROJECT / "demo-data", read(PROJECT / "demo-data" / "eval.jsonl")),
            "docs": (args.docs, read(HERE / "paraphrase-eval.jsonl") + read(HERE / "offtopic-en.jsonl")),
            "zh-news": (args.zh_news, read(HERE / "zh-news-eval.jsonl") + read(HERE / "offtopic-zh.jsonl"))}
    print(f"embedder: {args.embedder} (stand-in, served as {model!r}); demo_rag.py flags: {' '.join(flags + rest)}\n")
    off_topic = {it["question"] for name in ("offtopic-en.jsonl", "offtopic-zh.jsonl") for it in read(HERE / name)}
    print("| set | floor | declined, English questions: answerable · off-topic · the set's unanswerable "
          "| declined, Chinese questions | MRR: default fusion | rrf | dense | bm25 |")
    print("|---|---|---|---|---|---|---|---|")
    with standin(args.embedder, model) as url:
        for name, (notes, items) in sets.items():
            cache = args.cache / args.embedder / name
            result = evaluate(notes, items, cache, model, flags + rest, url)
            rrf = evaluate(notes, items, cache, model, flags + rest + ["--fusion", "rrf"], url)
            by = result["by_ranker"]
            cal = result["floor"].get("calibration") or {}
            floor = ", ".join(f"{lang} {f:.2f}" for lang, f in cal.get("floors", {}).items()) or \
                result["floor"]["min_score"] or "0.4"
            print(f"| {name} | {floor} | {floor_row(result, off_topic)} | "
                  f"{result['mrr']:.3f} | {rrf['mrr']:.3f} | {by['dense']['mrr']:.3f} | {by['bm25']['mrr']:.3f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
