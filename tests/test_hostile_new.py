"""A hostile pass over line-true sources and the citation check, Obsidian front matter and
filters, the gap log and --mcp: what strangers' notes, answers, logs and clients can do.
Each test runs the script as a user or a client would and failed on the code before its fix."""
from __future__ import annotations

import json

import pytest

NOTE = "# Kites\n\nKites fly on wind and string; a long tail keeps a kite steady in gusts.\n"


@pytest.fixture
def folder(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "kites.md").write_text(NOTE, encoding="utf-8")
    return notes


# ---- the citation check ------------------------------------------------------------------

def test_a_citation_of_thousands_of_digits_is_no_traceback(cli, server, folder):
    """int() refuses a number of more than 4,300 digits: the model's "[999…9]" must not end the run."""
    server.answer = "Kites fly on wind [" + "9" * 5000 + "]. A tail keeps them steady [1]."
    out = cli("--notes", folder, "how do kites fly", "--no-log")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-400:]
    assert "checked: " in out.stderr
    out = cli("--notes", folder, "how do kites fly", "--no-log", "--json")
    assert out.returncode == 0, out.stderr[-400:]
    assert json.loads(out.stdout)["citations"]


# ---- --mcp ---------------------------------------------------------------------------------

def mcp_session(server, folder, tmp_path, lines: list[bytes], timeout: float = 60):
    """--mcp fed these lines, then EOF: (exit code, the messages on stdout, stderr)."""
    import subprocess

    from conftest import SCRIPT_COMMAND, user_env
    p = subprocess.run([*SCRIPT_COMMAND, "--mcp", "--notes", str(folder), "--cache", str(tmp_path / "cache")],
                       input=b"".join(line + b"\n" for line in lines), capture_output=True,
                       env=user_env(server.url), timeout=timeout)
    return p.returncode, [json.loads(line) for line in p.stdout.splitlines()], p.stderr.decode("utf-8", "replace")


INIT = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode()


def test_eof_after_a_session_ends_the_server_with_exit_0_and_no_traceback(server, folder, tmp_path):
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    code, replies, err = mcp_session(server, folder, tmp_path, [INIT, ping])
    assert [r["id"] for r in replies] == [0, 1]
    assert code == 0 and "Traceback" not in err, err[-600:]


# ---- Obsidian front matter ------------------------------------------------------------------

def test_a_front_matter_line_of_spaces_is_read_in_linear_time(cli, folder):
    """One line of 300,000 spaces between two words (a stranger's note, well under the size
    limit) took the key's pattern minutes; the run must not hang on it."""
    (folder / "spaces.md").write_text("---\ntitle: Spaces\na" + " " * 300_000 + "b\n---\n" + NOTE, encoding="utf-8")
    (folder / "spaced-key.md").write_text("---\ntags: [sky]\nkey" + " " * 300_000 + ": value\n---\n" + NOTE,
                                          encoding="utf-8")
    out = cli("--notes", folder, "kites wind", "--retrieve-only", "--json", timeout=40)
    assert out.returncode == 0, out.stderr[-400:]
    cards = {s["source"]: s for s in json.loads(out.stdout)["sources"]}
    assert cards["spaced-key.md"]["tags"] == ["sky"]


# ---- --chat's inline filters -----------------------------------------------------------------

def test_a_long_hash_word_typed_in_chat_does_not_hang_it(cli, folder):
    """A pasted "#aaaa…a." (no filter: a full stop ends it) took the filter's pattern minutes."""
    out = cli("--notes", folder, "--chat", "--no-log", stdin="#" + "a" * 50_000 + ". kites\n#sky kites\n", timeout=40)
    assert out.returncode == 0, out.stderr[-400:]
    assert "no note matches --tag sky" in out.stdout      # the next line's filter still read


# ---- --since and --until -------------------------------------------------------------------

@pytest.mark.parametrize("bound", [["--until", "9999"], ["--since", "2000", "--until", "9999-12"]])
def test_the_last_year_a_date_can_have_is_a_date(cli, folder, bound):
    """December 9999's last day was found as the day before January 10000, which is no date:
    --until 9999 was refused as 'expected a date'."""
    out = cli("--notes", folder, "kites wind", "--retrieve-only", "--json", *bound)
    assert out.returncode == 0, out.stderr[-400:]
    assert [s["source"] for s in json.loads(out.stdout)["sources"]] == ["kites.md"]


@pytest.mark.parametrize("name", [["search_notes"], {"a": 1}, None, 5])
def test_a_tool_name_that_is_no_string_is_a_wrong_argument_not_an_internal_error(server, folder, tmp_path, name):
    call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name}}).encode()
    code, replies, err = mcp_session(server, folder, tmp_path, [INIT, call])
    assert replies[1]["error"]["code"] == -32602, replies[1]
    assert "Traceback" not in err and "internal error" not in err, err[-600:]
