#!/usr/bin/env python3
"""Count the chunks that hold headings and nothing else, as one version of demo_rag.py cuts a
folder's notes (read and chunked as the command line does; nothing is embedded).

    python bench/chunk_headings.py demo-data bench/obsidian-vault /tmp/zh-news
    python bench/chunk_headings.py --script /tmp/before/demo_rag.py demo-data   # an older version

Prints one Markdown row per folder: notes, chunks, heading-only chunks (share), the longest chunk
in characters, and how many chunks are longer than --chunk-size.
"""
import argparse
import importlib.util
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# A line that is a Markdown heading ("## Setup"), as demo_rag's LEADING_HEADINGS reads one.
HEADING_LINE = re.compile(r"[ \t]*#{1,6}[ \t][^\n]*")


def load(script: Path):
    spec = importlib.util.spec_from_file_location("demo_rag_under_test", script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def headings_only(text: str) -> bool:
    """Whether every line of a chunk is a heading or blank (so it answers nothing)."""
    return all(HEADING_LINE.fullmatch(line) or not line.strip() for line in text.split("\n"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="+", type=Path)
    p.add_argument("--script", type=Path, default=HERE.parent / "demo_rag.py")
    p.add_argument("--chunk-size", type=int, default=1500)
    p.add_argument("--chunk-overlap", type=int, default=80)
    args = p.parse_args()
    rag = load(args.script)
    splitter = rag.make_splitter(args.chunk_size, args.chunk_overlap)
    print(f"| folder ({args.script}) | notes | chunks | heading-only | longest | over {args.chunk_size} |")
    print("|---|---|---|---|---|---|")
    for folder in args.folders:
        files, _ = rag.scan_notes(folder)
        chunks, notes = [], 0
        for f in files:
            try:
                sections, _ = rag.read_note(f)
            except ValueError:            # skipped by the command line too
                continue
            notes += 1
            chunks += rag.chunk_sections(f.rel, sections, splitter)
        alone = sum(headings_only(c.text) for c in chunks)
        longest = max((len(c.text) for c in chunks), default=0)
        over = sum(len(c.text) > args.chunk_size for c in chunks)
        print(f"| {folder} | {notes:,} | {len(chunks):,} | {alone:,} ({alone / max(len(chunks), 1):.1%}) "
              f"| {longest:,} | {over:,} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
