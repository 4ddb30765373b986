"""The embedded model's server process: `python -m qshell.llm.local_child CONFIG_JSON`.

qshell starts this as a child (see `local.py`). It converts the bundled model once to a
faster quantisation in the cache directory when asked, loads the model into
`llama_cpp.server`'s FastAPI app, binds 127.0.0.1 on an ephemeral port itself (so no
other process can take the port between choosing and listening), reports each step as
one JSON line on stdout (`{"event": "converting"|"loading"|"listening", ...}`), and
serves with uvicorn. It exits when its standard input reaches end of file, which happens
when qshell exits for any reason, SIGKILL included: that is what keeps it from being
orphaned. Settings are passed explicitly, and the server's own environment-variable
settings (`MODEL`, `PORT`, ...) are not consulted. The API key comes in the environment
variable `QSHELL_LOCAL_KEY`, never on the command line, which other users can read.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import sys
import threading
from pathlib import Path
from typing import Any

KEY_ENV = "QSHELL_LOCAL_KEY"
Q8_0 = 7  # llama_ftype LLAMA_FTYPE_MOSTLY_Q8_0


_report = sys.stdout  # replaced by a private copy of stdout in `serve`


def _say(event: str, **fields: Any) -> None:
    _report.write(json.dumps({"event": event, **fields}) + "\n")
    _report.flush()


def _private_report_channel() -> None:
    """Keep stdout for the JSON protocol only: the server prints to fd 1, so fd 1 becomes
    a copy of stderr (the log file) and the protocol writes to a private duplicate."""
    global _report
    _report = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def _exit_when_parent_goes() -> None:
    """Block until stdin closes (qshell exited or was killed), then exit at once."""

    def watch() -> None:
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def convert(source: Path, target: Path, threads: int) -> None:
    """Re-quantise `source` to Q8_0 at `target`, atomically (a partial file never remains)."""
    import llama_cpp

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = Q8_0
    params.allow_requantize = True
    params.nthread = threads
    try:
        rc = llama_cpp.llama_model_quantize(
            str(source).encode(), str(partial).encode(), ctypes.byref(params)
        )
        if rc != 0:
            raise RuntimeError(f"llama_model_quantize returned {rc}")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def plain_text_templates() -> None:
    """llama-cpp-python renders its function-calling chat template with HTML autoescaping,
    so a prompt's quotes and angle brackets reach the model as `&#34;` and `&lt;` (and a
    small model copies them into its answers and tool arguments). A prompt is not HTML:
    its chat-format module gets a jinja2 whose `select_autoescape` never escapes."""
    import jinja2
    from llama_cpp import llama_chat_format

    class PlainJinja:
        def __getattr__(self, name: str) -> Any:
            return getattr(jinja2, name)

        @staticmethod
        def select_autoescape(*_args: Any, **_kwargs: Any) -> Any:
            return lambda _template_name=None: False

    llama_chat_format.jinja2 = PlainJinja()  # type: ignore[assignment,attr-defined]


def _model_settings(config: dict[str, Any], model: Path) -> Any:
    from llama_cpp.server.settings import ModelSettings

    threads = int(config.get("threads") or 0) or os.cpu_count() or 1
    fields: dict[str, Any] = {
        "model": str(model),
        "model_alias": config.get("alias") or model.name,
        "n_ctx": int(config["n_ctx"]),
        "n_threads": threads,
        "n_threads_batch": threads,
        "logits_all": False,
        "flash_attn": True,
        "cache": True,
        "cache_type": "ram",
        "cache_size": int(config.get("cache_bytes") or 512 << 20),
        "verbose": True,  # llama.cpp's log goes to stderr, which qshell sends to a file
    }
    if config.get("chat_format"):
        fields["chat_format"] = config["chat_format"]
    return ModelSettings(**fields)


def serve(config: dict[str, Any]) -> None:
    """Convert if asked, load, bind, report and serve until stdin closes."""
    _private_report_channel()
    _exit_when_parent_goes()
    model = Path(config["model"])
    converted = config.get("convert_to")
    threads = int(config.get("threads") or 0) or os.cpu_count() or 1
    if converted:
        target = Path(converted)
        if not target.exists():
            _say("converting", source=str(model), target=str(target))
            try:
                convert(model, target, threads)
            except Exception as exc:  # a failed conversion falls back to the original file
                _say("convert_failed", reason=str(exc))
            else:
                model = target
        else:
            model = target
    _say("loading", model=str(model))
    plain_text_templates()
    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ServerSettings

    server_settings = ServerSettings(
        host="127.0.0.1",
        port=0,
        api_key=os.environ.get(KEY_ENV) or None,
        interrupt_requests=False,  # queue requests; a new one must not cut the current stream
        disable_ping_events=True,
    )
    app = create_app(
        server_settings=server_settings, model_settings=[_model_settings(config, model)]
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    )
    _say("listening", port=port, model=str(model))
    server.run(sockets=[sock])


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m qshell.llm.local_child CONFIG_JSON\n")
        return 2
    serve(json.loads(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
