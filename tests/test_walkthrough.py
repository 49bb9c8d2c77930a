"""The notebook and --explain: the teaching material must run, not rot."""
from __future__ import annotations

import doctest
import json
import re
import shutil
import subprocess
import sys

import pytest

import demo_rag as rag
from conftest import ROOT, user_env

RUN_CELLS = """
import json, sys
cells = [c for c in json.load(open(sys.argv[1], encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
ns = {}
for number, cell in enumerate(cells, 1):
    print(f"--- cell {number}", flush=True)
    exec(compile("".join(cell["source"]), f"cell {number}", "exec"), ns)
"""


def test_notebook_runs_top_to_bottom(server, tmp_path):
    # A copy of the project, so the notebook's cache lands in tmp_path, not in this checkout.
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "demo_rag.py", project)
    shutil.copytree(ROOT / "demo-data", project / "demo-data")
    shutil.copytree(ROOT / "examples", project / "examples")
    notebook = project / "examples" / "walkthrough.ipynb"
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    assert all(c.get("outputs", []) == [] for c in cells if c["cell_type"] == "code"), "commit it with outputs cleared"
    out = subprocess.run([sys.executable, "-c", RUN_CELLS, str(notebook)], cwd=project / "examples",
                         capture_output=True, text=True, env={**__import__("os").environ, "OLLAMA_HOST": server.url})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "python-asyncio.md › # Python asyncio › ## asyncio versus threads" in out.stdout
    assert "According to the notes" in out.stdout
    assert "searched for: What is asyncio? When should I use them instead of processes?" in out.stdout
    assert (project / ".demo-cache").is_dir()


def readme_block(heading: str) -> str:
    """The first ```python block under the README's `heading` line, as a reader copies it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.search(r"```python\n(.*?)```", readme.split(f"\n{heading}\n", 1)[1], re.S)[1]


def test_the_readme_s_notebook_example_answers_from_the_command_line_s_index(server, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "demo_rag.py", project)
    shutil.copytree(ROOT / "demo-data", project / "demo-data")
    env = user_env(server.url)
    question = "How do I cancel an asyncio task?"
    asked = subprocess.run([sys.executable, "demo_rag.py", question], cwd=project, env=env,
                           capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert asked.returncode == 0, asked.stderr
    caches = sorted((project / ".demo-cache").iterdir())
    embedded = sum(len(b["input"]) for b in server.of("/api/embed"))
    snippet = readme_block("## From a notebook")
    assert question in snippet and "open_notes" in snippet
    out = subprocess.run([sys.executable, "-c", snippet], cwd=project, env=env,
                         capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert out.returncode == 0, out.stderr
    assert "According to the notes" in out.stdout and "python-asyncio.md" in out.stdout
    assert "0 chunks embedded" in out.stderr             # the command line's summary line
    # the command line's cache, as it was: no second file, and only the question embedded
    assert sorted((project / ".demo-cache").iterdir()) == caches
    assert sum(len(b["input"]) for b in server.of("/api/embed")) == embedded + 1


def test_the_readme_s_worked_examples_run():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(>>> .*?)```", readme, re.S)
    assert blocks, "the README's check_citations example is gone"
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for number, block in enumerate(blocks):
        test = doctest.DocTestParser().get_doctest(block, {}, f"README {number}", "README.md", 0)
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def test_open_notes_opens_and_checks_the_index_as_a_run_does(server, notes, tmp_path, capsys):
    settings = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache")
    index, report, _ = rag.open_notes(settings)
    assert len(index.files) == 10 and "10 new" in capsys.readouterr().err
    before = len(server.of("/api/embed"))
    again, report, _ = rag.open_notes(settings, quiet=True)
    assert len(server.of("/api/embed")) == before and capsys.readouterr().err == ""
    assert again.fingerprint == index.fingerprint
    with pytest.raises(rag.UsageError, match="no note matches --source 'nothing/'"):
        rag.open_notes(rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache",
                                    source_filter="nothing/"), quiet=True)


def test_explain_narrates_every_step(cli, notes):
    out = cli("--explain", "What is BM25?", "--notes", notes)
    assert out.returncode == 0, out.stderr
    for step in ["STEP 1 · LOAD", "STEP 2 · FINGERPRINT", "STEP 3 · CHUNK", "STEP 4 · EMBED",
                 "STEP 5 · SEARCH", "STEP 6 · PROMPT", "STEP 7 · ANSWER"]:
        assert step in out.stdout
    assert "turned the question into 256 numbers" in out.stdout
    assert "cosine" in out.stdout and "BM25" in out.stdout and "fused" in out.stdout
    assert "[1] bm25.md" in out.stdout and "num_ctx 8192" in out.stdout
    assert "According to the notes" in out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) <= 80


def test_explain_says_why_every_source_goes_when_it_does(cli, notes, tmp_path):
    out = cli("--explain", "What is BM25?", "--notes", notes)
    assert "stands at least 50% as far above" in " ".join(out.stdout.split()), out.stdout    # 12 chunks: compared
    few = tmp_path / "few"
    few.mkdir()
    for name, text in [("kites", "Kites fly best in a steady wind of fifteen knots."),
                       ("tea", "Green tea steeps two minutes in water at eighty degrees."),
                       ("bikes", "Road tyres want eighty psi; gravel tyres want far less.")]:
        (few / f"{name}.md").write_text(f"# {name}\n\n{text}\n", encoding="utf-8")
    out = cli("--explain", "How do kites fly?", "--notes", few)
    said = " ".join(out.stdout.split())
    assert out.returncode == 0 and "all of them, since 3 chunks searched are too few" in said, out.stdout
    assert "stands at least" not in said


def test_explain_s_check_cites_each_sentence_s_line_under_its_headings(cli, server, tmp_path):
    # Step 8 names a sentence's line as every other printer names a source: path:line › headings.
    notes = tmp_path / "kettle"
    notes.mkdir()
    (notes / "kettle.md").write_text("# Kettle\n\n## Storage\n\nKeep it dry in the cupboard.\n\n"
                                     "## Descaling\n\nDescale it monthly with vinegar.\n", encoding="utf-8")
    server.answer = "Descale the kettle monthly with vinegar [1]."
    out = cli("--explain", "How do I descale the kettle?", "--notes", notes, "--min-score", 0)
    step = " ".join(out.stdout.split("STEP 8 · CHECK")[1].split())
    assert out.returncode == 0 and "1 supported at kettle.md:9 › # Kettle › ## Descaling: Descale" in step, out.stdout


def test_importing_the_module_leaves_a_notebook_s_garbage_collector_as_it_was():
    # The command line freezes what its imports built (gc.freeze); an import must not.
    code = "import gc, demo_rag; print(gc.isenabled(), gc.get_freeze_count())"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.split() == ["True", "0"], out.stderr
