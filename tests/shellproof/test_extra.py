"""Command forms a caller declares read-only (`check(command, extra=rule)`): the rule is
asked only about simple commands the rules refuse, only with literal words, and waives
nothing structural; what a declared command reads is every operand, walked."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from qshell import shellproof
from qshell.shellproof import Read

asked: list[tuple[str, list[str]]] = []


def rule(name: str, argv: Sequence[str]) -> bool:
    asked.append((name, list(argv)))
    return name in ("cloc", "git") and "--out" not in argv


@pytest.fixture(autouse=True)
def fresh() -> None:
    asked.clear()


def test_a_declared_command_is_read_only_and_reads_its_operands_recursively():
    verdict = shellproof.check("cloc --quiet src lib", extra=rule)
    assert verdict.read_only and verdict.commands == ("cloc",)
    assert verdict.reads == (
        Read("src", "src", True, recursive=True),
        Read("lib", "lib", True, recursive=True),
    )
    assert asked == [("cloc", ["cloc", "--quiet", "src", "lib"])]


def test_with_no_operand_it_reads_the_current_directory():
    verdict = shellproof.check("cloc", extra=rule)
    assert verdict.read_only and [r.text for r in verdict.reads] == ["."]
    assert verdict.reads[0].recursive


def test_without_the_rule_or_when_it_says_no_the_command_stays_unproven():
    assert not shellproof.check("cloc .").read_only
    refused = shellproof.check("cloc --out report.txt .", extra=rule)
    assert not refused.read_only and refused.reason == "unknown command 'cloc'"


@pytest.mark.parametrize(
    "command",
    [
        "cloc . > report.txt",  # a redirection to a file
        "cloc $(rm -rf x)",  # a substitution that is not proven
        "cloc $DIR",  # a word known only at run time
        "cloc *.py",  # a glob
        "LANG=C cloc .",  # an environment prefix
        "cd src && cloc .",  # cd outside a subshell
        "cloc . | tee out.txt",  # the pipeline's other command
    ],
)
def test_the_structural_checks_are_never_waived(command):
    assert not shellproof.check(command, extra=rule).read_only


def test_the_rules_own_answer_comes_first():
    assert shellproof.check("ls -la", extra=rule).read_only
    assert asked == []  # ls is known: the rule is not asked
    assert not shellproof.check("git push", extra=lambda n, a: False).read_only


def test_a_declared_git_command_keeps_its_subcommand_for_the_callers_git_checks():
    verdict = shellproof.check("git frobnicate --all", extra=rule)
    assert verdict.read_only and verdict.commands == ("git frobnicate",)


def test_a_process_environment_operand_is_still_refused():
    assert not shellproof.check("cloc /proc/1/environ", extra=rule).read_only


@pytest.mark.parametrize(
    ("command", "value"),
    [("cloc --config=/etc/x .", "/etc/x"), ("cloc -L/outside .", "/outside")],
)
def test_an_options_value_is_read_too(command, value):
    """What an option carries may name a file outside the project (`yq -L/dir`): the
    scope rules must see it."""
    verdict = shellproof.check(command, extra=rule)
    assert verdict.read_only
    assert value in [r.text for r in verdict.reads]
