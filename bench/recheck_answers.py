"""Judge the answers a `--eval SET --answers --json` run stored again, with today's citation check,
without asking the chat model again (its answers are the slow part).

    python bench/recheck_answers.py RESULT.json SET.jsonl [demo_rag flags: --notes, --embed-model, --cache ...]

Each question is searched again (the same flags give the same sources: retrieval is deterministic),
its stored answer checked by check_citations(), and the `answers` block rebuilt by answer_scores().
The chat model's timings are kept from the stored run. Prints the new block as JSON, then each
question's answer and check for reading.
"""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import demo_rag as rag  # noqa: E402


def main() -> None:
    stored_path, set_path, *flags = sys.argv[1:]
    stored = json.loads(Path(stored_path).read_text(encoding="utf-8"))["answers"]
    items = rag.load_eval_set(Path(set_path))
    settings = rag.settings_from(rag.parse_args([*flags, "--eval", set_path]))
    client = rag.ollama_client()
    index, _ = rag.open_index(settings, client)
    asked = []
    for item, was in zip(items, stored["questions"], strict=True):
        assert item["question"] == was["question"]
        plan = rag.answer(client, index, item["question"], settings, retrieve_only=True)
        if was["status"] == rag.ANSWERED:
            text = was["answer"]
            check = rag.check_citations(text, [h.chunk.text for h in plan.retrieval.hits], index.lexicon)
            plan = replace(plan, status=rag.ANSWERED, text=text, check=check)
        else:
            plan = replace(plan, status=was["status"])
        asked.append((item, plan, was["first_word_seconds"]))
    block = rag.answer_scores(index, asked, settings)
    block["tokens_per_second"] = stored["tokens_per_second"]   # no chat model ran here
    questions = block.pop("questions")
    print(json.dumps(block, indent=2))
    for q in questions:
        print(f"\nQ: {q['question']}  [{q['status']}; cites gold: {q['cites_gold']}]")
        print(f"A: {(q['answer'] or '')[:600]!r}")
        print(f"   {q['check']}")


if __name__ == "__main__":
    main()
