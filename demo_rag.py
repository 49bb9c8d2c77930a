"""demo_rag.py: ask questions of your own notes, answered by local models through Ollama.

Retrieval-augmented generation (RAG) in one readable file:

    load notes -> fingerprint -> chunk -> embed & cache -> search -> prompt & answer

Run it:

    pip install -r requirements.txt
    ollama pull qwen3-embedding:0.6b && ollama pull qwen3:0.6b
    python demo_rag.py "什么是 RAG？"                 # answer from demo-data/
    python demo_rag.py --notes ~/vault "how do I ..."  # answer from your own notes
    python demo_rag.py --chat                         # follow-up questions
    python demo_rag.py --explain "What is BM25?"       # narrate every step
    python demo_rag.py --eval demo-data/eval.jsonl     # measure retrieval

Or from a notebook: `from demo_rag import Settings, build_index, search, answer, ask`.

What it does: reads every .md/.markdown/.txt (and .pdf with pypdf) note under a
folder, cuts the notes into heading-aware chunks, embeds each chunk once (cached
on disk, re-embedding only what changed), ranks chunks for a question by exact
cosine similarity fused with BM25, and streams an answer from a local chat model
that cites its sources as [1], [2].

How to read this file: Part I is the pipeline, in the order above, then the
command line's main path; it is the whole idea and reads alone. After it come
the conversation (--chat), the evaluation (--eval) and the narrated run
(--explain). Part II is what makes Part I robust and fast (encodings, PDFs, the
safe cache format, checkpoints and progress, the incremental BM25 index,
thinking models); Part I calls it by name, and a first reading may skip it.

What it leaves out, on purpose: approximate nearest-neighbour indexes (exact
NumPy search is fast enough up to a few hundred thousand chunks), rerankers,
servers, frameworks, and any network service but your own Ollama.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import fnmatch
import functools
import gc
import hashlib
import importlib
import itertools
import json
import logging
import math
import mmap
import operator
import os
import pickle
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple

import httpx  # the ollama client's HTTP layer: its connection errors surface mid-stream
import numpy as np
import ollama
# ----------------------------------------------------------------------------
# Configuration: every knob in one place; command-line flags override these.

HERE = Path(__file__).resolve().parent
NOTES_DIR = HERE / "demo-data"            # the notes to answer from
CACHE_DIR = HERE / ".demo-cache"          # one pickle per notes folder

EMBED_MODEL = "qwen3-embedding:0.6b"      # 1024-dim vectors, reads long inputs, multilingual
CHAT_MODEL = "qwen3:0.6b"                 # small enough for a CPU laptop
DEFAULT_HOST = "http://127.0.0.1:11434"   # what the ollama client uses without OLLAMA_HOST

# Which files are notes, and how each kind is read: suffix -> (reader, the optional
# package it needs). The readers live in Part II; each lambda looks its reader up
# when called, so the table can sit up here. To add a file type, add a line.
NOTE_TYPES = {
    ".md": (lambda path: read_text(path), None),
    ".markdown": (lambda path: read_text(path), None),
    ".txt": (lambda path: read_text(path), None),
    ".pdf": (lambda path: read_pdf(path), "pypdf"),       # optional: pip install pypdf
}
MIN_NOTE_CHARS = 50                       # shorter notes are stubs, not knowledge
MAX_NOTE_MB = 5.0                         # a bigger "note" is usually an export or a log

CHUNK_SIZE = 1500                         # characters; qwen3-embedding reads ~32k tokens
CHUNK_OVERLAP = 80                        # characters shared by neighbouring chunks
EMBED_BATCH_TEXTS = 32                    # texts per /api/embed request...
EMBED_BATCH_CHARS = 24_000                # ...and characters, so one request stays small

TOP_K = 5                                 # sources put in the prompt
MIN_SCORE = 0.3                           # relevance floor on confidence() (README: measured)
TEMPERATURE = 0.3                         # low: we want the notes, not creativity
ANSWER_TOKENS = 1024                      # room left in the context for the answer
MIN_NUM_CTX = 4096                        # Ollama's usual default context size

# Qwen3-Embedding is trained with an instruction on queries only (model card:
# "Instruct: {task}\nQuery:{query}"); documents are embedded as they are.
QUERY_INSTRUCTIONS = {
    "qwen3-embedding": "Instruct: Given a web search query, retrieve relevant passages "
                       "that answer the query\nQuery:{query}",
}

# Conversation (--chat and ask()): what is remembered, and how follow-ups are rewritten.
CHAT_NUM_CTX = 8192                       # the whole prompt budget, history included
CHAT_VERBATIM_TURNS = 3                   # recent turns kept word for word; older ones summarised
SUMMARY_CHARS = 600                       # the summary of older turns stays under ~150 tokens
SUMMARY_QUESTION_CHARS = 80               # per summarised turn: enough of the question to recall it,
SUMMARY_ANSWER_CHARS = 120                # and of the answer's first sentence
HISTORY_HEADER_TOKENS = 50                # "Conversation so far:" and line breaks, with a margin
REWRITE_TURNS = 2                         # a follow-up leans on the last turn or two, not on all
REWRITE_ANSWER_CHARS = 160                # each of those answers, shown to the rewriter: its first sentence
REWRITE_TOKENS = 64                       # a standalone query is one short line; stop a rambling model

# Evaluation (--eval): rankings are judged down to this rank (MRR@10, as in most
# retrieval benchmarks); a hit below it counts as a miss.
EVAL_DEPTH = 10

CACHE_FORMAT = 5                          # bump when the cache file's layout changes
# On disk, vectors are float32, memory-mapped straight from the cache file: no
# widening and no copy on load, which made a warm query at 50k chunks ~4x faster
# than float16 at twice the size (bench/bench_index.py, README).
DISK_VECTORS = np.dtype("<f4")
VECTOR_ALIGN = 4096                       # the vectors start on a page boundary, so they map cleanly
CHECKPOINT_SECONDS = 20.0                 # a hard kill loses at most this much embedding (issue: ~30 s)
CHECKPOINT_MAX_SHARE = 0.03               # ...unless writing one would cost more than 3% of the build
PROGRESS_SECONDS = 10.0                   # not on a terminal: one progress line this often, so logs stay short

# ----------------------------------------------------------------------------
# Shared values: settings, chunks, hits, and Ollama's errors in words a user can act on.


@dataclass(frozen=True)
class Settings:
    """Everything one run can change; functions take this instead of ten parameters."""
    notes_dir: Path = NOTES_DIR
    cache_dir: Path = CACHE_DIR
    embed_model: str = EMBED_MODEL
    chat_model: str = CHAT_MODEL
    chunk_size: int = CHUNK_SIZE
    chunk_overlap: int = CHUNK_OVERLAP
    top_k: int = TOP_K
    min_score: float = MIN_SCORE
    source_filter: str | None = None      # --source: only notes whose path matches
    query_instruction: str | None = None  # None: the model's documented one, "" for none
    max_note_mb: float = MAX_NOTE_MB
    checkpoint_seconds: float = CHECKPOINT_SECONDS   # how often a build saves what it embedded


class Chunk(NamedTuple):
    """A piece of one note, with where it came from, ready to cite.

    A NamedTuple rather than a dataclass: the cache holds tens of thousands of
    these, and a tuple is several times quicker to rebuild when the cache loads.
    """
    source: str                           # path relative to the notes folder
    heading: str                          # "# A › ## B", or "" before the first heading
    text: str
    page: int | None = None               # PDF page, counted from 1

    @property
    def citation(self) -> str:
        parts = [self.source]
        if self.page is not None:
            parts.append(f"p.{self.page}")
        if self.heading:
            parts.append(self.heading)
        return " › ".join(parts)

    @property
    def embed_text(self) -> str:
        # The heading path gives a mid-section chunk its context; the file name is
        # left out so that renaming a note does not change (and re-embed) its vectors.
        return f"{self.heading}\n\n{self.text}" if self.heading else self.text


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk: its rank, fused score and each ranker's own score."""
    rank: int
    row: int
    chunk: Chunk
    score: float
    dense: float
    lexical: float


def host() -> str:
    """The Ollama address the client will use, for messages."""
    return os.environ.get("OLLAMA_HOST") or DEFAULT_HOST


def ollama_client() -> ollama.Client:
    """The Ollama client for host(). Over plain http it skips loading the system's TLS
    certificates, which it would never use: ~0.2 s of a warm query's ~0.7 s."""
    plain = not host().lower().startswith("https:")
    return ollama.Client(verify=False) if plain else ollama.Client()


class OllamaError(Exception):
    """Ollama could not do what we asked; the message says what the user can do."""


def explain_ollama_error(exc: Exception, model: str) -> OllamaError:
    """Turn the client's exceptions into one line a user can act on."""
    if isinstance(exc, ollama.ResponseError) and exc.status_code == 404:
        return OllamaError(f"model '{model}' is not pulled: run `ollama pull {model}`")
    if isinstance(exc, ollama.ResponseError):
        return OllamaError(f"Ollama could not run '{model}': {exc.error}")
    return OllamaError(f"Ollama is not reachable at {host()}: start it with `ollama serve` "
                       f"(or point OLLAMA_HOST at it)")


OLLAMA_FAILURES = (ollama.ResponseError, ConnectionError, httpx.TransportError)

# ============================================================================
# PART I · THE PIPELINE
#
# One question, from notes on disk to a cited answer, in the order it happens:
# load -> fingerprint -> chunk -> embed & cache -> search -> prompt & answer,
# then the command line's main path. Read alone, this part is the whole idea.
# It calls the hardening and speed-ups of Part II by name (read_pdf, load_index,
# build_lexicon, strip_think, ...); a first reading can take those on trust.
# ============================================================================

# ----------------------------------------------------------------------------
# 1 · Load: find the notes and read them as text.


@dataclass(frozen=True)
class NoteFile:
    """A file that may hold a note, as the fingerprint sees it."""
    rel: str                              # posix path relative to the notes folder
    path: Path
    size: int
    mtime_ns: int


def scan_notes(notes_dir: Path, skip: Iterable[Path] = ()) -> tuple[list[NoteFile], list[str]]:
    """List note files under notes_dir, sorted, with warnings for what was passed over.

    Hidden folders (.git, .obsidian, ...) and the `skip` folders (the cache) are not
    entered. Symlinked folders are followed once: a link back to an ancestor is a
    loop, reported and skipped.
    """
    skip_real = {os.path.realpath(p) for p in skip}
    files, warnings, seen_dirs = [], [], set()
    unreadable: dict[str, list[str]] = {}     # suffix -> notes whose optional package is missing
    for folder, dirs, names in os.walk(notes_dir, followlinks=True,
                                       onerror=lambda e: warnings.append(f"cannot read {e.filename}: {e.strerror}")):
        real = os.path.realpath(folder)
        if real in seen_dirs:
            warnings.append(f"skipped {Path(folder).relative_to(notes_dir).as_posix()}/: "
                            "a symlink loop back to a folder already read")
            dirs[:] = []
            continue
        seen_dirs.add(real)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                         and os.path.realpath(os.path.join(folder, d)) not in skip_real)
        for name in sorted(names):
            path = Path(folder, name)
            suffix = path.suffix.lower()
            if name.startswith(".") or suffix not in NOTE_TYPES:
                continue
            rel = path.relative_to(notes_dir).as_posix()
            needs = NOTE_TYPES[suffix][1]
            if needs and not importable(needs):
                unreadable.setdefault(suffix, []).append(rel)
                continue
            try:
                st = path.stat()
            except OSError as e:
                warnings.append(f"skipped {rel}: {e.strerror}")
                continue
            files.append(NoteFile(rel, path, st.st_size, st.st_mtime_ns))
    for suffix, rels in unreadable.items():
        # Left out of the fingerprint too, so installing the package later indexes them.
        kind = suffix.lstrip(".").upper()
        warnings.append(f"skipped {len(rels)} {kind}s ({', '.join(sorted(rels))}): "
                        f"{kind} support needs `pip install {NOTE_TYPES[suffix][1]}`")
    files.sort(key=lambda f: f.rel)
    return files, warnings


def read_note(file: NoteFile, max_mb: float = MAX_NOTE_MB) -> tuple[list[tuple[int | None, str]], str | None]:
    """Read one note as a list of (page, text) sections, plus a warning or None.

    A text note is one section with page None; a PDF is one section per page.
    The reader comes from NOTE_TYPES. Raises ValueError, with the reason, for a
    note that cannot be used.
    """
    if file.size > max_mb * 2**20:
        raise ValueError(f"{file.size / 2**20:.1f} MB is over the {max_mb:g} MB limit (--max-note-mb)")
    reader, _ = NOTE_TYPES[file.path.suffix.lower()]
    return reader(file.path)

