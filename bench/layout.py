"""How demo_rag.py is laid out: its sections and their sizes, the names each part uses above
their definition, lines over 100 characters, and the trip one question takes through the file.

    python bench/layout.py                      # this checkout's demo_rag.py
    python bench/layout.py --rev 0db3315        # the file as a commit had it (git show)

No model and no Ollama: the file is parsed, not run. bench/layout.md holds the before/after.
"""
from __future__ import annotations

import argparse
import ast
import re
import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# One question from the command line to the printed answer: the functions it passes through.
TRIP = ["main", "parse_args", "ollama_client", "run_question", "open_index", "answer", "search",
        "rank", "build_messages", "stream_chat", "check_citations", "print_outcome"]


def defined(stmt: ast.stmt) -> list[str]:
    """The module-level names a top-level statement defines."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    targets = stmt.targets if isinstance(stmt, ast.Assign) else \
        [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def reads(node: ast.AST, local: frozenset[str] = frozenset()) -> set[str]:
    """The names `node` reads that no function around them binds: module-level names."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = node.args
        params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x}
        body = node.body if isinstance(node.body, list) else [node.body]
        stored = {n.id for s in body for n in ast.walk(s)
                  if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        outside = [*getattr(node, "decorator_list", []), *a.defaults, *a.kw_defaults,
                   getattr(node, "returns", None)]
        return {x for n in outside if n for x in reads(n, local)} | \
            {x for s in body for x in reads(s, local | params | stored)}
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        return set() if node.id in local else {node.id}
    return {x for child in ast.iter_child_nodes(node) for x in reads(child, local)}


def measure(source: str) -> dict:
    lines = source.splitlines()
    tree = ast.parse(source)
    parts = {m.group(1): i + 1 for i, line in enumerate(lines)
             if (m := re.match(r"# PART (I|II|III) · ", line))}
    bounds = {"preamble": (0, parts["I"]), "I": (parts["I"], parts["II"]),
              "II": (parts["II"], parts["III"]), "III": (parts["III"], 10**9)}
    part_of = lambda n: next(p for p, (a, b) in bounds.items() if a <= n < b)  # noqa: E731
    where = {}
    for stmt in tree.body:
        for name in defined(stmt):
            where.setdefault(name, stmt.lineno)
    above = {p: set() for p in bounds}
    for stmt in tree.body:
        p = part_of(stmt.lineno)
        above[p] |= {n for n in reads(stmt) if n in where and part_of(where[n]) == p
                     and where[n] > stmt.lineno}
    rule = re.compile(r"# (§[\w-]+ )?(-{20,}|={20,})")     # a banner's line, its marker first
    banners = [(i + 2, lines[i + 1][2:]) for i in range(len(lines) - 1)
               if rule.fullmatch(lines[i]) and lines[i + 1].startswith("# ")
               and not rule.fullmatch(lines[i + 1])]
    ends = [n - 1 for n, _ in banners[1:]] + [len(lines)]
    sections = [(title.split(":")[0], n, end - n + 1) for (n, title), end in zip(banners, ends)
                if n > parts["II"] and not title.startswith("PART")]
    trip = [where.get(f) for f in TRIP]
    steps = list(zip(trip, trip[1:])) if None not in trip else []
    return {
        "lines": len(lines),
        "part_lines": {p: min(b, len(lines) + 1) - a for p, (a, b) in bounds.items()},
        "above": {p: sorted(v) for p, v in above.items()},
        "over_100": sum(len(x) > 100 and "http" not in x for x in lines),
        "mean_line": statistics.mean(len(x) for x in lines if x.strip()),
        "sections": sections,
        "module_names": sum(len(defined(s)) for s in tree.body),
        "trip": list(zip(TRIP, trip)),
        "jumps_up": sum(b < a for a, b in steps), "jumps_down": sum(b > a for a, b in steps),
        "scroll": sum(abs(b - a) for a, b in steps),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", help="a commit: measure demo_rag.py as it was there")
    args = ap.parse_args()
    source = subprocess.run(["git", "show", f"{args.rev}:demo_rag.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout if args.rev else \
        (ROOT / "demo_rag.py").read_text(encoding="utf-8")
    m = measure(source)
    print(f"{m['lines']} lines, {m['module_names']} module-level names; parts (lines): "
          + ", ".join(f"{p} {n}" for p, n in m["part_lines"].items()))
    print("names used above their definition: "
          + ", ".join(f"Part {p} {len(v)}" for p, v in m["above"].items() if p != "preamble"))
    for p in ("II", "III"):
        if m["above"][p]:
            print(f"  Part {p}: {', '.join(m['above'][p])}")
    print(f"lines over 100 characters (URLs aside): {m['over_100']}; "
          f"mean non-blank line {m['mean_line']:.1f} characters")
    print(f"sections of Parts II and III: {len(m['sections'])}, the largest "
          f"{max(n for _, _, n in m['sections'])} lines")
    for title, start, n in m["sections"]:
        print(f"  {start:>5} {n:>4}  {title}")
    print("one question's trip: " + " -> ".join(f"{f} ({n})" for f, n in m["trip"]))
    print(f"  {m['jumps_up']} jumps up, {m['jumps_down']} down, {m['scroll']:,} lines of scrolling")


if __name__ == "__main__":
    main()
