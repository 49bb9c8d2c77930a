#!/usr/bin/env python3
"""--serve measured: the page's first byte, a question's first streamed word on the page and on
the command line against the same server, and the memory a serving process adds.

Run from the project root (offline; the tests' stand-in Ollama, tests/ollama_server.py, serves
its hashed 1,024-dim embedder and its template chat model over HTTP on 127.0.0.1):

    python bench/bench_serve.py                 # writes nothing; prints the table bench/serve.md holds
    python bench/bench_serve.py --runs 50

- first byte: a new connection's GET / (the page, with the token's cookie) until the first byte
  of the response, `runs` times, median and 90th percentile;
- first word on the page: POST /ask until the first {"token": ...} line of the streamed answer
  (the fetch the page makes), and the same in headless chromium when selenium and chromium are
  here (the question typed and Enter pressed, until the answer's first text shows);
- first word on the command line: what run_question does once its index is open (answer(), in
  this process, until its first piece: the engine without the page), and `python demo_rag.py
  QUESTION` started until the first word after "Answer:" on its stdout (a new process each
  time, as a user runs it); the index is built before the clock starts, for all;
- memory: VmRSS of the --serve process once it printed its URL (idle), after every question,
  and of a process that only imported demo_rag, for scale.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from ollama_server import FakeOllama  # noqa: E402

QUESTIONS = ["What is BM25?", "How many grams of coffee for 240 g of water?",
             "How do I undo the last commit?", "什么是 RAG？", "How often should I water a snake plant?"]


def rss_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", text).group(1)) / 1024


def spread(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    return f"{statistics.median(ms):.1f} ms (p90 {ms[int(len(ms) * 0.9) - 1]:.1f}, n={len(ms)})"


def start_serve(env: dict, notes: Path, cache: Path) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, str(ROOT / "demo_rag.py"), "--serve", "--port", "0",
                          "--notes", str(notes), "--cache", str(cache)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout:
        if "token=" in line:
            return p, line.strip()
    raise SystemExit("--serve printed no URL")


def first_byte(port: int, cookie: str) -> float:
    t = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request("GET", "/", headers={"Host": f"127.0.0.1:{port}", "Cookie": cookie})
    r = c.getresponse()
    r.read(1)
    took = time.perf_counter() - t
    r.read()
    c.close()
    return took


def page_first_word(port: int, cookie: str, question: str) -> float:
    host = f"127.0.0.1:{port}"
    t = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request("POST", "/ask", json.dumps({"question": question}),
              {"Host": host, "Cookie": cookie, "Origin": f"http://{host}"})
    r = c.getresponse()
    took = None
    for line in r:
        if took is None and b'"token"' in line:
            took = time.perf_counter() - t
    c.close()
    return took


def cli_first_word(env: dict, notes: Path, cache: Path, question: str) -> float:
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, str(ROOT / "demo_rag.py"), "--notes", str(notes),
                          "--cache", str(cache), question], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    seen = b""
    while b"Answer:\n" not in seen or not seen.split(b"Answer:\n", 1)[1].strip():
        chunk = os.read(p.stdout.fileno(), 4096)
        if not chunk:
            break
        seen += chunk
    took = time.perf_counter() - t
    p.wait()
    return took


def engine_first_word(url: str, notes: Path, cache: Path, runs: int) -> list[float]:
    """What the command line's run_question does once its index is open, in this process:
    answer() until its first piece (no process start, no HTTP)."""
    sys.path.insert(0, str(ROOT))
    import demo_rag as rag
    import ollama
    client = ollama.Client(host=url)
    settings = rag.Settings(notes_dir=notes, cache_dir=cache)
    index, _ = rag.open_index(settings, client)
    took = []
    for n in range(runs):
        t, first = time.perf_counter(), []
        rag.answer(client, index, QUESTIONS[n % len(QUESTIONS)], settings, rag.Conversation(),
                   on_token=lambda piece: first or first.append(time.perf_counter() - t))
        took.append(first[0])
    return took


def browser_first_word(url: str, runs: int) -> list[float] | None:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        return None
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    d = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    try:
        d.get(url)
        d.set_script_timeout(30)
        took = []
        for n in range(runs):
            took.append(d.execute_async_script("""
                const done = arguments[1], q = document.getElementById("q");
                const before = document.querySelectorAll("#log section").length, t = performance.now();
                q.value = arguments[0];
                document.getElementById("f").requestSubmit();
                (function look() {
                  const s = document.querySelectorAll("#log section")[before];
                  const text = s && s.querySelectorAll("p")[1].textContent;
                  if (text) done((performance.now() - t) / 1000); else requestAnimationFrame(look);
                })();""", QUESTIONS[n % len(QUESTIONS)]))
            time.sleep(0.3)               # the answer's end, before the next question
        return took
    finally:
        d.quit()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    notes, cache = work / "notes", work / "cache"
    shutil.copytree(ROOT / "demo-data", notes)
    with FakeOllama() as fake:
        env = {**os.environ, "OLLAMA_HOST": fake.url, "PYTHONIOENCODING": "utf-8"}
        env.pop("PYTHONUNBUFFERED", None)
        subprocess.run([sys.executable, str(ROOT / "demo_rag.py"), "--notes", str(notes),
                        "--cache", str(cache), "--retrieve-only", "warm"], env=env,
                       capture_output=True, check=True)
        imported = subprocess.Popen([sys.executable, "-c", "import demo_rag, sys; "
                                     "print(flush=True); sys.stdin.read()"], cwd=ROOT,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        imported.stdout.readline()
        p, url = start_serve(env, notes, cache)
        try:
            port = int(re.search(r":(\d+)/", url).group(1))
            cookie = f"demo_rag_{port}={url.split('token=')[1]}"
            time.sleep(1)
            idle, just_imported = rss_mb(p.pid), rss_mb(imported.pid)
            byte = [first_byte(port, cookie) for _ in range(args.runs)]
            page = [page_first_word(port, cookie, QUESTIONS[n % len(QUESTIONS)])
                    for n in range(args.runs)]
            asked = rss_mb(p.pid)
            cli = [cli_first_word(env, notes, cache, QUESTIONS[n % len(QUESTIONS)])
                   for n in range(max(5, args.runs // 4))]
            engine = engine_first_word(fake.url, notes, cache, args.runs)
            browser = browser_first_word(url, args.runs)
            after_browser = rss_mb(p.pid)
        finally:
            p.terminate()
            p.wait()
            imported.kill()
    shutil.rmtree(work, ignore_errors=True)
    print(f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}; stand-in Ollama (tests/ollama_server.py)")
    print(f"page's first byte (GET /)                      {spread(byte)}")
    print(f"first streamed word, page's stream (POST /ask) {spread(page)}")
    if browser:
        print(f"first streamed word, in chromium (Enter->text) {spread(browser)}")
    print(f"first streamed word, the command line's answer() once its index is open "
          f"{spread(engine)}")
    print(f"first streamed word, command line (new process) {spread(cli)}")
    print(f"memory: a process that imported demo_rag {just_imported:.1f} MB; --serve idle "
          f"{idle:.1f} MB (+{idle - just_imported:.1f}); after {args.runs} questions "
          f"{asked:.1f} MB (+{asked - idle:.1f} over idle); after the browser's "
          f"{after_browser:.1f} MB (+{after_browser - idle:.1f})")


if __name__ == "__main__":
    main()