# ----------------------------------------------------------------------------
# 2 · Fingerprint: one hash that changes when any note is added, removed or edited.


def fingerprint(files: list[NoteFile]) -> str:
    """MD5 of every note's relative path, size and modification time.

    It reads no file contents, so checking "did anything change?" costs one
    stat() per note; the cache is trusted only when this matches.
    """
    h = hashlib.md5()
    for f in files:
        h.update(f"{f.rel}\0{f.size}\0{f.mtime_ns}\n".encode())
    return h.hexdigest()

# ----------------------------------------------------------------------------
# 3 · Chunk: cut each note at headings, then paragraphs, lines and sentences.

# Regex separators, tried in order: headings first so chunks follow the note's
# outline; zero-width look-behinds keep a sentence's final punctuation with it.
SEPARATORS = [r"\n(?=## )", r"\n(?=### )", r"\n(?=#### )", r"\n\n", r"\n",
              r"(?<=[。！？；])", r"(?<=[.!?])\s+", r"\s+", ""]


def make_splitter(chunk_size: int, chunk_overlap: int):
    """A RecursiveCharacterTextSplitter with our heading-first separators."""
    # Imported here, not at the top: a warm query never chunks, and this import
    # (langchain-core underneath) costs more than the whole query.
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    return RecursiveCharacterTextSplitter(
        separators=SEPARATORS, is_separator_regex=True, keep_separator="start",
        chunk_size=chunk_size, chunk_overlap=chunk_overlap, add_start_index=True)


def chunk_note(rel: str, sections: list[tuple[int | None, str]], splitter) -> list[Chunk]:
    """Cut one note's sections into chunks that know their file, heading and page."""
    chunks = []
    for page, text in sections:
        outline = heading_outline(text)
        for doc in splitter.create_documents([text]):
            # The chunk is about the section its first real line is in, so look
            # past any headings it opens with ("# Title\n## Part 1\ntext" -> Part 1).
            offset = max(doc.metadata.get("start_index", 0), 0) + LEADING_HEADINGS.match(doc.page_content).end()
            chunks.append(Chunk(rel, heading_path(outline, offset), doc.page_content, page))
    return chunks

# ----------------------------------------------------------------------------
# 4 · Embed & cache: a vector for every chunk, computed once and kept on disk.


def build_index(settings: Settings, client: ollama.Client | None = None, rebuild: bool | str = False,
                progress: Callable[[str | EmbedProgress], None] = lambda s: None) -> tuple[Index, IndexReport]:
    """Load the cached index, or update it when the notes or settings changed.

    The fast path: the fingerprint matches and every chunk has a vector, so the
    cache is returned without reading a single note. Otherwise what is embedded
    is saved as it goes (CacheWriter, Part II): Ctrl-C (BuildInterrupted), a kill
    or Ollama failing mid-way keeps it, and the next run embeds only what is
    missing. `rebuild` (True, or the reason as a string) re-embeds everything,
    but never replaces the cache with one holding fewer vectors until it is done.
    Raises FileNotFoundError when the notes folder does not exist.
    """
    if not settings.notes_dir.is_dir():
        raise FileNotFoundError(f"notes folder not found: {settings.notes_dir}")
    client = client or ollama_client()
    files, warnings = scan_notes(settings.notes_dir, skip=[settings.cache_dir])
    path = cache_path(settings)
    old, reason = load_index(path)
    if old is not None:
        reason = stale_reason(old, settings)
        old = None if reason else old
    on_disk = int(old.has_vector.sum()) if old else 0
    writer = CacheWriter(path, settings.checkpoint_seconds, on_disk, floor=on_disk if rebuild else 0)
    if rebuild:
        old, reason = None, rebuild if isinstance(rebuild, str) else "--rebuild"
    if old is not None and old.fingerprint == fingerprint(files) and old.complete:
        return old, IndexReport(unchanged=len(old.files), warnings=warnings)
    if old is None and reason != "no cache yet":
        progress(f"rebuilding index: {reason}")
    index, report = update_index(settings, client, old, files, progress, writer)
    report.warnings[:0] = warnings
    report.reason = report.reason or ("" if old is not None else reason)
    if not writer.save(index) and writer.problem and not writer.warned:
        report.warnings.append(writer.problem)
    return index, report


@dataclass(frozen=True)
class Index:
    """Everything a question needs, as one value: chunks, vectors, BM25 statistics."""
    chunks: Sequence[Chunk]               # a list; a ChunkTable (decoded on demand) when loaded
    vectors: np.ndarray                   # (n, dim) float32, unit rows; zeros where missing
    has_vector: np.ndarray                # (n,) bool: False where Ollama could not embed
    lexicon: Lexicon
    files: dict[str, FileRecord]
    fingerprint: str
    embed_model: str
    chunking: tuple[int, int]             # (chunk_size, chunk_overlap)

    @property
    def complete(self) -> bool:
        return bool(self.has_vector.all())


def update_index(settings: Settings, client: ollama.Client, old: Index | None,
                 files: list[NoteFile], progress: Callable[[str | EmbedProgress], None] = lambda s: None,
                 writer: CacheWriter | None = None) -> tuple[Index, IndexReport]:
    """Bring the index up to date with the files, embedding only what is new.

    For each file: same size and mtime as recorded -> unchanged; otherwise hash
    its bytes, and a digest the index already holds (a touched, renamed or copied
    note) reuses those chunks. Only new content is read, chunked and embedded, and
    even then a chunk whose text was embedded before reuses its vector. The
    `writer`, if given, checkpoints the index while its vectors are filled in.
    """
    report = IndexReport()
    old_files = old.files if old else {}
    by_digest = {r.digest: r for r in old_files.values()}
    chunks: list[Chunk] = []
    reuse: list[int] = []                 # per new row: old row, or -1 if new
    records: dict[str, FileRecord] = {}
    splitter = None
    for f in files:
        rec = old_files.get(f.rel)
        if rec and (rec.size, rec.mtime_ns) == (f.size, f.mtime_ns):
            digest, source = rec.digest, rec
        else:
            try:
                digest = file_digest(f.path)
            except OSError as e:
                report.warnings.append(f"skipped {f.rel}: {e.strerror}")
                continue
            source = by_digest.get(digest)
        if source is not None:            # same bytes as before: reuse its chunks
            start = len(chunks)
            chunks.extend(c._replace(source=f.rel) for c in old.chunks[source.start:source.stop])
            reuse.extend(range(source.start, source.stop))
            records[f.rel] = FileRecord(f.size, f.mtime_ns, digest, start, len(chunks))
            count_file(report, f.rel, rec, digest)
            continue
        try:
            sections, warning = read_note(f, settings.max_note_mb)
        except ValueError as e:
            report.warnings.append(f"skipped {f.rel}: {e}")
            continue
        if warning:
            report.warnings.append(f"{f.rel}: {warning}")
        if sum(len(t.strip()) for _, t in sections) < MIN_NOTE_CHARS:
            report.warnings.append(f"skipped {f.rel}: under {MIN_NOTE_CHARS} characters")
            continue
        splitter = splitter or make_splitter(settings.chunk_size, settings.chunk_overlap)
        start = len(chunks)
        chunks.extend(chunk_note(f.rel, sections, splitter))
        reuse.extend([-1] * (len(chunks) - start))
        records[f.rel] = FileRecord(f.size, f.mtime_ns, digest, start, len(chunks))
        count_file(report, f.rel, rec, digest)
    report.deleted = len(set(old_files) - {f.rel for f in files})
    reuse_arr = np.array(reuse, dtype=np.int64)
    lexicon = build_lexicon(old.lexicon if old else None, reuse_arr,
                            [c.text for c, r in zip(chunks, reuse) if r < 0])

    def with_vectors(vectors: np.ndarray, has_vector: np.ndarray) -> Index:
        return Index(chunks, vectors, has_vector, lexicon, records, fingerprint(files),
                     settings.embed_model, (settings.chunk_size, settings.chunk_overlap))

    checkpoint = (lambda v, h, force=False: writer.checkpoint(with_vectors(v, h), force, progress)) \
        if writer else None
    return with_vectors(*fill_vectors(settings, client, old, chunks, reuse_arr, report, progress,
                                      checkpoint)), report


