#!/usr/bin/env python3
"""Measure fusion rules, relevance floors and chunkings without re-embedding.

For each evaluation set x embedder x chunking it embeds every chunk and question once
(vectors cached by text in bench/results/vectors-<embedder>.pkl), then ranks with
every candidate rule in numpy. It imports demo_rag.py from this worktree, so BM25,
tokenising, today's chunking and today's fuse()/confidence() are the shipped ones.

    python bench/fusion_study.py --docs ../shared/data/ollama-docs            # everything
    python bench/fusion_study.py --docs ... --embedders e5 --embed-only       # just fill the cache

Embedders: minilm and e5 are served by the shared stand-in (ollama_standin.py,
all-MiniLM-L6-v2 and multilingual-e5-small with its "query: " prompt); hash and random are
the test suite's hashed_vector and random_vector (tests/ollama_server.py), served by its
FakeOllama. None of these numbers are for qwen3-embedding.
"""
import argparse
import json
import math
import pickle
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
sys.path.insert(0, str(PROJECT))
sys.path.insert(0, str(PROJECT / "tests"))
import demo_rag as d  # noqa: E402
from eval_paraphrase import standin  # noqa: E402

RESULTS = HERE / "results"
# embedder -> (model name served, query template)
EMBEDDERS = {"minilm": ("all-minilm", ""), "e5": ("multilingual-e5-small", "query: {query}"),
             "hash": ("qwen3-embedding:0.6b", ""), "random": ("qwen3-embedding:0.6b", "")}

# ---------------------------------------------------------------------------
# Chunkings


def chunks_today(rel, sections, size=d.CHUNK_SIZE, overlap=d.CHUNK_OVERLAP):
    return d.chunk_sections(rel, sections, d.make_splitter(size, overlap))


def chunks_heading_first(rel, sections, size=d.CHUNK_SIZE, overlap=d.CHUNK_OVERLAP, min_size=200):
    """Each section (text from one heading to the next) is its own chunk when it fits;
    a piece shorter than min_size (or only a heading) absorbs the following sections
    while the result still fits; a section longer than size is cut by today's splitter."""
    splitter = d.make_splitter(size, overlap)
    out = []
    for text, page, _ in sections:
        outline = d.heading_outline(text)
        cuts = sorted({0, len(text)} | {off for off, _, _ in outline})
        pieces = [(a, text[a:b]) for a, b in zip(cuts, cuts[1:]) if text[a:b].strip()]
        merged = []
        for start, piece in pieces:
            if merged:
                prev_start, prev = merged[-1]
                body = prev[d.LEADING_HEADINGS.match(prev).end():].strip()
                if (len(prev.strip()) < min_size or not body) and len(prev) + len(piece) <= size:
                    merged[-1] = (prev_start, prev + piece)
                    continue
            merged.append((start, piece))
        for start, piece in merged:
            if len(piece.strip()) <= size:
                docs = [(start, piece)]
            else:
                docs = [(start + max(x.metadata.get("start_index", 0), 0), x.page_content)
                        for x in splitter.create_documents([piece])]
            for s, t in docs:
                offset = s + d.LEADING_HEADINGS.match(t).end()
                out.append(d.Chunk(rel, d.heading_paths(outline, [offset])[0], t.strip(), page))
    return out


CHUNKINGS = {"today": chunks_today,
             "heading-first/200": lambda r, s: chunks_heading_first(r, s, min_size=200),
             "heading-first/500": lambda r, s: chunks_heading_first(r, s, min_size=500)}


def load_chunks(notes: Path, chunking: str) -> list:
    files, _ = d.scan_notes(notes)
    chunks = []
    for f in files:
        sections, _ = d.read_note(f)
        if sections:
            chunks += CHUNKINGS[chunking](f.rel, sections)
    return chunks

# ---------------------------------------------------------------------------
# Embedding, through a server that speaks Ollama's API, cached by text


@contextmanager
def server(embedder: str):
    """Yield the URL of a server embedding with `embedder`; stop it afterwards."""
    if embedder in ("hash", "random"):
        from ollama_server import FakeOllama
        with FakeOllama(embed=embedder) as fake:
            yield fake.url
        return
    with standin(embedder, EMBEDDERS[embedder][0]) as url:
        yield url


