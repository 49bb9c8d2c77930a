"""Build bench/citation-check-five.jsonl and bench/citation-check-seven.jsonl from the
hand-written sources in bench/citation-sets-src/, and validate them.

Source format (one file per language, *.txt):
    LANG de                       language of the answers that follow
    FILE waschmaschine.md         default note (in bench/citation-notes/) for headings
    W <kind> | <heading>; <heading> | <bad indices, comma-separated> | <note>
    <answer text: the lines up to the next blank line, joined with a line break>
    R <kind> | <heading>; ...
    <answer>
A heading is written without its hashes; "other.md>Heading" takes it from another note.
An R entry is the right twin of the W entry just before it (its note says so).

The sentence split used to check the `bad` indices is the rule of bench/citation-sets.md:
a sentence ends at . ! ? (followed by a space or the end) and at 。！？, and at every line
break; a period between two digits (1.5, 1.250) does not end one, nor the period of a
day in a German date ("4. Juni"), nor the marker of a numbered list item at the start of a
line ("1. "), nor "e.g."/"z.B."; citations such as [1] and closing
brackets or quotes right after the mark belong to the sentence they end.
"""
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTES = ROOT / "bench" / "citation-notes"
SRC = ROOT / "bench" / "citation-sets-src"
WRONG = {"unit_swapped", "number_other_fact", "percent_as_count", "name_swapped",
         "exact_for_about", "min_max_swapped", "negation_added", "negation_dropped",
         "range_changed", "date_changed", "code_changed", "wrong_source",
         "unsupported_claim", "hedge_wrong"}
RIGHT = {"paraphrase", "unit_converted", "date_other_format", "number_in_words",
         "uncited_supported", "hedge_right", "code_right", "summary_of_list", "correct"}
FIVE = ["en", "zh", "de", "fr", "es"]
SEVEN = ["it", "pt", "nl", "ru", "ja", "ko", "pl"]
DE_MONTHS = ("Januar|Jänner|Februar|März|April|Mai|Juni|Juli|August|September|Oktober|"
             "November|Dezember")
ABBREV = re.compile(r"(?:\be\.g|\bi\.e|\bz\.\s?B)$")
CLOSERS = ")]\"'”’»」』）"


def sentences(text):
    out = []
    for line in text.split("\n"):
        start, i, n = 0, 0, len(line)
        while i < n:
            c = line[i]
            end = False
            if c in "。！？":
                end = True
            elif c in ".!?":
                nxt = line[i + 1] if i + 1 < n else ""
                prev = line[:i]
                if c == "." and nxt.isdigit() and prev[-1:].isdigit():
                    end = False
                elif nxt and not nxt.isspace() and nxt not in CLOSERS and nxt != "[":
                    end = False
                elif c == "." and re.fullmatch(r"\s*\d{1,2}", prev):
                    end = False  # the marker of a numbered list item, "1. "
                elif c == "." and ABBREV.search(prev):
                    end = False
                elif c == "." and re.search(r"(?:^|\s)\d{1,2}$", prev) and re.match(
                        r"\s+(?:" + DE_MONTHS + r")\b", line[i + 1:]):
                    end = False
                else:
                    end = True
            if end:
                j = i + 1
                while True:
                    m = re.match(r"\s*\[\d+\]", line[j:])
                    if m:
                        j += m.end()
                        continue
                    if j < n and line[j] in CLOSERS:
                        j += 1
                        continue
                    break
                piece = line[start:j].strip()
                if piece:
                    out.append(piece)
                start, i = j, j
                continue
            i += 1
        piece = line[start:].strip()
        if piece:
            out.append(piece)
    return out


def section_lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def find_heading(fname, text):
    path = NOTES / fname
    if not path.exists():
        raise SystemExit(f"no note {fname}")
    lines = section_lines(path)
    in_fence = False
    hits = []
    for ln in lines:
        if ln.startswith("```"):
            in_fence = not in_fence
            continue
        m = re.match(r"^(#{1,6})\s+(.*?)\s*$", ln)
        if m and not in_fence and m.group(2) == text:
            hits.append(ln)
    if len(hits) != 1:
        raise SystemExit(f"heading {text!r} found {len(hits)} times in {fname}")
    return hits[0]


