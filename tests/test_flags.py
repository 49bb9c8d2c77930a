"""A setting is declared once (a Settings field with its flag), the modes are a table, and
--help is grouped: what the parser builds from them, and what it refuses."""
from __future__ import annotations

import dataclasses
import json
import re

import pytest

from conftest import run_cli

import demo_rag as rag


def test_every_setting_is_a_flag_whose_default_is_the_setting_s():
    args = rag.parse_args(["a question"])
    assert rag.settings_from(args) == rag.Settings()
    flags = [f.metadata["flag"] for f in dataclasses.fields(rag.Settings)]
    assert len(flags) == len(set(flags)) == len(dataclasses.fields(rag.Settings))


def test_a_flag_sets_its_field():
    args = rag.parse_args(["q", "--notes", "~/vault", "--top-k", "3", "--fusion", "rrf", "--keep-alive", "10m",
                           "--min-score", "0.5", "--follow-links", "--source", "work/*"])
    s = rag.settings_from(args)
    assert (s.top_k, s.fusion, s.keep_alive, s.min_score, s.follow_links, s.source_filter) == \
        (3, "rrf", "10m", 0.5, True, "work/*")
    assert s.notes_dir == rag.Path("~/vault").expanduser()


def test_help_is_one_screen_that_says_where_the_rest_is(server):
    out = run_cli("--help", host=server.url, env={"COLUMNS": "250"})    # a wide terminal too
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and len(lines) <= 60 and max(map(len, lines)) <= 100, out.stdout
    assert "python demo_rag.py --help-all" in out.stdout
    assert all(re.search(rf"^  {m.flag or 'question'} ", out.stdout, re.M) for m in rag.MODES)
    assert "--top-k" not in out.stdout and "--notes DIR" in out.stdout
    narrow = run_cli("--help", host=server.url, env={"COLUMNS": "1"})     # a terminal too narrow to wrap in
    assert narrow.returncode == 0 and narrow.stdout.startswith("usage: demo_rag.py"), narrow.stderr


def test_help_all_shows_every_flag_the_parser_has_with_its_help(server):
    out = run_cli("--help-all", host=server.url, env={"COLUMNS": "250"})
    assert out.returncode == 0 and max(map(len, out.stdout.splitlines())) <= 100
    flags = [s for a in rag.build_parser()._actions for s in a.option_strings]
    assert len(flags) >= 40 and all(re.search(rf"^  (-h, )?{f}\b", out.stdout, re.M) for f in flags)
    unwrapped = "".join(out.stdout.split())
    assert all("".join(o["help"].split()) in unwrapped for o in rag.all_options().values() if o["help"])


def test_help_all_is_grouped_with_examples(server):
    out = run_cli("--help-all", host=server.url)
    assert out.returncode == 0
    starts = [out.stdout.index(g + ":\n") for g in rag.GROUPS]
    assert starts == sorted(starts)                          # in the order GROUPS gives
    assert "examples:\n  python demo_rag.py" in out.stdout and out.stdout.count("\n  --") >= 28
    usage = out.stdout.split("\n\n")[0]
    assert all(m.flag in usage for m in rag.MODES)                       # every mode, from MODES
    examples = out.stdout[out.stdout.index("examples:"):]
    assert all(re.search(rf"python demo_rag.py {re.escape(arguments)} +{re.escape(what)}\n", examples)
               for m in rag.MODES for arguments, what in m.examples)
    # where Ollama is looked for, the switch for the gap log, and what each exit code means
    assert "OLLAMA_HOST" in out.stdout and rag.NO_LOG_ENV in out.stdout and rag.HYPERLINK_ENV in out.stdout
    codes = out.stdout[out.stdout.index("exit codes:"):]
    assert all(f"{code} " in codes for code in (0, 1, 2, 3, 130))


@pytest.mark.parametrize("args, says", [
    (["--chat", "--eval", "set.jsonl"], "choose one mode, not --chat and --eval"),
    (["--eval", "set.jsonl", "what?"], "--eval takes no question"),
    (["--explain"], "--explain needs a question to narrate"),
    (["--questions", "5", "what?"], "--questions goes with --make-eval"),
    (["--tune-chunk-sizes", "800", "--eval", "set.jsonl"], "--tune-chunk-sizes goes with --tune"),
    (["--chat", "--retrieve-only"], "--retrieve-only goes with a question or --explain"),
    (["--explain", "--show-prompt", "what?"], "--show-prompt goes with a question"),
    (["--chat", "--json"], "--json prints one object for a question, --eval, --make-eval, --tune or --gaps; "
                           "--chat prints text for people to read"),
    ([], "give a question, or --chat, --explain QUESTION, --eval FILE"),
])
def test_flags_that_do_not_go_together_are_one_line_and_exit_2(server, args, says):
    out = run_cli(*args, "--json", host=server.url) if "--json" not in args else run_cli(*args, host=server.url)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert json.loads(out.stdout.splitlines()[-1])["exit_code"] == 2      # --json: one object says it too
