"""--serve: the notes on a local page, its server spoken to in plain HTTP.

Every rule that keeps others out (the token, the Host header, the Origin of a POST, the
headers that keep a note's text from running) has a test here; tests/test_serve_browser.py
drives the page itself in a real browser.
"""
from __future__ import annotations

import http.client
import itertools
import json
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import ollama
import pytest
from conftest import ROOT, SCRIPT_COMMAND, read_until, user_env
from ollama_server import FakeOllama

import demo_rag as rag


class Page:
    """`demo_rag.py --serve --port 0` as a subprocess, and requests to it over plain HTTP."""

    def __init__(self, notes, cache, host: str, *args, env: dict | None = None):
        self.p = subprocess.Popen([*SCRIPT_COMMAND, "--serve", "--port", "0", "--notes", notes,
                                   "--cache", cache, *map(str, args)], env=user_env(host, env),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.said = read_until(self.p.stdout, "token=", timeout=60)
        while not re.search(r"token=\S+\n", self.said):
            self.said += read_until(self.p.stdout, "\n", timeout=10)
        self.url = re.search(r"http://\S+", self.said).group(0)
        self.port = int(re.search(r":(\d+)/", self.url).group(1))
        self.token = self.url.split("token=")[1]
        self.host = f"127.0.0.1:{self.port}"
        self.cookie = f"demo_rag_{self.port}={self.token}"

    def request(self, method: str, path: str, body=None, host: str | None = None,
                cookie: str | None = None, origin: str | None = None, **headers):
        """(status, headers, body) of one request; by default with the right Host, the token's
        cookie and, for a POST, this page's Origin."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        origin = f"http://{self.host}" if origin is None else origin
        given = {"Cookie": self.cookie if cookie is None else cookie,
                 **({"Origin": origin} if method == "POST" else {}), **headers}
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        # Host "" is sent so, empty: http.client would put its own in place of none
        c.request(method, path, data, {"Host": self.host if host is None else host,
                                       **{k: v for k, v in given.items() if v != ""}})
        r = c.getresponse()
        got = r.status, r.headers, r.read()
        c.close()
        return got

    def ask(self, question: str, **more) -> list[dict]:
        status, _, data = self.request("POST", "/ask", {"question": question, **more})
        assert status == 200, data
        return [json.loads(line) for line in data.splitlines()]

    def stop(self) -> tuple[int, str]:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
        try:
            code = self.p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.p.kill()
            code = self.p.wait()
        out = self.p.stderr.read().decode()
        self.p.stdout.close()
        self.p.stderr.close()
        return code, out


def endless(ended: threading.Event):
    """A chat model's answer that goes on, a word every 20 ms, until `ended` is set."""
    for n in itertools.count():
        if ended.wait(0.02):
            return
        yield f"then {n} "


@pytest.fixture(scope="module")
def fake():
    with FakeOllama() as f:
        yield f


@pytest.fixture(scope="module")
def page(fake, tmp_path_factory):
    """One server for the module's tests, on a copy of demo-data, each call seeing the notes
    as they are (--fresh-seconds 0)."""
    folder = tmp_path_factory.mktemp("serve")
    shutil.copytree(ROOT / "demo-data", folder / "notes")
    p = Page(folder / "notes", folder / "cache", fake.url, "--fresh-seconds", "0")
    p.folder = folder
    yield p
    p.stop()


def test_the_page_comes_with_the_token_and_leaves_a_strict_cookie_named_by_its_port(page):
    assert page.url.startswith(f"http://127.0.0.1:{page.port}/?token=")
    status, headers, body = page.request("GET", f"/?token={page.token}", cookie="")
    assert status == 200 and b"<script>" in body
    cookie = headers["Set-Cookie"]
    assert cookie.startswith(f"demo_rag_{page.port}={page.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert page.request("GET", "/", cookie=cookie.split(";")[0])[0] == 200


@pytest.mark.parametrize("cookie", ["", "demo_rag_1=x", "{name}=wrong", "{name}={token}x"])
def test_no_token_or_a_wrong_one_is_refused(page, cookie):
    cookie = cookie.format(name=f"demo_rag_{page.port}", token=page.token)
    for method, path in [("GET", "/"), ("GET", "/?token=wrong"), ("GET", "/note?path=bm25.md"),
                         ("GET", "/gaps"), ("POST", "/ask")]:
        status, _, body = page.request(method, path, {"question": "What is BM25?"}
                                       if method == "POST" else None, cookie=cookie)
        assert status == 403, (method, path, body)
        assert b"<script" not in body


@pytest.mark.parametrize("host", ["localhost.evil.com:{port}", "127.0.0.1:{port}.evil.com",
                                  "evil.com:{port}", "127.0.0.1", "localhost:1{port}", "",
                                  "127.0.0.1:{port} ", "LOCALHOST.:{port}"])
def test_a_host_header_not_exactly_one_of_the_server_s_names_is_refused(page, host):
    status, _, _ = page.request("GET", "/", host=host.format(port=page.port))
    assert status == 403


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "[::1]"])
def test_each_of_the_server_s_own_names_is_let_in(page, name):
    assert page.request("GET", "/", host=f"{name}:{page.port}")[0] == 200


