"""@path attachments and their Tab completion."""

from __future__ import annotations

import pytest

from qshell.agent.attachments import (
    MAX_COMPLETIONS,
    MAX_FILE_BYTES,
    complete_mention,
    expand_mentions,
)
from qshell.tools.paths import PathResolver


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "notes.txt").write_text("line one\nline two\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


@pytest.fixture
def resolver(root, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    return PathResolver(root, home=home)


def test_a_mention_keeps_the_text_and_appends_the_file_as_a_block(resolver):
    out = expand_mentions("look at @notes.txt please", resolver)
    assert out.text == (
        'look at @notes.txt please\n\n<file path="notes.txt">\nline one\nline two\n</file>'
    )
    assert out.attached == ["notes.txt"] and out.problems == []


def test_a_mention_at_the_start_and_one_in_a_subdirectory_are_both_attached(resolver):
    out = expand_mentions("@notes.txt and @src/app.py", resolver)
    assert out.attached == ["notes.txt", "src/app.py"]
    assert "<file path=\"src/app.py\">\nprint('hi')\n</file>" in out.text


def test_an_email_address_is_not_a_mention(resolver):
    out = expand_mentions("mail a@notes.txt or bob@example.com", resolver)
    assert out.text == "mail a@notes.txt or bob@example.com"
    assert out.attached == [] and out.problems == []


@pytest.mark.parametrize("punct", [".", ",", ";", ":", "!", "?", ")", "?!", ")."])
def test_trailing_punctuation_is_not_part_of_an_existing_path(resolver, punct):
    out = expand_mentions(f"(see @notes.txt{punct}", resolver)
    assert out.attached == ["notes.txt"] and out.problems == []
    assert out.text.startswith(f"(see @notes.txt{punct}\n\n")


def test_trailing_punctuation_stays_when_the_file_name_really_has_it(root, resolver):
    (root / "odd.").write_text("dot")
    out = expand_mentions("@odd.", resolver)
    assert out.attached == ["odd."]


def test_a_quoted_mention_may_contain_spaces(root, resolver):
    (root / "my notes.md").write_text("spaced")
    out = expand_mentions('read @"my notes.md" now', resolver)
    assert out.attached == ["my notes.md"]
    assert out.text.endswith('<file path="my notes.md">\nspaced\n</file>')
    assert out.text.startswith('read @"my notes.md" now')


def test_a_missing_path_is_a_problem_and_stays_plain_text(resolver):
    out = expand_mentions("fix @nothing/here.py.", resolver)
    assert out.text == "fix @nothing/here.py."
    assert out.attached == []
    assert len(out.problems) == 1 and out.problems[0].startswith("no file 'nothing/here.py'")


def test_a_home_path_and_a_path_outside_the_root_can_be_attached(tmp_path, resolver):
    (resolver.home / "todo.txt").write_text("from home")
    (tmp_path / "outside.txt").write_text("from outside")
    out = expand_mentions(f"@~/todo.txt @{tmp_path / 'outside.txt'}", resolver)
    assert out.problems == []
    assert out.attached == [str(resolver.home / "todo.txt"), str(tmp_path / "outside.txt")]
    assert "from home" in out.text and "from outside" in out.text


def test_the_same_file_mentioned_twice_is_attached_once(resolver):
    out = expand_mentions("@notes.txt vs @./notes.txt", resolver)
    assert out.attached == ["notes.txt"] and out.text.count("<file ") == 1


def test_a_file_over_the_size_cap_is_refused_with_a_hint(root, resolver):
    (root / "big.log").write_text("x" * (MAX_FILE_BYTES + 1))
    out = expand_mentions("@big.log", resolver)
    assert out.attached == [] and "<file" not in out.text
    assert out.problems == [
        "big.log is too large to attach (257 KiB); ask the model to read it instead"
    ]


def test_attachments_together_are_capped_at_one_mebibyte(root, resolver):
    names = []
    for i in range(5):
        (root / f"part{i}.txt").write_text("y" * (250 * 1024))
        names.append(f"@part{i}.txt")
    out = expand_mentions(" ".join(names), resolver)
    assert out.attached == ["part0.txt", "part1.txt", "part2.txt", "part3.txt"]
    assert len(out.problems) == 1 and out.problems[0].startswith("part4.txt is too large")
    assert "in all" in out.problems[0] and "ask the model to read it" in out.problems[0]


def test_a_binary_file_is_refused(root, resolver):
    (root / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    out = expand_mentions("@img.png", resolver)
    assert out.attached == [] and "binary" in out.problems[0]


@pytest.mark.parametrize("name", [".env", "server.pem"])
def test_a_secret_looking_file_is_refused_and_the_model_may_read_it_with_approval(
    root, resolver, name
):
    (root / name).write_text("TOKEN=abc")
    out = expand_mentions(f"@{name}", resolver)
    assert out.attached == [] and "TOKEN" not in out.text
    assert "secret" in out.problems[0] and "approval" in out.problems[0]


def test_a_symlink_to_a_secret_is_refused_too(root, resolver):
    (root / ".env").write_text("TOKEN=abc")
    (root / "config").symlink_to(root / ".env")
    out = expand_mentions("@config", resolver)
    assert out.attached == [] and "TOKEN" not in out.text


def test_a_directory_is_attached_as_a_gitignore_aware_listing(root, resolver):
    (root / "src" / "lib").mkdir()
    (root / "src" / "lib" / "deep.py").write_text("")
    (root / "src" / "build.tmp").write_text("")
    (root / ".gitignore").write_text("*.tmp\n")
    out = expand_mentions("what is in @src/", resolver)
    assert out.attached == ["src/"]
    assert out.text.endswith('<directory path="src/">\napp.py\nlib/\n</directory>')


def test_completion_lists_one_level_with_directories_marked(root, resolver):
    (root / "src" / "api").mkdir()
    assert complete_mention("", resolver) == ["notes.txt", "src/"]
    assert complete_mention("s", resolver) == ["src/"]
    assert complete_mention("src/", resolver) == ["src/api/", "src/app.py"]
    assert complete_mention("src/app", resolver) == ["src/app.py"]
    assert complete_mention("missing/", resolver) == []


def test_completion_hides_gitignored_entries_and_git(root, resolver):
    (root / ".git").mkdir()
    (root / "node_modules").mkdir()
    (root / "debug.log").write_text("")
    (root / ".gitignore").write_text("node_modules/\n*.log\n")
    assert complete_mention("", resolver) == [".gitignore", "notes.txt", "src/"]
    assert complete_mention(".g", resolver) == [".gitignore"]


def test_completion_is_capped(root, resolver):
    many = root / "many"
    many.mkdir()
    for i in range(MAX_COMPLETIONS + 50):
        (many / f"f{i:04d}").write_text("")
    found = complete_mention("many/", resolver)
    assert len(found) == MAX_COMPLETIONS and found == sorted(found)
