"""Benchmark the index: warm query time, cache size, peak memory, and what re-indexing embeds.

Run from the project root (offline; a stand-in embedder replaces Ollama):

    python bench/bench_index.py              # 1k, 10k and 50k chunks (about 3 minutes)
    python bench/bench_index.py --sizes 1000 # a quick look

"naive" is the straightforward tutorial cache: a pickle of per-chunk Python float
lists, loaded, np.stack-ed and normalised again on every query. "demo_rag" is
this project's cache: float16 bytes in a builtins-only pickle, unit rows, BM25
postings, loaded by load_index(). Each measurement runs in a fresh process so
peak memory (ru_maxrss above the post-import baseline) is its own.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import demo_rag as rag  # noqa: E402

DIM = 1024                                # qwen3-embedding:0.6b's vector size
WORDS = ("alpha beta gamma delta notes vector search chunk cache model python asyncio bread tea "
         "river mountain 检索 向量 笔记 模型 缓存 bm25 fusion query answer source heading").split()


def synthetic_index(n: int, seed: int = 0) -> rag.Index:
    """n chunks of ~600 characters in notes of 10 chunks, with random unit vectors."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, 90)) + f" id{i}" for i in range(n)]
    chunks = [rag.Chunk(f"note-{i // 10:05d}.md", f"# Note {i // 10} › ## Part {i % 10}", t)
              for i, t in enumerate(texts)]
    vectors = rag.normalize(rng.standard_normal((n, DIM)).astype(np.float32))
    files = {f"note-{j:05d}.md": rag.FileRecord(6000, j, f"{j:032x}", j * 10, min(n, j * 10 + 10))
             for j in range((n + 9) // 10)}
    lex = rag.lexicon_from_texts(texts)
    return rag.Index(chunks, vectors, np.ones(n, bool), lex, files, "fp", rag.EMBED_MODEL, (1500, 80))


def write_caches(n: int, folder: Path) -> None:
    index = synthetic_index(n)
    rag.save_index(index, folder / f"demo_rag-{n}.pkl")
    naive = {"chunks": [{"source": c.source, "text": c.text} for c in index.chunks],
             "vectors": [v.tolist() for v in index.vectors]}
    with open(folder / f"naive-{n}.pkl", "wb") as f:
        pickle.dump(naive, f)
    np.save(folder / f"query-{n}.npy", index.vectors[n // 2] + 0.01)


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM; unlike ru_maxrss it starts afresh at exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(kind: str, n: int, folder: Path) -> dict:
    """In a fresh process: load the cache and run one query; time it and its memory."""
    q = np.load(folder / f"query-{n}.npy")
    base = peak_rss_mb()
    t0 = time.perf_counter()
    if kind == "naive":
        with open(folder / f"naive-{n}.pkl", "rb") as f:
            data = pickle.load(f)
        m = np.stack([np.array(v, dtype=np.float32) for v in data["vectors"]])
        scores = (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
        best = np.argsort(-scores)[:5]
    else:
        index, _ = rag.load_index(folder / f"demo_rag-{n}.pkl")
        t_load = time.perf_counter() - t0
        best = rag.top_k(index.vectors @ q, 5)
        m = index.vectors
    took = time.perf_counter() - t0
    out = {"seconds": took, "peak_mb": peak_rss_mb() - base,
           "best": int(best[0])}
    if kind == "demo_rag":
        # the search alone against a bare matrix @ vector, best of 20
        def best_of(f):
            return min((lambda t: (f(), time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(20))
        out["load_seconds"] = t_load
        out["search_ms"] = best_of(lambda: rag.top_k(m @ q, 5)) * 1000
        out["bare_ms"] = best_of(lambda: m @ q) * 1000
        t1 = time.perf_counter()
        rag.retrieve(index, "vector search id42", q, rag.Settings())
        out["hybrid_ms"] = (time.perf_counter() - t1) * 1000
    return out


def run_measure(kind: str, n: int, folder: Path, repeats: int = 7, env: dict | None = None) -> dict:
    """The median run over fresh processes (the files stay in the OS cache: a warm
    query), with the fastest and slowest times beside it."""
    runs = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, __file__, "--measure", kind, str(n), str(folder)],
                             capture_output=True, text=True, check=True, env={**os.environ, **(env or {})})
        runs.append(json.loads(out.stdout))
    runs.sort(key=lambda r: r["seconds"])
    return {**runs[len(runs) // 2], "fastest": runs[0]["seconds"], "slowest": runs[-1]["seconds"]}


class CountingEmbedder:
    """Stands in for ollama.Client: embeds by hashing, and counts the texts it was sent."""

    def __init__(self):
        self.texts = 0

    def embed(self, model, input):
        self.texts += len(input)
        vecs = [np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(64).tolist() for t in input]
        return type("Reply", (), {"embeddings": vecs})()


def reindex_counts() -> dict:
    """Texts embedded after editing 1 note of 100, touching all 100, and renaming one."""
    with tempfile.TemporaryDirectory() as tmp:
        notes = Path(tmp, "notes")
        notes.mkdir()
        for i in range(100):
            (notes / f"n{i:03d}.md").write_text(
                "".join(f"## Section {s}\n\n" + f"Note {i} section {s} says something. " * 20 + "\n\n" for s in range(3)))
        s = rag.Settings(notes_dir=notes, cache_dir=Path(tmp, "cache"), chunk_size=800, chunk_overlap=0)
        emb = CountingEmbedder()
        rag.build_index(s, emb)
        total, out = emb.texts, {}
        steps = {
            "edit 1 note of 100": lambda: (notes / "n042.md").write_text((notes / "n042.md").read_text()
                                                                         .replace("Section 1", "Section one")),
            "touch all 100": lambda: [os.utime(p, ns=(10**18, 10**18)) for p in notes.iterdir()],
            "rename 1 note": lambda: (notes / "n007.md").rename(notes / "renamed.md"),
        }
        for name, change in steps.items():
            change()
            before = emb.texts
            index, _ = rag.build_index(s, emb)
            out[name] = emb.texts - before
        out["chunks per note"] = total // 100
        return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 50_000])
    p.add_argument("--measure", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure:
        kind, n, folder = args.measure
        print(json.dumps(measure(kind, int(n), Path(folder))))
        return
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, numpy {np.__version__}")
    print("| chunks | warm query naive | warm query demo_rag (fastest–slowest) | speed-up | search vs bare `m @ q` "
          "| cache naive | cache demo_rag | ratio | peak mem naive | peak mem demo_rag | ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for n in args.sizes:
            write_caches(n, folder)
            naive, ours = run_measure("naive", n, folder), run_measure("demo_rag", n, folder)
            assert naive["best"] == ours["best"] == n // 2, "both must find the planted best match"
            size_n = (folder / f"naive-{n}.pkl").stat().st_size / 2**20
            size_o = (folder / f"demo_rag-{n}.pkl").stat().st_size / 2**20
            print(f"| {n:,} | {naive['seconds'] * 1000:.0f} ms | {ours['seconds'] * 1000:.1f} ms "
                  f"({ours['fastest'] * 1000:.0f}–{ours['slowest'] * 1000:.0f}) "
                  f"| {naive['seconds'] / ours['seconds']:.1f}× | {ours['search_ms']:.2f} ms vs "
                  f"{ours['bare_ms']:.2f} ms ({ours['search_ms'] / ours['bare_ms']:.2f}×) "
                  f"| {size_n:.0f} MB | {size_o:.0f} MB | {size_o / size_n:.2f} "
                  f"| {naive['peak_mb']:.0f} MB | {ours['peak_mb']:.0f} MB | {ours['peak_mb'] / naive['peak_mb']:.2f} |",
                  flush=True)
            if n == args.sizes[-1]:
                # NumPy asks Linux for huge pages for big arrays; where the kernel compacts
                # memory to find them, a load can stall. Measured once more without them.
                calm = run_measure("demo_rag", n, folder, env={"NUMPY_MADVISE_HUGEPAGE": "0"})
                print(f"\nat {n:,} chunks with NUMPY_MADVISE_HUGEPAGE=0: warm query {calm['seconds'] * 1000:.0f} ms "
                      f"({calm['fastest'] * 1000:.0f}–{calm['slowest'] * 1000:.0f}), "
                      f"{naive['seconds'] / calm['seconds']:.1f}× faster than naive")
            for f in folder.iterdir():
                f.unlink()
        print(f"\nhybrid retrieve() (dense + BM25 + fusion) at {args.sizes[-1]:,} chunks: {ours['hybrid_ms']:.1f} ms")
    print("\nfloat16 storage vs float32, top-5 agreement over 200 queries at 10,000 chunks:")
    rng = np.random.default_rng(1)
    m32 = rag.normalize(rng.standard_normal((10_000, DIM)).astype(np.float32))
    m16 = m32.astype(np.float16).astype(np.float32)
    for label, noise in (("near-duplicate queries", 0.5), ("random queries", None)):
        top1 = same_set = same_order = 0
        worst = 0.0
        for i in range(200):
            q = rng.standard_normal(DIM) if noise is None else m32[i] + noise * rng.standard_normal(DIM) / np.sqrt(DIM)
            q = (q / np.linalg.norm(q)).astype(np.float32)
            a, b = rag.top_k(m32 @ q, 5).tolist(), rag.top_k(m16 @ q, 5).tolist()
            top1, same_set, same_order = top1 + (a[0] == b[0]), same_set + (set(a) == set(b)), same_order + (a == b)
            worst = max(worst, float(np.abs(m32 @ q - m16 @ q).max()))
        print(f"  {label}: same top-1 {top1}/200, same top-5 set {same_set}/200, same top-5 order "
              f"{same_order}/200; largest score difference {worst:.1e}")
    print("\ntexts embedded when re-indexing 100 notes (stand-in embedder):")
    for k, v in reindex_counts().items():
        print(f"  {k}: {v}")


if __name__ == "__main__":
    main()
