"""Random speculative write/read sequences never touch the real tree until apply."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from qshell.overlay import Overlay
from qshell.tools.paths import PathResolver
from tests.overlay.test_overlay import snapshot

EXISTING = {"a.txt": b"alpha\n", "src/b.py": b"beta\n", "src/pkg/c.py": b"gamma\n"}
NEW = ["new.txt", "src/new.py", "fresh/dir/d.txt"]
FILES = [*EXISTING, *NEW]
DIRS = ["", "src", "src/pkg", "fresh", "fresh/dir"]

writes = st.tuples(st.just("write"), st.sampled_from(FILES), st.binary(max_size=300))
reads = st.tuples(st.just("read"), st.sampled_from(FILES), st.just(b""))
listings = st.tuples(st.just("list"), st.sampled_from(DIRS), st.just(b""))
operations = st.lists(st.one_of(writes, reads, listings), max_size=25)


def view_names(model: dict[str, bytes], directory: str) -> set[str]:
    """The names a listing of `directory` should show, given the files in `model`."""
    prefix = f"{directory}/" if directory else ""
    return {rel[len(prefix) :].split("/")[0] for rel in model if rel.startswith(prefix)}


@given(operations)
def test_the_real_tree_is_byte_identical_until_apply_and_then_matches_the_view(ops):
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp) / "project"
        for rel, data in EXISTING.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        original = snapshot(root)
        model = dict(EXISTING)
        with Overlay.create(root, PathResolver(root), base_dir=Path(temp) / "base") as overlay:
            view = overlay.view
            for kind, rel, data in ops:
                path = root / rel
                if kind == "write":
                    view.write_bytes(path, data)
                    model[rel] = data
                elif kind == "read":
                    assert view.exists(path) == (rel in model)
                    if rel in model:
                        assert view.read_bytes(path) == model[rel]
                        assert view.stat(path).st_size == len(model[rel])
                elif view.exists(path):
                    assert {e.name for e in view.scandir(path)} == view_names(model, rel)
                assert snapshot(root) == original
            assert sorted(overlay.written) == sorted(
                {rel for kind, rel, _ in ops if kind == "write"}
            )
            overlay.apply()
        after = snapshot(root)
        assert {rel: data for rel, data in after.items() if data is not None} == model