class VectorCache:
    def __init__(self, embedder: str):
        self.path = RESULTS / f"vectors-{embedder}.pkl"
        self.embedder = embedder
        self.data = pickle.loads(self.path.read_bytes()) if self.path.exists() else {}

    def get(self, texts: list[str], url: str | None) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self.data))
        if todo:
            import ollama
            client = ollama.Client(host=url)
            model = EMBEDDERS[self.embedder][0]
            for i in range(0, len(todo), 64):
                part = todo[i:i + 64]
                for t, v in zip(part, d.embed_texts(client, model, part)):
                    self.data[t] = v.astype(np.float32)
                print(f"  {self.embedder}: embedded {min(i + 64, len(todo))}/{len(todo)}", file=sys.stderr)
            RESULTS.mkdir(exist_ok=True)
            self.path.write_bytes(pickle.dumps(self.data))
        return np.stack([self.data[t] for t in texts])

# ---------------------------------------------------------------------------
# One cell: an evaluation set, a chunking and an embedder, scored by both rankers


def load_items(path: Path) -> list[dict]:
    return d.load_eval_set(path)


def prepare(notes: Path, items: list[dict], chunking: str, embedder: str, url: str | None) -> dict:
    chunks = load_chunks(notes, chunking)
    cache = VectorCache(embedder)
    vectors = d.normalize(cache.get([c.embed_text for c in chunks], url))
    template = EMBEDDERS[embedder][1]
    queries = [template.replace("{query}", it["question"]) if template else it["question"] for it in items]
    qvecs = d.normalize(cache.get(queries, url))
    lex = d.lexicon_from_texts([c.text for c in chunks])
    dense = qvecs @ vectors.T
    bm25 = np.stack([d.bm25_scores(lex, d.query_postings(lex, it["question"])) for it in items])
    return {"chunks": chunks, "items": items, "dense": dense, "bm25": bm25, "lex": lex,
            "embedder": embedder, "chunking": chunking}

# ---------------------------------------------------------------------------
# Candidate rules. Each fusion takes (dense, bm25) scores over the chunks, returns fused scores.


def noise_level(n: int) -> float:
    """How many standard deviations the best of n chance scores lies above their middle."""
    return math.sqrt(2 * math.log(n)) if n > 1 else 0.0


def robust_z(s: np.ndarray) -> np.ndarray:
    """Scores in robust standard deviations from the median (MAD x 1.4826): the bulk of
    chunks sets the scale, so a heavy upper tail of relevant chunks does not widen it."""
    med = float(np.median(s))
    mad = 1.4826 * float(np.median(np.abs(s - med)))
    if mad == 0:
        mad = float(s.std()) or 1.0
    return (s - med) / mad


def robust_standout(s: np.ndarray) -> float:
    """Best score's robust z minus the noise level: <= 0 means 'no better than chance'."""
    return float(robust_z(s).max()) - noise_level(len(s)) if len(s) > 1 else 0.0


def rank_positions(s: np.ndarray, matched_only: bool) -> np.ndarray:
    """1-based rank of every row (ties in row order); inf for rows without a match."""
    order = np.lexsort((np.arange(len(s)), -s))
    pos = np.empty(len(s))
    pos[order] = np.arange(1, len(s) + 1)
    if matched_only:
        pos[s <= 0] = np.inf
    return pos


def rrf(parts, k=60.0):
    """parts: (weight, ranks); sum of weight / (k + rank)."""
    return sum(w / (k + r) for w, r in parts if w > 0)


def f_today(dense, bm25):                     # the default before this study: --fusion zscore
    return d.fuse(dense, bm25, 0.0, "zscore")[0]


def f_dense(dense, bm25):
    return dense


def f_bm25(dense, bm25):
    return bm25


def f_rrf_plain(dense, bm25):                 # every row ranked by both, ties in row order
    return rrf([(1, rank_positions(dense, False)), (1, rank_positions(bm25, False))])


def f_rrf_matched(dense, bm25):               # BM25 ranks only chunks with a query word
    return rrf([(1, rank_positions(dense, False)), (1, rank_positions(bm25, True))])


def f_rrf_guard(dense, bm25):
    """RRF; dense dropped when its best is no further above the median than chance
    would put it (robust z, so a heavy tail of relevant chunks does not hide it)."""
    w = 1.0 if robust_standout(dense) > 0 else 0.0
    if not (bm25 > 0).any():
        w = 1.0
    return rrf([(w, rank_positions(dense, False)), (1, rank_positions(bm25, True))])


def f_rrf_guard_std(dense, bm25):             # same guard with today's (non-robust) standout
    w = 1.0 if d.standout(dense) > 0 else 0.0
    if not (bm25 > 0).any():
        w = 1.0
    return rrf([(w, rank_positions(dense, False)), (1, rank_positions(bm25, True))])


def f_rrf_soft(dense, bm25):
    """RRF, dense weighted by Phi(robust standout): 0.5 at the chance level, -> 1 above."""
    w = 0.5 * (1 + math.erf(robust_standout(dense) / math.sqrt(2)))
    if not (bm25 > 0).any():
        w = 1.0
    return rrf([(w, rank_positions(dense, False)), (1, rank_positions(bm25, True))])


