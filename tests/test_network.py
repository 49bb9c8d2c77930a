"""Where the notes go over the network: to OLLAMA_HOST and nowhere else, and what is said when
the address does not lead to Ollama.

Each test runs the script as a subprocess against real sockets on 127.0.0.1: FakeOllama, and a
Listener, a small HTTP server that counts every connection it gets, logs every request, and
answers as a proxy or a redirecting server would. Nothing of httpx is mocked.
"""
from __future__ import annotations

import http.client
import os
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import run_cli
from ollama_server import FakeOllama

import demo_rag as rag

# A remote Ollama's address: .invalid never resolves (RFC 6761), so only a proxy can reach it.
REMOTE = "http://ollama.invalid:11434"


@pytest.fixture(autouse=True)
def no_proxy_settings(monkeypatch):
    """This machine's own proxy settings are not the test's: the script's environment starts
    without any (run_cli copies os.environ), and each test sets what it means to."""
    for name in list(os.environ):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
            monkeypatch.delenv(name)


class Listener:
    """An HTTP server on 127.0.0.1 that counts connections and logs requests
    ({"method", "target", "headers", "body"}); `answer(request) -> (status, headers, body)`
    replies, by default 502 as a proxy with nowhere to send the request."""

    def __init__(self, answer=None):
        self.answer = answer or (lambda request: (502, {}, b"no upstream"))
        self.connections = 0
        self.requests: list[dict] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_one_request(self):
                self.raw_requestline = self.rfile.readline(65537)
                if not self.raw_requestline or not self.parse_request():
                    self.close_connection = True
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = {"method": self.command, "target": self.path, "headers": dict(self.headers), "body": body}
                listener.requests.append(request)
                status, headers, data = listener.answer(request)
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(data)), "Connection": "close"}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def verify_request(self, request, client_address):
                listener.connections += 1        # any connection at all, HTTP or not (a SOCKS hello)
                return True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def listener():
    """Listener(): a proxy that answers 502 (set .answer to change that)."""
    made = Listener()
    yield made
    made.close()


def forward_to(url: str):
    """A Listener answer that plays a forwarding proxy: the request goes on to `url` (FakeOllama)."""
    where = urllib.parse.urlsplit(url)

    def answer(request):
        path = urllib.parse.urlsplit(request["target"])
        connection = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
        connection.request(request["method"], path.path + (f"?{path.query}" if path.query else ""),
                           body=request["body"] or None, headers={"Content-Type": "application/json"})
        reply = connection.getresponse()
        data = reply.read()
        connection.close()
        return reply.status, {"Content-Type": reply.getheader("Content-Type", "application/json")}, data
    return answer


# ---- this machine's Ollama: never through a proxy -------------------------------

@pytest.mark.parametrize("variable, hostname, no_proxy", [
    ("HTTP_PROXY", "127.0.0.1", "localhost"),      # NO_PROXY=localhost does not cover 127.0.0.1 for httpx
    ("http_proxy", "localhost", ""),
    ("ALL_PROXY", "127.0.0.1", ""),
])
def test_a_proxy_setting_sees_nothing_sent_to_this_machines_ollama(cli, server, notes, listener,
                                                                   variable, hostname, no_proxy):
    env = {variable: listener.url, "NO_PROXY": no_proxy}
    out = cli("What is asyncio?", "--notes", notes, host=server.url.replace("127.0.0.1", hostname), env=env)
    assert out.returncode == 0, out.stderr
    assert "Answer:\nAccording to the notes" in out.stdout
    assert listener.connections == 0, listener.requests[:1]
    assert server.of("/api/embed") and server.of("/api/chat")      # all went to Ollama itself
    assert "not on this machine" not in out.stderr


