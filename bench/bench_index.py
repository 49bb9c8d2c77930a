"""Benchmark the index: warm query time, cache size, peak memory, and what re-indexing embeds.

Run from the project root (offline; a stand-in embedder replaces Ollama):

    python bench/bench_index.py              # 1k, 10k and 50k chunks (about 3 minutes)
    python bench/bench_index.py --sizes 1000 # a quick look

"naive" is the straightforward tutorial cache: a pickle of per-chunk Python float
lists, loaded, np.stack-ed and normalised again on every query. "demo_rag" is
this project's cache: a builtins-only pickle (texts, BM25 postings) followed by
memory-mapped float32 unit rows, loaded by load_index(). Each measurement runs in
a fresh process so peak memory (ru_maxrss above the post-import baseline) is its own.

Two more tables:
- the whole process, as a user feels it: `python demo_rag.py --retrieve-only Q`
  against the original naive script (import ollama and NumPy, unpickle, stack,
  embed the question, rank), both asking the tests' stand-in server for the
  question's 1,024-dim vector; median of 7 runs each, alternated.
- the cold build: open_index() over real note files with an in-process
  embedder (random 1,024-dim vectors handed over as Python floats, as the
  ollama client does); the script's own time (embedder time left out), peak
  memory of the whole process, and what checkpointing costs.
    python bench/bench_index.py --sizes 20000 50000 --only whole cold
    python bench/bench_index.py --sizes 20000 --only cold --against /path/to/old/checkout
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.environ.get("BENCH_DEMO_RAG_DIR", str(ROOT)))   # --against: an older checkout
sys.path.insert(1, str(ROOT / "tests"))
import demo_rag as rag  # noqa: E402

# The index builder: open_index here, build_index in checkouts from before the rename (--against).
open_index = getattr(rag, "build_index", None) or rag.open_index

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
    files = {f"note-{j:05d}.md": rag.FileRecord(6000, j, j, j, f"{j:032x}", j * 10, min(n, j * 10 + 10))
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
        best = rag.top_rows(index.vectors @ q, 5)
        m = index.vectors
    took = time.perf_counter() - t0
    out = {"seconds": took, "peak_mb": peak_rss_mb() - base,
           "best": int(best[0])}
    if kind == "demo_rag":
        # the search alone against a bare matrix @ vector, best of 20
        def best_of(f):
            return min((lambda t: (f(), time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(20))
        out["load_seconds"] = t_load
        out["search_ms"] = best_of(lambda: rag.top_rows(m @ q, 5)) * 1000
        out["bare_ms"] = best_of(lambda: m @ q) * 1000
        t1 = time.perf_counter()
        rag.rank(index, "vector search id42", q, rag.Settings())
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


class Unreachable:
    """The parts of ollama.Client a build asks besides embed(), as an Ollama that does not answer them."""

    def show(self, model):
        raise ConnectionError("no /api/show here")   # the build then skips its context-length check

    def list(self):
        raise ConnectionError("no /api/tags here")   # ...and records no build of the model


class CountingEmbedder(Unreachable):
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
        open_index(s, emb)
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
            index, _ = open_index(s, emb)
            out[name] = emb.texts - before
        out["chunks per note"] = total // 100
        return out


NAIVE_SCRIPT = """
import pickle, sys
import numpy as np
import ollama
with open(sys.argv[1], "rb") as f:
    data = pickle.load(f)
