"""A real ``stratamem`` HTTP server for the web tests: uvicorn in a thread on a free 127.0.0.1 port."""

from __future__ import annotations

import socket
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from stratamem import Config, Memory
from stratamem.ingest import read_file
from stratamem.web import Security, create_app
from stratamem.web.limits import Limits


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def web_config() -> Config:
    """Small segments so a short conversation builds a pyramid; quick lock timeouts."""
    return Config().replace(pyramid={"micro_chunk_size": 6, "mini_chunk_size": 3}, store={"busy_timeout_ms": 200})


def load_sample(mem: Memory) -> int:
    """Store the bundled sample conversation (6 sessions, 276 turns); returns the turn count."""
    sample = resources.files("stratamem") / "data" / "sample_conversation.jsonl"
    with resources.as_file(sample) as path:
        return len(mem.add_sessions(read_file(path)))


class Server:
    """``create_app`` served by uvicorn in a daemon thread until :meth:`stop`."""

    def __init__(
        self,
        db: Path,
        *,
        namespace: str = "default",
        security: Security | None = None,
        project_dir: Path | None = None,
        config: Config | None = None,
        summarizer: Any = None,
        limits: Limits | None = None,
    ) -> None:
        self.db = db
        self.memory = Memory(db, namespace=namespace, config=config or web_config(), summarizer=summarizer)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        app = create_app(self.memory, security=security, project_dir=project_dir, limits=limits)
        self.app: Any = app
        self.spaces: Any = app.spaces
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the web server did not start")
            time.sleep(0.02)

    def client(self, **kw: Any) -> httpx.Client:
        """An HTTP client for this server."""
        return httpx.Client(base_url=self.url, timeout=30, **kw)

    def stop(self) -> None:
        """Stop serving and close the store."""
        self.server.should_exit = True
        self.thread.join(10)
        self.memory.close()
