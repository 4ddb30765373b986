"""The consequence rules: which kinds of action a text mentions, in the word forms a
user or a model writes them, and which harmless texts they leave alone."""

from __future__ import annotations

import pytest

from qshell.followup.consequence import DEFAULT_RULES, ConsequenceRules, parse_rule

RULES = ConsequenceRules(DEFAULT_RULES)


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("push it", {"push"}),
        ("pushing the branch now", {"push"}),
        ("git push origin main", {"push"}),
        ("force-push to main", {"push", "force"}),
        ("force push it", {"push", "force"}),
        ("deploy to staging", {"deploy"}),
        ("deployed yet?", {"deploy"}),
        ("ship it", {"deploy"}),
        ("npm publish", {"publish"}),
        ("cut a release", {"release"}),
        ("rm -rf build", {"delete"}),
        ("drop the table users", {"delete"}),
        ("deleting the cache", {"delete"}),
        ("git reset --hard HEAD~1", {"reset"}),
        ("send the report", {"send"}),
        ("pay the invoice", {"pay"}),
        ("推送到远程", {"push"}),
        ("部署到生产环境", {"deploy"}),
        ("删除旧文件", {"delete"}),
    ],
)
def test_a_consequential_text_names_its_kinds(text: str, kinds: set[str]) -> None:
    assert RULES.kinds(text) == kinds
    assert RULES.kind(text) in kinds


@pytest.mark.parametrize(
    "text",
    ["run the tests", "commit this", "pushover config", "the publisher class", "运行测试", ""],
)
def test_a_harmless_text_names_none(text: str) -> None:
    assert RULES.kinds(text) == frozenset()
    assert RULES.kind(text) is None


def test_a_bare_phrase_is_its_own_kind_and_empty_rules_are_dropped() -> None:
    rules = ConsequenceRules(["run the migration", "", "migrate: migrate, db upgrade"])
    assert rules.kinds("run the migrations") == {"run the migration"}
    assert rules.kinds("migrating the db") == {"migrate"}
    assert parse_rule(" , ") is None