def test_part_one_s_own_client_sends_nothing_to_a_proxy(server, notes, tmp_path, listener, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", listener.url)             # a notebook on a machine with a proxy
    # No client given: Part I makes its own.
    hits, answer = rag.answer_question("How much coffee for 240 g of water?", notes, cache_dir=tmp_path)
    assert hits[0].chunk.source == "coffee-brewing.md" and "".join(answer)
    assert listener.connections == 0 and server.of("/api/embed")


@pytest.mark.parametrize("scheme", ["socks5h", "socks5"])
def test_a_socks_proxy_setting_does_not_stop_this_machines_ollama(cli, notes, listener, scheme):
    proxy = listener.url.replace("http", scheme, 1)
    out = cli("What is asyncio?", "--notes", notes, "--retrieve-only", env={"ALL_PROXY": proxy})
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "[1] python-asyncio.md" in out.stdout and listener.connections == 0


# ---- an Ollama elsewhere: the proxy settings as the user set them, and a note -------

def test_a_remote_ollama_goes_through_the_proxy_set_and_the_run_says_where(server, notes, tmp_path, listener):
    listener.answer = forward_to(server.url)
    proxy = listener.url.replace("//", "//me:secret@")
    out = run_cli("What is asyncio?", "--notes", notes, "--retrieve-only", "--cache", tmp_path / "c",
                  host=REMOTE, env={"HTTP_PROXY": proxy})
    assert out.returncode == 0, out.stderr
    assert "[1] python-asyncio.md" in out.stdout
    assert f"POST {REMOTE}/api/embed" in [f"{r['method']} {r['target']}" for r in listener.requests]
    (note,) = [line for line in out.stderr.splitlines() if "not on this machine" in line]
    assert note == f"note: the notes and questions go to Ollama at {REMOTE}, not on this machine, " \
                   f"through the proxy {listener.url}"
    assert "secret" not in out.stderr


def test_no_proxy_keeps_a_remote_ollama_off_the_proxy(notes, tmp_path, listener):
    out = run_cli("What is asyncio?", "--notes", notes, "--retrieve-only", "--cache", tmp_path / "c",
                  host=REMOTE, env={"HTTP_PROXY": listener.url, "NO_PROXY": ".invalid"})
    assert listener.connections == 0
    assert f"note: the notes and questions go to Ollama at {REMOTE}, not on this machine\n" in out.stderr
    assert f"Ollama is not reachable at {REMOTE}" in out.stderr and "Traceback" not in out.stderr


def test_a_socks_proxy_this_python_cannot_use_for_a_remote_ollama_is_one_line(notes, tmp_path):
    out = run_cli("What is asyncio?", "--notes", notes, "--cache", tmp_path / "c",
                  host=REMOTE, env={"ALL_PROXY": "socks5h://127.0.0.1:1"})
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    (line,) = out.stderr.splitlines()
    assert line.startswith("error: the proxy settings send Ollama's requests to socks5h://127.0.0.1:1")
    assert "NO_PROXY" in line


# ---- redirects: never followed, and said ------------------------------------------

@pytest.mark.parametrize("status", [307, 302, 308])
def test_a_redirect_is_not_followed_and_is_said(notes, tmp_path, listener, status):
    elsewhere = f"{listener.url}/api/embed"
    redirector = Listener(lambda request: (status, {"Location": elsewhere}, b""))
    try:
        out = run_cli("What is asyncio?", "--notes", notes, "--retrieve-only", "--cache", tmp_path / "c",
                      host=redirector.url)
    finally:
        redirector.close()
    assert listener.connections == 0, listener.requests[:1]        # no note went on to the other host
    assert f"Ollama at {redirector.url} answered with a redirect ({status}) to {elsewhere}; not followed: " \
           "point OLLAMA_HOST at Ollama itself" in out.stderr
    assert "ollama pull" not in out.stderr and "Traceback" not in out.stderr


def test_a_redirected_answer_is_not_followed_and_ends_the_run_with_why(cli, server, notes, listener):
    server.redirects["/api/chat"] = (307, f"{listener.url}/api/chat")
    out = cli("What is asyncio?", "--notes", notes)
    assert out.returncode == 3, out.stderr
    assert listener.connections == 0, listener.requests[:1]        # the prompt, sources and all, stayed
    assert f"answered with a redirect (307) to {listener.url}/api/chat; not followed" in out.stderr


# ---- a 404 is "not pulled" only when Ollama says so -------------------------------

@pytest.mark.parametrize("path", ["/api", "/v1"])
def test_an_ollama_host_with_a_path_is_told_to_drop_it(cli, server, notes, path):
    out = cli("What is asyncio?", "--notes", notes, "--retrieve-only", host=server.url + path)
    assert "ollama pull" not in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert f"Ollama at {server.url}{path} answered 404 (404 page not found): OLLAMA_HOST has a path, " \
           f"{path}, and Ollama's address has none: try OLLAMA_HOST={server.url}" in out.stderr


def test_a_server_without_api_embed_is_not_called_a_missing_model(notes, tmp_path):
    with FakeOllama() as old:
        old.absent.add("/api/embed")
        out = run_cli("What is asyncio?", "--notes", notes, "--retrieve-only", "--cache", tmp_path / "c",
                      host=old.url)
    assert "ollama pull" not in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert f"the server at {old.url} answered 404 (404 page not found) where Ollama's API should be: " \
           "it is not Ollama, or an Ollama too old for this script" in out.stderr


def test_a_model_ollama_does_not_have_is_still_not_pulled(cli, notes):
    out = cli("What is asyncio?", "--notes", notes, "--chat-model", "llama9:70b")
    assert out.returncode == 3 and "model 'llama9:70b' is not pulled: run `ollama pull llama9:70b`" in out.stderr


# ---- a stall mid-answer is not a model still loading --------------------------------

def test_an_answer_that_stalls_mid_way_says_it_stopped(notes, tmp_path):
    with FakeOllama() as server:
        release = server.hold("/api/chat")          # all but the last part is sent, then nothing
        try:
            out = run_cli("What is asyncio?", "--notes", notes, "--cache", tmp_path / "c", "--timeout", "1",
                          host=server.url, timeout=30)
        finally:
            release.set()
    assert out.returncode == 3 and "According to the notes" in out.stdout, out.stderr
    assert f"Ollama at {server.url} stopped answering mid-way: nothing more came within 1 s, so the answer " \
           "is cut short" in out.stderr
    assert "may still be loading" not in out.stderr


# ---- a second hostile pass -------------------------------------------------------

@pytest.mark.parametrize("spelling", ["127.1", "2130706433", "0"])
def test_this_machine_spelled_oddly_is_still_this_machine(cli, server, notes, listener, spelling):
    out = cli("What is asyncio?", "--notes", notes, host=server.url.replace("127.0.0.1", spelling),
              env={"HTTP_PROXY": listener.url})
    assert out.returncode == 0 and "Answer:" in out.stdout, out.stderr
    assert listener.connections == 0 and "not on this machine" not in out.stderr


def test_a_password_in_ollama_host_is_never_printed(cli, notes, dead_host):
    host = dead_host.replace("http://", "http://me:s3cret@")
    for args in (["What is asyncio?"], ["What is asyncio?", "--json"]):
        out = cli(*args, "--notes", notes, host=host)
        assert "s3cret" not in out.stdout + out.stderr and "not reachable at http://127.0.0.1:" in out.stderr


def test_tls_to_a_plain_http_ollama_says_so(cli, server, notes):
    out = cli("What is asyncio?", "--notes", notes, "--retrieve-only", host=server.url.replace("http:", "https:"))
    assert "did not answer in TLS" in out.stderr and "OLLAMA_HOST=http://" in out.stderr, out.stderr
    assert "start it with `ollama serve`" not in out.stderr


def test_an_error_page_is_one_line_of_at_most_200_characters(cli, server, notes):
    server.errors["/api/embed"] = (502, "<html>\n" + "<p>line of junk text here</p>\n" * 200 + "</html>")
    out = cli("What is asyncio?", "--notes", notes, "--retrieve-only")
    assert out.returncode == 0, out.stderr
    said = [line for line in out.stderr.splitlines() if "could not run" in line]
    assert said and all(len(line) < 400 for line in said) and "<p>" not in out.stderr.split(said[-1])[-1]
    assert out.stderr.count("line of junk") < 20
