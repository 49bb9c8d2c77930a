"""Mutation check (a development tool, not collected by pytest, not run in CI).

Applies each break below to a scratch copy of the project, runs the tests that reach it
(stopping at the first failure) and prints which breaks the suite caught:

    python tests/mutate.py                 # every break
    python tests/mutate.py cache mrr       # only the breaks whose description contains a word

A break whose `old` snippet is not found exactly once in demo_rag.py is reported as
NOT FOUND / AMBIGUOUS, never as caught: demo_rag.py is being restructured, so update
the snippets in MUTATIONS (the only list to keep up to date) when that happens.
Exit status: 0 when every break was caught, 1 otherwise.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = "demo_rag.py"

# (description, old snippet, new snippet, pytest arguments selecting the tests that reach it)
MUTATIONS: list[tuple[str, str, str, list[str]]] = [
    ("unpickler accepts builtins (exec, eval, getattr gadgets)",
     '        raise self.Refused(f"refusing to load {module}.{name} from a cache file")',
     '        if module == "builtins":\n            return super().find_class(module, name)\n'
     '        raise self.Refused(f"refusing to load {module}.{name} from a cache file")',
     ["tests/test_index.py", "-k", "gadgets or crafted"]),
    ("unpickler accepts copyreg and subprocess",
     '        raise self.Refused(f"refusing to load {module}.{name} from a cache file")',
     '        if module in ("copyreg", "subprocess"):\n            return super().find_class(module, name)\n'
     '        raise self.Refused(f"refusing to load {module}.{name} from a cache file")',
     ["tests/test_index.py", "-k", "gadgets or crafted"]),
    ("unpickler accepts os.system",
     '        raise self.Refused(f"refusing to load {module}.{name} from a cache file")',
     '        if module in ("os", "posix", "nt"):\n            return super().find_class(module, name)\n'
     '        raise self.Refused(f"refusing to load {module}.{name} from a cache file")',
     ["tests/test_index.py", "-k", "gadgets or crafted"]),
    ("fingerprint fast path removed (every run rewrites the cache)",
     "    if old is not None and old.fingerprint == fingerprint(files) and old.complete:",
     "    if False:",
     ["tests/test_index.py", "-k", "warm_run or unchanged_vault"]),
    ("stat check removed (every changed run hashes every note)",
     "        if rec and same_stat(rec, f):",
     "        if False:",
     ["tests/test_index.py", "-k", "warm_run or unchanged_vault"]),
    ("confidence() ignores its meaning (cosine) term",
     "    return words + meaning_found(max(float(dense[row]) for row in hit_rows), median(dense[rows]))",
     "    return words",
     ["tests/test_steps.py", "tests/test_hybrid.py", "-k", "confidence or known_ranks"]),
    ("query rewrites keep <think>...</think>",
     "    text = \"\".join(strip_think([reply.message.content or \"\"])).strip().strip('\"').splitlines()",
     "    text = (reply.message.content or \"\").strip().strip('\"').splitlines()",
     ["tests/test_chat.py", "-k", "rewrite"]),
    ("single answers always send num_ctx 4096",
     '    return stream_chat(client, settings.chat_model, messages, context_size(messages, num_ctx), settings.keep_alive)',
     '    return stream_chat(client, settings.chat_model, messages, 4096, settings.keep_alive)',
     ["tests/test_cli.py", "-k", "long_prompt or show_prompt"]),
    ("dense search runs on a partly embedded index",
     "    if qvec is not None and index.vectors.shape[1] == len(qvec) and index.has_vector[rows].all():",
     "    if qvec is not None and index.vectors.shape[1] == len(qvec):",
     ["tests/test_index.py", "tests/test_hybrid.py", "-k", "partly or lexical"]),
    ("cache written in place instead of temp file + os.replace",
     '    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")',
     "    fd, tmp = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), str(path)",
     ["tests/test_index.py", "tests/test_cli.py", "-k", "fails_part_way or two_processes or ctrl_c_during"]),
    ("fusion ignores the evidence each ranker found (equal weights)",
     '    return weighted_z_scores(parts, {name: evidence[name] ** EVIDENCE_POWER for name in parts})',
     '    return weighted_z_scores(parts, dict.fromkeys(parts, 1.0))',
     ["tests/test_steps.py", "tests/test_doctests.py", "-k", "fusion or docstring"]),
    ("fusion weighs the evidence linearly (no power: a weak embedder flips close keyword calls)",
     "    return weighted_z_scores(parts, {name: evidence[name] ** EVIDENCE_POWER for name in parts})",
     "    return weighted_z_scores(parts, {name: evidence[name] for name in parts})",
     ["tests/test_steps.py", "-k", "fusion or weak"]),
    ("the quick exit drops the output still buffered",
     "    for stream in (sys.stdout, sys.stderr):",
     "    for stream in ():",
     ["tests/test_index.py", "-k", "quick_exit"]),
    ("the floor's meaning ignores the embedder's scale (raw cosine)",
     "    return min(1.0, max(0.0, (best - typical) / (1 - typical))) if typical < 1 else 0.0   # 1: float32 rounding",
     "    return best",
     ["tests/test_steps.py", "tests/test_hybrid.py", "-k", "confidence or known_ranks"]),
    ("MRR computed as hit@10",
     "    mrr = sum(1 / r for r in ranks if r is not None and r <= EVAL_DEPTH) / n",
     "    mrr = sum(1 for r in ranks if r is not None and r <= EVAL_DEPTH) / n",
     ["tests/test_steps.py", "tests/test_hybrid.py", "-k", "metrics or known_ranks or documented"]),
    ("hit@3 and hit@5 equal to hit@1",
     '"hit@3": hit(3), "hit@5": hit(5),',
     '"hit@3": hit(1), "hit@5": hit(1),',
     ["tests/test_steps.py", "tests/test_hybrid.py", "-k", "metrics or known_ranks or documented"]),
    ("the floor's declined count inverted",
     '            floor["unanswerable_refused"] += not found',
     '            floor["unanswerable_refused"] += found',
     ["tests/test_hybrid.py", "-k", "known_ranks or documented"]),
    ("single answer buffered and printed at the end",
     "            shown.append(piece)\n            if echo:\n                print(piece, end=\"\", flush=True)\n"
     "        if echo:\n            print()\n",
     "            shown.append(piece)\n        if echo:\n            print(\"\".join(shown), flush=True)\n",
     ["tests/test_cli.py", "-k", "streams or ctrl_c_mid"]),
    ("per-request character limit for embedding ignored",
     "                      or sum(map(len, batch)) + len(text) > EMBED_BATCH_CHARS):",
     "                      or False):",
     ["tests/test_index.py", "-k", "character_limit"]),
    ("CLI ignores --top-k",
     "chunk_overlap=args.chunk_overlap, top_k=args.top_k,",
     "chunk_overlap=args.chunk_overlap, top_k=TOP_K,",
     ["tests/test_cli.py", "-k", "top_k"]),
    ("CLI ignores --query-instruction",
     "query_instruction=args.query_instruction, max_note_mb=args.max_note_mb,",
     "query_instruction=None, max_note_mb=args.max_note_mb,",
     ["tests/test_cli.py", "-k", "query_instruction"]),
    ("CLI ignores --max-note-mb",
     "query_instruction=args.query_instruction, max_note_mb=args.max_note_mb,",
     "query_instruction=args.query_instruction, max_note_mb=MAX_NOTE_MB,",
     ["tests/test_cli.py", "-k", "max_note_mb"]),
    ("CLI ignores --rebuild",
     "        index, report = open_index(settings, client, rebuild, line)",
     "        index, report = open_index(settings, client, \"\", line)",
     ["tests/test_cli.py", "-k", "rebuild"]),
    ("Part I's fusion ranks every chunk by words, not only those holding a question word",
     "[:np.count_nonzero(lexical)]   # chunks with a question word",
     "   # every chunk",
     ["tests/test_layers.py", "-k", "rank_the_same or replaces"]),
    ("Part I's BM25 without saturation",
     "saturated(f[rows], lengths[rows], float(lengths.mean()))",
     "f[rows]",
     ["tests/test_layers.py", "tests/test_doctests.py", "-k", "rank_the_same or replaces or doctest"]),
    ("Part I's cache is used whatever changed",
     "        if data[\"stamp\"] != stamp:",
     "        if False:",
     ["tests/test_layers.py", "-k", "caches"]),
    ("Part I's cache is unpickled with plain pickle",
     "            data = BuiltinsOnlyUnpickler(f).load()\n        if data[\"stamp\"]",
     "            data = pickle.load(f)\n        if data[\"stamp\"]",
     ["tests/test_layers.py", "-k", "unpickles"]),
    ("a mode's set-up ignores --progress-seconds",
     "    index, report, took = index_with_progress(settings, client, rebuild, quiet, args.progress_seconds)",
     "    index, report, took = index_with_progress(settings, client, rebuild, quiet)",
     ["tests/test_modes.py", "-k", "progress"]),
    ("a mode's set-up skips the --source check",
     "    if not source_mask(index, settings.source_filter).any():\n        raise UsageError",
     "    if False:\n        raise UsageError",
     ["tests/test_modes.py", "-k", "source"]),
    ("a notebook's --top-k is not capped",
     "min(settings.top_k, top_k_limit(settings.chunk_size))",
     "settings.top_k",
     ["tests/test_modes.py", "-k", "capped"]),
    ("an incremental build loses the BM25 postings of the notes it reuses",
     "        parts.append(reused_postings(old, rows, src, term_id))",
     "        pass",
     ["tests/test_index.py", "tests/test_hybrid.py", "tests/test_build.py"]),
    ("terminal output passes control characters through",
     "        return self.raw.write(text.translate(CONTROL_ESCAPES))",
     "        return self.raw.write(text)",
     ["tests/test_hostile.py", "-k", "escape or json_output"]),
    ("file names keep their line breaks",
     "    return os.fsencode(name.translate(NAME_ESCAPES)).decode(\"utf-8\", \"backslashreplace\")",
     "    return os.fsencode(name).decode(\"utf-8\", \"backslashreplace\")",
     ["tests/test_hostile.py", "-k", "forges"]),
    ("symlinks out of the notes folder are followed",
     "        return os.path.commonpath([root, real]) == root or \\\n",
     "        return True or \\\n",
     ["tests/test_hostile.py", "-k", "links"]),
    ("--follow-links follows a link to / or /proc",
     "            follow_links and real != \"/\" and not any(os.path.commonpath([real, top]) == top for top in SYSTEM_TREES)",
     "            follow_links",
     ["tests/test_hostile.py", "tests/test_odd_inputs.py", "-k", "links or fifo"]),
    ("a second Ctrl-C during a save aborts it",
     "        with interrupts_deferred(notice) as came:",
     "        with contextlib.nullcontext([]) as came:",
     ["tests/test_hostile.py", "-k", "second_interrupt"]),
    ("--make-eval glues its first line onto a last line without a line break",
     "    if path.exists() and path.stat().st_size and not path.read_bytes().endswith(b\"\\n\"):",
     "    if False:",
     ["tests/test_hostile.py", "-k", "make_eval_appends"]),
    ("an embed reply with the wrong number of vectors is reshaped",
     "            if rows.ndim != 2 or len(rows) != len(batch):         # a server may send anything",
     "            if False:",
     ["tests/test_hostile.py", "-k", "does_not_fit"]),
    ("a chunk vector that is not a number is stored",
     "            finite = np.isfinite(fresh).all(axis=1)",
     "            finite = np.ones(len(fresh), dtype=bool)",
     ["tests/test_hostile.py", "-k", "bare_nan"]),
    ("a batch Ollama refuses for a NaN costs every chunk after it its vector",
     "            if not NOT_A_NUMBER.search(str(e)):\n                raise\n            refusal = e",
     "            raise\n            refusal = e",
     ["tests/test_hostile.py", "-k", "cannot_embed"]),
    ("a refused chunk is ranked with its zero vector's cosine",
     "    if len(zero) and len(zero) < len(rows):\n        dense[zero] = median(dense[np.setdiff1d(rows, zero)])",
     "    if False:\n        dense[zero] = median(dense[np.setdiff1d(rows, zero)])",
     ["tests/test_hostile.py", "-k", "near_0_8"]),
    ("any error that mentions NaN is taken for a refusal",
     'NOT_A_NUMBER = re.compile(r"NaN or Inf values|unsupported value: NaN")',
     'NOT_A_NUMBER = re.compile(r"\\bNaN\\b")',
     ["tests/test_hostile.py", "-k", "only_names"]),
    ("a model that refuses every text is asked text by text on every run",
     "                if not any_vector and n == 3:",
     "                if False:",
     ["tests/test_hostile.py", "-k", "refuses_every_text"]),
    ("the fusion's cosine counts in full from the probes' most (no reach beyond it)",
     "    top = highest + PROBE_REACH * (highest - typical)",
     "    top = highest",
     ["tests/test_doctests.py"]),
    ("a calibration is kept whatever probes it was measured with",
     "    rule = repr((FLOOR_PROBES, FLOOR_MARGIN, MIN_SCORE, OFF_TOPIC_COVERAGE, MIN_CALIBRATION_PROBES))",
     "    rule = ''",
     ["tests/test_floor.py", "-k", "other_probes"]),
    ("a probe the model refuses costs the whole calibration",
     "    # A probe the model returns no number for is left out, as a chunk would be.",
     "    if None in got:\n        return None",
     ["tests/test_floor.py", "-k", "cannot_embed"]),
    ("--explain keeps the index's warnings to itself",
     "    err(*(f\"warning: {w}\" for w in report.warnings))   # what a question's run would say too",
     "    pass",
     ["tests/test_hostile.py", "-k", "cannot_embed"]),
    ("a refused chunk's zero vector is reused for an edited note",
     "            usable = old.has_vector & old.vectors.any(axis=1)",
     "            usable = old.has_vector",
     ["tests/test_hostile.py", "-k", "edited_note"]),
    ("refused chunks leave the index incomplete (keywords only, never calibrated)",
     "    if dim:\n        has_vector[report.refused] = True",
     "    if False:\n        has_vector[report.refused] = True",
     ["tests/test_hostile.py", "-k", "cannot_embed"]),
    ("a question vector that is not a number is searched with",
     "        if qvec is not None and not np.isfinite(qvec).all():",
     "        if False:",
     ["tests/test_hostile.py", "-k", "nan_question"]),
    ("a connection closed mid-answer is called unreachable",
     "            raise explain_ollama_error(e, self.model, mid_reply=started) from None",
     "            raise explain_ollama_error(e, self.model) from None",
     ["tests/test_hostile.py", "-k", "broken_answer"]),
    ("--json leaves out the answer's error",
     "            \"tokens\": tokens, \"warnings\": warnings, \"error\": error,",
     "            \"tokens\": tokens, \"warnings\": warnings,",
     ["tests/test_hostile.py", "-k", "json_carries"]),
    ("an error that ends a --json run prints nothing on stdout",
     "        if args.json:                     # a script reading stdout learns what happened too",
     "        if False:",
     ["tests/test_hostile.py", "-k", "errors_under_json"]),
    ("num_ctx above the largest context",
     "    return min(MAX_NUM_CTX, next((size for size in NUM_CTX_LADDER if size >= tokens), MAX_NUM_CTX))",
     "    return next((size for size in NUM_CTX_LADDER if size >= tokens), tokens)",
     ["tests/test_hostile.py", "-k", "huge"]),
    ("num_ctx in steps of 1024 instead of the ladder's rungs (a reload per prompt length)",
     "    return min(MAX_NUM_CTX, next((size for size in NUM_CTX_LADDER if size >= tokens), MAX_NUM_CTX))",
     "    return min(MAX_NUM_CTX, max(NUM_CTX // 2, math.ceil(tokens / 1024) * 1024))",
     ["tests/test_cli.py", "tests/test_chat.py", "-k", "context_size or one_context or grows"]),
    ("a conversation's rewrite asks with its own context size",
     "                                     \"num_ctx\": context_size(messages, at_least=conv.num_ctx)})",
     "                                     \"num_ctx\": context_size(messages)})",
     ["tests/test_chat.py", "-k", "one_context or grows"]),
    ("--help does not exit 0",
     '    p = ArgumentParser(prog="demo_rag.py", ',
     '    p = ArgumentParser(add_help=False, prog="demo_rag.py", ',
     ["tests/test_cli.py", "-k", "help"]),
    ("non-404 Ollama errors (500, error line mid-stream) reported as not reachable",
     "    if isinstance(exc, ollama.ResponseError):\n"
     "        return OllamaError(f\"Ollama could not run '{model}': {exc.error}\")\n",
     "",
     ["tests/test_cli.py", "-k", "500 or error_line"]),
    ("every source is sent, however far below the best",
     "    return [h for h in hits if h.score - average >= SOURCE_CUT * (hits[0].score - average)]",
     "    return hits",
     ["tests/test_cli.py", "-k", "close_to_the_best"]),
    ("no preload of the chat model",
     '    threading.Thread(target=load, name="load the chat model", daemon=True).start()',
     "    pass",
     ["tests/test_loading.py", "-k", "asked_to_load"]),
    ("a preload with Ollama's default context size (a second load for the answer)",
     '            ollama_chat(ollama_client(timeout), settings.chat_model, [], {"num_ctx": NUM_CTX},',
     '            ollama_chat(ollama_client(timeout), settings.chat_model, [], {},',
     ["tests/test_loading.py", "-k", "asked_to_load"]),
    ("a model loaded with a larger context is asked for less (reloaded every run)",
     "    if loaded and loaded >= NUM_CTX:\n        return loaded",
     "    if False:\n        return loaded",
     ["tests/test_loading.py", "-k", "shrunk"]),
    ("a preload that keeps nothing (Ollama unloads the model)",
     "    if keep_alive_seconds(settings.keep_alive) < 1:",
     "    if False:",
     ["tests/test_loading.py", "-k", "keep_alive_zero"]),
    ("the calibrated floor ignored (the fixed one always)",
     "    if cal and lang in cal[\"floors\"]:\n        return cal[\"floors\"][lang], f\"calibrated on this index: {cal['note']}\"",
     "    if False:\n        return cal[\"floors\"][lang], f\"calibrated on this index: {cal['note']}\"",
     ["tests/test_floor.py", "-k", "only_thanks"]),
    ("the fusion trusts an embedder that cannot read the question",
     "    evidence = {\"dense\": meaning_weight(meaning, *off_topic) if off_topic else meaning, \"bm25\": words_found}",
     "    evidence = {\"dense\": meaning, \"bm25\": words_found}",
     ["tests/test_floor.py", "-k", "never_declines"]),
    ("a stuck /api/ps holds the question up for the whole --timeout",
     "        running = ollama_client(min(timeout or OLLAMA_CONNECT_TIMEOUT, OLLAMA_CONNECT_TIMEOUT)).ps().models",
     "        running = ollama_client(timeout).ps().models",
     ["tests/test_loading.py", "-k", "stuck"]),
    ("a cached calibration is trusted whatever it holds",
     "    return c if ok else None",
     "    return c",
     ["tests/test_floor.py", "-k", "hold_together"]),
    ("--keep-alive takes any text as a duration",
     '    if re.fullmatch(rf"[-+]?({DURATION_PART})+", text):',
     "    if True:",
     ["tests/test_loading.py", "-k", "keep_alive_zero"]),
    ("probes the notes do cover are kept in the calibration",
     "        if max((coverage(r.terms, h.row) for h in r.candidates), default=0.0) < OFF_TOPIC_COVERAGE:",
     "        if True:",
     ["tests/test_floor.py"]),
    ("an edited folder keeps the old calibration",
     "    return new.complete and sorted(r.digest for r in old.files.values()) == sorted(r.digest for r in new.files.values())",
     "    return new.complete",
     ["tests/test_floor.py", "-k", "touched or name_order"]),
    ("a note over --max-note-mb is hashed before its size is checked",
     '            if why := too_big(f.size, settings.max_note_mb):   # before hashing: a log or an export is never read\n'
     '                report.skip(f, why, "size")\n                continue\n',
     "",
     ["tests/test_index.py", "-k", "size_limit"]),
    ("skipped notes are opened again on every warm run",
     '        elif skip.kind == "access":',
     "        elif True:",
     ["tests/test_odd_inputs.py", "-k", "stubs"]),
    ("every skipped note is said in a line of its own",
     "    if len(skipped) <= SKIPS_NAMED:",
     "    if True:",
     ["tests/test_odd_inputs.py", "-k", "stubs"]),
    ("skipped notes are read again on every update",
     '        if skip and skip.kind == "content" and same_stat(skip, f):',
     "        if False:",
     ["tests/test_odd_inputs.py", "-k", "stubs"]),
    ("the stat check ignores ctime and inode",
     "    return (known.size, known.mtime_ns, known.ctime_ns, known.ino) == stat_of(f)",
     "    return (known.size, known.mtime_ns) == stat_of(f)[:2]",
     ["tests/test_index.py", "-k", "keeps_size_and_mtime"]),
    ("the fingerprint ignores ctime and inode",
     '        h.update(f"{f.rel}\\0{f.size}\\0{f.mtime_ns}\\0{f.ctime_ns}\\0{f.ino}\\n".encode("utf-8", "surrogateescape"))',
     '        h.update(f"{f.rel}\\0{f.size}\\0{f.mtime_ns}\\n".encode("utf-8", "surrogateescape"))',
     ["tests/test_index.py", "-k", "keeps_size_and_mtime"]),
    ("the embedding model's build is not compared",
     "        reason = stale_reason(old, settings) or build_changed(old, build)",
     "        reason = stale_reason(old, settings)",
     ["tests/test_build.py", "-k", "another_build"]),
    ("an Ollama that does not say its build is warned of on every run",
     '    unsaid = build == "" and (old is None or old.model_digest != "")',
     '    unsaid = build == ""',
     ["tests/test_build.py", "-k", "which_build"]),
    ("a vector size that changes mid-build rebuilds again",
     "            if fresh.shape[1] != dim and sized_here:",
     "            if False:",
     ["tests/test_build.py", "-k", "two_sizes or size_change"]),
    ("a size-change rebuild replaces the old cache before it holds as many vectors",
     "            writer.floor = writer.on_disk",
     "            pass",
     ["tests/test_build.py", "-k", "size_change"]),
    ("a folder without a cache of its own never takes over another",
     "        old, note, donor = adopted(settings, files, path)",
     '        old, note, donor = None, "", None',
     ["tests/test_index.py", "tests/test_odd_inputs.py", "-k", "moved_folder or previous_format"]),
    ("the cache a moved folder took over is left behind",
     "        if p == donor:",
     "        if False:",
     ["tests/test_index.py", "-k", "moved_folder"]),
    ("a first build takes no vector from other caches",
     "    if donors and not has_vector.all():",
     "    if False:",
     ["tests/test_index.py", "-k", "another_folder_or_chunk"]),
    ("--explain answers with 8,192 whatever the model is loaded with",
     "    stream = answer_stream(client, args.question, r.hits, settings, num_ctx)\n    code = EXIT_OLLAMA if",
     "    stream = answer_stream(client, args.question, r.hits, settings)\n    code = EXIT_OLLAMA if",
     ["tests/test_loading.py", "-k", "explain"]),
]


def scratch_copy() -> Path:
    """The project tree in a temp folder (without git data, caches and bytecode)."""
    dst = Path(tempfile.mkdtemp(prefix="demo-rag-mutate-")) / "project"
    shutil.copytree(ROOT, dst, ignore=shutil.ignore_patterns(".git", ".demo-cache", "__pycache__", ".pytest_cache"))
    return dst


def run_tests(project: Path, args: list[str]) -> tuple[int, str, float]:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *args],
                         cwd=project, capture_output=True, text=True)
    failed = [ln[len("FAILED "):] for ln in out.stdout.splitlines() if ln.startswith("FAILED ")]
    last = out.stdout.strip().splitlines()[-1:] or [out.stderr.strip()[-200:]]
    return out.returncode, (failed or last)[0], time.perf_counter() - t0


def main(words: list[str]) -> int:
    project = scratch_copy()
    target = project / TARGET
    original = target.read_text(encoding="utf-8")
    chosen = [m for m in MUTATIONS if not words or any(w.lower() in m[0].lower() for w in words)]
    rows = []
    try:
        for description, old, new, args in chosen:
            count = original.count(old)
            if count != 1:
                rows.append((description, "NOT FOUND" if count == 0 else f"AMBIGUOUS ({count} matches)", "", 0.0))
                print(f"  {rows[-1][1]:<10} {description}", flush=True)
                continue
            target.write_text(original.replace(old, new), encoding="utf-8")
            try:
                code, detail, took = run_tests(project, args)
            finally:
                target.write_text(original, encoding="utf-8")
            verdict = {0: "MISSED", 1: "caught", 5: "NO TESTS"}.get(code, f"ERROR {code}")
            rows.append((description, verdict, detail, took))
            print(f"  {verdict:<10} {description}  ({took:.0f}s)", flush=True)
    finally:
        shutil.rmtree(project.parent, ignore_errors=True)
    width = max(len(r[0]) for r in rows) if rows else 10
    print(f"\n| {'break':<{width}} | result | first failing test |")
    print(f"|{'-' * (width + 2)}|--------|--------------------|")
    for description, verdict, detail, _ in rows:
        print(f"| {description:<{width}} | {verdict} | {detail} |")
    caught = sum(1 for r in rows if r[1] == "caught")
    print(f"\n{caught}/{len(rows)} breaks caught")
    return 0 if caught == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