def parse(path):
    lang, fname, items = None, None, []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i]
        if not ln.strip() or ln.startswith("//"):
            i += 1
            continue
        if ln.startswith("LANG "):
            lang = ln.split()[1]
        elif ln.startswith("FILE "):
            fname = ln[5:].strip()
        elif ln[:2] in ("W ", "R "):
            parts = [p.strip() for p in ln[2:].split("|")]
            body = []
            i += 1
            while i < len(lines) and lines[i].strip():
                body.append(lines[i].rstrip())
                i += 1
            items.append({"wr": ln[0], "lang": lang, "file": fname, "parts": parts,
                          "answer": "\n".join(body), "where": f"{path.name}:{i}"})
            continue
        else:
            raise SystemExit(f"{path.name}:{i+1}: cannot read {ln!r}")
        i += 1
    return items


def build(langs, out_name):
    rows, counters, prev_id = [], {}, None
    for lang in langs:
        src = SRC / f"{lang}.txt"
        if not src.exists():
            print(f"missing {src.name}", file=sys.stderr)
            continue
        for it in parse(src):
            assert it["lang"] == lang, it["where"]
            kind = it["parts"][0]
            heads = [h.strip() for h in it["parts"][1].split(";") if h.strip()]
            sources = []
            for h in heads:
                f, t = (h.split(">", 1) if ">" in h else (it["file"], h))
                sources.append({"file": f"bench/citation-notes/{f.strip()}",
                                "heading": find_heading(f.strip(), t.strip())})
            counters[lang] = counters.get(lang, 0) + 1
            rid = f"{lang}-{counters[lang]:03d}"
            sents = sentences(it["answer"])
            if it["wr"] == "W":
                assert kind in WRONG, (it["where"], kind)
                bad = [int(x) for x in it["parts"][2].split(",")]
                note = it["parts"][3]
                prev_id = rid
            else:
                assert kind in RIGHT, (it["where"], kind)
                bad = []
                note = f"right twin of {prev_id}" if prev_id else ""
                prev_id = None
            assert note, it["where"]
            assert all(0 <= b < len(sents) for b in bad), (it["where"], sents, bad)
            assert 1 <= len(sents) <= 6, (it["where"], sents)
            cites = [int(c) for c in re.findall(r"\[(\d+)\]", it["answer"])]
            assert all(1 <= c <= len(sources) for c in cites), (it["where"], cites)
            rows.append({"id": rid, "lang": lang, "kind": kind, "sources": sources,
                         "answer": it["answer"], "bad": bad, "note": note})
    out = ROOT / "bench" / out_name
    with out.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return rows


def report(rows, title):
    print(f"## {title}: {len(rows)} answers")
    langs = sorted({r["lang"] for r in rows}, key=lambda l: (FIVE + SEVEN).index(l))
    kinds = {}
    for r in rows:
        n = len(sentences(r["answer"]))
        b = len(r["bad"])
        d = kinds.setdefault(r["lang"], {"answers": 0, "wrong": 0, "right": 0})
        d["answers"] += 1
        d["wrong"] += b
        d["right"] += n - b
    tw = sum(d["wrong"] for d in kinds.values())
    tr = sum(d["right"] for d in kinds.values())
    for l in langs:
        print(f"  {l}: {kinds[l]}")
    print(f"  total wrong sentences {tw}, right sentences {tr}")
    byk = {}
    for r in rows:
        byk.setdefault(r["kind"], {}).setdefault(r["lang"], 0)
        byk[r["kind"]][r["lang"]] += 1
    for k in sorted(byk, key=lambda k: (k in RIGHT, k)):
        print(f"  {k:18s} " + " ".join(f"{l}:{byk[k].get(l, 0)}" for l in langs))


if __name__ == "__main__":
    a = build(FIVE, "citation-check-five.jsonl")
    report(a, "five")
    b = build(SEVEN, "citation-check-seven.jsonl")
    report(b, "seven")
