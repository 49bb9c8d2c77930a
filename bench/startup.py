"""What a run of demo_rag.py spends before it opens the index: the interpreter, the imports,
compiling the script, and running its module body (definitions, regexes, dataclasses).

    python bench/startup.py                   # 15 runs of each, medians
    python bench/startup.py --runs 31 --against /path/to/old/checkout

Each figure is a fresh process, so nothing is warm but the OS's file cache. The script runs
as a user runs it (`python demo_rag.py --help` parses the flags and prints, nothing more).
No model and no Ollama are involved. bench/startup.md holds the measured tables.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Each probe prints how many seconds its part took, measured inside the process (perf_counter),
# except "whole": the process from start to exit, measured from outside.
PROBES = {
    "interpreter alone": "pass",
    "its third-party imports": "import numpy, httpx, ollama",
    "compiling the script": "import sys, time; s = open(sys.argv[1], encoding='utf-8').read(); "
                            "t = time.perf_counter(); compile(s, sys.argv[1], 'exec'); "
                            "print(time.perf_counter() - t)",
    "the module body, imports aside": "import sys, time, types, numpy, httpx, ollama; "
                                      "c = compile(open(sys.argv[1], encoding='utf-8').read(), "
                                      "sys.argv[1], 'exec'); m = types.ModuleType('demo_rag'); "
                                      "m.__file__ = sys.argv[1]; sys.modules['demo_rag'] = m; "
                                      "t = time.perf_counter(); exec(c, m.__dict__); "
                                      "print(time.perf_counter() - t)",
}


def timed(args: list[str]) -> tuple[float, str]:
    t = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return time.perf_counter() - t, out


def measure(script: Path, runs: int) -> dict[str, float]:
    results: dict[str, list[float]] = {name: [] for name in [*PROBES, "whole: demo_rag.py --help"]}
    for _ in range(runs):                 # interleaved, so a busy moment costs every probe alike
        for name, code in PROBES.items():
            took, out = timed([sys.executable, "-c", code, str(script)])
            results[name].append(float(out) if out.strip() else took)
        took, _ = timed([sys.executable, str(script), "--help"])
        results["whole: demo_rag.py --help"].append(took)
    return {name: statistics.median(v) for name, v in results.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--against", type=Path, help="another checkout, measured alongside")
    args = ap.parse_args()
    scripts = {"this checkout": ROOT / "demo_rag.py"}
    if args.against:
        scripts["against"] = args.against / "demo_rag.py"
    table = {label: measure(path, args.runs) for label, path in scripts.items()}
    print(f"Python {sys.version.split()[0]}, medians of {args.runs} runs, seconds")
    print("| part | " + " | ".join(table) + " |\n|---|" + "---:|" * len(table))
    for name in next(iter(table.values())):
        print(f"| {name} | " + " | ".join(f"{t[name]:.3f}" for t in table.values()) + " |")


if __name__ == "__main__":
    main()