def fill_vectors(settings: Settings, client: ollama.Client, old: Index | None, chunks: list[Chunk],
                 reuse: np.ndarray, report: IndexReport, progress: Callable[[str | EmbedProgress], None],
                 checkpoint: Callable[..., int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Vectors for the new chunk list: reused by row or by identical text, else embedded.

    Each batch goes into one float32 matrix as it arrives (never a Python float
    per number), and `checkpoint(vectors, has_vector)` may save it. If Ollama
    stops, the rows embedded so far are kept, the rest stay zero and marked
    missing, so BM25 still works and the next run fills them in. Ctrl-C saves
    what arrived and raises BuildInterrupted.
    """
    n = len(chunks)
    dim = old.vectors.shape[1] if old is not None and old.vectors.size else 0
    vectors = np.zeros((n, dim), dtype=np.float32)
    has_vector = np.zeros(n, dtype=bool)
    if old is not None and dim:
        known = reuse >= 0
        vectors[known], has_vector[known] = old.vectors[reuse[known]], old.has_vector[reuse[known]]
        missing = np.flatnonzero(~has_vector)
        by_text = {c.embed_text: i for i, c in enumerate(old.chunks) if old.has_vector[i]} if len(missing) else {}
        for i in missing:
            j = by_text.get(chunks[i].embed_text)
            if j is not None:
                vectors[i], has_vector[i] = old.vectors[j], True
    todo = np.flatnonzero(~has_vector)
    if len(todo) == 0:
        return vectors, has_vector
    t0, done = time.perf_counter(), 0
    try:
        for fresh in embed_batches(client, settings.embed_model, (chunks[i].embed_text for i in todo)):
            if fresh.shape[1] != dim:     # first vectors, or the model's size changed
                if dim:
                    report.reason = f"vector size changed ({dim} -> {fresh.shape[1]}); re-embedding all"
                    progress(f"rebuilding index: {report.reason}")
                    return fill_vectors(settings, client, None, chunks, np.full(n, -1), report, progress,
                                        checkpoint)
                dim, vectors = fresh.shape[1], np.zeros((n, fresh.shape[1]), dtype=np.float32)
            rows = todo[done:done + len(fresh)]
            vectors[rows], has_vector[rows] = fresh, True
            done += len(fresh)
            report.embedded += len(fresh)
            progress(EmbedProgress(int(has_vector.sum()), n, done, time.perf_counter() - t0,
                                   chunks[rows[-1]].source))
            if checkpoint:
                checkpoint(vectors, has_vector)
    except OllamaError as e:
        report.embed_error = str(e)
    except BuildInterrupted:              # from the re-embedding call above: already saved
        raise
    except KeyboardInterrupt:             # Ctrl-C or SIGTERM: keep what arrived, then stop
        kept = checkpoint(vectors, has_vector, force=True) if checkpoint else 0
        raise BuildInterrupted(kept, n) from None
    return vectors, has_vector


def embed_texts(client: ollama.Client, model: str, texts: list[str]) -> np.ndarray:
    """Embed texts with Ollama; return an (n, dim) float32 matrix of unit rows. Raises OllamaError."""
    return np.concatenate(list(embed_batches(client, model, texts)) or [np.zeros((0, 0), np.float32)])


def embed_batches(client: ollama.Client, model: str, texts: Iterable[str]) -> Iterator[np.ndarray]:
    """Embed texts in batches, yielding each batch's unit rows as float32 as it arrives.

    Batches hold at most EMBED_BATCH_TEXTS texts and EMBED_BATCH_CHARS characters,
    so a long note never makes one huge request; `texts` may be a generator, so
    a big build never holds every text at once. Raises OllamaError.
    """
    batch: list[str] = []
    batch_chars = 0
    for text in itertools.chain(texts, [None]):       # None: the end, send what is left
        if batch and (text is None or len(batch) == EMBED_BATCH_TEXTS
                      or batch_chars + len(text) > EMBED_BATCH_CHARS):
            try:
                rows = client.embed(model=model, input=batch).embeddings
            except OLLAMA_FAILURES as e:
                raise explain_ollama_error(e, model) from None
            yield normalize(np.array(rows, dtype=np.float32).reshape(len(batch), -1))
            batch, batch_chars = [], 0
        if text is not None:
            batch.append(text)
            batch_chars += len(text)


def normalize(m: np.ndarray) -> np.ndarray:
    """Scale each row to length 1, so a dot product is a cosine similarity.

    >>> normalize(np.array([[3.0, 4.0]]))
    array([[0.6, 0.8]])
    """
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1, norms)

# ----------------------------------------------------------------------------
# 5 · Search: rank chunks by meaning (cosine), by words (BM25), and by both (fused).


def search(client: ollama.Client, index: Index, question: str, settings: Settings) -> Retrieval:
    """The one search path every caller takes: embed the question, rank, say how it went.

    When the question cannot be embedded (Ollama away, the model not pulled) or
    some chunks have no vector yet, it ranks by keywords alone and records why
    in `keywords_only_because`. A later step (a reranker, say) belongs here.
    """
    t0 = time.perf_counter()
    qvec, why = None, None
    if not index.complete:
        why = f"{int((~index.has_vector).sum())} of {len(index.chunks)} chunks have no vector yet"
    else:
        try:
            qvec = embed_query(client, question, settings)
        except OllamaError as e:
            why = str(e)
        if qvec is not None and len(qvec) != index.vectors.shape[1] and index.has_vector.any():  # re-pulled
            why = vector_size_changed(index, qvec)
    t1 = time.perf_counter()
    r = retrieve(index, question, qvec, settings)
    return replace(r, keywords_only_because=why,
                   timings={"embed_query": t1 - t0, "search": time.perf_counter() - t1})


@dataclass(frozen=True)
class Retrieval:
    """The result of one search: ranked hits, how sure we are, and how they were found."""
    hits: list[Hit]
    confidence: float                     # confidence(); below the floor = not found
    found: bool
    query_vector: np.ndarray | None       # None: searched by keywords only
    dense: np.ndarray | None              # each ranker's scores over all chunks, for --explain
    lexical: np.ndarray                   # and --eval; dense is None without usable vectors
    fused: np.ndarray
    weights: dict[str, float]             # how much each ranker counted in the fusion
    keywords_only_because: str | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def lexical_only(self) -> bool:
        return self.dense is None


def retrieve(index: Index, question: str, qvec: np.ndarray | None, settings: Settings) -> Retrieval:
    """Rank the chunks for an embedded question; qvec None means keywords only."""
    rows = np.flatnonzero(source_mask(index, settings.source_filter))   # the chunks we may return
    dense = None
    # A partly embedded index (Ollama left mid-way) is searched by BM25 alone:
    # fusing would favour the rows that happen to have vectors.
    if qvec is not None and index.vectors.shape[1] == len(qvec) and index.has_vector[rows].all():
        dense = index.vectors @ qvec      # exact cosine: one matrix-vector product
    terms = query_postings(index.lexicon, question)    # the question is tokenized once, here
    lexical = bm25_scores(index.lexicon, terms)
    fused = np.full(len(index.chunks), -np.inf, dtype=np.float32)
    fused[rows], weights = fuse(None if dense is None else dense[rows], lexical[rows])
    best = rows[top_k(fused[rows], settings.top_k)]
    if dense is None:
        best = [i for i in best if lexical[i] > 0]   # keywords only: a chunk without them is no match
    hits = [Hit(rank, int(i), index.chunks[i], float(fused[i]),
                float(dense[i]) if dense is not None else float("nan"), float(lexical[i]))
            for rank, i in enumerate(best, 1)]
    conf = confidence(terms, [h.row for h in hits], dense, rows)
    return Retrieval(hits, conf, conf >= settings.min_score, qvec, dense, lexical, fused, weights)


def vector_size_changed(index: Index, qvec: np.ndarray) -> str:
    """The reason to re-embed when the model now returns vectors of another size."""
    return (f"vector size changed ({index.vectors.shape[1]} -> {len(qvec)}) under the same model name "
            f"'{index.embed_model}'; re-embedding all")


def embed_query(client: ollama.Client, question: str, settings: Settings) -> np.ndarray:
    """One /api/embed request for the question; returns a unit vector."""
    return embed_texts(client, settings.embed_model, [query_text(question, settings)])[0]


def query_text(question: str, settings: Settings) -> str:
    """The text to embed for a question: the model's documented query instruction, if any."""
    template = settings.query_instruction
    if template is None:      # matches "qwen3-embedding:0.6b" and "hf.co/Qwen/Qwen3-Embedding-0.6B-GGUF"
        name = settings.embed_model.lower()
        template = next((t for family, t in QUERY_INSTRUCTIONS.items() if family in name), "")
    return template.replace("{query}", question) if template else question


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores, best first; equal scores keep file order.

    np.argpartition finds the k best in O(n) without sorting everything; only
    those k are then sorted.

    >>> top_k(np.array([0.1, 0.9, 0.5, 0.9]), 3)
    array([1, 3, 2])
    """
    k = min(k, len(scores))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    kth = scores[np.argpartition(-scores, k - 1)[:k]].min()
    above = np.flatnonzero(scores > kth)
    # subtle: argpartition picks arbitrarily among ties at the cut; take them in row order
    idx = np.concatenate([above, np.flatnonzero(scores == kth)[:k - len(above)]])
    return idx[np.lexsort((idx, -scores[idx]))]


def tokenize(text: str) -> list[str]:
    """Words and numbers in lower case and singular; CJK runs as single characters plus
    bigrams; stopwords dropped (single characters only, for CJK: bigrams keep the context).

    Chinese has no spaces, so a whitespace tokenizer would see a whole sentence
    as one word; characters and bigrams let "向量" match inside "用向量检索".

    >>> tokenize("What are RAGs? 用向量检索 v2")
    ['rag', '用', '向', '量', '检', '索', '用向', '向量', '量检', '检索', 'v2']
    """
    tokens = []
    for run in TOKEN.findall(text.lower()):
        if CJK_CHAR.match(run):
            tokens.extend(run)
            tokens.extend(run[i:i + 2] for i in range(len(run) - 1))
        else:
            tokens.append(run)
    return [t if CJK_CHAR.match(t) else singular(t) for t in tokens if t not in STOPWORDS]


class Term(NamedTuple):
    """One distinct term of a query, looked up in the lexicon (see Lexicon in Part II)."""
    idf: float                            # how rare the term is: rarer terms weigh more
    rows: np.ndarray                      # the chunks it occurs in
    counts: np.ndarray                    # how often, in each of them


def query_postings(lex: Lexicon, query: str) -> list[Term]:
    """Each distinct term of the query with its idf and the chunks it occurs in, in the order typed.

    idf = ln(1 + (N - df + 0.5) / (df + 0.5)) for a term in df of N chunks: a term
    in every chunk weighs ~0, a term in no chunk weighs the most (and matches nothing).

    >>> lex = lexicon_from_texts(["the cat sat", "a dog sat"])
    >>> [(round(t.idf, 3), t.rows.tolist()) for t in query_postings(lex, "cat sat fish")]
    [(0.693, [0]), (0.182, [0, 1]), (1.792, [])]
    """
    n = len(lex.lengths)
    out = []
    for term in dict.fromkeys(tokenize(query)):
        t = bisect.bisect_left(lex.vocab, term)
        if t < len(lex.vocab) and lex.vocab[t] == term:
            rows, counts = lex.docs[lex.ptr[t]:lex.ptr[t + 1]], lex.counts[lex.ptr[t]:lex.ptr[t + 1]]
        else:
            rows, counts = lex.docs[:0], lex.counts[:0]
        out.append(Term(math.log(1 + (n - len(rows) + 0.5) / (len(rows) + 0.5)), rows, counts))
    return out


def bm25_scores(lex: Lexicon, terms: list[Term], k1: float = 1.2, b: float = 0.75) -> np.ndarray:
    """BM25 score of every chunk for a query's terms: the sum of idf × saturated term frequency.

    A term seen f times in a chunk of length dl adds idf · f(k1+1) / (f + k1(1 - b + b·dl/avgdl)):
    a second mention counts less than the first, and long chunks are not favoured for
    being long. Worked example, two chunks of 2 tokens, "cat" once in the first: idf =
    ln(1 + 1.5/1.5) = 0.693, and f = 1, dl = avgdl gives 0.693 · 2.2 / 2.2 = 0.693.

    >>> lex = lexicon_from_texts(["black cat", "black dog"])
    >>> bm25_scores(lex, query_postings(lex, "cat")).round(3)
    array([0.693, 0.   ], dtype=float32)
    """
    scores = np.zeros(len(lex.lengths), dtype=np.float32)
    if len(scores) == 0:
        return scores
    norm = k1 * (1 - b + b * lex.lengths / max(float(lex.lengths.mean()), 1e-9))
    for idf, rows, f in terms:
        scores[rows] += idf * f * (k1 + 1) / (f + norm[rows])
    return scores


def standout(scores: np.ndarray) -> float:
    """How far the best score stands above what chance would give, in standard deviations.

    The best of n random scores lies about sqrt(2 ln n) standard deviations above
    their mean; a ranker that found something relevant puts its best further out.
    Values <= 0 mean "no better than noise".

    >>> round(standout(np.array([0.0] * 99 + [1.0])), 2)
    6.92
    """
    n = len(scores)
    if n < 2:
        return 0.0
    sd = float(scores.std())
    if sd == 0:
        return 0.0
    return (float(scores.max()) - float(scores.mean())) / sd - math.sqrt(2 * math.log(n))


FUSION = "z-scores weighted by how far each ranker stands out"


def fuse(dense: np.ndarray | None, lexical: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
    """Fuse two rankers' scores into one; returns the fused scores and each ranker's weight.

    Each ranker's scores become z-scores (so cosine and BM25 are comparable), and
    each is weighted by its standout(): a ranker whose best match is no better
    than noise (an English-only embedder on Chinese notes) gets weight 0, so it
    cannot drag the other down; when neither stands out, both count equally.
    Worked example: the cosines barely differ, BM25 finds one chunk, so BM25 decides.

    >>> fused, weights = fuse(np.array([0.2, 0.1, 0.3, 0.1]), np.array([0.0, 0.0, 0.0, 3.0]))
    >>> int(fused.argmax()), {name: round(w, 2) for name, w in weights.items()}
    (3, {'dense': 0.0, 'bm25': 0.07})
    """
    parts = {name: s for name, s in (("dense", dense), ("bm25", lexical)) if s is not None and len(s)}
    if not parts:
        return np.zeros(0, dtype=np.float32), {}
    weights = {name: max(standout(s), 0.0) for name, s in parts.items()}
    if sum(weights.values()) == 0:
        weights = dict.fromkeys(parts, 1.0)
    total = sum(weights.values())
    fused = sum(weights[name] * (s - s.mean()) / (s.std() or 1.0) for name, s in parts.items()) / total
    return fused.astype(np.float32), weights


def confidence(terms: list[Term], hit_rows: list[int], dense: np.ndarray | None, rows: np.ndarray) -> float:
    """How sure we are that the notes hold an answer, 0 to 1 (compared with --min-score).

    The best, over the hits, of two signals: the question's words found in the hit
    (coverage), and how far the hit's cosine stands above the average over `rows`.

    >>> lex = lexicon_from_texts(["black cat", "black dog"])
    >>> round(confidence(query_postings(lex, "cat"), [0, 1], None, np.arange(2)), 2)
    1.0
    >>> round(confidence(query_postings(lex, "fish"), [0], np.array([0.9, 0.5]), np.arange(2)), 2)
    0.2
    """
    average = float(dense[rows].mean()) if dense is not None and len(rows) else 0.0
    best = 0.0
    for row in hit_rows:
        best = max(best, coverage(terms, row))
        if dense is not None:
            best = max(best, float(dense[row]) - average)
    return best


def coverage(terms: list[Term], row: int) -> float:
    """Share of a query's idf weight whose terms occur in chunk `row`, 0 to 1.

    It asks "are the question's informative words in this passage?", and does not
    depend on the embedder or on how many chunks there are. Worked example, "cat"
    in chunk 0 only, "fish" in neither: idf(cat) = ln(1 + 1.5/1.5) = 0.69, idf(fish)
    = ln(1 + 2.5/0.5) = 1.79, so chunk 0 covers 0.69 / (0.69 + 1.79) = 0.28.

    >>> lex = lexicon_from_texts(["black cat", "black dog"])
    >>> round(coverage(query_postings(lex, "cat fish"), 0), 2)
    0.28
    """
    total = sum(t.idf for t in terms)
    found = sum(t.idf for t in terms if np.any(t.rows == row))
    return found / total if total else 0.0


def source_mask(index: Index, pattern: str | None) -> np.ndarray:
    """Which chunks --source allows: a glob ("notes/*.md") or a plain substring."""
    if not pattern:
        return np.ones(len(index.chunks), dtype=bool)
    glob = any(ch in pattern for ch in "*?[")
    return np.array([fnmatch.fnmatch(c.source, pattern) if glob else pattern in c.source
                     for c in index.chunks], dtype=bool)

# ----------------------------------------------------------------------------
# 6 · Prompt & answer: rules, numbered sources, question -> a streamed, cited answer.

NOT_FOUND = "Not found in your notes: no source is relevant enough."

RULES = """You answer questions from the user's own notes.
- Use only the numbered sources below. Do not add facts from elsewhere.
- Cite the sources you use with their numbers in square brackets, like [1] or [2][3].
- If the sources do not contain the answer, say plainly that the notes do not cover it.
- Answer in the same language as the question."""


def answer(client: ollama.Client, question: str, hits: list[Hit], settings: Settings) -> Iterator[str]:
    """Stream an answer to the question from the retrieved hits."""
    return stream_chat(client, settings.chat_model, build_messages(question, hits))


def build_messages(question: str, hits: list[Hit], history: str = "") -> list[dict]:
    """The three-part prompt as chat messages: rules (system), then sources and question."""
    user = f"Sources:\n\n{format_sources(hits)}\n\n"
    if history:
        user += f"Conversation so far:\n{history}\n\n"
    return [{"role": "system", "content": RULES},
            {"role": "user", "content": user + f"Question: {question}"}]


def format_sources(hits: list[Hit]) -> str:
    """The numbered sources block: '[1] file › heading' then the chunk's text."""
    return "\n\n".join(f"[{i}] {h.chunk.citation}\n{h.chunk.text}" for i, h in enumerate(hits, 1))


def context_size(messages: list[dict]) -> int:
    """num_ctx for a prompt: its estimate plus room for the answer, in steps of 1024.

    Ollama silently drops the start of a prompt longer than its context window,
    which is exactly where our rules and first sources are, so we ask for enough.
    """
    need = sum(estimate_tokens(m["content"]) for m in messages) + ANSWER_TOKENS
    return max(MIN_NUM_CTX, math.ceil(need / 1024) * 1024)


def estimate_tokens(text: str) -> int:
    """A rough token count: one per CJK character, one per 4 other characters.

    >>> estimate_tokens("RAG 检索增强生成")
    7
    """
    cjk = len(re.findall(rf"[{CJK}]", text))
    return cjk + math.ceil((len(text) - cjk) / 4)


def stream_chat(client: ollama.Client, model: str, messages: list[dict],
                num_ctx: int | None = None) -> Iterator[str]:
    """Stream the chat model's reply as text pieces, thinking stripped. Raises OllamaError."""
    options = {"temperature": TEMPERATURE, "num_ctx": num_ctx or context_size(messages)}

    def pieces():
        try:
            for part in ollama_chat(client, model, messages, options, stream=True):
                yield part.message.content or ""
        except OLLAMA_FAILURES as e:
            raise explain_ollama_error(e, model) from None
    return strip_think(pieces())


def ollama_chat(client: ollama.Client, model: str, messages: list[dict], options: dict, stream: bool):
    """client.chat with thinking turned off, for thinking and non-thinking models alike.

    Thinking models (qwen3) are asked not to think: it would only delay the answer.
    Some Ollama versions refuse the `think` field for models without that ability
    ("... does not support thinking", status 400): then ask again without it.
    """
    def call(**think):
        reply = client.chat(model=model, messages=messages, stream=stream, options=options, **think)
        if not stream:
            return reply
        first = next(reply, None)         # a stream's errors arrive with its first part
        return itertools.chain([first] if first else [], reply)
    try:
        return call(think=False)
    except ollama.ResponseError as e:
        if e.status_code != 400 or "thinking" not in str(e.error):
            raise
        return call()

# ----------------------------------------------------------------------------
# 7 · The command line's main path: a question in, sources and a streamed answer out.
# Only main() and the run_* functions print.

EXIT_OK, EXIT_USAGE, EXIT_OLLAMA, EXIT_INTERRUPTED = 0, 2, 3, 130


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = parse_args(argv)
    settings = settings_from(args)
    client = ollama_client()
    previous = sigterm_as_interrupt()
    try:
        if args.eval:
            return run_eval(args, settings, client)
        if args.chat:
            return run_chat(args, settings, client)
        if args.explain:
            return run_explain(args, settings, client)
        return run_question(args, settings, client)
    except FileNotFoundError as e:
        err(f"error: {e} (give a folder of .md/.txt notes with --notes)")
        return EXIT_USAGE
    except OllamaError as e:
        err(f"error: {e}")
        return EXIT_OLLAMA
    except BuildInterrupted as e:
        err(f"\n{e}")
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        err("\ninterrupted; the cache on disk is unchanged or complete")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    finally:
        restore_sigterm(previous)


def run_question(args, settings: Settings, client: ollama.Client) -> int:
    """The main job: one question -> sources -> streamed answer."""
    echo = not args.json                  # --json prints one object at the end instead
    timings = {}
    index, report, timings["index"] = open_index(settings, client, args.rebuild, quiet=not echo,
                                                 progress_seconds=args.progress_seconds)
    if not index.chunks:
        return no_usable_notes(settings)
    r = search(client, index, args.question, settings)
    if r.query_vector is not None and r.keywords_only_because == vector_size_changed(index, r.query_vector):
        index, report, timings["index"] = open_index(settings, client, r.keywords_only_because, quiet=not echo,
                                                     progress_seconds=args.progress_seconds)
        r = search(client, index, args.question, settings)
    timings.update(r.timings)
    ollama_problem = report.embed_error or r.keywords_only_because
    if echo and r.keywords_only_because and not report.embed_error:   # that one was said already
        err(f"warning: {r.keywords_only_because}; searching by keywords (BM25) only")
    if echo:
        print_hits(r.hits, r.lexical_only)
    if echo and args.show_prompt:
        messages = build_messages(args.question, r.hits)
        print("Prompt:")
        for m in messages:
            print(f"--- {m['role']} ---\n{m['content']}")
        print(f"--- options: temperature={TEMPERATURE}, num_ctx={context_size(messages)} ---\n")
    text, code = None, EXIT_OK
    if ollama_problem and not r.hits:
        code = EXIT_OLLAMA                # nothing to show: the warning above says what to do
    elif not r.found:
        if echo:
            print(f"{NOT_FOUND} (confidence {r.confidence:.2f} < --min-score {settings.min_score}; "
                  "the closest sources are above)")
    elif ollama_problem:
        if echo:
            print(f"Keyword-only passages above (Ollama unavailable: {ollama_problem}).")
    elif not args.retrieve_only:
        t0 = time.perf_counter()
        text, code = stream_answer(answer(client, args.question, r.hits, settings), echo)
        timings["answer"] = time.perf_counter() - t0
    if echo:
        err("timings: " + " · ".join(f"{k} {v:.2f}s" for k, v in timings.items()))
    else:
        print(json.dumps({
            "question": args.question, "answer": text, "found": r.found, "lexical_only": r.lexical_only,
            "confidence": round(r.confidence, 3),
            "sources": [{"rank": h.rank, "source": h.chunk.source, "heading": h.chunk.heading,
                         "page": h.chunk.page, "score": round(h.score, 4), "text": h.chunk.text}
                        for h in r.hits],
            "timings": {k: round(v, 3) for k, v in timings.items()}}, ensure_ascii=False, indent=2))
    return code


def open_index(settings: Settings, client: ollama.Client, rebuild: bool | str,
               quiet: bool, progress_seconds: float = PROGRESS_SECONDS) -> tuple[Index, IndexReport, float]:
    """build_index with the progress and the index summary on stderr.

    Embedding progress is shown even when quiet (it is on stderr, and a long
    build needs it): one line rewritten in place on a terminal, else a line
    every `progress_seconds` (ProgressLine, Part II).
    """
    t0 = time.perf_counter()
    line = ProgressLine(sys.stderr, progress_seconds, quiet)
    try:
        index, report = build_index(settings, client, rebuild, line)
    finally:
        line.finish()
    took = time.perf_counter() - t0
    if not quiet:
        for w in report.warnings:
            err(f"warning: {w}")
        err(f"{report.summary(len(index.files))} in {took:.2f}s")
        if report.touched:
            names = report.touched[:8] + ([f"… {len(report.touched) - 8} more"] if len(report.touched) > 8 else [])
            err("  (re)indexed: " + ", ".join(names))
        if report.embed_error:
            err(f"warning: {report.embed_error}; searching by keywords (BM25) only")
    return index, report, took


def print_hits(hits: list[Hit], lexical_only: bool) -> None:
    print("Top sources" + (" (keywords only):" if lexical_only else ":"))
    for h in hits:
        scores = f"bm25 {h.lexical:.2f}" if lexical_only else f"cos {h.dense:.3f} · bm25 {h.lexical:.2f}"
        print(f"  [{h.rank}] {h.chunk.citation}  ({scores})\n      {preview(h.chunk.text)}")
    print()


def stream_answer(pieces: Iterable[str], echo: bool = True) -> tuple[str, int]:
    """Print a streamed answer as it arrives (when echo); return (its text, exit code).

    The one place the command line streams an answer (--chat streams through ask()).
    """
    shown = []
    try:
        if echo:
            print("Answer:")
        for piece in pieces:
            shown.append(piece)
            if echo:
                print(piece, end="", flush=True)
        if echo:
            print()
    except OllamaError as e:
        err(f"\nerror: {e}")
        return "".join(shown), EXIT_OLLAMA
    return "".join(shown), EXIT_OK

# ============================================================================
# More ways to use the pipeline: a conversation, an evaluation, a narrated run.
# ============================================================================

# ----------------------------------------------------------------------------
# Conversation: follow-up questions, rewritten to stand alone before retrieving.

FOLLOW_UP = re.compile(
    r"\b(it|its|this|that|these|those|they|them|their|he|she|the same|above|former|latter)\b"
    r"|它|它们|这个|那个|这些|那些|这|那|上面|前面|上述|他|她|其|呢[？?]?$", re.IGNORECASE)


@dataclass(frozen=True)
class Turn:
    question: str
    answer: str
    query: str                            # what was actually searched


@dataclass(frozen=True)
class Conversation:
    """The conversation so far: recent turns verbatim, older ones as a summary."""
    turns: tuple[Turn, ...] = ()
    summary: str = ""


@dataclass(frozen=True)
class ChatStep:
    """What one conversational question produced, before the answer streams."""
    query: str                            # the rewritten query ("" if not rewritten)
    retrieval: Retrieval
    messages: list[dict]
    num_ctx: int


def ask(client: ollama.Client, index: Index, question: str, conv: Conversation, settings: Settings,
        on_sources: Callable[[ChatStep], None] = lambda step: None,
        on_token: Callable[[str], None] = lambda piece: None) -> tuple[str, list[Hit], Conversation]:
    """One conversational turn: returns (answer, sources, the conversation with this turn added).

    For notebooks as it is; the --chat REPL passes callbacks to print the sources
    before the answer (on_sources) and the answer as it streams (on_token). Below
    the relevance floor the answer is NOT_FOUND and the chat model is not called.
    Raises OllamaError when the chat model cannot answer.
    """
    step = prepare_turn(client, index, question, conv, settings)
    on_sources(step)
    if not step.retrieval.found:
        return NOT_FOUND, step.retrieval.hits, conv
    pieces = []
    for piece in stream_chat(client, settings.chat_model, step.messages, step.num_ctx):
        pieces.append(piece)
        on_token(piece)
    text = "".join(pieces)
    return text, step.retrieval.hits, remember(conv, Turn(question, text, step.query or question))


def prepare_turn(client: ollama.Client, index: Index, question: str, conv: Conversation,
                 settings: Settings) -> ChatStep:
    """Rewrite if needed, search, and fit rules + sources + history + question in the budget."""
    query = ""
    if needs_rewrite(question, conv):
        try:
            query = rewrite_query(client, question, conv, settings)
        except OllamaError:
            pass                          # search as typed: search() falls back and says why
    retrieval = search(client, index, query or question, settings)
    base = build_messages(question, retrieval.hits)
    # Everything but the history, plus the answer's room and the history's own
    # header. Sources are never cut: if they alone overflow the budget, num_ctx
    # grows instead and the history gets what is left.
    fixed = sum(estimate_tokens(m["content"]) for m in base) + ANSWER_TOKENS + HISTORY_HEADER_TOKENS
    num_ctx = max(CHAT_NUM_CTX, math.ceil(fixed / 1024) * 1024)
    messages = build_messages(question, retrieval.hits, history_text(conv, num_ctx - fixed))
    return ChatStep(query, retrieval, messages, num_ctx)


def needs_rewrite(question: str, conv: Conversation) -> bool:
    """A cheap check: does this question lean on earlier turns (pronouns, ellipsis)?

    >>> needs_rewrite("how is it different from threads?", Conversation((Turn("q", "a", "q"),)))
    True
    >>> needs_rewrite("what is asyncio?", Conversation((Turn("q", "a", "q"),)))
    False
    """
    if not conv.turns:
        return False
    q = question.strip()
    words = sum(len(w) if CJK_CHAR.match(w) else 1 for w in TOKEN.findall(q))  # a CJK character is a word
    return bool(FOLLOW_UP.search(q)) or words <= 2      # so short it must lean on context: "and threads?"


REWRITE_PROMPT = """Rewrite the user's last question as one standalone search query, using the
conversation to replace pronouns and fill in what is left out. Keep the question's
language. Reply with the query only."""


def rewrite_query(client: ollama.Client, question: str, conv: Conversation, settings: Settings) -> str:
    """Ask the chat model (short, not streamed, no thinking) for a standalone query."""
    recent = "\n".join(f"Q: {t.question}\nA: {first_sentence(t.answer, REWRITE_ANSWER_CHARS)}"
                       for t in conv.turns[-REWRITE_TURNS:])
    messages = [{"role": "system", "content": REWRITE_PROMPT},
                {"role": "user", "content": f"{recent}\n\nLast question: {question}"}]
    try:
        reply = ollama_chat(client, settings.chat_model, messages, stream=False,
                            options={"temperature": 0, "num_predict": REWRITE_TOKENS,
                                     "num_ctx": context_size(messages)})
    except OLLAMA_FAILURES as e:
        raise explain_ollama_error(e, settings.chat_model) from None
    text = "".join(strip_think([reply.message.content or ""])).strip().strip('"').splitlines()
    return text[0].strip() if text and text[0].strip() else question


def history_text(conv: Conversation, budget: int) -> str:
    """The conversation as prompt text within `budget` tokens, dropping oldest first."""
    lines = [f"(earlier: {conv.summary})"] if conv.summary else []
    lines += [f"Q: {t.question}\nA: {t.answer}" for t in conv.turns]
    while lines and estimate_tokens("\n".join(lines)) > budget:
        lines.pop(0)
    return "\n".join(lines)


def remember(conv: Conversation, turn: Turn) -> Conversation:
    """Add a turn; turns beyond the verbatim window fold into a one-line-each summary."""
    turns = conv.turns + (turn,)
    summary = conv.summary
    while len(turns) > CHAT_VERBATIM_TURNS:
        old, turns = turns[0], turns[1:]
        summary = (summary + " " if summary else "") + \
            f"Asked “{first_sentence(old.question, SUMMARY_QUESTION_CHARS)}”: " \
            f"{first_sentence(old.answer, SUMMARY_ANSWER_CHARS)}"
        summary = summary[-SUMMARY_CHARS:]    # the oldest part goes first
    return Conversation(turns, summary)


def first_sentence(text: str, limit: int) -> str:
    """The first sentence of a text, cut to `limit` characters.

    >>> first_sentence("One. Two.", 80)
    'One.'
    >>> first_sentence("A long first sentence.", 8)
    'A long …'
    """
    m = re.match(r".+?(?:[。！？]|[.!?](?=\s|$))", text.strip(), re.DOTALL)
    s = (m.group(0) if m else text.strip()).replace("\n", " ")
    return s if len(s) <= limit else s[:limit - 1] + "…"

# ----------------------------------------------------------------------------
# Evaluation: hit@k and MRR on a set of questions with known answers.


def evaluate(client: ollama.Client, index: Index, items: list[dict], settings: Settings) -> dict:
    """Score dense, BM25 and fused retrieval on an evaluation set, and the relevance floor."""
    ranks: dict[str, list] = {"fused": [], "dense": [], "bm25": []}
    misses, floor = [], {"answerable_found": 0, "answerable": 0, "unanswerable_refused": 0, "unanswerable": 0}
    confidences = []
    rows = np.flatnonzero(source_mask(index, settings.source_filter))
    dense_used = False                    # did any question get dense scores?
    for item in items:
        r = search(client, index, item["question"], replace(settings, top_k=EVAL_DEPTH))
        dense_used = dense_used or r.dense is not None
        answerable = bool(item.get("answers"))
        confidences.append({"question": item["question"], "answerable": answerable,
                            "confidence": round(r.confidence, 3)})
        if not answerable:
            floor["unanswerable"] += 1
            floor["unanswerable_refused"] += not r.found
            continue
        floor["answerable"] += 1
        floor["answerable_found"] += r.found
        for name, scores in (("fused", r.fused), ("dense", r.dense), ("bm25", r.lexical)):
            if scores is None:            # no vectors (Ollama away): this ranker is not scored
                continue
            ranking = rows[top_k(scores[rows], EVAL_DEPTH)]
            ranks[name].append(first_hit_rank(index, ranking, item["answers"]))
        if ranks["fused"][-1] != 1:
            misses.append({"question": item["question"], "answers": item["answers"],
                           "rank": ranks["fused"][-1],
                           "top": r.hits[0].chunk.citation if r.hits else None})
    result = metrics(ranks["fused"])
    result["by_ranker"] = {name: metrics(rs) for name, rs in ranks.items()}
    result["floor"] = {"min_score": settings.min_score, **floor}
    result["misses"] = misses
    result["confidences"] = confidences
    result["embed_model"] = settings.embed_model if dense_used else None
    return result


def load_eval_set(path: Path) -> list[dict]:
    """Read a JSONL file of {"question": ..., "answers": [...], "source"?: ...} lines."""
    items = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            item = None
        if not (isinstance(item, dict) and isinstance(item.get("question"), str)
                and isinstance(item.get("answers", []), list)):
            raise ValueError(f"{path}:{n}: expected {{\"question\": str, \"answers\": [str, ...]}}")
        items.append(item)
    return items


def first_hit_rank(index: Index, ranking: np.ndarray, answers: list[str]) -> int | None:
    """1-based rank of the first chunk containing one of the answers (case-insensitive)."""
    wanted = [a.lower() for a in answers]
    for rank, row in enumerate(ranking, 1):
        text = index.chunks[row].text.lower()
        if any(a in text for a in wanted):
            return rank
    return None


def metrics(ranks: list[int | None]) -> dict:
    """hit@1/3/5 and MRR@10 (EVAL_DEPTH) from each question's first-hit rank (None: missed).

    >>> metrics([1, 3, None, 6])
    {'hit@1': 0.25, 'hit@3': 0.5, 'hit@5': 0.5, 'mrr': 0.375, 'n': 4}
    """
    n = len(ranks)
    if n == 0:
        return {"hit@1": 0.0, "hit@3": 0.0, "hit@5": 0.0, "mrr": 0.0, "n": 0}
    hit = lambda k: round(sum(1 for r in ranks if r is not None and r <= k) / n, 4)  # noqa: E731
    mrr = sum(1 / r for r in ranks if r is not None and r <= EVAL_DEPTH) / n
    return {"hit@1": hit(1), "hit@3": hit(3), "hit@5": hit(5), "mrr": round(mrr, 4), "n": n}

# ----------------------------------------------------------------------------
# The other command-line modes: --chat, --eval, --explain, and the flags.


def run_chat(args, settings: Settings, client: ollama.Client) -> int:
    """The REPL: questions in, streamed answers with sources out, until /quit or Ctrl-D."""
    index, _, _ = open_index(settings, client, args.rebuild, quiet=False, progress_seconds=args.progress_seconds)
    if not index.chunks:
        return no_usable_notes(settings)
    conv, last_hits = Conversation(), []
    commands = "/sources  /clear  /stats  /quit"
    print(f"Ask about your notes ({len(index.files)} notes). Commands: {commands}. Ctrl-D leaves.")

    def show_sources(step: ChatStep) -> None:
        nonlocal last_hits
        if step.query:
            print(f"(searching for: {step.query})")
        last_hits = step.retrieval.hits
        print_hits(step.retrieval.hits, step.retrieval.lexical_only)
        if not step.retrieval.found:
            print(NOT_FOUND)

    while True:
        try:
            line = input("> ").strip()
        except EOFError:
            print()
            return EXIT_OK
        if not line:
            continue
        if line.startswith("/"):
            if line == "/quit":
                return EXIT_OK
            elif line == "/clear":
                conv, last_hits = Conversation(), []
                print("(conversation cleared)")
            elif line == "/sources":
                for h in last_hits:
                    print(f"[{h.rank}] {h.chunk.citation}  {h.score:.3f}\n{h.chunk.text}\n")
            elif line == "/stats":
                print(f"notes {len(index.files)} · chunks {len(index.chunks)} · embed {settings.embed_model} · "
                      f"chat {settings.chat_model} · turns kept {len(conv.turns)}"
                      f"{' + summary' if conv.summary else ''}")
            else:
                print(f"unknown command {line.split()[0]}; commands: {commands}")
            continue
        try:
            text, _, conv = ask(client, index, line, conv, settings, on_sources=show_sources,
                                on_token=lambda piece: print(piece, end="", flush=True))
            if text != NOT_FOUND:
                print()                   # end the streamed answer's last line
        except OllamaError as e:
            print(f"\n(Ollama unavailable: {e}; the sources above are the lexical best)")


def run_eval(args, settings: Settings, client: ollama.Client) -> int:
    index, _, _ = open_index(settings, client, args.rebuild, quiet=args.json, progress_seconds=args.progress_seconds)
    try:
        items = load_eval_set(args.eval)
    except (OSError, ValueError) as e:
        err(f"error: cannot read evaluation set: {e}")
        return EXIT_USAGE
    result = evaluate(client, index, items, settings)
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return EXIT_OK
    embedder = result["embed_model"] or "none (Ollama unavailable: BM25 only)"
    print(f"{result['n']} answerable questions, {len(items) - result['n']} unanswerable; embedder: {embedder}")
    print(f"{'ranker':<8}{'hit@1':>8}{'hit@3':>8}{'hit@5':>8}{'MRR':>8}")
    for name in ("dense", "bm25", "fused"):
        m = result["by_ranker"][name]
        row = "".join(f"{m[k]:>8.3f}" for k in ("hit@1", "hit@3", "hit@5", "mrr")) if m["n"] else "     n/a"
        print(f"{name:<8}{row}")
    f = result["floor"]
    print(f"relevance floor {f['min_score']}: answered {f['answerable_found']}/{f['answerable']} answerable, "
          f"declined {f['unanswerable_refused']}/{f['unanswerable']} unanswerable")
    for m in result["misses"]:
        print(f"miss (rank {m['rank']}): {m['question']}  -> top: {m['top']}")
    return EXIT_OK


def run_explain(args, settings: Settings, client: ollama.Client) -> int:
    """--explain: one question, every step narrated with this run's real values (80 columns).

    Steps 4 to 7 narrate what search() and the answer functions returned, so the
    narration cannot drift from what the pipeline does.
    """
    from textwrap import fill, shorten

    def say(text: str = "", indent: str = "  ") -> None:
        print(fill(text, 78, initial_indent=indent, subsequent_indent=indent + "  ") if text else "")

    def cut(text: str, width: int) -> str:
        return shorten(text, width, placeholder=" …")

    def label(c: Chunk) -> str:          # file and innermost heading: "notes.md › ## Part"
        return cut(" › ".join([c.source] + c.heading.split(" › ")[-1:]) if c.heading else c.source, 60)

    print("STEP 1 · LOAD: find the notes")
    files, _ = scan_notes(settings.notes_dir, skip=[settings.cache_dir])
    say(f"{len(files)} files under {settings.notes_dir.name}/: " + ", ".join(f.rel for f in files))
    print("\nSTEP 2 · FINGERPRINT: MD5 over every note's name, size and mtime")
    say(f"{fingerprint(files)}: while it stays the same, the cache is used as it is")
    index, report, took = open_index(settings, client, args.rebuild, quiet=True, progress_seconds=args.progress_seconds)
    say(f"index: {len(index.chunks)} chunks from {len(index.files)} notes, "
        f"{report.embedded} embedded just now ({took:.2f}s)")
    if not index.chunks:
        return no_usable_notes(settings)
    print("\nSTEP 3 · CHUNK: cut at headings, then paragraphs, lines, sentences")
    rel, rec = max(index.files.items(), key=lambda kv: (kv[1].stop - kv[1].start, kv[1].size))
    say(f"{rel} became {rec.stop - rec.start} chunk(s) of at most {settings.chunk_size} characters "
        f"(notes shorter than that stay whole; try --chunk-size 300):")
    for c in index.chunks[rec.start:rec.stop][:4]:
        say(f"{len(c.text):>5} chars  {c.heading or '(no heading)'}", indent="    ")
    print("\nSTEP 4 · EMBED: text -> a vector of numbers; similar meaning, similar direction")
    r = search(client, index, args.question, settings)
    if r.query_vector is not None:
        qvec = r.query_vector
        say(f"{settings.embed_model} turned the question into {len(qvec)} numbers of total length 1: "
            f"[{', '.join(f'{x:+.3f}' for x in qvec[:4])}, …]")
    else:
        say(f"Ollama unavailable ({r.keywords_only_because}); keywords (BM25) only")

    print("\nSTEP 5 · SEARCH: rank by meaning (cosine) and by words (BM25), then fuse")
    for name, key, scores in (("cosine", "dense", r.dense), ("BM25", "bm25", r.lexical), ("fused", "", r.fused)):
        if scores is not None:
            note = f"weight {r.weights.get(key, 0.0):.2f}" if key else FUSION
            print(f"  {name} ({cut(note, 60)}):")
            for i in top_k(scores, 3):
                print(f"    {scores[i]:>7.3f}  {label(index.chunks[i])}")
    say(f"confidence {r.confidence:.2f} against the floor {settings.min_score}: "
        + ("answer from these sources" if r.found else "not found in your notes"))
    messages = build_messages(args.question, r.hits)
    print("\nSTEP 6 · PROMPT: rules · numbered sources · question (--show-prompt: in full)")
    for m in messages:
        print(f"  --- {m['role']}: {estimate_tokens(m['content'])} tokens (estimated) ---")
        lines = [ln for ln in m["content"].splitlines() if ln.strip()]
        shown = lines if m["role"] == "system" else [ln for ln in lines if re.match(r"\[\d+\] |Sources:|Question:", ln)]
        for line in shown:
            print("  " + cut(line, 76))
    say(f"num_ctx {context_size(messages)}: the estimate plus {ANSWER_TOKENS} tokens for the answer, "
        "so Ollama cuts nothing")
    print(f"\nSTEP 7 · ANSWER: {settings.chat_model}, streamed")
    if not r.found:
        say("not found in your notes: the chat model is not called")
        return EXIT_OK
    if r.lexical_only:
        say("Ollama unavailable: the passages above are all there is")
        return EXIT_OK
    return stream_answer(answer(client, args.question, r.hits, settings))[1]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="demo_rag.py", description="Ask questions of your notes with local Ollama models.")
    p.add_argument("question", nargs="?", help="what to ask (in any language)")
    p.add_argument("--notes", type=Path, default=NOTES_DIR, help="notes folder (default: demo-data/)")
    p.add_argument("--cache", type=Path, default=CACHE_DIR, help="cache folder (default: .demo-cache/)")
    p.add_argument("--top-k", type=int, default=TOP_K, help=f"sources to use (default {TOP_K})")
    p.add_argument("--embed-model", default=EMBED_MODEL, help=f"default {EMBED_MODEL}")
    p.add_argument("--chat-model", default=CHAT_MODEL, help=f"default {CHAT_MODEL}")
    p.add_argument("--chunk-size", type=int, default=CHUNK_SIZE, help=f"characters (default {CHUNK_SIZE})")
    p.add_argument("--chunk-overlap", type=int, default=CHUNK_OVERLAP, help=f"characters (default {CHUNK_OVERLAP})")
    p.add_argument("--min-score", type=float, default=MIN_SCORE,
                   help=f"relevance floor on retrieval confidence (default {MIN_SCORE})")
    p.add_argument("--source", metavar="PATTERN", help="only use notes whose path matches (glob or substring)")
    p.add_argument("--query-instruction", metavar="TEMPLATE",
                   help="query template with {query}; '' for none (default: the model's documented one)")
    p.add_argument("--max-note-mb", type=float, default=MAX_NOTE_MB,
                   help=f"skip bigger notes (default {MAX_NOTE_MB:g})")
    p.add_argument("--rebuild", action="store_true", help="re-read and re-embed every note")
    p.add_argument("--retrieve-only", action="store_true", help="show the sources, skip the chat model")
    p.add_argument("--show-prompt", action="store_true", help="print the exact prompt sent")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--chat", action="store_true", help="ask follow-up questions in a conversation")
    p.add_argument("--explain", action="store_true", help="narrate every step with this run's values")
    p.add_argument("--eval", type=Path, metavar="JSONL", help="measure retrieval on an evaluation set")
    p.add_argument("--progress-seconds", type=float, default=PROGRESS_SECONDS, metavar="S",
                   help=f"when stderr is not a terminal, a progress line every S seconds (default {PROGRESS_SECONDS:g})")
    p.add_argument("--checkpoint-seconds", type=float, default=CHECKPOINT_SECONDS, metavar="S",
                   help=f"save the embedding done so far every S seconds, 0 after every batch (default {CHECKPOINT_SECONDS:g})")
    args = p.parse_args(argv)
    if not (args.question or args.chat or args.eval):
        p.print_usage(sys.stderr)
        p.exit(EXIT_USAGE, "demo_rag.py: error: give a question, or --chat, or --eval FILE\n")
    if args.top_k < 1 or args.chunk_size < 50 or not 0 <= args.chunk_overlap < args.chunk_size:
        p.error("need --top-k >= 1, --chunk-size >= 50 and 0 <= --chunk-overlap < --chunk-size")
    return args


def settings_from(args: argparse.Namespace) -> Settings:
    return Settings(notes_dir=args.notes.expanduser(), cache_dir=args.cache.expanduser(),
                    embed_model=args.embed_model, chat_model=args.chat_model,
                    chunk_size=args.chunk_size, chunk_overlap=args.chunk_overlap, top_k=args.top_k,
                    min_score=args.min_score, source_filter=args.source,
                    query_instruction=args.query_instruction, max_note_mb=args.max_note_mb,
                    checkpoint_seconds=args.checkpoint_seconds)


def err(*lines: str) -> None:
    for line in lines:
        print(line, file=sys.stderr, flush=True)


def preview(text: str, width: int = 72) -> str:
    """The start of a chunk's text on one line, past its headings (they are in the citation),
    cut to `width` terminal columns (a CJK character takes two).

    >>> preview("## Title\\n\\nRAG 是检索增强生成", 12)
    'RAG 是检索…'
    """
    line = " ".join(text[LEADING_HEADINGS.match(text).end():].split())
    used = 0
    for i, ch in enumerate(line):
        used += 2 if re.match(rf"[{CJK}\uff00-\uffef\u3000-\u303f]", ch) else 1
        if used > width - 1:
            return line[:i] + "…"
    return line


def no_usable_notes(settings: Settings) -> int:
    """Say which folder had no notes and what was looked for; the exit code for it."""
    err(f"no usable notes in {settings.notes_dir} (looked for {', '.join(NOTE_TYPES)}, "
        f"at least {MIN_NOTE_CHARS} characters)")
    return EXIT_USAGE

# ============================================================================
# PART II · HARDENING AND SPEED
#
# What makes Part I robust on real folders and fast on big ones. A first
# reading may stop here: every function below is called from Part I by a name
# that says what it does, and the tests pin down how.
# ============================================================================

# ----------------------------------------------------------------------------
# Reading files: encodings, front matter, PDFs.


def read_text(path: Path) -> tuple[list[tuple[int | None, str]], str | None]:
    """Read a Markdown or text note: one section, front matter dropped, plus a warning or None."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ValueError(e.strerror) from None
    if b"\0" in data[:8192]:
        raise ValueError("looks binary, not text")
    text, warning = decode_note(data)
    return [(None, strip_front_matter(text))], warning


def decode_note(data: bytes) -> tuple[str, str | None]:
    """Decode bytes as UTF-8 (with or without BOM), else as GB18030; say when we fell back."""
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("gb18030"), "not UTF-8; read as GB18030"
    except UnicodeDecodeError:
        raise ValueError("neither UTF-8 nor GB18030 text") from None


FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)


def strip_front_matter(text: str) -> str:
    """Drop a YAML front-matter block (Obsidian, Jekyll) from the start of a note.

    >>> strip_front_matter("---\\ntags: [a]\\n---\\n# Title")
    '# Title'
    """
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    return FRONT_MATTER.sub("", text, count=1)


def read_pdf(path: Path) -> tuple[list[tuple[int | None, str]], str | None]:
    """Extract a PDF's text page by page, cleaned for chunking (needs pypdf); no warning."""
    import pypdf  # optional: only PDFs need it
    logging.getLogger("pypdf").setLevel(logging.ERROR)   # we report a bad PDF in one line ourselves
    try:
        reader = pypdf.PdfReader(path)
        if reader.is_encrypted:
            raise ValueError("encrypted PDF")
        pages = [page.extract_text() or "" for page in reader.pages]
    except ValueError:
        raise
    except Exception as e:  # pypdf raises many kinds of errors on malformed files
        raise ValueError(f"malformed PDF ({type(e).__name__})") from None
    pages = clean_pdf_pages(pages)
    if not any(p.strip() for p in pages):
        raise ValueError("no extractable text (a scanned PDF?)")
    return [(number, text) for number, text in enumerate(pages, 1) if text.strip()], None


# A line is a running header or footer when it starts or ends at least this share
# of the pages: title pages and chapter openers often lack the header, so "every
# page" would miss it. With fewer pages there is no telling a header from text.
PDF_EDGE_SHARE = 0.6
PDF_EDGE_MIN_PAGES = 3


def clean_pdf_pages(pages: list[str]) -> list[str]:
    """Undo the usual PDF extraction damage: hyphenated line breaks, runs of spaces,
    and header/footer lines that repeat on most pages.

    >>> clean_pdf_pages(["Manual\\nretriev-\\nal  works\\n1", "Manual\\nso   does\\n2", "Manual\\nthis\\n3"])
    ['retrieval works', 'so does', 'this']
    """
    pages = [re.sub(r"(\w)-\n(\w)", r"\1\2", p) for p in pages]
    pages = [re.sub(r"[ \t\u00a0]+", " ", p) for p in pages]
    lines = [[ln.strip() for ln in p.split("\n") if ln.strip()] for p in pages]
    if len(pages) >= PDF_EDGE_MIN_PAGES:
        # A header or footer is a first or last line seen on most pages; page
        # numbers differ from page to page, so lines are compared with digits masked.
        def key(line: str) -> str:
            return re.sub(r"\d+", "#", line)
        edges = Counter(key(ls[i]) for ls in lines if ls for i in {0, len(ls) - 1})
        repeated = {k for k, n in edges.items() if n >= PDF_EDGE_SHARE * len(pages)}
        lines = [[ln for j, ln in enumerate(ls) if not ((j == 0 or j == len(ls) - 1) and key(ln) in repeated)]
                 for ls in lines]
    return ["\n".join(ls) for ls in lines]


@functools.cache
def importable(module: str) -> bool:
    """True when an optional package (pypdf) can be imported; checked once per run."""
    try:
        importlib.import_module(module)
        return True
    except ImportError:
        return False

# ----------------------------------------------------------------------------
# Headings: where each chunk sits in its note's outline, for citations.

HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
LEADING_HEADINGS = re.compile(r"(?:[ \t]*(?:#{1,6}[ \t][^\n]*)?\n)*")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def heading_outline(text: str) -> list[tuple[int, int, str]]:
    """List (offset, level, title) of the Markdown headings, ignoring code blocks.

    >>> heading_outline("# A\\ntext\\n## B\\n```\\n# not a heading\\n```")
    [(0, 1, 'A'), (9, 2, 'B')]
    """
    fenced = [m.span() for m in FENCE.finditer(text)]
    return [(m.start(), len(m.group(1)), m.group(2)) for m in HEADING.finditer(text)
            if not any(a <= m.start() < b for a, b in fenced)]


def heading_path(outline: list[tuple[int, int, str]], offset: int) -> str:
    """The headings in force at `offset`, e.g. '# A › ## B'.

    >>> heading_path([(0, 1, 'A'), (9, 2, 'B'), (20, 2, 'C')], 15)
    '# A › ## B'
    """
    stack: list[tuple[int, str]] = []
    for start, level, title in outline:
        if start > offset:
            break
        stack = [(lv, t) for lv, t in stack if lv < level] + [(level, title)]
    return " › ".join("#" * lv + " " + t for lv, t in stack)

# ----------------------------------------------------------------------------
# Words for BM25: CJK-aware tokens, stopwords, plurals.

CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
TOKEN = re.compile(rf"[{CJK}]+|(?:(?![{CJK}])[^\W_])+")
CJK_CHAR = re.compile(rf"[{CJK}]")
# Words that carry no topic. BM25's idf already discounts common words in a big
# vault, but in a folder of ten notes "the" or "的" can look rare enough to matter.
STOPWORDS = frozenset(
    "a an and are as at be but by can did do does for from had has have how i if in into is it its "
    "me my of on or our should so than that the their them then there these they this to was we "
    "were what when where which who why will with would you your "
    "的 了 是 吗 呢 吧 啊 么 什 怎 样 哪 谁 我 你 在 和 与 及 或 也 都 就 个 有 要 会 能 可 以 之 其 把 被 让 给".split())


def singular(word: str) -> str:
    """Harman's "S" stemmer (1991): fold English plurals so "notes" matches "note".

    >>> [singular(w) for w in ["notes", "queries", "boxes", "class", "status", "goes"]]
    ['note', 'query', 'boxe', 'class', 'status', 'goe']
    """
    if len(word) > 3 and word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word

# ----------------------------------------------------------------------------
# The lexicon: BM25's inverted index, updated without re-reading old chunks.


@dataclass(frozen=True)
class Lexicon:
    """An inverted index: for each term, the chunks it occurs in and how often.

    Postings of term `vocab[t]` are rows `docs[ptr[t]:ptr[t+1]]` with counts
    `counts[ptr[t]:ptr[t+1]]`; `lengths[row]` is the chunk's token count.
    """
    vocab: list[str]                      # sorted, so a lookup is a binary search
    ptr: np.ndarray                       # (len(vocab) + 1,) int64
    docs: np.ndarray                      # (postings,) int32
    counts: np.ndarray                    # (postings,) float32
    lengths: np.ndarray                   # (chunks,) float32


def lexicon_from_texts(texts: list[str]) -> Lexicon:
    """A lexicon built from scratch, chunk i being texts[i].

    >>> lex = lexicon_from_texts(["the cat sat", "a dog sat"])
    >>> lex.vocab, lex.ptr.tolist(), lex.docs.tolist(), lex.lengths.tolist()
    (['cat', 'dog', 'sat'], [0, 1, 2, 4], [0, 1, 0, 1], [2.0, 2.0])
    """
    return build_lexicon(None, np.full(len(texts), -1), texts)


def build_lexicon(old: Lexicon | None, reuse: np.ndarray, new_texts: list[str]) -> Lexicon:
    """A lexicon for a new list of chunks, tokenising only the chunks that are new.

    `reuse[i]` is the row in `old` whose terms chunk i has, or -1 for a new chunk;
    the new chunks' texts come in `new_texts`, in order of their -1 entries.
    """
    n = len(reuse)
    lengths = np.zeros(n, dtype=np.float32)
    rows, src = np.flatnonzero(reuse >= 0), reuse[reuse >= 0]
    old_terms = np.zeros(0, np.int64)                  # postings kept: old term id, new row, count
    old_docs, old_counts = np.zeros(0, np.int64), np.zeros(0, np.float32)
    if old is not None and len(rows):
        lengths[rows] = old.lengths[src]
        # Gather the reused rows' postings (a row may be reused twice: a copied note).
        term_of = np.repeat(np.arange(len(old.vocab)), np.diff(old.ptr))
        order = np.argsort(old.docs, kind="stable")
        by_row = np.searchsorted(old.docs[order], np.arange(len(old.lengths) + 1))
        starts, lens = by_row[src], by_row[src + 1] - by_row[src]
        # Concatenated ranges without a loop: starts [5, 0], lens [2, 3] -> [5, 6, 0, 1, 2]
        take = order[np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(lens.sum())]
        old_terms, old_docs, old_counts = term_of[take], np.repeat(rows, lens), old.counts[take]
    new_counts = [Counter(tokenize(text)) for text in new_texts]
    for row, tf in zip(np.flatnonzero(reuse < 0), new_counts):
        lengths[row] = sum(tf.values())
    # The new vocabulary: the old terms still in use plus the new chunks' terms, sorted.
    vocab = sorted({old.vocab[t] for t in np.unique(old_terms)} | {t for tf in new_counts for t in tf})
    term_id = {t: i for i, t in enumerate(vocab)}
    remap = np.array([term_id.get(t, -1) for t in old.vocab] if old is not None else [], dtype=np.int64)
    terms = np.concatenate([remap[old_terms], [term_id[t] for tf in new_counts for t in tf]]).astype(np.int64)
    docs = np.concatenate([old_docs, [row for row, tf in zip(np.flatnonzero(reuse < 0), new_counts) for _ in tf]])
    counts = np.concatenate([old_counts, [c for tf in new_counts for c in tf.values()]]).astype(np.float32)
    order = np.lexsort((docs, terms))                 # postings sorted by term, then row
    ptr = np.searchsorted(terms[order], np.arange(len(vocab) + 1)).astype(np.int64)
    return Lexicon(vocab, ptr, docs[order].astype(np.int32), counts[order], lengths)

# ----------------------------------------------------------------------------
# The cache on disk: one file per notes folder, embedding model and chunking,
# written atomically, checkpointed while embedding, loaded safely and fast.


def cache_path(settings: Settings) -> Path:
    """One cache file per notes folder, embedding model and chunking.

    So two folders never clash, and trying another model or --chunk-size and
    coming back costs no re-embedding: the first cache is still there.
    """
    real = os.path.realpath(settings.notes_dir)
    key = f"{real}\0{settings.embed_model}\0{settings.chunk_size}/{settings.chunk_overlap}"
    digest = hashlib.md5(key.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    # subtle: names are cut short, as a file name may hold only 255 bytes (a CJK character is 3)
    name = re.sub(r"[^\w.-]+", "_", Path(real).name)[:40] or "notes"
    model = re.sub(r"[^\w.-]+", "_", settings.embed_model)[-40:]
    return settings.cache_dir / f"{name}-{model}-{settings.chunk_size}-{digest}.pkl"


class FileRecord(NamedTuple):
    """What the index knows about one note: its stat, its content hash, its rows."""
    size: int
    mtime_ns: int
    digest: str                           # MD5 of the bytes: same digest, same chunks
    start: int                            # its chunks are rows start..stop-1
    stop: int


@dataclass
class IndexReport:
    """What an index update did, for one line of output."""
    changed: int = 0
    new: int = 0
    deleted: int = 0
    unchanged: int = 0
    embedded: int = 0
    touched: list[str] = field(default_factory=list)   # the notes read again: new or changed
    reason: str = ""                      # why a full rebuild happened, if one did
    warnings: list[str] = field(default_factory=list)
    embed_error: str | None = None        # set when vectors are missing: lexical-only

    def summary(self, notes: int) -> str:
        return (f"indexed {notes} notes: {self.changed} changed, {self.new} new, "
                f"{self.deleted} deleted, {self.unchanged} unchanged ({self.embedded} chunks embedded)")


def stale_reason(index: Index, settings: Settings) -> str:
    """Why a loaded index cannot be reused with these settings ("" if it can)."""
    if index.embed_model != settings.embed_model:
        return f"embedding model changed ({index.embed_model} -> {settings.embed_model})"
    if index.chunking != (settings.chunk_size, settings.chunk_overlap):
        return (f"chunk settings changed ({index.chunking[0]}/{index.chunking[1]} -> "
                f"{settings.chunk_size}/{settings.chunk_overlap})")
    return ""


def save_index(index: Index, path: Path) -> None:
    """Write the cache atomically: a temp file in the same folder, then os.replace.

    The file is a pickle of everything but the vectors, zeros up to the next
    4 KB boundary, then the vectors as raw float32 rows, which load_index maps
    into memory instead of reading them. A crash, a kill or Ctrl-C mid-write
    leaves the previous cache intact, and two processes writing at once each
    replace the file with one complete version. Raises OSError (disk full...).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            pickle.dump(index_to_dict(index), f, protocol=pickle.HIGHEST_PROTOCOL)
            f.write(bytes(-f.tell() % VECTOR_ALIGN))
            f.write(np.ascontiguousarray(index.vectors, dtype=DISK_VECTORS).data)  # no copy if float32
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    # A process killed mid-write leaves its temp file behind; none lives an hour.
    for old in path.parent.glob(glob_escape(path.name) + "*.tmp"):
        with contextlib.suppress(OSError):
            if time.time() - old.stat().st_mtime > 3600:
                old.unlink()


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def load_index(path: Path) -> tuple[Index | None, str]:
    """Load a cache file; on any problem return (None, a one-line reason).

    The vectors are not read but memory-mapped (read-only): the OS pages them in
    as the first search touches them, and a warm query pays no copy at all.
    """
    if not path.exists():
        return None, "no cache yet"
    try:
        with open(path, "rb") as f, gc_paused():
            d = BuiltinsOnlyUnpickler(f).load()
            if not isinstance(d, dict) or d.get("format") != CACHE_FORMAT:
                return None, "cache is from another version of demo_rag"
            vectors = map_vectors(f, f.tell() + (-f.tell() % VECTOR_ALIGN), d["vectors_shape"])
            return index_from_dict(d, vectors), ""
    except BuiltinsOnlyUnpickler.Refused as e:
        return None, f"cache refused ({e})"
    except CacheDamaged as e:
        return None, f"cache is damaged ({e})"
    except Exception as e:  # truncated, corrupt, foreign: never trust it, rebuild
        return None, f"cache is damaged ({type(e).__name__})"


class CacheDamaged(ValueError):
    """A cache file that unpickles but does not hold together."""


class ChunkTable(Sequence):
    """A loaded index's chunks, kept as columns and made into a Chunk only when asked for.

    A warm query shows five hits of perhaps 50,000 chunks: storing each text
    column as one UTF-8 blob with offsets loads in one copy instead of 50,000
    string objects (and their tuples), and the few hits are decoded on demand.
    """

    def __init__(self, names: list[str], source_ids: np.ndarray, headings: tuple, texts: tuple,
                 pages: np.ndarray):
        self.names, self.source_ids, self.pages = names, source_ids, pages
        self.headings, self.texts = headings, texts      # each (blob, offsets)

    def __len__(self) -> int:
        return len(self.source_ids)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = range(len(self))[i]                          # negative indices; IndexError past the end
        page = int(self.pages[i])
        return Chunk(self.names[self.source_ids[i]], text_at(self.headings, i), text_at(self.texts, i),
                     None if page < 0 else page)

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and all(map(operator.eq, self, other))

    @staticmethod
    def pack(chunks: Sequence[Chunk]) -> dict:
        """Chunks as plain data: distinct source names, blobs of headings and texts, pages (-1: none)."""
        names = sorted({c.source for c in chunks})
        ids = {name: k for k, name in enumerate(names)}
        return {"names": names,
                "source_ids": arr_data(np.array([ids[c.source] for c in chunks], dtype="<i4")),
                "headings": blob_data([c.heading for c in chunks]), "texts": blob_data([c.text for c in chunks]),
                "pages": arr_data(np.array([-1 if c.page is None else c.page for c in chunks], dtype="<i8"))}

    @classmethod
    def unpack(cls, d: dict, arr: Callable) -> ChunkTable:
        """pack()'s output back, every column checked (CacheDamaged) so a hit never fails to decode."""
        names, source_ids, pages = check(d["names"], list, "names"), arr(d["source_ids"], "<i4", "source ids"), \
            arr(d["pages"], "<i8", "pages")
        headings, texts = (check_blob(d[k], arr, len(source_ids), k) for k in ("headings", "texts"))
        if not (set(map(type, names)) <= {str} and pages.shape == source_ids.shape
                and (len(source_ids) == 0 or 0 <= source_ids.min() <= source_ids.max() < len(names))
                and (len(pages) == 0 or pages.min() >= -1)):
            raise CacheDamaged("chunk columns disagree")
        return cls(names, source_ids, headings, texts, pages)


def arr_data(a: np.ndarray) -> tuple:
    """An array as plain builtins: (dtype, shape, bytes)."""
    return (a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes())


def blob_data(strings: list[str]) -> tuple:
    """Strings as one UTF-8 blob and their offsets: ["ab", "ç"] -> (b"ab\\xc3\\xa7", offsets [0, 2, 4])."""
    encoded = [t.encode("utf-8", "surrogatepass") for t in strings]
    return b"".join(encoded), arr_data(np.cumsum([0] + [len(b) for b in encoded], dtype=np.int64))


def check_blob(t, arr: Callable, n: int, what: str) -> tuple:
    """A blob_data() tuple, checked: n + 1 rising offsets that cut the blob only between characters."""
    blob, offsets = check(t, tuple, what)
    offsets = arr(offsets, "<i8", what)
    raw = np.frombuffer(check(blob, bytes, what), dtype=np.uint8)
    starts = offsets[:-1][offsets[:-1] < len(raw)]
    if not (offsets.shape == (n + 1,) and offsets[0] == 0 and offsets[-1] == len(raw)
            and (np.diff(offsets) >= 0).all() and ((raw[starts] & 0xC0) != 0x80).all()):
        raise CacheDamaged(f"{what} offsets do not match their text")
    return blob, offsets


def text_at(column: tuple, i: int) -> str:
    """The i-th string of a blob_data() column. Bytes damaged inside a text (which no
    check short of a checksum would catch) read as U+FFFD instead of failing the query."""
    blob, offsets = column
    raw = blob[offsets[i]:offsets[i + 1]]
    try:
        return raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace")


def map_vectors(f, start: int, shape) -> np.ndarray:
    """The (n, dim) float32 rows stored from byte `start` to the end of file f, memory-mapped."""
    n, dim = check(shape, tuple, "vectors_shape")
    if not all(type(x) is int and x >= 0 for x in (n, dim)):
        raise CacheDamaged("bad vectors_shape")
    size = n * dim * DISK_VECTORS.itemsize
    if os.fstat(f.fileno()).st_size != start + size:
        raise CacheDamaged("vectors are cut short or followed by other data")
    if size == 0:
        return np.zeros((n, dim), dtype=np.float32)
    whole = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)   # stays valid after f closes
    return np.frombuffer(whole, dtype=DISK_VECTORS, count=n * dim, offset=start).reshape(n, dim)


def check(value, kind: type, what: str):
    """value if it is a `kind`, else CacheDamaged naming `what`."""
    if type(value) is not kind:
        raise CacheDamaged(f"{what} is a {type(value).__name__}, not a {kind.__name__}")
    return value


def index_to_dict(index: Index) -> dict:
    """Everything but the vectors, as plain builtins: arrays become (dtype, shape, bytes)."""
    arr = arr_data
    lex = index.lexicon
    return {
        "format": CACHE_FORMAT, "embed_model": index.embed_model, "chunking": index.chunking,
        "fingerprint": index.fingerprint, "vectors_shape": index.vectors.shape,
        "files": {rel: tuple(r) for rel, r in index.files.items()},
        "chunks": ChunkTable.pack(index.chunks),
        "has_vector": arr(index.has_vector),
        "lexicon": (lex.vocab, arr(lex.ptr), arr(lex.docs), arr(lex.counts), arr(lex.lengths)),
    }


def index_from_dict(d: dict, vectors: np.ndarray) -> Index:
    """Rebuild an Index from index_to_dict's output, checking it as strictly as the unpickler.

    A file can unpickle and still lie: a text that is a number, rows past the
    end, a NaN vector (which would make every query "not found"). Anything that
    does not hold together raises CacheDamaged, and the index is rebuilt.
    """
    def arr(t, dtype: str, what: str) -> np.ndarray:   # (dtype, shape, bytes) -> a read-only array
        kind, shape, data = check(t, tuple, what)
        if kind != dtype or type(shape) is not tuple or type(data) is not bytes:
            raise CacheDamaged(f"{what} is not {dtype}")
        return np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape)
    n = len(vectors)
    chunks = ChunkTable.unpack(check(d["chunks"], dict, "chunks"), arr)
    if len(chunks) != n:
        raise CacheDamaged("chunks do not match the vectors")
    has_vector = arr(d["has_vector"], "|b1", "has_vector")
    vocab, ptr, docs, counts, lengths = check(d["lexicon"], tuple, "lexicon")
    lex = Lexicon(check(vocab, list, "vocabulary"), arr(ptr, "<i8", "postings"), arr(docs, "<i4", "postings"),
                  arr(counts, "<f4", "counts"), arr(lengths, "<f4", "lengths"))
    files = {check(rel, str, "file name"): FileRecord(*check(r, tuple, "file record"))
             for rel, r in check(d["files"], dict, "files").items()}
    if not (has_vector.shape == lex.lengths.shape == (n,) and lex.ptr.shape == (len(vocab) + 1,)
            and all(type(t) is str for t in vocab) and lex.ptr[0] == 0 and lex.ptr[-1] == len(lex.docs)
            and (np.diff(lex.ptr) >= 0).all() and len(lex.counts) == len(lex.docs)
            and (len(lex.docs) == 0 or 0 <= lex.docs.min() <= lex.docs.max() < n)
            and np.isfinite(lex.counts).all() and np.isfinite(lex.lengths).all()):
        raise CacheDamaged("BM25 postings do not match the chunks")
    if not all(type(a) is int and type(b) is int and type(c) is str and type(e) is int and type(f) is int
               and 0 <= e <= f <= n for a, b, c, e, f in files.values()):
        raise CacheDamaged("a file record points outside the chunks")
    # One matrix-vector product (as long as a search) finds any NaN or infinity.
    if n and vectors.shape[1] and not np.isfinite(vectors @ np.ones(vectors.shape[1], np.float32)).all():
        raise CacheDamaged("a vector is not a number")
    chunking = tuple(check(d["chunking"], tuple, "chunking"))
    return Index(chunks, vectors, has_vector, lex, files,
                 check(d["fingerprint"], str, "fingerprint"), check(d["embed_model"], str, "embed_model"),
                 chunking)


