"""Time the walk of a notes folder: walk_folders() alone, and scan_notes() (the walk and a stat of
each note), against os.walk for reference, on two folders made in a temporary directory:
5,000 notes in 220 folders (20 folders of 10 folders each, the notes spread evenly) and a chain
of 100 folders, one inside the other, a note in each. Best of 20 runs each.

    python bench/walk.py                          # this checkout's demo_rag.py
    python bench/walk.py --script /tmp/before.py  # another copy, e.g. git show HEAD~1:demo_rag.py

Results: bench/index-speed-memory.md, "The walk of the notes folder".
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load(script: Path):
    spec = importlib.util.spec_from_file_location("demo_rag_walked", script)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)   # for dataclasses
    spec.loader.exec_module(module)
    return module


def wide(top: Path, notes: int = 5000) -> Path:
    folders = [top / f"area-{i:02d}" / f"topic-{j}" for i in range(20) for j in range(10)]
    folders += sorted({f.parent for f in folders})            # 200 + 20 = 220 folders
    for f in folders:
        f.mkdir(parents=True, exist_ok=True)
    for n in range(notes):
        (folders[n % len(folders)] / f"note-{n:05d}.md").write_text(f"# Note {n}\n\nwords\n")
    return top


def chain(top: Path, depth: int = 100) -> Path:
    folder = top
    for level in range(depth):
        folder = folder / f"level-{level:03d}"
        folder.mkdir(parents=True)
        (folder / "note.md").write_text(f"# Level {level}\n\nwords\n")
    return top


def best(run, times: int = 20) -> float:
    took = []
    for _ in range(times):
        t0 = time.perf_counter()
        run()
        took.append(time.perf_counter() - t0)
    return min(took) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--script", type=Path, default=ROOT / "demo_rag.py")
    rag = load(ap.parse_args().script)
    with tempfile.TemporaryDirectory() as tmp:
        folders = {"5,000 notes in 220 folders": wide(Path(tmp, "wide")),
                   "a chain 100 folders deep": chain(Path(tmp, "deep"))}
        print("| folder | walk_folders | scan_notes | os.walk | notes found |")
        print("|---|---:|---:|---:|---:|")
        for name, top in folders.items():
            said: list[str] = []
            walked = best(lambda: [0 for _ in rag.walk_folders(str(top), said)])
            scanned = best(lambda: rag.scan_notes(top))
            by_path = best(lambda: [0 for _ in os.walk(top)])
            found = len(rag.scan_notes(top)[0])
            assert not said and found == (5000 if "5,000" in name else 100), (said, found)
            print(f"| {name} | {walked:.1f} ms | {scanned:.1f} ms | {by_path:.1f} ms | {found:,} |",
                  flush=True)


if __name__ == "__main__":
    sys.exit(main())
