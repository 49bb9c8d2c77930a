"""A first build's first minute, as a newcomer sees it: how long until the run says anything,
until its first progress line, and until the first word of the answer.

    python bench/first_minute.py                          # this checkout, 1.0 s a batch
    python bench/first_minute.py --against /tmp/main      # and another checkout alongside
    python bench/first_minute.py --delay 30 --first-lines      # a CPU embedder's 30 s batch

A folder of `--notes` notes of three sections (334: 1,002 chunks at --chunk-size 300) is asked
one question on a first build, once with stderr and stdout on a pseudo-terminal (a user's shell)
and once on pipes (a log, CI). Ollama is the tests' stand-in (tests/ollama_server.py), each
embed request taking `--delay` seconds, as a CPU embedder's batch of 32 would; its chat model
answers at once, so the last column is the build's cost. --first-lines stops each run at its
first progress line (a slow batch's build would take many minutes). bench/first-minute.md holds
the tables.
"""
from __future__ import annotations

import argparse
import os
import pty
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from ollama_server import FakeOllama  # noqa: E402
from test_index import make_vault  # noqa: E402

QUESTION = "What does note 7 explain about kites?"


def marks(text: str, t0: float, times: list[tuple[float, str]]) -> dict[str, float | None]:
    """Seconds to the first output, the first progress line and the first word of the answer,
    from (time, text so far) pairs."""
    def first(found) -> float | None:
        return next((t - t0 for t, seen in times if found(seen)), None)
    return {"first line": first(lambda s: s.strip()),
            "first progress": first(lambda s: "  embedding " in s),
            "first answer word": first(lambda s: "Answer:" in s
                                       and s.split("Answer:", 1)[1].strip())}


def run(script: Path, host: str, folder: Path, terminal: bool,
        first_lines: bool = False) -> dict[str, float | None]:
    cache = Path(tempfile.mkdtemp())
    args = [sys.executable, str(script), QUESTION, "--notes", str(folder), "--cache", str(cache),
            "--chunk-size", "300", "--chunk-overlap", "0"]
    env = {**os.environ, "OLLAMA_HOST": host, "DEMO_RAG_NO_LOG": "1", "COLUMNS": "120"}
    env.pop("PYTHONUNBUFFERED", None)     # a user's shell does not set it
    times: list[tuple[float, str]] = []
    seen = ""
    t0 = time.monotonic()
    if terminal:
        leader, follower = pty.openpty()
        p = subprocess.Popen(args, stdin=follower, stdout=follower, stderr=follower, env=env)
        os.close(follower)
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:
                break
            if not data:
                break
            seen += data.decode("utf-8", "replace")
            times.append((time.monotonic(), seen))
            if first_lines and "  embedding " in seen:
                p.kill()
        os.close(leader)
    else:
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        lock = threading.Lock()
        texts = {"out": "", "err": ""}

        def pump(stream, name):
            for line in iter(stream.readline, b""):
                with lock:
                    texts[name] += line.decode("utf-8", "replace")
                    times.append((time.monotonic(), texts["err"] + texts["out"]))
                    if first_lines and "  embedding " in texts["err"]:
                        p.kill()
        readers = [threading.Thread(target=pump, args=(p.stdout, "out")),
                   threading.Thread(target=pump, args=(p.stderr, "err"))]
        for r in readers:
            r.start()
        for r in readers:
            r.join()
    p.wait(timeout=600)
    return marks(seen, t0, times) | {"exit": p.returncode}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay", type=float, default=1.0, help="seconds per embed request")
    ap.add_argument("--notes", type=int, default=334, help="notes of three chunks each")
    ap.add_argument("--against", type=Path, help="another checkout, measured too")
    ap.add_argument("--first-lines", action="store_true", help="stop at the first progress line")
    ap.add_argument("--runs", type=int, default=1, help="rounds, interleaved; medians shown")
    args = ap.parse_args()
    folder = make_vault(Path(tempfile.mkdtemp()) / "vault", n=args.notes)
    checkouts = [("this checkout", ROOT)] + ([("against", args.against)] if args.against else [])
    print(f"{args.notes * 3:,} chunks, {args.delay} s per embed request (32 texts at most)\n")
    print("| checkout | stderr | first line | first progress | first answer word |")
    print("|---|---|---|---|---|")
    keys = ("first line", "first progress", "first answer word")
    got: dict[tuple[str, bool], list[dict]] = {}
    with FakeOllama(embed_delay=args.delay) as server:
        for _ in range(args.runs):        # interleaved: a busy moment costs every checkout alike
            for name, root in checkouts:
                for terminal in (True, False):
                    got.setdefault((name, terminal), []).append(
                        run(root / "demo_rag.py", server.url, folder, terminal, args.first_lines))
    for (name, terminal), runs in got.items():
        cells = []
        for k in keys:
            seen = [m[k] for m in runs if m[k] is not None]
            cells.append(f"{statistics.median(seen):.1f} s" if len(seen) == len(runs) else "—")
        exits = {m["exit"] for m in runs} - {0, -9}
        print(f"| {name} | {'terminal' if terminal else 'pipe'} | " + " | ".join(cells)
              + (f" (exit {exits})" if exits else "") + " |")

if __name__ == "__main__":
    main()
