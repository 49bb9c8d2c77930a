"""The stand-in Ollama itself: the behaviours other tests rely on, checked through the real client."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ollama
import pytest

from ollama_server import FakeOllama, prompt_tokens


def sources(n: int) -> str:
    return "Sources:\n\n" + "\n\n".join(f"[{i}] n{i}.md\nfact {i} " + "word " * 200 for i in range(1, n + 1))


def test_chat_reports_counts_and_cuts_an_over_long_prompt_from_the_front(server):
    client = ollama.Client(host=server.url)
    messages = [{"role": "system", "content": "Rules."}, {"role": "user", "content": sources(20) + "\n\nQuestion: q"}]
    sent = prompt_tokens(messages)
    assert sent > 4096
    whole = client.chat(model="qwen3:0.6b", messages=messages, options={"num_ctx": 8192})
    assert whole.prompt_eval_count == sent and whole.eval_count > 0 and whole.eval_duration > 0
    assert whole.message.content.startswith("According to the notes, fact 1 ")
    cut = client.chat(model="qwen3:0.6b", messages=messages)              # the default window: 4096
    assert cut.prompt_eval_count <= 4096 < sent
    assert cut.message.content.startswith("According to the notes, nothing")   # [1] was cut off
    parts = list(client.chat(model="qwen3:0.6b", messages=messages, options={"num_ctx": 2048}, stream=True))
    assert parts[-1].done and parts[-1].prompt_eval_count <= 2048 and parts[-1].prompt_eval_duration > 0


def test_a_model_s_own_limit_caps_num_ctx(server):
    with FakeOllama(context_limits={"qwen3:0.6b": 2048}) as small:
        client = ollama.Client(host=small.url)
        messages = [{"role": "user", "content": sources(20)}]
        reply = client.chat(model="qwen3:0.6b", messages=messages, options={"num_ctx": 32768})
        assert reply.prompt_eval_count <= 2048
        info = client.show("qwen3:0.6b").modelinfo
        assert info == {"general.architecture": "qwen3", "qwen3.context_length": 2048, "qwen3.embedding_length": 256}
        with pytest.raises(ollama.ResponseError) as e:
            client.show("nope:1b")
        assert e.value.status_code == 404


def test_errors_on_request(server):
    client = ollama.Client(host=server.url)
    server.errors["/api/chat"] = (500, "runner died")
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model="qwen3:0.6b", messages=[{"role": "user", "content": "hi"}])
    assert (e.value.status_code, e.value.error) == (500, "runner died")
    del server.errors["/api/chat"]
    server.stream_error = "broke mid-way"
    stream = client.chat(model="qwen3:0.6b", messages=[{"role": "user", "content": "hi"}], stream=True)
    assert next(stream).message.content
    with pytest.raises(ollama.ResponseError, match="broke mid-way"):
        next(stream)
    server.embed_fail_after = 1
    client.embed(model="qwen3-embedding:0.6b", input=["a"])
    with pytest.raises(ollama.ResponseError) as e:
        client.embed(model="qwen3-embedding:0.6b", input=["b"])
    assert e.value.status_code == 500


def test_thinking_replies_and_formats(server):
    client = ollama.Client(host=server.url)
    rewrite = [{"role": "system", "content": "Rewrite the question"}, {"role": "user", "content": "Last question: x?"}]
    assert client.chat(model="thinker:1b", messages=rewrite).message.content.startswith("<think>")
    half = client.chat(model="halfthink:1b", messages=rewrite).message.content
    assert "<think>" not in half and half.endswith("</think>\n\nx?")
    schema = {"type": "object", "properties": {"query": {"type": "string"}, "n": {"type": "integer"}}}
    reply = client.chat(model="qwen3:0.6b", messages=rewrite, format=schema)
    assert json.loads(reply.message.content) == {"query": "x?", "n": 1}
    server.format_junk = True
    with pytest.raises(ValueError):
        json.loads(client.chat(model="qwen3:0.6b", messages=rewrite, format="json").message.content)


def test_wait_for_and_hold(server):
    import threading
    client = ollama.Client(host=server.url)
    release = server.hold("/api/chat")
    result = []
    t = threading.Thread(target=lambda: result.append("".join(
        p.message.content for p in client.chat(model="qwen3:0.6b", stream=True,
                                               messages=[{"role": "user", "content": "[1] a.md\nfact"}]))))
    t.start()
    server.wait_for(lambda: any(r["held"] for r in server.records("/api/chat")))
    assert not server.records("/api/chat")[0]["done"] and result == []
    release.set()
    server.wait_for(lambda: server.records("/api/chat")[0]["done"])
    t.join(10)
    assert result == ["According to the notes, fact [1]"]
    with pytest.raises(TimeoutError):
        server.wait_for(lambda: server.of("/api/embed"), timeout=0.1)


EMBED = "qwen3-embedding:0.6b"


@pytest.mark.parametrize("kind, sizes", [
    ("half", [256, 256]),                           # 4 inputs -> 2 vectors
    ("one_short", [256, 256, 256]),
    ("double", [256] * 8),
    ("ragged", [256, 255, 256, 255]),              # the 2nd and 4th one number short: the client takes it
    ("nan", [256] * 4),
])
def test_embed_mangle_after_the_first_n(server, kind, sizes):
    import math
    client = ollama.Client(host=server.url)
    server.embed_mangle, server.embed_mangle_after = kind, 1
    normal = client.embed(model=EMBED, input=["a", "b", "c", "d"]).embeddings      # the first: as usual
    assert [len(v) for v in normal] == [256] * 4
    mangled = client.embed(model=EMBED, input=["a", "b", "c", "d"]).embeddings
    assert [len(v) for v in mangled] == sizes
    if kind == "double":
        assert mangled[0::2] == mangled[1::2] == normal
    assert [any(map(math.isnan, v)) for v in mangled] == [kind == "nan"] + [False] * (len(mangled) - 1)
    assert [len(v) for v in client.embed(model=EMBED, input=["a"]).embeddings] == \
        {"half": [], "one_short": [], "double": [256, 256]}.get(kind, [256])     # one input
    server.embed_mangle = None
    assert len(client.embed(model=EMBED, input=["a", "b"]).embeddings) == 2


def test_embed_mangle_nan_is_the_bare_json_literal_and_no_field_fails_validation(server):
    import urllib.request
    server.embed_mangle = "nan"
    request = urllib.request.Request(server.url + "/api/embed", json.dumps({"model": EMBED, "input": ["a"]}).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as r:
        assert r.read().decode().startswith('{"model": "qwen3-embedding:0.6b", "embeddings": [[NaN, ')
    server.embed_mangle = "no_field"
    with urllib.request.urlopen(request, timeout=10) as r:
        assert json.loads(r.read()) == {"model": EMBED}
    import pydantic
    with pytest.raises(pydantic.ValidationError, match="embeddings"):     # what ollama 0.6 raises
        ollama.Client(host=server.url).embed(model=EMBED, input=["a", "b"])


@pytest.mark.parametrize("switch, raised", [
    ("stream_junk", json.JSONDecodeError),          # ollama's _stream json.loads()es every line
    ("stream_close", __import__("httpx").RemoteProtocolError),   # "incomplete chunked read"
])
def test_stream_junk_and_stream_close(server, switch, raised):
    client = ollama.Client(host=server.url)
    messages = [{"role": "user", "content": "[1] a.md\nfact"}]
    setattr(server, switch, True)
    stream = client.chat(model="qwen3:0.6b", messages=messages, stream=True)
    assert next(stream).message.content == "According "
    with pytest.raises(raised) as e:
        next(stream)
    assert type(e.value) is raised
    # a reply that is not streamed is not affected
    assert client.chat(model="qwen3:0.6b", messages=messages).message.content == "According to the notes, fact [1]"
    setattr(server, switch, False)
    assert "".join(p.message.content for p in client.chat(model="qwen3:0.6b", messages=messages, stream=True)) \
        == "According to the notes, fact [1]"


def test_every_test_id_is_short_enough_for_a_child_process_to_start():
    """pytest puts the running test's id in PYTEST_CURRENT_TEST, and Linux will not start a process
    whose environment holds a string over 128 KB. pytest 8 spells a parameter's whole value into the
    id (newer ones do when told to, as here): conftest's hook must keep a 400 KB note out of it."""
    tests = Path(__file__).resolve().parent
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-o", "parametrize_long_str_id_strategy=legacy", str(tests)],
                         capture_output=True, text=True, cwd=tests.parent, timeout=120)
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    assert out.returncode == 0 and len(ids) > 500, out.stdout[-2000:]
    assert max(map(len, ids)) < 1000, max(ids, key=len)[:300]
