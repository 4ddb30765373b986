"""The bundled model's real parts, joined by the server child, are the pinned GGUF."""

from __future__ import annotations

from qshell.llm.local import BUNDLED_SIZE, LocalServer, bundled_parts


def test_the_bundled_parts_join_into_the_whole_gguf_in_the_cache(local_server: LocalServer):
    parts = bundled_parts()
    assert parts is not None and len(parts) == 6
    model = local_server.model
    assert model.bundled and model.parts == tuple(parts)
    assert model.path.stat().st_size == BUNDLED_SIZE  # joined, and its SHA-256 checked
    with open(model.path, "rb") as handle:
        assert handle.read(4) == b"GGUF"
    assert not [p for p in model.path.parent.iterdir() if p.name.endswith(".partial")]