@pytest.mark.parametrize("origin", ["http://evil.com", "null", "http://localhost.evil.com:{port}",
                                    "https://127.0.0.1:{port}", ""])
def test_a_post_from_another_origin_or_none_is_refused(page, origin):
    status, _, body = page.request("POST", "/ask", {"question": "What is BM25?"},
                                   origin=origin.format(port=page.port))
    assert status == 403 and b"Origin" in body
    assert page.request("POST", "/stop", {"id": "x"}, origin="http://evil.com")[0] == 403


def test_a_get_only_reads_and_a_post_only_asks(page):
    assert page.request("GET", "/ask?question=hi")[0] == 404
    assert page.request("POST", "/note", {"path": "bm25.md"})[0] == 404


def test_every_answer_carries_the_headers_that_keep_a_note_s_text_from_running(page):
    for method, path in [("GET", "/"), ("GET", "/note?path=bm25.md"), ("GET", "/nothing"),
                         ("POST", "/ask")]:
        _, headers, _ = page.request(method, path, {"question": "What is BM25?"})
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "no-referrer"
        assert "Access-Control-Allow-Origin" not in headers
        policy = dict(p.strip().split(" ", 1) for p in headers["Content-Security-Policy"].split(";"))
        assert policy["default-src"] == "'none'" and policy["connect-src"] == "'self'"
        assert re.fullmatch(r"'sha256-[\w+/=]+'", policy["script-src"])
        assert re.fullmatch(r"'sha256-[\w+/=]+'", policy["style-src"])


def test_the_policy_allows_the_page_s_own_script_and_style_by_their_hashes(page):
    import base64
    import hashlib
    _, headers, body = page.request("GET", "/")
    script = re.search(rb"<script>(.*?)</script>", body, re.DOTALL).group(1)
    digest = base64.b64encode(hashlib.sha256(script).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in headers["Content-Security-Policy"]


def test_the_page_never_writes_text_as_html():
    script = re.search(r"<script>(.*?)</script>", rag.PAGE, re.DOTALL).group(1)
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                 "new Function", "setTimeout(\""):
        assert sink not in script


def test_a_question_streams_its_answer_in_pieces_then_the_result_as_ask_notes_gives_it(page):
    lines = page.ask("What is BM25?")
    assert "id" in lines[0] and "plan" in lines[1]
    assert lines[1]["plan"]["sources"][0]["path"] == "bm25.md"
    pieces = [m["token"] for m in lines if "token" in m]
    assert len(pieces) > 3
    result = lines[-1]["result"]
    assert result["status"] == "answered" and result["answer"] == "".join(pieces)
    assert set(result) == set(rag.mcp_output_schemas()["ask_notes"]["properties"])
    sentence = result["citations"]["sentences"][0]
    assert sentence["path"] == "bm25.md" and sentence["line"] >= 1


def test_each_source_offers_the_editor_link_of_the_format_the_user_set(page, fake):
    assert "editor" not in page.ask("What is BM25?")[1]["plan"]["sources"][0]   # file://: none
    p = Page(page.folder / "notes", page.folder / "cache", fake.url, "--hyperlink-format", "vscode")
    try:
        lines = p.ask("What is BM25?")
    finally:
        p.stop()
    for source in lines[1]["plan"]["sources"] + lines[-1]["result"]["sources"]:
        where = (page.folder / "notes" / source["path"]).absolute()
        assert source["editor"] == f"vscode://file{where}:{source['line']}:1"


def test_an_editor_link_names_the_note_s_absolute_path_when_the_folder_was_given_relative(
        tmp_path, monkeypatch):
    from types import SimpleNamespace
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "tea.md").write_text("# Tea\n")
    monkeypatch.chdir(tmp_path)           # --notes notes, as the README's demo-data/ is given
    server = SimpleNamespace(link_format=rag.HYPERLINK_FORMATS["vscode"],
                             held=SimpleNamespace(settings=SimpleNamespace(notes_dir="notes")))
    linked = rag.PageServer.linked(server, [{"path": "tea.md", "line": 3}])
    assert linked[0]["editor"] == f"vscode://file{tmp_path}/notes/tea.md:3:1"


