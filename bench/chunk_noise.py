#!/usr/bin/env python3
"""MRR over chunk sizes for two checkouts of demo_rag.py: is the gap between them theirs, or
where the chunker happens to cut?

One MRR at one --chunk-size compares two sets of chunk boundaries as much as two programs: a
reader that makes the text shorter moves every cut after it. This runs `demo_rag.py --eval
--json` for "before" (a checkout given by path) and "after" (this one) at several chunk sizes,
with each embedder, on the paraphrase set over the Ollama documentation (the same set file for
both, this checkout's), and demo-data's own set at one size; then prints, per embedder, MRR and
hit@1 per size, their mean and median, after minus before per size, and per question how many
sizes rank its gold chunk higher in one version than in the other.

    git worktree add /tmp/before c0ea5fb^
    ../venv-standin/bin/python bench/chunk_noise.py ../shared/data/ollama-docs \
        --before /tmp/before
    ... --sizes 900,1000,1100 --embedders minilm --runs /tmp/chunk-noise   # fewer, kept
    ... --report --runs /tmp/chunk-noise                                   # tables only

Run it with the stand-in's Python, ../venv-standin (it runs demo_rag.py and the stand-in with
its own). Each run's JSON is kept in --runs and not run again while its file is there, so a
sweep that stops resumes. Runs are serial: a run embeds the whole corpus (at 1,000 characters
on two shared cores, about 2 to 3 minutes with MiniLM, 9 with e5). Numbers are the stand-in's
embedders', not qwen3-embedding's.
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from eval_paraphrase import EMBEDDERS, EVAL_SET, PROJECT, standin

SIZES = "800,900,950,1000,1050,1100,1200,1500"
DEMO_SIZE = 1000
MISSED = 11                      # a gold chunk outside the top 10 ranks below any found one


def run_eval(checkout: Path, url: str, embedder: str, notes: Path, eval_set: Path, size: int,
             out: Path) -> None:
    """One --eval --json run of checkout's demo_rag.py into out (its log into out.err)."""
    model, flags = EMBEDDERS[embedder]
    with tempfile.TemporaryDirectory(prefix="chunk-noise-") as cache:
        cmd = [sys.executable, str(checkout / "demo_rag.py"), "--notes", str(notes),
               "--cache", cache, "--embed-model", model, *flags, "--eval", str(eval_set),
               "--json", "--chunk-size", str(size)]
        with open(out.with_suffix(".tmp"), "w") as f, open(f"{out}.err", "w") as log:
            code = subprocess.run(cmd, env=dict(os.environ, OLLAMA_HOST=url), stdout=f,
                                  stderr=log).returncode
    if code:
        raise SystemExit(f"{out.name}: demo_rag.py exited {code} (see {out}.err)")
    out.with_suffix(".tmp").rename(out)


def sweep(args, versions: dict[str, Path]) -> None:
    """Every run not yet in args.runs, one embedder's stand-in at a time."""
    for emb in args.embedders:
        jobs = [(v, "paraphrase", size) for size in args.sizes for v in versions]
        jobs += [(v, "demo", DEMO_SIZE) for v in versions]
        jobs = [j for j in jobs if not path_of(args.runs, j[0], emb, j[1], j[2]).exists()]
        if not jobs:
            continue
        with standin(emb, EMBEDDERS[emb][0]) as url:
            for v, kind, size in jobs:
                demo = versions[v] / "demo-data"
                notes, eval_set = ((args.corpus, EVAL_SET) if kind == "paraphrase" else
                                   (demo, demo / "eval.jsonl"))
                print(f"{emb} {v} {kind} --chunk-size {size}", file=sys.stderr, flush=True)
                run_eval(versions[v], url, emb, notes, eval_set, size,
                         path_of(args.runs, v, emb, kind, size))


def path_of(runs: Path, version: str, emb: str, kind: str, size: int) -> Path:
    return runs / f"{version}-{emb}-{kind}-{size}.json"


def load(out: Path) -> dict | None:
    """A run's result, None while it is missing or not yet written."""
    return json.loads(out.read_text()) if out.exists() and out.stat().st_size else None


def ranks(result: dict) -> dict[str, int]:
    """Each answerable question's rank of its gold chunk (MISSED when not in the top 10):
    --json lists the questions not found first, under "misses"."""
    rank = {c["question"]: 1 for c in result["confidences"] if c["answerable"]}
    for m in result["misses"]:
        rank[m["question"]] = m["rank"] or MISSED
    return rank


def chunks(out: Path) -> str:
    found = re.findall(r"embedded (\d+) chunks", Path(f"{out}.err").read_text())
    return found[-1] if found else ""