m = np.stack([np.array(v, dtype=np.float32) for v in data["vectors"]])
q = np.array(ollama.Client().embed(model="qwen3-embedding:0.6b", input=[sys.argv[2]]).embeddings[0])
scores = (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
for i in np.argsort(-scores)[:5]:
    print(data["chunks"][i]["source"], scores[i])
"""


def whole_process_table(sizes: list[int]) -> None:
    """Python start to exit: the naive script against `demo_rag.py --retrieve-only`."""
    from ollama_server import FakeOllama
    print("\nwhole process, warm (median of 7, alternated; stand-in server answers the question's vector):")
    print("| chunks | naive script | demo_rag.py --retrieve-only (fastest–slowest) | speed-up |")
    print("|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp, FakeOllama(dim=DIM) as server:
        env = {**os.environ, "OLLAMA_HOST": server.url}
        for n in sizes:
            folder = Path(tmp, str(n))
            notes = folder / "notes"
            notes.mkdir(parents=True)
            for j in range((n + 9) // 10):
                (notes / f"note-{j:05d}.md").write_text(f"# Note {j}\n\n" + "words " * 100)
            index = synthetic_index(n)
            files = rag.scan_notes(notes)[0]
            records = {f.rel: index.files[f.rel]._replace(size=f.size, mtime_ns=f.mtime_ns, ctime_ns=f.ctime_ns, ino=f.ino) for f in files}
            index = rag.Index(index.chunks, index.vectors, index.has_vector, index.lexicon, records,
                              rag.fingerprint(files), index.embed_model, index.chunking)
            s = rag.Settings(notes_dir=notes, cache_dir=folder / "cache")
            rag.save_index(index, rag.cache_path(s))
            with open(folder / "naive.pkl", "wb") as f:
                pickle.dump({"chunks": [{"source": c.source, "text": c.text} for c in index.chunks],
                             "vectors": [v.tolist() for v in index.vectors]}, f)
            del index
            cmds = {"naive": [sys.executable, "-c", NAIVE_SCRIPT, str(folder / "naive.pkl"), "vector search id42"],
                    "demo_rag": [sys.executable, str(ROOT / "demo_rag.py"), "--notes", str(notes), "--cache",
                                 str(folder / "cache"), "--retrieve-only", "vector search id42"]}
            times: dict[str, list[float]] = {k: [] for k in cmds}
            for _ in range(7):
                for kind, cmd in cmds.items():
                    t0 = time.perf_counter()
                    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
                    times[kind].append(time.perf_counter() - t0)
                    assert out.returncode == 0 and "keywords only" not in out.stdout, out.stderr
            naive, ours = (sorted(times[k]) for k in ("naive", "demo_rag"))
            print(f"| {n:,} | {naive[3]:.2f} s | {ours[3]:.2f} s ({ours[0]:.2f}–{ours[-1]:.2f}) "
                  f"| {naive[3] / ours[3]:.1f}× |", flush=True)
            size_naive = (folder / "naive.pkl").stat().st_size
            size_ours = rag.cache_path(s).stat().st_size
            print(f"  cache: naive {size_naive / 2**20:.0f} MB, demo_rag {size_ours / 2**20:.0f} MB "
                  f"({size_ours / size_naive:.2f})")
            shutil.rmtree(folder)


class TimedEmbedder(Unreachable):
    """Stands in for ollama.Client in a cold build: random 1,024-dim vectors as Python floats
    (what the ollama client hands over), `delay` seconds per text (0: as fast as it can), and
    the time spent in here, so that the script's own time can be told apart."""

    def __init__(self, delay: float = 0.0):
        self.delay, self.seconds, self.texts = delay, 0.0, 0
        self.rng = np.random.default_rng(0)

    def embed(self, model, input):
        t0 = time.perf_counter()
        self.texts += len(input)
        vecs = self.rng.standard_normal((len(input), DIM)).tolist()
        if self.delay:
            time.sleep(self.delay * len(input))
        self.seconds += time.perf_counter() - t0
        return type("Reply", (), {"embeddings": vecs})()


def write_vault(notes: Path, n: int) -> None:
    """n chunks: notes of 10 sections of ~1,300 characters, one chunk each at the default size."""
    rng = np.random.default_rng(0)
    notes.mkdir(parents=True)
    for j in range((n + 9) // 10):
        sections = [f"## Part {p}\n\n" + " ".join(rng.choice(WORDS, 200)) + f" id{j}-{p}"
                    for p in range(min(10, n - j * 10))]
        (notes / f"note-{j:05d}.md").write_text(f"# Note {j}\n\n" + "\n\n".join(sections))


def cold_build(notes: Path, cache: Path, delay: float, checkpoint_seconds: float) -> dict:
    """In this (fresh) process: one cold build; its own time, peak memory and checkpoints."""
    emb = TimedEmbedder(delay)
    s = rag.Settings(notes_dir=notes, cache_dir=cache)
    if hasattr(rag.Settings, "checkpoint_seconds"):
        s = rag.replace(s, checkpoint_seconds=checkpoint_seconds)
    saves = []
    real_save = rag.save_index

    def timed_save(index, path):
        t0 = time.perf_counter()
        real_save(index, path)
        saves.append(time.perf_counter() - t0)
    rag.save_index = timed_save
    t0 = time.perf_counter()
    index, _ = open_index(s, emb)
    took = time.perf_counter() - t0
    assert index.complete and emb.texts >= len(index.chunks)    # the floor's probe questions come after
    return {"chunks": len(index.chunks), "seconds": took, "own_seconds": took - emb.seconds,
            "peak_mb": peak_rss_mb(), "saves": len(saves), "save_seconds": sum(saves),
            "last_save": saves[-1] if saves else 0.0}


def run_cold(notes: Path, cache: Path, delay: float = 0.0, checkpoint_seconds: float = 20.0) -> dict:
    shutil.rmtree(cache, ignore_errors=True)
    out = subprocess.run([sys.executable, __file__, "--cold", str(notes), str(cache), str(delay),
                          str(checkpoint_seconds)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def cold_table(sizes: list[int], delay: float) -> None:
    print("\ncold build, in-process embedder (random vectors; its own time left out); one run each:")
    print("| chunks | own time | peak memory (whole process) | checkpoints written | one checkpoint "
          f"| checkpoint overhead at {delay * 1000:g} ms/chunk embedding |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            notes, cache = Path(tmp, f"notes-{n}"), Path(tmp, "cache")
            write_vault(notes, n)
            fast = run_cold(notes, cache)
            paced = run_cold(notes, cache, delay)                 # checkpoints every 20 s (default)
            bare = run_cold(notes, cache, delay, 1e9)             # only the final save
            overhead = (paced["seconds"] - bare["seconds"]) / bare["seconds"]
            print(f"| {fast['chunks']:,} | {fast['own_seconds']:.1f} s | {fast['peak_mb']:.0f} MB "
                  f"| {paced['saves'] - 1} in {paced['seconds']:.0f} s | {paced['last_save']:.2f} s "
                  f"| {overhead * 100:+.1f}% ({paced['seconds']:.0f} s vs {bare['seconds']:.0f} s; "
                  f"writes {paced['save_seconds'] - bare['save_seconds']:.1f} s) |", flush=True)
            shutil.rmtree(notes)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 50_000])
    p.add_argument("--only", nargs="+", choices=["load", "whole", "cold", "extras"],
                   default=["load", "whole", "cold", "extras"])
    p.add_argument("--embed-ms", type=float, default=2.0,
                   help="simulated embedding per chunk for the checkpoint overhead (default 2 ms: a fast GPU)")
    p.add_argument("--against", type=Path, help="measure the cold build of the demo_rag.py in this folder")
    p.add_argument("--measure", nargs=3, help=argparse.SUPPRESS)
    p.add_argument("--cold", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure:
        kind, n, folder = args.measure
        print(json.dumps(measure(kind, int(n), Path(folder))))
        return
    if args.cold:
        notes, cache, delay, every = args.cold
        print(json.dumps(cold_build(Path(notes), Path(cache), float(delay), float(every))))
        return
    if args.against:
        os.environ["BENCH_DEMO_RAG_DIR"] = str(args.against.resolve())
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, numpy {np.__version__}")
    if "whole" in args.only:
        whole_process_table(args.sizes)
    if "cold" in args.only:
        cold_table(args.sizes, args.embed_ms / 1000)
    if "load" in args.only:
        load_table(args.sizes)
    if "extras" in args.only:
        extras(args.sizes)


def load_table(sizes: list[int]) -> None:
    print("| chunks | warm query naive | warm query demo_rag (fastest–slowest) | speed-up | search vs bare `m @ q` "
          "| cache naive | cache demo_rag | ratio | peak mem naive | peak mem demo_rag | ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for n in sizes:
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
            if n == sizes[-1]:
                # NumPy asks Linux for huge pages for big arrays; where the kernel compacts
                # memory to find them, a load can stall. Measured once more without them.
                calm = run_measure("demo_rag", n, folder, env={"NUMPY_MADVISE_HUGEPAGE": "0"})
                print(f"\nat {n:,} chunks with NUMPY_MADVISE_HUGEPAGE=0: warm query {calm['seconds'] * 1000:.0f} ms "
                      f"({calm['fastest'] * 1000:.0f}–{calm['slowest'] * 1000:.0f}), "
                      f"{naive['seconds'] / calm['seconds']:.1f}× faster than naive")
            for f in folder.iterdir():
                f.unlink()
        print(f"\nhybrid retrieve() (dense + BM25 + fusion) at {sizes[-1]:,} chunks: {ours['hybrid_ms']:.1f} ms")


def extras(sizes: list[int]) -> None:
    print("\ntexts embedded when re-indexing 100 notes (stand-in embedder):")
    for k, v in reindex_counts().items():
        print(f"  {k}: {v}")


if __name__ == "__main__":
    main()
