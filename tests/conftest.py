"""Shared fixtures: a stand-in Ollama server, a notes folder, and a CLI runner."""
from __future__ import annotations

import importlib.util
import os
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "demo_rag.py"
# The suite starts the script about a thousand times. `python demo_rag.py` compiles the whole file
# at every start (Python keeps no bytecode for the script it runs), 0.2 s of which nothing is under
# test: so the children run it as `python -m demo_rag` would, from bytecode compiled once here,
# into __pycache__ as any import does (this machine's PYTHONDONTWRITEBYTECODE writes none itself).
# Same code, same process, same __file__ and argv; test_cli runs the README's `python demo_rag.py`.
py_compile.compile(str(SCRIPT), cfile=importlib.util.cache_from_source(str(SCRIPT)), doraise=True)
SCRIPT_COMMAND = [sys.executable, "-c", "import runpy, sys; sys.path[0] = sys.argv.pop(1); "
                  "runpy.run_module('demo_rag', run_name='__main__', alter_sys=True)", str(ROOT)]

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import demo_rag as rag  # noqa: E402
from ollama_server import FakeOllama  # noqa: E402
# Not passed to the CLI's children (unless a test's `env` sets them). PYTHONUNBUFFERED is set in this
# machine's environment but not in a user's: with it, a print() the script forgets to flush=True still
# shows up at once. DEMO_RAG_NO_LOG may be set by a developer who keeps no gap log, as the README
# offers: the gap log's tests set it themselves.
NOT_A_USERS = ("PYTHONUNBUFFERED", "DEMO_RAG_NO_LOG", "PYTEST_CURRENT_TEST")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """With pytest-xdist installed (.ci/run installs it) and no -n given, the suite runs on
    every core: most of its time goes to children starting and waiting, which overlap well."""
    worker = hasattr(config, "workerinput") or "PYTEST_XDIST_WORKER" in os.environ
    if getattr(config.option, "numprocesses", 0) is None and not config.option.collectonly \
            and not worker:
        config.option.numprocesses = "auto"


def pytest_make_parametrize_id(config, val, argname):
    """A long string parameter gets a short test id, on every pytest version.

    Older pytest (and newer ones told to) spell the whole value into the id, and pytest puts that
    id in PYTEST_CURRENT_TEST: a 400 KB note then made every child process fail to start, since
    Linux refuses an environment string over 128 KB (E2BIG). The id keeps the value's start."""
    if isinstance(val, (str, bytes)) and len(val) > 100:
        start = val[:30] if isinstance(val, str) else val[:30].decode("latin-1")
        return f"{start.encode('unicode_escape').decode('ascii')}...{len(val)}-long"
    return None


def user_env(host: str, extra: dict | None = None) -> dict:
    """The environment a user's `python demo_rag.py` runs in: ours without NOT_A_USERS, OLLAMA_HOST
    set to `host`, then `extra` on top (which may set NOT_A_USERS variables back explicitly)."""
    env = {k: v for k, v in os.environ.items() if k not in NOT_A_USERS}
    return {**env, "OLLAMA_HOST": host, "PYTHONIOENCODING": "utf-8", **(extra or {})}


@pytest.fixture(autouse=True, scope="session")
def checkout_stays_clean():
    """Tests write under tmp_path only: the checkout's own cache folder is left as it was."""
    def listing():
        return sorted(p.name for p in (ROOT / ".demo-cache").glob("*")) if (ROOT / ".demo-cache").exists() else []
    before = listing()
    yield
    assert listing() == before, "a test wrote into the checkout's .demo-cache/"


@pytest.fixture
def server(monkeypatch):
    """A running stand-in Ollama; OLLAMA_HOST points at it for in-process clients."""
    with FakeOllama() as s:
        monkeypatch.setenv("OLLAMA_HOST", s.url)
        yield s


@pytest.fixture
def notes(tmp_path) -> Path:
    """A copy of demo-data/ to change freely."""
    dst = tmp_path / "notes"
    shutil.copytree(ROOT / "demo-data", dst)
    return dst