def test_a_follow_up_is_searched_as_the_chat_mode_rewrites_it_with_the_tab_s_turns(page, fake):
    first = page.ask("What is BM25?")[-1]["result"]
    turns = [{"question": "What is BM25?", "answer": first["answer"], "query": "What is BM25?"}]
    plan = page.ask("and who made it?", turns=turns)[1]["plan"]
    assert plan["query"] == "What is BM25? and who made it?"       # the stand-in's rewrite
    assert page.ask("and who made it?")[1]["plan"]["query"] == ""   # another tab: no turns


def test_a_note_is_served_as_read_note_reads_it_and_nothing_else_is(page):
    status, _, body = page.request("GET", "/note?path=bm25.md")
    note = json.loads(body)
    assert status == 200 and note["text"] == (page.folder / "notes/bm25.md").read_text().rstrip("\n")
    (page.folder / "secret.md").write_text("secret")
    for path in ["../secret.md", str(page.folder / "secret.md"), "/etc/passwd", "nothing.md", ""]:
        status, _, body = page.request("GET", f"/note?path={path}")
        assert status == 404 and b"not a note of the index" in body, path


@pytest.mark.parametrize("body, said", [
    (b"x" * (rag.SERVE_MAX_BODY + 1), b"at most"), (b"[1]", b"JSON object"), (b"{", b"JSON object"),
    ({"question": "x" * (rag.MAX_QUESTION_CHARS + 1)}, b"at most"),
    ({"question": "  "}, b"blank"), ({"question": 3}, b"a string"), ({}, b"missing"),
    ({"question": "hi", "tags": "work"}, b"an array"),
    ({"question": "hi", "turns": [{"question": "a"}]}, b"turns")])
def test_a_body_too_big_or_of_the_wrong_shape_is_refused_in_a_line(page, body, said):
    status, _, got = page.request("POST", "/ask", body)
    assert status in (400, 413) and said in got


def test_a_question_the_notes_cannot_answer_gives_the_closest_sources_and_joins_the_gap_log(page):
    result = page.ask("How do I repair the gearbox of a tractor?")[-1]["result"]
    assert result["status"] == "declined" and result["answer"] is None
    gaps = json.loads(page.request("GET", "/gaps")[2])["questions"]
    assert gaps[0]["question"] == "How do I repair the gearbox of a tractor?"
    entry = json.loads((page.folder / "cache" / rag.GAP_LOG).read_text().splitlines()[-1])
    assert entry["via"] == "page"


def test_stop_closes_the_chat_model_s_stream_on_the_server(page, fake):
    ended = threading.Event()
    fake.answer = endless(ended)
    try:
        c = http.client.HTTPConnection("127.0.0.1", page.port, timeout=30)
        c.request("POST", "/ask", json.dumps({"question": "What is BM25?"}),
                  {"Host": page.host, "Cookie": page.cookie, "Origin": f"http://{page.host}"})
        r = c.getresponse()
        key = json.loads(r.readline())["id"]
        while "token" not in json.loads(r.readline()):
            pass
        assert page.request("POST", "/stop", {"id": key})[0] == 200
        rest = [json.loads(r.readline())]
        while "token" in rest[-1] and len(rest) < 300:     # a few came meanwhile: then it ends
            rest.append(json.loads(r.readline()))
        c.close()
        chat = fake.records("/api/chat")[-1]
        fake.wait_for(lambda: chat.get("gone"), timeout=10)      # its stream closed: Ollama stops
        assert rest[-1] == {"stopped": True} and chat["sent_parts"] < 200
    finally:
        ended.set()
        fake.answer = None


def test_a_page_that_goes_away_mid_answer_closes_the_chat_model_s_stream(page, fake):
    ended = threading.Event()
    fake.answer = endless(ended)
    try:
        with socket.create_connection(("127.0.0.1", page.port)) as s:
            body = json.dumps({"question": "What is BM25?"}).encode()
            s.sendall(f"POST /ask HTTP/1.1\r\nHost: {page.host}\r\nCookie: {page.cookie}\r\n"
                      f"Origin: http://{page.host}\r\nContent-Length: {len(body)}\r\n\r\n"
                      .encode() + body)
            while b'"token"' not in s.recv(65536):
                pass
        chat = fake.records("/api/chat")[-1]
        fake.wait_for(lambda: chat.get("gone"), timeout=10)
        assert chat["sent_parts"] < 200
    finally:
        ended.set()
        fake.answer = None


