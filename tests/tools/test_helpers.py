"""The shared helpers behind the tools: walk, diffs, truncate, files and html_text."""

from __future__ import annotations

from pathlib import Path

from qshell.tools.diffs import count_lines, unified_diff
from qshell.tools.files import decode_text, looks_binary
from qshell.tools.html_text import html_to_text
from qshell.tools.truncate import HeadTailBuffer, cap_middle
from qshell.tools.walk import expand_braces, glob_matcher, list_dir, walk_files


def test_walk_lets_a_nested_gitignore_reinclude_a_file(make_tree, root: Path) -> None:
    tree = {".gitignore": "*.gen\n", "sub/.gitignore": "!keep.gen\n", "top.gen": ""}
    make_tree({**tree, "sub/keep.gen": "", "sub/drop.gen": ""})
    found = {p.relative_to(root).as_posix() for p in walk_files(root, root)}
    assert found == {".gitignore", "sub/.gitignore", "sub/keep.gen"}


def test_walk_from_a_subdirectory_applies_the_root_gitignore(make_tree, root: Path) -> None:
    make_tree({".gitignore": "/sub/skip.txt\n", "sub/skip.txt": "", "sub/keep.txt": ""})
    found = {p.name for p in walk_files(root / "sub", root)}
    assert found == {"keep.txt"}


def test_walk_does_not_follow_directory_symlinks(make_tree, root: Path, tmp_path: Path) -> None:
    make_tree({"a.txt": ""})
    (tmp_path / "far").mkdir()
    (tmp_path / "far" / "b.txt").write_text("")
    (root / "link").symlink_to(tmp_path / "far")
    assert [p.name for p in walk_files(root, root)] == ["a.txt"]


def test_list_dir_hides_ignored_entries_and_git(make_tree, root: Path) -> None:
    make_tree({".gitignore": "out/\n", "out/x": "", ".git/HEAD": "", "src/a.py": ""})
    assert list_dir(root, root) == [(".gitignore", False), ("src", True)]


def test_expand_braces_handles_several_and_nested_groups() -> None:
    assert expand_braces("a.{b,c}") == ["a.b", "a.c"]
    assert sorted(expand_braces("{x,y}/{1,2}")) == ["x/1", "x/2", "y/1", "y/2"]
    assert expand_braces("plain") == ["plain"]


def test_glob_matcher_ignores_leading_dot_slash_and_negation() -> None:
    assert glob_matcher("./src/*.py")("src/a.py")
    assert glob_matcher("!*.py")("deep/a.py")


def test_unified_diff_marks_new_files_and_missing_final_newline() -> None:
    created = unified_diff("", "one\ntwo", "f.txt")
    assert created.text.startswith("--- /dev/null\n+++ b/f.txt\n")
    assert "\\ No newline at end of file" in created.text
    assert (created.added, created.removed) == (2, 0)
    assert count_lines("one\ntwo") == 2 and count_lines("") == 0


def test_unified_diff_of_equal_texts_is_empty() -> None:
    assert unified_diff("a\n", "a\n", "f").text == ""


def test_cap_middle_keeps_head_and_tail() -> None:
    capped = cap_middle("H" * 50 + "T" * 50, 20)
    assert capped.startswith("H" * 10) and capped.endswith("T" * 10)
    assert "80 characters omitted" in capped
    assert cap_middle("short", 20) == "short"


def test_head_tail_buffer_bounds_memory_and_notes_the_gap() -> None:
    buffer = HeadTailBuffer(4, 4)
    for chunk in (b"abc", b"defgh", b"ijklmn"):
        buffer.write(chunk)
    assert buffer.total_bytes == 14
    assert buffer.text() == "abcd\n[... 6 bytes omitted ...]\nklmn"
    whole = HeadTailBuffer(4, 4)
    whole.write(b"abcdefg")
    assert whole.text() == "abcdefg"


def test_binary_sniffing_allows_a_cut_multibyte_character() -> None:
    assert not looks_binary(b"caf" + "\u00e9".encode()[:1])
    assert looks_binary(b"a\x00b")
    assert looks_binary(b"\xff\xfe plain")
    assert decode_text(b"\xef\xbb\xbfhi") is not None
    assert decode_text(b"\xff\xfe") is None


def test_html_to_text_skips_links_without_a_usable_target() -> None:
    text = html_to_text('<p><a href="#top">Top</a> <a href="javascript:x()">Run</a></p>', "")
    assert text == "Top Run"
