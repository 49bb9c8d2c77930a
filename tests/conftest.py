"""Shared fixtures: a stand-in Ollama server, a notes folder, and a CLI runner."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ollama_server import FakeOllama  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "demo_rag.py"


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
    """Run `python demo_rag.py ARGS` as a new user would, against `host` (extra `env` on top)."""
    env = {**os.environ, "OLLAMA_HOST": host, "PYTHONIOENCODING": "utf-8", **(env or {})}
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, encoding="utf-8", env=env, cwd=cwd, input=stdin, timeout=timeout)


@pytest.fixture
def cli(server, tmp_path):
    """run_cli bound to the stand-in server, with a private cache folder."""
    cache = tmp_path / "cache"

    def run(*args, **kw):
        return run_cli(*args, "--cache", cache, host=kw.pop("host", server.url), **kw)
    run.cache = cache
    return run


def dead_host() -> str:
    """An address where nothing listens (a port we bound and released)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
