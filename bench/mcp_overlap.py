"""Would checking the notes' stats in a thread, while the question is ranked, shorten an --mcp call?

Run from the project root, after `python bench/bench_mcp.py` has built its 50,000-chunk vault:

    python bench/mcp_overlap.py

Times, in this process, the median of 30 of each: McpServer.still_current() (a stat() of every
note, and Ollama asked for the model's build), rank() for one question, and the two at once, the
check in a thread. On the 2-core machine of bench/mcp.md the two at once took longer than one
after the other, which is why --mcp runs them in turn.
"""
from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]
import bench_mcp  # noqa: E402
import demo_rag as rag  # noqa: E402
from ollama_server import FakeOllama  # noqa: E402


def median_ms(f, n: int = 30) -> float:
    took = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        took.append(time.perf_counter() - t0)
    return statistics.median(took) * 1000


def main() -> None:
    with FakeOllama(dim=bench_mcp.DIM) as server:
        m, questions = bench_mcp.in_process(Path("/tmp/demo_rag-bench-mcp"), 50_000, server)
        s, q = m.settings, questions[1]
        qvec = rag.embed_query(m.client, q, s)

        def both() -> None:
            watch = threading.Thread(target=m.held.still_current)
            watch.start()
            rag.rank(m.held.index, q, qvec, s)
            watch.join()
        check, ranking, together = median_ms(m.held.still_current), median_ms(lambda: rag.rank(m.held.index, q, qvec, s)), \
            median_ms(both)
    print(f"load average {os.getloadavg()[0]:.1f}; {len(m.held.watched[1]):,} notes, {len(m.held.index.chunks):,} chunks")
    print(f"stat check {check:.1f} ms, ranking {ranking:.1f} ms: one after the other {check + ranking:.1f} ms, "
          f"at once {together:.1f} ms")


if __name__ == "__main__":
    main()
