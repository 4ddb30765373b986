"""The server child joins the bundled model's parts into one GGUF, atomically and checked.

`join_parts` and `model_file` are plain file work: these run without llama.cpp.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from qshell.llm import local_child
from qshell.llm.local_child import PartsMismatch, join_parts, model_file

PIECES = (b"GGUF" + b"a" * 1000, b"b" * 3, b"", b"c" * 2048)


def parts_in(tmp_path: Path) -> list[Path]:
    parts = []
    for index, data in enumerate(PIECES):
        part = tmp_path / "wheels" / f"part{index}.bin"
        part.parent.mkdir(exist_ok=True)
        part.write_bytes(data)
        parts.append(part)
    return parts


WHOLE = b"".join(PIECES)
DIGEST = hashlib.sha256(WHOLE).hexdigest()


def test_the_parts_are_joined_in_order_into_the_target_which_appears_only_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_child, "CHUNK", 100)  # several reads per part
    target = tmp_path / "cache" / "models" / "model.gguf"
    replaced: list[tuple[Path, bytes]] = []
    real_replace = os.replace

    def replace(source: str | os.PathLike[str], destination: str | os.PathLike[str]) -> None:
        assert not target.exists()  # nothing at the target until the file is whole
        replaced.append((Path(source), Path(source).read_bytes()))
        real_replace(source, destination)

    monkeypatch.setattr("qshell.llm.local_child.os.replace", replace)
    join_parts(parts_in(tmp_path), target, DIGEST)
    assert target.read_bytes() == WHOLE
    [(source, data)] = replaced
    assert source.parent == target.parent and source.name.endswith(".partial")
    assert data == WHOLE
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.gguf"]
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700


def test_parts_that_are_not_the_pinned_file_raise_and_leave_no_file(tmp_path: Path) -> None:
    target = tmp_path / "models" / "model.gguf"
    with pytest.raises(PartsMismatch) as caught:
        join_parts(parts_in(tmp_path), target, "0" * 64)
    assert DIGEST in str(caught.value) and "0" * 64 in str(caught.value)
    assert list(target.parent.iterdir()) == []


def test_a_part_that_cannot_be_read_leaves_no_partial_file(tmp_path: Path) -> None:
    parts = parts_in(tmp_path)
    parts[2].unlink()
    target = tmp_path / "models" / "model.gguf"
    with pytest.raises(OSError):
        join_parts(parts, target, DIGEST)
    assert list(target.parent.iterdir()) == []


def test_the_model_file_is_joined_once_and_announced_and_a_plain_model_is_used_as_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[dict[str, object]] = []
    monkeypatch.setattr(local_child, "_say", lambda event, **fields: said.append({event: fields}))
    target = tmp_path / "models" / "model.gguf"
    config = {"model": str(target), "parts": [str(p) for p in parts_in(tmp_path)], "sha256": DIGEST}
    assert model_file(json.loads(json.dumps(config))) == target
    assert target.read_bytes() == WHOLE
    assert said == [{"joining": {"target": str(target)}}]
    inode = target.stat().st_ino
    assert model_file(config) == target  # already joined, as its stamp says: not again
    assert target.stat().st_ino == inode and len(said) == 1
    plain = tmp_path / "other.gguf"
    assert model_file({"model": str(plain)}) == plain and len(said) == 1


def test_a_joined_model_changed_since_its_join_is_joined_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    monkeypatch.setattr(local_child, "_say", lambda event, **fields: said.append(event))
    target = tmp_path / "models" / "model.gguf"
    config = {"model": str(target), "parts": [str(p) for p in parts_in(tmp_path)], "sha256": DIGEST}
    model_file(config)
    with open(target, "r+b") as handle:  # corrupted in place, its size kept
        handle.write(b"XXXX")
    assert target.stat().st_size == len(WHOLE)
    model_file(config)
    assert target.read_bytes() == WHOLE and said == ["joining", "joining"]
    target.with_name(target.name + ".joined").unlink()  # no stamp: not trusted either
    model_file(config)
    assert target.read_bytes() == WHOLE and said == ["joining"] * 3