def run_cli(*args, host: str, cwd: Path | None = None, stdin: str | None = None,
            timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `python demo_rag.py ARGS` as a new user would, against `host` (extra `env` on top; see user_env)."""
    env = user_env(host, env)
    return subprocess.run([*SCRIPT_COMMAND, *map(str, args)], capture_output=True,
                          text=True, encoding="utf-8", env=env, cwd=cwd, input=stdin, timeout=timeout)


@pytest.fixture
def cli(server, tmp_path):
    """run_cli bound to the stand-in server, with a private cache folder."""
    cache = tmp_path / "cache"

    def run(*args, **kw):
        return run_cli(*args, "--cache", cache, host=kw.pop("host", server.url), **kw)
    run.cache = cache
    return run


@pytest.fixture
def dead_host() -> str:
    """An address where nothing listens: a port kept bound, never listen()ed on, for the test's
    duration, so no other program can take it and connecting is refused at once."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def spawn():
    """Popen for tests: every process started through it is killed when the test ends, pass or fail.
    The child gets user_env(host, env): no PYTHONUNBUFFERED unless `env` sets it."""
    started: list[subprocess.Popen] = []

    def start(args, host: str, **kw) -> subprocess.Popen:
        env = user_env(host, kw.pop("env", None))
        p = subprocess.Popen([*SCRIPT_COMMAND, *map(str, args)], env=env,
                             stdin=kw.pop("stdin", subprocess.DEVNULL), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, **kw)
        started.append(p)
        return p
    try:
        yield start
    finally:
        for p in started:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=30)
            for pipe in (p.stdin, p.stdout, p.stderr):
                if pipe:
                    pipe.close()


def read_terminal(leader: int) -> bytes:
    """All that a child wrote to the pseudo-terminal whose leader end is `leader`, until it closed it."""
    got = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:                          # EIO: the child closed the terminal
            break
        if not data:
            break
        got.append(data)
    return b"".join(got)


def read_until(pipe, text: str, timeout: float = 10) -> str:
    """Read a binary pipe as it arrives until `text` shows up; return what was read.

    Raises TimeoutError with what was read when `text` has not shown up after `timeout` seconds.
    """
    import selectors
    import time
    got = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(pipe, selectors.EVENT_READ)
        while text.encode() not in got:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise TimeoutError(f"{text!r} did not arrive within {timeout}s; got {got.decode(errors='replace')!r}")
            data = os.read(pipe.fileno(), 65536)
            if not data:
                raise EOFError(f"{text!r} never arrived; got {got.decode(errors='replace')!r}")
            got += data
    return got.decode()


# Runs demo_rag.py's command line with an audit hook that logs every file opened under
# AUDIT_UNDER to AUDIT_LOG (one path per line), whichever way the script opens it.
AUDIT_MAIN = r"""
import os, runpy, sys
under, log = os.environ["AUDIT_UNDER"], os.environ["AUDIT_LOG"]
def hook(event, args):
    if event != "open":
        return
    path = os.fspath(args[0]) if isinstance(args[0], (str, os.PathLike)) else ""
    if isinstance(path, str) and path.startswith(under):
        with open(log, "a", encoding="utf-8") as f:
            f.write(path + "\n")
sys.addaudithook(hook)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_cli_audited(*args, host: str, under: Path, log: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    """run_cli, logging to `log` every file the script opens under the folder `under`."""
    env = user_env(host, {"AUDIT_UNDER": os.path.join(under, ""), "AUDIT_LOG": str(log)})
    return subprocess.run([sys.executable, "-c", AUDIT_MAIN, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, encoding="utf-8", env=env, timeout=timeout)


def read_cache(path: Path) -> tuple[dict, "rag.np.ndarray"]:
    """A cache file's fields as one dict (its header and the rest), and a copy of its vectors."""
    with open(path, "rb") as f:
        d = rag.BuiltinsOnlyUnpickler(f).load()
        d.update(rag.BuiltinsOnlyUnpickler(f).load())
    return d, rag.load_index(path)[0].vectors.copy()


def write_cache(path: Path, d: dict, vectors, header_keys=None) -> None:
    """Write read_cache()'s two back as save_index lays them out (header_keys=(): one pickle of it all,
    as format 5 did)."""
    import pickle
    keys = rag.HEADER_KEYS if header_keys is None else header_keys
    with open(path, "wb") as f:
        if keys:
            pickle.dump({k: d[k] for k in keys}, f)
        pickle.dump({k: v for k, v in d.items() if k not in keys}, f)
        f.write(bytes(-f.tell() % rag.VECTOR_ALIGN))
        vectors.astype("<f4").tofile(f)


PROBES = tuple(q for qs in rag.FLOOR_PROBES.values() for q in qs)


def note_texts(texts: list[str]) -> list[str]:
    """The embedded texts that came from notes: without the off-topic questions each build asks
    to calibrate the relevance floor (embedded with whatever query template the model has)."""
    return [t for t in texts if not t.endswith(PROBES)]


def write_long_chinese_note(notes: Path, sections: int = 8) -> None:
    """龙井.md: `sections` Chinese sections of about 1,300 characters, each a full chunk and about
    as many tokens: eight of them as sources need a 16,384 context, four fit in 8,192."""
    (notes / "龙井.md").write_text("# 龙井\n\n" + "".join(f"## 第{i}节\n\n" + "龙井茶用八十度的水冲泡，" * 110 + "\n\n"
                                                      for i in range(sections)), encoding="utf-8")