def f_z_robust(dense, bm25):
    """Score fusion: dense in robust z, BM25 in z over all chunks, summed; dense dropped by the guard."""
    w = 1.0 if robust_standout(dense) > 0 else 0.0
    zb = (bm25 - bm25.mean()) / (bm25.std() or 1.0)
    return w * robust_z(dense) / noise_level(len(dense)) + zb / noise_level(len(bm25))


def f_minmax(dense, bm25):
    """CombSUM of min-max normalised scores, dense dropped by the guard."""
    mm = lambda s: (s - s.min()) / ((s.max() - s.min()) or 1.0)  # noqa: E731
    w = 1.0 if robust_standout(dense) > 0 else 0.0
    return w * mm(dense) + mm(bm25)


def f_today_robust(dense, bm25):
    """Today's fuse with the robust standout as the weight."""
    parts = [dense, bm25]
    ws = [max(robust_standout(s), 0.0) for s in parts]
    if sum(ws) == 0:
        ws = [1.0, 1.0]
    return sum(w * (s - s.mean()) / (s.std() or 1.0) for w, s in zip(ws, parts)) / sum(ws)


def coverage_of_best(lex, question: str, bm25: np.ndarray) -> float:
    """Share of the question's idf weight found in BM25's best chunk (demo_rag.coverage)."""
    if not (bm25 > 0).any():
        return 0.0
    return d.coverage(d.query_postings(lex, question), int(np.argmax(bm25)))