def test_a_note_changed_is_seen_by_the_next_question(page):
    (page.folder / "notes" / "kiln.md").write_text("# Kiln\n\nThe kiln fires at 1240 degrees.\n")
    lines = page.ask("At what temperature does the kiln fire?")
    assert lines[1]["plan"]["sources"][0]["path"] == "kiln.md"


def test_clients_that_send_nothing_do_not_hold_the_server(page):
    silent = [socket.create_connection(("127.0.0.1", page.port)) for _ in range(8)]
    try:
        assert page.request("GET", "/")[0] == 200
    finally:
        for s in silent:
            s.close()


def test_a_silent_client_is_let_go_and_connections_past_the_bound_are_closed(monkeypatch, fake,
                                                                           notes, tmp_path):
    assert rag.PageHandler.timeout == rag.SERVE_IDLE_SECONDS      # then shortened, to wait less
    monkeypatch.setattr(rag.PageHandler, "timeout", 2.0)
    monkeypatch.setattr(rag, "SERVE_CONNECTIONS", 2)
    settings = rag.Settings(notes_dir=notes, cache_dir=tmp_path / "cache")
    held = rag.HeldIndex(settings, ollama.Client(host=fake.url))
    server = rag.PageServer("127.0.0.1", 0, held, rag.NUM_CTX, "")
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        first = socket.create_connection(("127.0.0.1", server.port))
        second = socket.create_connection(("127.0.0.1", server.port))
        time.sleep(0.2)
        third = socket.create_connection(("127.0.0.1", server.port))
        third.settimeout(1.5)
        assert third.recv(1) == b""                  # closed at once: two are open
        first.settimeout(5)
        assert first.recv(1) == b""                  # let go after the timeout (2 s)
        for s in (first, second, third):
            s.close()
    finally:
        server.shutdown()
        server.server_close()


def test_it_listens_on_loopback_unless_told_and_then_warns(fake, tmp_path, notes):
    r = subprocess.run([*SCRIPT_COMMAND, "--serve", "--host", "0.0.0.0", "--notes", str(notes)],
                       env=user_env(fake.url), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--allow-remote" in r.stderr and "token" not in r.stdout
    p = Page(notes, tmp_path / "cache", fake.url, "--host", "0.0.0.0", "--allow-remote")
    try:
        assert p.request("GET", "/", host=f"0.0.0.0:{p.port}")[0] == 200
    finally:
        code, err = p.stop()
    assert "warning: serving beyond this machine" in err


def test_ctrl_c_stops_it_cleanly_leaving_the_index_saved(fake, tmp_path, notes):
    browser = tmp_path / "browser"
    browser.write_text('#!/bin/sh\necho "opened:$1"\n')
    browser.chmod(0o755)
    p = Page(notes, tmp_path / "cache", fake.url, "--open", env={"BROWSER": str(browser)})
    said = p.said
    while not re.search(r"opened:\S+\n", said):
        said += read_until(p.p.stdout, "\n", timeout=10)
    assert p.url in said                  # --open: the browser is given the URL, token and all
    code, err = p.stop()
    assert code == 0 and "stopped; the index is saved" in err and "Traceback" not in err
    embeds = len(fake.of("/api/embed"))
    r = subprocess.run([*SCRIPT_COMMAND, "--notes", str(notes), "--cache", str(tmp_path / "cache"),
                        "--retrieve-only", "What is BM25?"], env=user_env(fake.url),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "10 unchanged (0 chunks embedded)" in r.stderr
    assert len(fake.of("/api/embed")) == embeds + 1     # the question's vector alone


def test_a_port_taken_is_said_in_a_line(fake, tmp_path, notes):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        r = subprocess.run([*SCRIPT_COMMAND, "--serve", "--port", str(s.getsockname()[1]),
                            "--notes", str(notes), "--cache", str(tmp_path / "c")], env=user_env(fake.url),
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--port 0" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("args, said", [
    (["--serve", "--port", "70000"], "--port must be 0 to 65535, not 70000"),
    (["--port", "0", "What is BM25?"], "--port goes with --serve"),
    (["--chat", "--allow-remote"], "--allow-remote goes with --serve"),
    (["--serve", "What is BM25?"], "--serve takes no question")])
def test_its_flags_go_with_serve_alone_and_a_port_is_one(fake, args, said):
    r = subprocess.run([*SCRIPT_COMMAND, *args], env=user_env(fake.url), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and said in r.stderr
