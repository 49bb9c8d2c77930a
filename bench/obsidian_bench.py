#!/usr/bin/env python3
"""Run demo_rag.py --eval on the Obsidian vault (by kind of question) and on the other sets, for
one embedder served by the shared stand-in (ollama_standin.py) already listening at --host, with
one version of the script (--script: this checkout's, or an older one, e.g. from `git show`).

    git show c302bde:demo_rag.py > /tmp/before.py      # the code before Obsidian support
    STANDIN_PORT=11513 STANDIN_EMBED=e5 STANDIN_MODELS=multilingual-e5-small,qwen3:0.6b \\
        python ollama_standin.py &
    python bench/obsidian_bench.py --host http://127.0.0.1:11513 --embed-model multilingual-e5-small \\
        --script /tmp/before.py --docs DOCS --zh-news ZH --cache /tmp/cache-before

DOCS: the Ollama documentation (bench/paraphrase-eval.jsonl asks about it); ZH: the folder
bench/zh_news_vault.py writes. Prints one Markdown table row per set: fused hit@1, hit@5, MRR.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_eval(script, notes, items, args) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        f.writelines(json.dumps(i, ensure_ascii=False) + "\n" for i in items)
    env = {**os.environ, "OLLAMA_HOST": args.host}
    out = subprocess.run([sys.executable, script, "--notes", notes, "--cache", args.cache, "--embed-model",
                          args.embed_model, "--eval", f.name, "--json"], capture_output=True, text=True, env=env)
    os.unlink(f.name)
    if out.returncode:
        sys.exit(f"{script} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", required=True)
    p.add_argument("--embed-model", required=True)
    p.add_argument("--script", default=str(HERE.parent / "demo_rag.py"))
    p.add_argument("--docs")
    p.add_argument("--zh-news")
    p.add_argument("--cache", required=True)
    p.add_argument("--obsidian-only", action="store_true", help="only the vault's questions")
    args = p.parse_args()
    read = lambda path: [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    obsidian = read(HERE / "obsidian-eval.jsonl")
    sets = [(f"obsidian: {kind}", HERE / "obsidian-vault", [i for i in obsidian if i["kind"] == kind])
            for kind in ("alias", "title", "filter", "paraphrase")]
    sets += [("obsidian: all", HERE / "obsidian-vault", obsidian)]
    sets += [] if args.obsidian_only else [
             ("demo-data/eval.jsonl", HERE.parent / "demo-data", read(HERE.parent / "demo-data" / "eval.jsonl")),
             ("bench/paraphrase-eval.jsonl", Path(args.docs), read(HERE / "paraphrase-eval.jsonl")),
             ("bench/zh-news-eval.jsonl", Path(args.zh_news), read(HERE / "zh-news-eval.jsonl"))]
    print(f"| set ({args.embed_model}, {Path(args.script).name}) | n | hit@1 | hit@5 | MRR |")
    print("|---|---|---|---|---|")
    for name, notes, items in sets:
        m = run_eval(args.script, str(notes), items, args)
        print(f"| {name} | {m['n']} | {m['hit@1']:.3f} | {m['hit@5']:.3f} | {m['mrr']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