def phi(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def make_cov(p: float = 2.0, kind: str = "z", k: float = 20.0):
    """Recommended family: words vote as much as BM25's best chunk holds the question's
    words (coverage c), meaning votes for the rest, times the chance its best is not noise:
    w_bm25 = c^p, w_dense = Phi(standout(dense)) * (1 - c)^p; z-scores (or RRF) summed."""
    def fuse_cov(dense, bm25, c):
        wd, wb = phi(d.standout(dense)) * (1 - c) ** p, c ** p
        if wd + wb == 0:
            wd = wb = 1.0
        if kind == "z":
            z = lambda s: (s - s.mean()) / (s.std() or 1.0)  # noqa: E731
            return (wd * z(dense) + wb * z(bm25)) / (wd + wb)
        return wd / (k + rank_positions(dense, False)) + wb / (k + rank_positions(bm25, True))
    fuse_cov.needs_coverage = True
    return fuse_cov


FUSIONS = {"dense": f_dense, "bm25": f_bm25, "today": f_today, "rrf60": f_rrf_plain,
           "rrf60-matched": f_rrf_matched, "rrf-guard": f_rrf_guard, "rrf-guard(std)": f_rrf_guard_std,
           "rrf-soft": f_rrf_soft, "z-robust": f_z_robust, "minmax-guard": f_minmax,
           "today-robust": f_today_robust,
           "cov-z p1": make_cov(1), "cov-z p2 (recommended)": make_cov(2), "cov-z p3": make_cov(3),
           "cov-rrf20 p2": make_cov(2, "rrf", 20), "cov-rrf60 p1": make_cov(1, "rrf", 60)}
RECOMMENDED = FUSIONS["cov-z p2 (recommended)"]


def run_fusion(fn, cell, qi):
    dense, bm25 = cell["dense"][qi], cell["bm25"][qi]
    if getattr(fn, "needs_coverage", False):
        return fn(dense, bm25, coverage_of_best(cell["lex"], cell["items"][qi]["question"], bm25))
    return fn(dense, bm25)


def evaluate_cell(cell: dict, fusions=FUSIONS) -> dict:
    """hit@1, hit@5, MRR@10 of every fusion on one cell (answerable questions only)."""
    out = {}
    chunks = cell["chunks"]
    texts = [c.text.lower() for c in chunks]
    for name, fn in fusions.items():
        ranks = []
        for qi, it in enumerate(cell["items"]):
            if not it.get("answers"):
                continue
            fused = np.asarray(run_fusion(fn, cell, qi), dtype=np.float64)
            order = np.lexsort((np.arange(len(fused)), -fused))[:10]
            wanted = [a.lower() for a in it["answers"]]
            ranks.append(next((r for r, row in enumerate(order, 1) if any(a in texts[row] for a in wanted)), None))
        out[name] = d.metrics(ranks)
    return out

# ---------------------------------------------------------------------------
# Relevance floor: features of each question's best hits under a fusion


def floor_features(cell: dict, fusion=None, top=5) -> list[dict]:
    feats = []
    lex = cell["lex"]
    for qi, it in enumerate(cell["items"]):
        dense = cell["dense"][qi]
        fused = np.asarray(run_fusion(fusion or RECOMMENDED, cell, qi), dtype=np.float64)
        hits = np.lexsort((np.arange(len(fused)), -fused))[:top]
        postings = d.query_postings(lex, it["question"])
        cov = max(d.coverage(postings, int(r)) for r in hits)
        z = robust_z(dense)
        n = len(dense)
        feats.append({"answerable": bool(it.get("answers")), "question": it["question"],
                      "coverage": cov,
                      "today_cos": max(float(dense[r]) - float(dense.mean()) for r in hits),
                      "zbest": float(z[hits].max()), "noise": noise_level(n),
                      "zstd": float(((dense[hits].max() - dense.mean()) / (dense.std() or 1))),
                      "chinese": bool(d.CJK_CHAR.search(it["question"])),
                      "gap": (float(dense[hits].max()) - float(np.median(dense))) / (1 - float(np.median(dense)))})
    return feats


FLOOR_RULES = {
    "today: max(coverage, cos - mean cos)": lambda f: max(f["coverage"], f["today_cos"]),
    "coverage only": lambda f: f["coverage"],
    "max(coverage, gap)  gap = (best cos - median) / (1 - median)": lambda f: max(f["coverage"], f["gap"]),
    "max(coverage, Phi(standout of best hit))": lambda f: max(f["coverage"], phi(f["zstd"] - f["noise"])),
}


def floor_table(results: dict, floors=(0.15, 0.2, 0.25, 0.3)) -> str:
    lines = []
    for rule, fn in FLOOR_RULES.items():
        lines += [f"\n**{rule}** (hits: top 5 of the recommended fusion, today's chunking)\n",
                  "| --min-score | " + " | ".join(f"{k[0]} x {k[1]}" for k in results) + " |",
                  "|---|" + "---|" * len(results)]
        for t in floors:
            cells = []
            for key, r in results.items():
                F = r["floor"]
                a = [f for f in F if f["answerable"]]
                u = [f for f in F if not f["answerable"]]
                da = sum(fn(f) < t for f in a)
                dz = sum(fn(f) < t for f in a if f["chinese"])
                du = sum(fn(f) < t for f in u)
                cells.append(f"ans. declined {da}/{len(a)} ({dz} zh); unans. declined {du}/{len(u)}")
            lines.append(f"| {t} | " + " | ".join(cells) + " |")
    return "\n".join(lines)

# ---------------------------------------------------------------------------
# Main: every cell, every candidate; tables in Markdown


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=Path, required=True, help="the Ollama documentation folder")
    p.add_argument("--embedders", default="minilm,e5,hash,random")
    p.add_argument("--chunkings", default=",".join(CHUNKINGS))
    p.add_argument("--embed-only", action="store_true")
    p.add_argument("--json", type=Path, help="write every number here")
    args = p.parse_args()
    sets = {"paraphrase": (args.docs, load_items(HERE / "paraphrase-eval.jsonl")),
            "demo": (PROJECT / "demo-data", load_items(PROJECT / "demo-data" / "eval.jsonl"))}
    cells = {}
    for emb in args.embedders.split(","):
        with server(emb) as url:
            for sname, (notes, items) in sets.items():
                if sname == "paraphrase" and emb in ("hash", "random"):
                    continue
                for ch in args.chunkings.split(","):
                    cells[(sname, emb, ch)] = prepare(notes, items, ch, emb, url)
    if args.embed_only:
        return 0
    results = {}
    for key, cell in cells.items():
        results[key] = {"n_chunks": len(cell["chunks"]), "fusion": evaluate_cell(cell),
                        "floor": floor_features(cell)}
    if args.json:
        args.json.write_text(json.dumps({" | ".join(k): v for k, v in results.items()}, ensure_ascii=False, indent=1))
    today = {k: r for k, r in results.items() if k[2] == "today"}
    if today:
        print("\n## Relevance floor\n" + floor_table(today))
    for ch in dict.fromkeys(k[2] for k in results):
        keys = [k for k in results if k[2] == ch]
        print(f"\n## Fusion, {ch} chunking: hit@1 / hit@5 / MRR@10 (answerable questions)\n")
        print("| fusion | " + " | ".join(f"{k[0]} x {k[1]} ({results[k]['n_chunks']} chunks)" for k in keys) + " |")
        print("|---|" + "---|" * len(keys))
        for name in FUSIONS:
            print(f"| {name} | " + " | ".join(
                "{hit@1:.2f} / {hit@5:.2f} / {mrr:.3f}".format(**results[k]["fusion"][name]) for k in keys) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
