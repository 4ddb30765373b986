"""The secret index judges files by what they hold, and knows a secret by every name it has.

A file that holds a key is found whatever it is called; one written in place (same inode,
same directory listing) is judged again once `REJUDGE_S` has passed; what an installed
environment or a tool's cache holds is not read; every hard link of a secret file is
masked, even one whose content alone would have made a redacted copy; and the copy the
jail shows keeps every byte but the secrets'."""

from __future__ import annotations

import os
import time
from pathlib import Path

from qshell.permissions.file_secrets import Copies, holds_secret, without_secrets
from qshell.sandbox.masks import REJUDGE_S, SecretIndex, Walk
from qshell.tools.paths import PathResolver
from tests.redaction.fakes import github_token, pem_block


def index_of(root: Path) -> SecretIndex:
    paths = PathResolver(root, home=root.parent / "home")
    return SecretIndex(root, paths.is_secret, Walk(content=holds_secret))


def names(found: frozenset[Path] | tuple[Path, ...], root: Path) -> set[str]:
    return {path.relative_to(root).as_posix() for path in found}


def test_a_file_is_found_by_what_it_holds_and_judged_again_when_written_in_place(tmp_path):
    (tmp_path / "backup_key.txt").write_text(pem_block() + "\n")
    (tmp_path / "notes.txt").write_text("nothing yet\n")
    index = index_of(tmp_path)
    assert names(index.by_content(), tmp_path) == {"backup_key.txt"}
    with (tmp_path / "notes.txt").open("a") as out:  # in place: the directory is unchanged
        out.write(f"token: {github_token()}\n")
    time.sleep(REJUDGE_S * 1.5)
    assert names(index.by_content(), tmp_path) == {"backup_key.txt", "notes.txt"}
    (tmp_path / "notes.txt").write_text("nothing again\n")
    time.sleep(REJUDGE_S * 1.5)
    assert names(index.paths(), tmp_path) == {"backup_key.txt"}


def test_environments_and_caches_are_not_read_but_the_project_is(tmp_path):
    key = pem_block() + "\n"
    for where in (".venv/lib/site.py", ".mypy_cache/3.12/x.json", "node_modules/a/t.pem.txt"):
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / where).write_text(key)
    (tmp_path / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / ".mypy_cache" / "CACHEDIR.TAG").write_text(
        "Signature: 8a477f597d28d172789f06886806bc55\n"
    )
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "fixture.txt").write_text(key)
    assert names(index_of(tmp_path).by_content(), tmp_path) == {"src/fixture.txt"}


def test_every_name_of_a_secret_file_is_masked_not_copied(tmp_path):
    (tmp_path / ".env").write_text(f"TOKEN={github_token()}\nWORD=plain\n")
    os.link(tmp_path / ".env", tmp_path / "notes.txt")
    (tmp_path / "sub").mkdir()
    os.link(tmp_path / ".env", tmp_path / "sub" / "again.txt")
    index = index_of(tmp_path)
    assert names(index.paths(), tmp_path) == {".env", "notes.txt", "sub/again.txt"}
    assert index.by_content() == frozenset()  # masked whole, as `.env` is


def test_the_copy_keeps_every_byte_but_the_secrets(tmp_path):
    data = b"\x00\xffhead\n" + pem_block().encode() + b"\ntail \xe9\n"
    shown = without_secrets(data)
    assert shown == b"\x00\xffhead\n[redacted: private-key #0]\ntail \xe9\n"
    (tmp_path / "k.bin").write_bytes(data)
    copies = Copies()  # the copies live as long as it does
    copy = copies.copy_of(tmp_path / "k.bin")
    assert copy is not None and copy.read_bytes() == shown
    (tmp_path / "plain.txt").write_text("nothing\n")
    assert copies.copy_of(tmp_path / "plain.txt") is None


def test_a_utf8_file_is_judged_as_text_and_its_copy_keeps_its_bytes():
    """`mysql -p…` is a placeholder only read as UTF-8 (as Latin-1 the ellipsis is three
    other characters); a secret after non-ASCII text is replaced at the right bytes."""
    assert without_secrets("run `mysql -p…` to connect\n".encode()) == (
        "run `mysql -p…` to connect\n".encode()
    )
    token = github_token()
    data = f"héllo — token = {token}\n".encode()
    assert without_secrets(data) == "héllo — token = [redacted: github-token #0]\n".encode()
