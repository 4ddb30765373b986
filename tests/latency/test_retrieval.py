"""Which project files a small model is shown with its prompt, and which command runs the
project's tests (latency/retrieval.py); and that attaching them never carries a secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qshell.agent.attachments import expand_mentions
from qshell.latency import retrieval
from qshell.latency.retrieval import BUDGET_BYTES, MAX_FILES, shown_files
from qshell.tools.paths import PathResolver


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "README.md").write_text("# Shop\nA tiny shop.\n")
    (root / "app.py").write_text("from shop import discount\nprint(discount(10))\n")
    (root / "shop.py").write_text("def discount(price):\n    return price * 0.9\n")
    (root / "lib").mkdir()
    (root / "lib" / "cart.js").write_text("function addItem(cart, item) { cart.push(item) }\n")
    (root / "notes.txt").write_text("- buy milk\n")
    return root


def test_a_named_file_is_shown(root: Path) -> None:
    assert shown_files("what is in notes.txt?", root) == ["notes.txt"]
    assert shown_files("what is in lib/cart.js?", root) == ["lib/cart.js"]


def test_a_named_python_file_brings_the_project_module_it_imports(root: Path) -> None:
    assert shown_files("explain app.py", root) == ["app.py", "shop.py"]
    (root / "app.py").write_text("import os\nfrom lib import nothing\nprint(os.sep)\n")
    assert shown_files("explain app.py", root) == ["app.py"]  # nothing of the project's


def test_the_tests_of_a_defined_name_follow_its_definition(root: Path) -> None:
    (root / "tests").mkdir()
    (root / "tests" / "test_shop.py").write_text(
        "from shop import discount\n\ndef test_it():\n    assert discount(10) == 9\n"
    )
    (root / "tests" / "test_other.py").write_text("def test_other():\n    pass\n")
    assert shown_files("why is discount wrong?", root) == ["shop.py", "tests/test_shop.py"]


def test_a_file_defining_a_name_the_prompt_mentions_is_shown(root: Path) -> None:
    assert shown_files("what does discount do?", root) == ["shop.py"]
    assert shown_files("how does addItem work", root) == ["lib/cart.js"]  # two levels down


def test_a_named_file_comes_first_then_the_definitions(root: Path) -> None:
    assert shown_files("does app.py call discount right?", root) == ["app.py", "shop.py"]


def test_the_readme_is_shown_for_a_question_about_the_whole_project(root: Path) -> None:
    assert shown_files("what does this project do?", root) == ["README.md"]
    assert shown_files("give me an overview", root) == ["README.md"]


def test_a_question_about_nothing_in_the_project_is_shown_nothing(root: Path) -> None:
    assert shown_files("how do I reverse a string in Python?", root) == []
    assert shown_files("hello", root) == []
    (root / "README.md").unlink()
    assert shown_files("what does this project do?", root) == []


def test_at_most_two_files_are_shown(root: Path) -> None:
    shown = shown_files("compare app.py, shop.py and notes.txt", root)
    assert len(shown) == MAX_FILES == 2
    assert shown == ["app.py", "shop.py"]


def test_a_missing_file_a_directory_and_a_path_outside_the_root_are_not_chosen(
    root: Path, tmp_path: Path
) -> None:
    (tmp_path / "outside.py").write_text("SECRET = 1\n")
    assert shown_files("explain missing.py", root) == []
    assert shown_files("explain lib/", root) == []
    assert shown_files("explain ../outside.py", root) == []
    assert shown_files(f"explain {tmp_path / 'outside.py'}", root) == []


def test_what_an_attached_file_holds_chooses_no_more_files(root: Path) -> None:
    prompt = 'hello\n\n<file path="notes.txt">\nsee discount in shop.py\n</file>'
    assert shown_files(prompt, root) == ["notes.txt"]  # the attached file itself, only


def resolver_for(root: Path, tmp_path: Path) -> PathResolver:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return PathResolver(root, home=home)


def test_the_files_shown_are_attached_as_though_mentioned(root: Path, tmp_path: Path) -> None:
    prompt = "what does discount do?"
    implied = shown_files(prompt, root)
    out = expand_mentions(
        prompt, resolver_for(root, tmp_path), implied=implied, implied_budget=BUDGET_BYTES
    )
    assert out.attached == ["shop.py"] and out.problems == []
    assert out.text == (
        'what does discount do?\n\n<file path="shop.py">\n'
        "def discount(price):\n    return price * 0.9\n</file>"
    )
    assert (root / "shop.py").resolve() in {p.resolve() for p in out.seen}


def test_a_file_also_mentioned_is_attached_once(root: Path, tmp_path: Path) -> None:
    out = expand_mentions(
        "explain @app.py", resolver_for(root, tmp_path), implied=["app.py"], implied_budget=999
    )
    assert out.attached == ["app.py"] and out.text.count('<file path="app.py">') == 1


@pytest.mark.parametrize("name", ["server.pem", "id_rsa", ".env"])
def test_a_secret_looking_file_is_never_attached_and_says_nothing(
    root: Path, tmp_path: Path, name: str
) -> None:
    (root / name).write_text("TOKEN=sk-abcdefghijklmnop\n")
    out = expand_mentions(
        f"explain {name}", resolver_for(root, tmp_path), implied=[name], implied_budget=BUDGET_BYTES
    )
    assert out.attached == [] and out.problems == []
    assert "TOKEN" not in out.text and out.text == f"explain {name}"


def test_a_shown_file_over_the_budget_is_left_out_silently(root: Path, tmp_path: Path) -> None:
    (root / "big.py").write_text("x = 1\n" * 2000)
    out = expand_mentions(
        "explain big.py", resolver_for(root, tmp_path), implied=["big.py"], implied_budget=1024
    )
    assert out.attached == [] and out.problems == [] and out.text == "explain big.py"
    missing = expand_mentions(
        "explain gone.py", resolver_for(root, tmp_path), implied=["gone.py"], implied_budget=1024
    )
    assert missing.attached == [] and missing.problems == []


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"package.json": json.dumps({"scripts": {"test": "jest"}})}, "npm test"),
        ({"Cargo.toml": "[package]\n"}, "cargo test"),
        ({"go.mod": "module x\n"}, "go test ./..."),
        ({"tests/test_app.py": "def test_x(): pass\n"}, "python -m pytest -q"),
        ({"test_app.py": "def test_x(): pass\n"}, "python -m pytest -q"),
        ({"conftest.py": ""}, "python -m pytest -q"),
        ({"Makefile": "build:\n\tcc x.c\ntest:\n\t./run-tests\n"}, "make test"),
        ({"Makefile": "build:\n\tcc x.c\n"}, None),
        ({"package.json": json.dumps({"scripts": {"start": "node ."}})}, None),
        ({"package.json": "not json"}, None),
        ({"app.py": "print(1)\n"}, None),
        ({}, None),
    ],
)
def test_the_test_command_is_named_from_the_projects_files(
    tmp_path: Path, files: dict[str, str], expected: str | None
) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert retrieval.test_command(tmp_path) == expected


def test_a_path_through_home_is_not_chosen_nor_attached(root: Path, tmp_path: Path) -> None:
    """`~/diary.txt` is outside the project, however it is written."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "diary.txt").write_text("dear diary\n")
    resolver = resolver_for(root, tmp_path)
    assert resolver.home == home
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        assert shown_files("explain ~/diary.txt", root) == []
    out = expand_mentions(
        "explain it", resolver, implied=["~/diary.txt"], implied_budget=BUDGET_BYTES
    )
    assert out.attached == [] and "dear diary" not in out.text


def test_nothing_under_git_is_chosen_or_attached(root: Path, tmp_path: Path) -> None:
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text('[remote "origin"]\n\turl = git@host:me/x\n')
    assert shown_files("explain .git/config", root) == []
    out = expand_mentions(
        "explain it", resolver_for(root, tmp_path), implied=[".git/config"], implied_budget=999
    )
    assert out.attached == []


def test_a_symlink_to_a_project_file_is_not_attached_by_its_innocent_name(
    root: Path, tmp_path: Path
) -> None:
    """`settings.local` pointing at `.env`: the name as written and the target both count."""
    (root / ".env").write_text("DB_PASSWORD=hunter2hunter2\n")
    (root / "settings.local").symlink_to(root / ".env")
    (root / "notes.md").symlink_to(root / "notes.txt")
    resolver = resolver_for(root, tmp_path)
    for name in ("settings.local", "notes.md"):
        out = expand_mentions("explain it", resolver, implied=[name], implied_budget=999)
        assert out.attached == [], name


def test_a_fifo_named_like_a_module_is_never_opened(root: Path) -> None:
    import os

    os.mkfifo(root / "pipe.py")
    assert shown_files("explain pipe.py", root) == []  # returns: it was never opened
