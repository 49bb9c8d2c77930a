"""Benchmark the memory of a cold build: reading, chunking, BM25, then embedding.

Run from the project root (offline; the tests' stand-in Ollama answers over HTTP):

    python bench/bench_memory.py                      # a 20 MB vault (about a minute)
    python bench/bench_memory.py --mb 66              # the full case: 200 notes, 66 MB (a few minutes)
    python bench/bench_memory.py --mb 66 --against /path/to/old/checkout
    python bench/bench_memory.py --mb 5 --trace       # also: the largest allocations before embedding

It writes a vault of 200 notes, about half of the characters Chinese, half English,
markdown headings every few paragraphs; the same on every run (a fixed seed). The text:

- English: sentences of 6 to 25 words from a fixed 30,000-word vocabulary (the common
  function words, then pseudo-words; /usr/share/dict/words where present), Zipf s 1.05.
- Chinese: words from a fixed lexicon of 30,000 words of 1 to 4 characters (mostly 2)
  made of 3,500 characters with Zipf-Mandelbrot weights; words drawn with Zipf s 1.1,
  70% of them one of the previous word's 4 usual next words (collocations), clauses of
  2 to 8 words joined by ，、； and ended by 。？！.
- Each section is about something: 40% of its words come from 150 words per language
  picked at its heading.

Checked against real Chinese found on the build machine (Rust by Example's Chinese
translation and vim's zh_CN tutor, 55,000 Han characters of prose; with the zh_CN
gettext catalogues, 482,000): in 50,000 Han characters the real prose has 1,056
distinct characters and 11,300 distinct bigrams, this text about 2,000 and 17,000
(random pairs of characters, as an earlier version made, give 37,500); per 1,500-character
chunk tokenize() finds about 900 distinct terms in the real text, about 1,340 here. The
top 1,000 characters carry 95% of this text (real Chinese: about 90%). So the vault is
somewhat richer than real technical Chinese: memory measured on it errs high.

Then, for this checkout and for each --against checkout, a fresh process imports
demo_rag from that folder and runs one cold build (demo_rag.open_index, or build_index in older
checkouts, with an empty cache folder) against tests/ollama_server.py's FakeOllama, started by this
script on 127.0.0.1. The building process reports:

- peak memory before the first embed request (reading, chunking, BM25 statistics),
- peak memory from then on (embedding, checkpoints, the final save),
- ru_maxrss of the whole build, and the memory right after importing demo_rag,
- wall time of the build (and of the part before embedding), chunks, cache file size.

Peaks come from the kernel's high-water mark (VmHWM in /proc/self/status, reset at
the first embed request where the kernel allows it) and from a thread that samples
VmRSS every 50 ms; the larger of the two is shown. Memory is in MB (2**20 bytes).

The stand-in embedder returns --dim numbers per text (default 256), so embedding
costs little and the build's own memory is what is measured. --embed hash uses
the server's bag-of-words vectors instead of random ones (slower, same memory).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
NOTES = 200
SEED = 20240601

# ----------------------------------------------------------------------------
# The vault: natural-like text, the same on every run.

# The most frequent English words, in rank order: function words, as in real text
# (demo_rag drops most of them as stopwords, as it would in real notes).
COMMON_ENGLISH = ("the of and to a in is that for it as was with be by on not he this are or his from at "
                  "which but have an they you were her she there been one all we their has would when if "
                  "so no will can more what about up out them into some could time than other then its "
                  "only new also these two may first any like now my such how our over after most").split()
ONSETS = ["", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
          "bl", "br", "ch", "cl", "cr", "dr", "fl", "fr", "gr", "pl", "pr", "sc", "sh", "sl", "sp", "st",
          "str", "th", "tr"]
VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ee", "io", "ou", "y"]
TOPIC_WORDS = 150        # words a section is about, per language
TOPIC_SHARE = 0.4        # share of a section's words drawn from them
NEXT_WORDS = 4           # usual next words per Chinese word
FOLLOW_SHARE = 0.7       # share of Chinese words that are the previous word's usual next word
CODAS = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "nt", "ng", "st", "rt", "ck", "sh", "x"]


def zipf_weights(n: int, s: float = 1.0, q: float = 2.7) -> np.ndarray:
    """Zipf-Mandelbrot probabilities for ranks 1..n: p(r) ~ 1 / (r + q)^s."""
    w = 1.0 / (np.arange(1, n + 1) + q) ** s
    return w / w.sum()


def english_vocabulary(rng: np.random.Generator, n: int) -> list[str]:
    """n distinct words: the common function words first, then pseudo-words of 1 to 4
    syllables, shorter ones at the more frequent ranks (as in real English)."""
    dictionary = Path("/usr/share/dict/words")
    words = list(COMMON_ENGLISH)
    seen = set(words)
    if dictionary.exists():               # real words where the machine has them
        real = [w.strip().lower() for w in dictionary.read_text(errors="ignore").split()]
        real = sorted({w for w in real if w.isalpha() and w.isascii() and 2 <= len(w) <= 14} - seen)
        rng.shuffle(real)
        pool = real
    else:
        pool = []
        while len(pool) < 2 * n:
            syllables = rng.choice([1, 2, 3, 4], p=[0.3, 0.4, 0.2, 0.1])
            pool.append("".join(ONSETS[rng.integers(len(ONSETS))] + VOWELS[rng.integers(len(VOWELS))]
                                + CODAS[rng.integers(len(CODAS))] for _ in range(syllables)))
    for w in pool:
        if len(words) >= n:
            break
        if w not in seen and len(w) > 1:
            seen.add(w)
            words.append(w)
    head, tail = words[:len(COMMON_ENGLISH)], words[len(COMMON_ENGLISH):]
    tail.sort(key=lambda w: (len(w) + rng.random() * 6))     # short words tend to be frequent
    return head + tail


def chinese_vocabulary(rng: np.random.Generator, n: int, characters: int = 3500) -> list[str]:
    """n words of 1 to 4 characters (mostly 2, as in Chinese), the most frequent first.

    The `characters` are a fixed choice from U+4E00..U+9FA5 with Zipf-Mandelbrot weights
    (s 1.3, q 10: the top 1,000 carry about 90% of the weight, the top 2,500 about 98%,
    the usual figures for Chinese). The single-character words are the most frequent
    characters themselves (the function words of real text: 的 是 在 了 ...); the longer
    words draw their characters by those weights. Shorter words get the frequent ranks.
    """
    pool = rng.permutation(np.arange(0x4E00, 0x9FA6))[:characters]
    char_p = zipf_weights(characters, s=1.3, q=10.0)
    singles = ["".join(chr(c)) for c in pool[:int(0.06 * n)]]      # the top characters, alone
    lengths = rng.choice([2, 3, 4], size=2 * n, p=[0.78, 0.14, 0.08])
    codes = pool[rng.choice(characters, size=int(lengths.sum()), p=char_p)]
    words, seen, at = list(singles), set(singles), 0
    for k in lengths:
        w = "".join(map(chr, codes[at:at + k]))
        at += k
        if w not in seen:
            seen.add(w)
            words.append(w)
            if len(words) == n:
                break
    head, tail = words[:200], words[200:]                     # the 200 commonest characters lead
    tail.sort(key=lambda w: (len(w) + rng.random() * 3))        # then short words tend to be frequent
    return head + tail


class TextMaker:
    """Sentences, paragraphs and notes from the two vocabularies, with Zipf word frequencies."""

    def __init__(self, seed: int = SEED, english_words: int = 30_000, chinese_words: int = 30_000):
        rng = np.random.default_rng(seed)
        self.en = english_vocabulary(rng, english_words)
        self.zh = chinese_vocabulary(rng, chinese_words)
        self.en_p = zipf_weights(len(self.en), s=1.05)
        self.zh_p = zipf_weights(len(self.zh), s=1.1)
        # Chinese word order is not free: each word has a few usual next words (collocations).
        self.zh_next = rng.choice(len(self.zh), size=(len(self.zh), NEXT_WORDS), p=self.zh_p)
        self.new_topic(rng)

    def new_topic(self, rng: np.random.Generator, size: int = TOPIC_WORDS) -> None:
        """Pick the current section's topic: `size` words of each language, drawn by frequency
        from past the 200 commonest (which are function words). A share TOPIC_SHARE of the
        words written from now on come from it: real text repeats its subject's words."""
        def pick(p: np.ndarray) -> np.ndarray:
            q = p[200:] / p[200:].sum()
            return 200 + rng.choice(len(q), size=size, replace=False, p=q)
        self.en_topic, self.zh_topic = pick(self.en_p), pick(self.zh_p)

    def words(self, rng: np.random.Generator, n: int, p: np.ndarray, topic: np.ndarray) -> np.ndarray:
        """n word ranks: by Zipf frequency, a TOPIC_SHARE of them from the topic instead."""
        ids = rng.choice(len(p), size=n, p=p)
        on_topic = rng.random(n) < TOPIC_SHARE
        ids[on_topic] = topic[rng.integers(len(topic), size=int(on_topic.sum()))]
        return ids

    def english(self, rng: np.random.Generator, chars: int) -> str:
        """A paragraph of English sentences, about `chars` characters."""
        ids = self.words(rng, chars // 5 + 20, self.en_p, self.en_topic)
        out, used, at = [], 0, 0
        while used < chars and at < len(ids):
            k = int(rng.integers(6, 26))
            words = [self.en[i] for i in ids[at:at + k]]
            at += k
            if not words:
                break
            if len(words) > 12:
                words[len(words) // 2 - 1] += ","
            sentence = " ".join(words).capitalize() + ("?" if rng.random() < 0.05 else ".")
            out.append(sentence)
            used += len(sentence) + 1
        return " ".join(out)

    def chinese(self, rng: np.random.Generator, chars: int) -> str:
        """A paragraph of Chinese sentences, about `chars` characters: sentences of 1 to 4
        clauses of 2 to 8 words, clauses joined by ， (sometimes ； or 、), ending in 。 ？ or ！."""
        ids = self.words(rng, chars + 20, self.zh_p, self.zh_topic)
        follow = rng.random(len(ids)) < FOLLOW_SHARE      # these take one of the previous word's usual next words
        pick = rng.integers(NEXT_WORDS, size=len(ids))
        nxt = self.zh_next
        ids = ids.tolist()
        for i in np.flatnonzero(follow[1:]).tolist():
            ids[i + 1] = int(nxt[ids[i], pick[i + 1]])
        out, used, at = [], 0, 0
        while used < chars and at < len(ids):
            clauses = []
            for _ in range(int(rng.integers(1, 5))):
                k = int(rng.integers(2, 9))
                clauses.append("".join(self.zh[i] for i in ids[at:at + k]))
                at += k
            clauses = [c for c in clauses if c]
            if not clauses:
                break
            text = clauses[0]
            for c in clauses[1:]:
                u = rng.random()
                text += ("；" if u < 0.06 else "、" if u < 0.16 else "，") + c
            u = rng.random()
            sentence = text + ("？" if u < 0.05 else "！" if u < 0.08 else "。")
            out.append(sentence)
            used += len(sentence)
        return "".join(out)

    def heading(self, rng: np.random.Generator) -> str:
        if rng.random() < 0.5:
            return self.chinese(rng, 8).rstrip("。？")
        return self.english(rng, 30).rstrip(".?")

    def note(self, rng: np.random.Generator, target_bytes: int) -> str:
        """One note of about target_bytes UTF-8 bytes: a title, sections and subsections."""
        parts = [f"# {self.heading(rng)}\n"]
        size, paragraphs_left = 0, 0
        while size < target_bytes:
            if paragraphs_left == 0:          # a heading every few paragraphs
                level = "##" if rng.random() < 0.6 else "###"
                self.new_topic(rng)
                parts.append(f"{level} {self.heading(rng)}\n")
                paragraphs_left = int(rng.integers(4, 13))
            chars = int(rng.integers(80, 800))
            text = self.chinese(rng, chars) if rng.random() < 0.55 else self.english(rng, chars)
            parts.append(text + "\n")
            paragraphs_left -= 1
            size += len(text.encode()) + 1
        return "\n".join(parts)


def write_vault(folder: Path, mb: float, notes: int = NOTES, seed: int = SEED) -> dict:
    """Write `notes` notes of natural-like text, mb MB in all; return what was written."""
    folder.mkdir(parents=True, exist_ok=True)
    maker = TextMaker(seed)
    per_note = int(mb * 2**20 / notes)
    chars = cjk = 0
    for j in range(notes):
        text = maker.note(np.random.default_rng([seed, j]), per_note)
        chars += len(text)
        cjk += sum(1 for ch in text if ch >= "\u4e00")
        (folder / f"note-{j:03d}.md").write_text(text, encoding="utf-8")
    size = sum(p.stat().st_size for p in folder.iterdir())
    return {"notes": notes, "mb": size / 2**20, "chars": chars, "cjk_share": cjk / max(chars, 1)}

# ----------------------------------------------------------------------------
# The measured process: one cold build, its memory sampled.


def status_kb(field: str) -> int:
    """A field of /proc/self/status in kB (VmRSS, VmHWM), or 0 where there is none."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def reset_high_water_mark() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class Meter:
    """Samples VmRSS every `every` seconds from a thread, keeping the peak per phase:
    "prepare" until the first embed request, then "embed"."""

    def __init__(self, every: float = 0.05):
        self.every, self.phase = every, "prepare"
        self.peak_kb = {"prepare": 0, "embed": 0}
        self.hwm_prepare_kb = self.maxrss_prepare_kb = 0
        self.hwm_reset = False
        self.t0 = time.perf_counter()
        self.first_embed_at: float | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(self.every)

    def sample(self) -> None:
        phase = self.phase
        self.peak_kb[phase] = max(self.peak_kb[phase], status_kb("VmRSS"))

    def first_embed(self) -> None:
        if self.phase != "prepare":
            return
        self.sample()
        self.hwm_prepare_kb = status_kb("VmHWM")
        self.maxrss_prepare_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss   # reset below too
        self.hwm_reset = reset_high_water_mark()
        self.first_embed_at = time.perf_counter() - self.t0
        self.phase = "embed"

    def finish(self) -> dict:
        self.sample()
        self.stop.set()
        self.thread.join()
        hwm = status_kb("VmHWM")
        maxrss = max(self.maxrss_prepare_kb, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # kB
        prepare = max(self.peak_kb["prepare"], self.hwm_prepare_kb or hwm)
        embed = max(self.peak_kb["embed"], hwm if self.hwm_reset else 0)
        return {"peak_prepare_mb": prepare / 1024, "peak_embed_mb": embed / 1024,
                "sampled_prepare_mb": self.peak_kb["prepare"] / 1024,
                "sampled_embed_mb": self.peak_kb["embed"] / 1024,
                "maxrss_mb": maxrss / 1024, "hwm_reset": self.hwm_reset,
                "prepare_seconds": self.first_embed_at}


def cold_build(checkout: Path, notes: Path, cache: Path, host: str, trace: bool) -> dict:
    """In this (fresh) process: import demo_rag from `checkout`, build the index cold, measure."""
    os.environ["OLLAMA_HOST"] = host
    sys.path.insert(0, str(checkout))
    import ollama
    import demo_rag
    assert Path(demo_rag.__file__).resolve().parent == checkout.resolve(), demo_rag.__file__
    if trace:
        import tracemalloc
        tracemalloc.start(5)
    meter = Meter()
    imported_mb = status_kb("VmRSS") / 1024

    class Client(ollama.Client):
        """The real client; it tells the meter when the first embed request goes out."""

        def embed(self, *args, **kwargs):
            if meter.phase == "prepare" and trace:
                print_top_allocations(tracemalloc.take_snapshot())
            meter.first_embed()
            return super().embed(*args, **kwargs)

    settings = demo_rag.Settings(notes_dir=notes, cache_dir=cache)
    t0 = time.perf_counter()
    open_index = getattr(demo_rag, "build_index", None) or demo_rag.open_index   # renamed since
    index, report = open_index(settings, Client(host=host))
    seconds = time.perf_counter() - t0
    out = meter.finish()
    path = demo_rag.cache_path(settings)
    assert index.complete, report.embed_error
    out.update(imported_mb=imported_mb, seconds=seconds, chunks=len(index.chunks),
               postings=int(len(index.lexicon.docs)), vocab=len(index.lexicon.vocab),
               cache_mb=path.stat().st_size / 2**20, dim=int(index.vectors.shape[1]))
    return out


def print_top_allocations(snapshot, n: int = 15) -> None:
    """The largest live allocations (by line, then by traceback for the top few), to stderr."""
    stats = snapshot.statistics("lineno")
    total = sum(s.size for s in stats)
    print(f"tracemalloc before the first embed request: {total / 2**20:.0f} MB live in Python", file=sys.stderr)
    for s in stats[:n]:
        frame = s.traceback[0]
        print(f"  {s.size / 2**20:8.1f} MB {s.count:>10,} blocks  {frame.filename}:{frame.lineno}",
              file=sys.stderr)

# ----------------------------------------------------------------------------
# The driver: one vault, one stand-in server, one fresh process per checkout.


def run_build(checkout: Path, notes: Path, cache: Path, host: str, trace: bool) -> dict:
    shutil.rmtree(cache, ignore_errors=True)
    cmd = [sys.executable, __file__, "--child", str(checkout), str(notes), str(cache), host]
    proc = subprocess.run(cmd + (["--trace"] if trace else []), stdout=subprocess.PIPE, text=True,
                          cwd=checkout)
    if proc.returncode:
        raise SystemExit(f"the build with {checkout} failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=float, default=20.0, help="vault size in MB (default 20; 66 is the full case)")
    p.add_argument("--against", action="append", type=Path, default=[], metavar="DIR",
                   help="also build with demo_rag.py from this checkout (repeatable)")
    p.add_argument("--dim", type=int, default=256, help="the stand-in embedder's vector size (default 256)")
    p.add_argument("--embed", choices=("random", "hash"), default="random",
                   help="the stand-in's vectors: random (fast) or its bag of words")
    p.add_argument("--trace", action="store_true", help="print tracemalloc's largest allocations "
                   "before embedding (slow; its own memory is counted in the peaks)")
    p.add_argument("--vault", type=Path, help="write the vault here and keep it (default: a temp folder)")
    p.add_argument("--child", nargs=4, metavar=("CHECKOUT", "NOTES", "CACHE", "HOST"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        checkout, notes, cache, host = args.child
        print(json.dumps(cold_build(Path(checkout), Path(notes), Path(cache), host, args.trace)))
        return

    sys.path.insert(0, str(ROOT / "tests"))
    from ollama_server import FakeOllama

    checkouts = [ROOT] + [d.resolve() for d in args.against]
    for d in checkouts:
        if not (d / "demo_rag.py").exists():
            raise SystemExit(f"no demo_rag.py in {d}")
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        notes = args.vault or Path(tmp, "notes")
        if args.vault and notes.exists():
            shutil.rmtree(notes)
        t0 = time.perf_counter()
        vault = write_vault(notes, args.mb)
        print(f"vault: {vault['notes']} notes, {vault['mb']:.1f} MB, {vault['chars']:,} characters, "
              f"{vault['cjk_share']:.0%} CJK (written in {time.perf_counter() - t0:.0f} s)")
        print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, NumPy {np.__version__}; "
              f"stand-in embedder: {args.embed} vectors of {args.dim} numbers over HTTP\n")
        print("| checkout | chunks | postings | distinct terms | peak before embedding | peak while embedding | ru_maxrss "
              "| after import | time before embedding | wall time | cache file |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        with FakeOllama(embed=args.embed, dim=args.dim) as server:
            for d in checkouts:
                r = run_build(d, notes, Path(tmp, "cache"), server.url, args.trace)
                print(f"| {d} | {r['chunks']:,} | {r['postings']:,} | {r['vocab']:,} | {r['peak_prepare_mb']:,.0f} MB "
                      f"| {r['peak_embed_mb']:,.0f} MB | {r['maxrss_mb']:,.0f} MB | {r['imported_mb']:.0f} MB "
                      f"| {r['prepare_seconds'] or 0:.1f} s | {r['seconds']:.1f} s | {r['cache_mb']:,.0f} MB |",
                      flush=True)
                if not r["hwm_reset"]:
                    print("  (the kernel did not allow resetting VmHWM: the peak while embedding is sampled "
                          "every 50 ms and may miss a short spike)")


if __name__ == "__main__":
    main()
