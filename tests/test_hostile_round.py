"""A hostile pass beyond the eleven classes of folder blinks: a wrong answer the citation
check must not pass, and a cache that must not lose what it kept."""
from __future__ import annotations

import shutil

import pytest

import demo_rag as rag


def cache_files(cache) -> list:
    return sorted(p for p in cache.glob("*.pkl"))


def test_a_second_loss_keeps_the_copy_from_before_the_first(cli, server, notes, tmp_path):
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    away = tmp_path / "away"
    away.mkdir()
    kept = sorted(p for p in notes.iterdir() if p.suffix in (".md", ".txt"))
    for p in kept[:6]:                                    # a sync half done: 6 of 10 gone
        shutil.move(p, away / p.name)
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    for p in kept[6:9]:                                   # ...then 3 of the 4 left
        shutil.move(p, away / p.name)
    out = cli("--notes", notes, "--retrieve-only", "coffee ratio")
    assert "Traceback" not in out.stderr
    for p in away.iterdir():                              # all back
        shutil.copy(p, notes / p.name)
    embedded = len(server.embedded_texts())
    out = cli("--notes", notes, "--retrieve-only", "coffee ratio")
    assert out.returncode == 0, out.stderr
    assert len(server.embedded_texts()) - embedded == 1   # the question, no chunk


def test_a_folder_empty_after_losing_most_notes_keeps_the_copy(cli, server, notes, tmp_path):
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    away = tmp_path / "away"
    away.mkdir()
    kept = sorted(p for p in notes.iterdir() if p.suffix in (".md", ".txt"))
    for p in kept[:6]:                                    # a sync half done: 6 of 10 gone
        shutil.move(p, away / p.name)
    assert cli("--notes", notes, "--retrieve-only", "coffee ratio").returncode == 0
    for p in kept[6:]:                                    # ...then the folder empty
        shutil.move(p, away / p.name)
    out = cli("--notes", notes, "--retrieve-only", "coffee ratio")
    assert out.returncode == rag.EXIT_USAGE and "Traceback" not in out.stderr
    for p in away.iterdir():                              # all back
        shutil.copy(p, notes / p.name)
    embedded = len(server.embedded_texts())
    out = cli("--notes", notes, "--retrieve-only", "coffee ratio")
    assert out.returncode == 0, out.stderr
    assert len(server.embedded_texts()) - embedded == 1   # the question, no chunk


# ---- a number's sign ---------------------------------------------------------------------

def verdict(answer: str, source: str) -> str:
    [sentence] = rag.check_citations(answer, [source]).sentences
    return sentence.verdict


def test_a_number_that_lost_or_gained_its_minus_sign_is_caught():
    # wrong where the rest of the sentence holds its line's words, else unsupported
    for answer, source, flagged in [
            ("Temperatures drop to -5 °C at night in January [1].",
             "Temperatures drop to 5 °C at night in January.", rag.UNSUPPORTED),
            ("Temperatures drop to 5 °C at night in January [1].",
             "Temperatures drop to −5 °C at night in January.", rag.UNSUPPORTED),
            ("The account balance is minus 200 euros this month [1].",
             "The account balance is 200 euros this month.", rag.UNSUPPORTED),
            ("The account balance is 200 euros this month [1].",
             "The account balance is -200 euros this month.", rag.UNSUPPORTED),
            ("一月夜间气温降到零下5度 [1]。", "一月夜间气温降到5度。", rag.WRONG),
            ("一月夜间气温降到5度 [1]。", "一月夜间气温降到-5度。", rag.WRONG)]:
        assert verdict(answer, source) == flagged, (answer, source)


def test_a_flagged_negative_number_is_named_with_its_sign():
    [s] = rag.check_citations("Temperatures drop to -5 °C at night in January [1].",
                              ["Temperatures drop to 5 °C at night in January."]).sentences
    assert s.why == "-5 °C is in none of its lines"


def test_a_minus_sign_written_another_way_and_dashes_between_numbers_still_match():
    for answer, source in [
            ("Temperatures drop to −5 °C at night in January [1].",
             "Temperatures drop to -5 °C at night in January."),
            ("Temperatures drop to minus 5 °C at night in January [1].",
             "Temperatures drop to –5 °C at night in January."),
            ("一月夜间气温降到-5度 [1]。", "一月夜间气温降到零下5度。"),
            ("Use 3-5 g of salt per litre of water [1].",
             "Use 3 to 5 g of salt per litre of water."),
            ("The release is due on 2026-03-05 for COVID-19 data [1].",
             "The release for COVID-19 data is due on 5 March 2026.")]:
        assert verdict(answer, source) == rag.SUPPORTED, (answer, source)


# ---- a date's day and month ------------------------------------------------------------

def test_a_date_whose_day_and_month_swapped_is_caught_however_written():
    for answer, source in [
            ("The lease ends on 2026-03-05 for the flat [1].",
             "The lease ends on 2026-05-03 for the flat."),
            ("The lease ends on 5 March 2026 for the flat [1].",
             "The lease ends on 3 May 2026 for the flat."),
            ("The lease ends on March 5, 2026 for the flat [1].",
             "The lease ends on 2026-05-03 for the flat."),
            ("The lease ends on 5.3.2026 for the flat [1].",
             "The lease ends on 3.5.2026 for the flat."),
            ("The lease ends on March 5 for the flat [1].",
             "The lease ends on 3 May 2026 for the flat."),
            ("租约在2026年3月5日到期 [1]。", "租约在2026年5月3日到期。"),
            ("租约在3月5日到期 [1]。", "租约在2026-05-03到期。")]:
        assert verdict(answer, source) == rag.UNSUPPORTED, (answer, source)


def test_a_date_written_another_way_still_matches():
    for answer, source in [
            ("The lease ends on 5 March 2026 for the flat [1].",
             "The lease ends on 2026-03-05 for the flat."),
            ("The lease ends on March 5 for the flat [1].",
             "The lease ends on 5.3.2026 for the flat."),
            ("The lease ends on 03/05/2026 for the flat [1].",
             "The lease ends on 5 March 2026 for the flat."),
            ("租约在3月5日到期 [1]。", "租约在2026年3月5日到期。"),
            # a source that states no date: the answer's date is held by its parts
            ("The lease ends on 5 March 2026 for the flat [1].",
             "The lease of the flat ends in 2026, in month 3, on day 5.")]:
        assert verdict(answer, source) == rag.SUPPORTED, (answer, source)