class BuiltinsOnlyUnpickler(pickle.Unpickler):
    """Unpickles plain data only: any class or function reference is refused.

    A pickle can name any importable callable (os.system, say) and have it called
    on load. Our cache holds only dicts, lists, tuples, strings, numbers and
    bytes, which need no lookup at all, so refusing every lookup loses nothing.
    """

    class Refused(pickle.UnpicklingError):
        pass

    def find_class(self, module, name):
        raise self.Refused(f"refusing to load {module}.{name} from a cache file")


class CacheWriter:
    """Saves an index being built: every `seconds` while embedding, and at the end.

    A checkpoint costs a full write, so on a big index it waits long enough to
    stay under CHECKPOINT_MAX_SHARE of the build. It never replaces the cache
    with an incomplete one holding fewer than `floor` vectors (a --rebuild with
    Ollama away keeps the old vectors). A cache that cannot be written (disk
    full, read-only) costs one warning, not the run: the build carries on.
    """

    def __init__(self, path: Path, seconds: float, on_disk: int = 0, floor: int = 0):
        self.path, self.seconds, self.floor = path, seconds, floor
        self.on_disk = on_disk            # vectors in the cache file now
        self.last, self.cost = time.perf_counter(), 0.0
        self.problem: str | None = None   # why the last write failed
        self.warned = False

    def checkpoint(self, index: Index, force: bool, progress: Callable[[str], None]) -> int:
        """Save if one is due (or forced); return the vectors now on disk."""
        wait = max(self.seconds, self.cost / CHECKPOINT_MAX_SHARE) if self.seconds else 0   # 0: every batch
        due = force or time.perf_counter() - self.last >= wait
        if due and not self.save(index) and self.problem and not self.warned:
            self.warned = True
            progress(f"warning: {self.problem}")
        return self.on_disk

    def save(self, index: Index) -> bool:
        """Write the index unless that would lose vectors; False if not written."""
        kept = int(index.has_vector.sum())
        if kept < self.floor and not index.complete:
            return False
        t0 = time.perf_counter()
        try:
            save_index(index, self.path)
        except OSError as e:
            self.problem = f"cache not saved ({e.strerror or e}); this run carries on, the next one embeds again"
            return False
        finally:
            self.last = time.perf_counter()
            self.cost = self.last - t0
        self.on_disk, self.problem = kept, None
        return True


class BuildInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) during a build, after what was embedded was saved."""

    def __init__(self, kept: int, total: int):
        super().__init__(f"kept {kept:,} of {total:,} vectors; run again to continue")


def sigterm_as_interrupt():
    """Make SIGTERM stop a run the way Ctrl-C does (what was embedded is kept); return the
    previous handler for restore_sigterm, or None off the main thread (a notebook's worker)."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt
    try:
        return signal.signal(signal.SIGTERM, interrupt)
    except ValueError:
        return None


def restore_sigterm(previous) -> None:
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def gc_paused():
    """Pause the cyclic garbage collector: loading creates ~100k tuples and strings,
    none of them garbage, and the collector would walk them again and again."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()

# ----------------------------------------------------------------------------
# Keeping the index up to date: which notes changed.


def file_digest(path: Path) -> str:
    """MD5 of a file's bytes, read in blocks so a big file never sits in memory."""
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def count_file(report: IndexReport, rel: str, before: FileRecord | None, digest: str) -> None:
    """Count a note as new (including a rename), unchanged or changed."""
    if before is None:
        report.new += 1
    elif before.digest == digest:
        report.unchanged += 1
        return
    else:
        report.changed += 1
    report.touched.append(rel)

# ----------------------------------------------------------------------------
# Progress on stderr: numbers a long first build can be planned by.


class EmbedProgress(NamedTuple):
    """Where a build's embedding stands, reported after every batch."""
    done: int                             # chunks with a vector, of
    total: int                            # all chunks in the index
    embedded: int                         # embedded by this run, in
    seconds: float                        # this long
    note: str                             # the note the last batch came from


class ProgressLine:
    """Shows build_index's progress on a stream (stderr), as a callable.

    On a terminal: one line rewritten in place, at most 10 times a second. Not
    on a terminal (a pipe, a log, CI): a line every `every` seconds, so a long
    build's log stays readable. Either way finish() ends with a summary line.
    Plain messages (str) are printed as they come, unless quiet.
    """

    def __init__(self, stream, every: float = PROGRESS_SECONDS, quiet: bool = False):
        self.stream, self.quiet = stream, quiet
        self.tty = stream.isatty()
        self.every = 0.1 if self.tty else every
        self.shown = time.monotonic()
        self.latest: EmbedProgress | None = None
        self.open = False                 # a line on the terminal still waits for its newline

    def __call__(self, event: str | EmbedProgress) -> None:
        if isinstance(event, str):
            if not self.quiet:
                self.write(event + "\n")
            return
        self.latest = event
        if time.monotonic() - self.shown >= self.every:
            self.shown = time.monotonic()
            self.write("  " + progress_text(event) + ("" if self.tty else "\n"))

    def finish(self) -> None:
        e, self.latest = self.latest, None
        if e is not None:
            rate = e.embedded / max(e.seconds, 1e-9)
            self.write(f"  embedded {e.embedded:,} chunks in {duration(e.seconds)} ({rate:.1f} chunks/s)\n")

    def write(self, text: str) -> None:
        if self.tty:
            with contextlib.suppress(OSError):
                width = os.get_terminal_size(self.stream.fileno()).columns
                text = text if text.endswith("\n") else text[:width - 1]
            text = ("\r\x1b[K" if self.open else "") + text
            self.open = not text.endswith("\n")
        self.stream.write(text)
        self.stream.flush()


def progress_text(e: EmbedProgress) -> str:
    """One progress line.

    >>> progress_text(EmbedProgress(3200, 10000, 1200, 400.0, "notes/rag.md"))
    'embedding 3,200/10,000 chunks · 3.0 chunks/s · 6m40s elapsed · 37m47s left · notes/rag.md'
    """
    rate = e.embedded / max(e.seconds, 1e-9)
    left = (e.total - e.done) / rate if rate else float("inf")
    return (f"embedding {e.done:,}/{e.total:,} chunks · {rate:.1f} chunks/s · {duration(e.seconds)} elapsed"
            f" · {duration(left)} left · {e.note}")


def duration(seconds: float) -> str:
    """A short human duration.

    >>> duration(9.4), duration(400), duration(4000), duration(float("inf"))
    ('9s', '6m40s', '1h06m', '?')
    """
    if not math.isfinite(seconds):
        return "?"
    s = round(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"

# ----------------------------------------------------------------------------
# Thinking models: their reasoning is not part of the answer.


def strip_think(pieces: Iterable[str]) -> Iterator[str]:
    """Drop <think>...</think> from a stream of text pieces, even when a tag is split.

    >>> "".join(strip_think(["<thi", "nk>hmm</think>", "\\nHello [1]"]))
    'Hello [1]'
    """
    buf, inside, started = "", False, False
    for piece in pieces:
        buf += piece
        while True:
            tag = "</think>" if inside else "<think>"
            at = buf.find(tag)
            if at >= 0:
                if not inside and buf[:at]:
                    started = True
                    yield buf[:at]
                buf, inside = buf[at + len(tag):], not inside
                continue
            keep = next((k for k in range(len(tag) - 1, 0, -1) if buf.endswith(tag[:k])), 0)
            out, buf = (buf[:len(buf) - keep], buf[len(buf) - keep:])
            if inside:
                out = ""
            if not started:
                out = out.lstrip()        # no blank lines where a think block was
            if out:
                started = True
                yield out
            break
    if buf and not inside:
        yield buf if started else buf.lstrip()


if __name__ == "__main__":
    sys.exit(main())