def sign_p(up: int, down: int) -> float:
    """Two-sided sign test: how likely a split this uneven is if up and down were a coin."""
    n = up + down
    tail = sum(math.comb(n, k) for k in range(min(up, down) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def report_embedder(runs: Path, emb: str, sizes: list[int]) -> None:
    got = {(v, s): load(path_of(runs, v, emb, "paraphrase", s))
           for v in ("before", "after") for s in sizes}
    sizes = [s for s in sizes if got["before", s] and got["after", s]]
    if not sizes:
        return
    print(f"\n| {emb}, --chunk-size | before MRR | after MRR | after - before | before hit@1 "
          "| after hit@1 | dense MRR before / after | BM25 MRR before / after "
          "| chunks before / after |\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    diffs = []
    for s in sizes:
        b, a = got["before", s], got["after", s]
        diffs.append(a["mrr"] - b["mrr"])
        cut = f"{chunks(path_of(runs, 'before', emb, 'paraphrase', s))} / " \
              f"{chunks(path_of(runs, 'after', emb, 'paraphrase', s))}"
        alone = " | ".join(f"{b['by_ranker'][r]['mrr']:.4f} / {a['by_ranker'][r]['mrr']:.4f}"
                           for r in ("dense", "bm25"))
        print(f"| {s} | {b['mrr']:.4f} | {a['mrr']:.4f} | {diffs[-1]:+.4f} | {b['hit@1']:.2f} "
              f"| {a['hit@1']:.2f} | {alone} | {cut} |")
    for name, f in (("mean", statistics.mean), ("median", statistics.median)):
        mb, ma = (f([got[v, s]["mrr"] for s in sizes]) for v in ("before", "after"))
        hb, ha = (f([got[v, s]["hit@1"] for s in sizes]) for v in ("before", "after"))
        print(f"| **{name}** | {mb:.4f} | {ma:.4f} | {f(diffs):+.4f} | {hb:.2f} | {ha:.2f} "
              "| | | |")
    spread = {v: [got[v, s]["mrr"] for s in sizes] for v in ("before", "after")}
    print("| **lowest - highest** | " + " | ".join(
        f"{min(m):.4f} - {max(m):.4f}" for m in spread.values())
        + f" | {min(diffs):+.4f} - {max(diffs):+.4f} | | | | | |")
    up, down = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    print(f"\nsizes where after is higher: {up}, lower: {down}, equal: {len(diffs) - up - down} "
          f"(sign test p = {sign_p(up, down):.2f})")
    report_questions(got, sizes)


def report_questions(got: dict, sizes: list[int]) -> None:
    """Per question, at how many sizes each version ranks its gold chunk higher."""
    before = {s: ranks(got["before", s]) for s in sizes}
    after = {s: ranks(got["after", s]) for s in sizes}
    rows = []
    for q in before[sizes[0]]:
        wins = sum(after[s][q] < before[s][q] for s in sizes)
        losses = sum(after[s][q] > before[s][q] for s in sizes)
        if wins or losses:
            rows.append((wins - losses, wins, losses, q, [before[s][q] for s in sizes],
                         [after[s][q] for s in sizes]))
    rows.sort(key=lambda r: (r[0], r[3]))

    def shown(rs: list[int]) -> str:
        return " ".join("-" if r == MISSED else str(r) for r in rs)

    print("\n| question | after better at | before better at | ranks before | ranks after |"
          "\n|---|--:|--:|---|---|")
    for _, wins, losses, q, rb, ra in rows:
        print(f"| {q[:60]} | {wins} | {losses} | {shown(rb)} | {shown(ra)} |")
    pairs_up, pairs_down = sum(r[1] for r in rows), sum(r[2] for r in rows)
    mostly = sum(r[0] > 0 for r in rows), sum(r[0] < 0 for r in rows)
    print(f"\nquestion x size pairs: after better {pairs_up}, before better {pairs_down}, "
          f"same {len(before[sizes[0]]) * len(sizes) - pairs_up - pairs_down}; questions better "
          f"in after at more sizes: {mostly[0]}, in before: {mostly[1]}, "
          f"even or never different: {len(before[sizes[0]]) - sum(mostly)} "
          f"(sign test over those questions p = {sign_p(*mostly):.2f})")


def report(args) -> None:
    print(f"ranks: per size in {args.sizes} order, '-' outside the top 10")
    for emb in args.embedders:
        report_embedder(args.runs, emb, args.sizes)
        b, a = (load(path_of(args.runs, v, emb, "demo", DEMO_SIZE)) for v in ("before", "after"))
        if b and a:
            print(f"\ndemo-data, {emb}, --chunk-size {DEMO_SIZE}: MRR before {b['mrr']:.4f}, "
                  f"after {a['mrr']:.4f}; hit@1 {b['hit@1']:.2f}, {a['hit@1']:.2f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("corpus", type=Path, nargs="?", help="the Ollama documentation folder")
    p.add_argument("--before", type=Path, help="the checkout to compare this one with")
    p.add_argument("--sizes", default=SIZES, help=f"chunk sizes (default {SIZES})")
    p.add_argument("--embedders", default="minilm,e5", help="of " + ", ".join(EMBEDDERS))
    p.add_argument("--runs", type=Path, default=Path(tempfile.gettempdir()) / "chunk-noise",
                   help="where each run's JSON is kept (default: %(default)s)")
    p.add_argument("--report", action="store_true", help="only the tables, from --runs")
    args = p.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.embedders = args.embedders.split(",")
    if any(e not in EMBEDDERS for e in args.embedders):
        p.error(f"--embedders: each of {', '.join(EMBEDDERS)}")
    if not args.report:
        if not (args.corpus and args.corpus.is_dir()):
            p.error("the Ollama documentation folder is needed (or --report)")
        if not (args.before and (args.before / "demo_rag.py").is_file()):
            p.error("--before: a checkout holding demo_rag.py is needed")
        args.runs.mkdir(parents=True, exist_ok=True)
        sweep(args, {"before": args.before, "after": PROJECT})
    report(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
