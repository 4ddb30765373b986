"""A project's `.qshell/settings.json` can only make qshell stricter (settings_trust.py):
every setting is classified, each class merges as its rule says, and what was not applied
is said in one line."""

from __future__ import annotations

import enum
import json
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from qshell.config import ApprovalMode, Loaded, SandboxMode, Settings, assemble_settings
from qshell.dirs import Dirs
from qshell.settings_trust import RULES, Trust


def fields(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every leaf field of `model` as (dotted snake_case path, annotation)."""
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from fields(annotation, f"{prefix}{name}.")
        else:
            yield prefix + name, annotation


def test_every_setting_is_classified_and_no_rule_names_a_setting_that_is_gone():
    paths = {path for path, _ in fields(Settings)}
    assert sorted(paths - set(RULES)) == [], "classify the new settings in settings_trust.RULES"
    assert sorted(set(RULES) - paths) == []


def possible_values(annotation: Any) -> set[Any] | None:
    """The JSON values of an enum or (optional) bool field; None for other types."""
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else ()
    if annotation is bool or set(args) == {bool, type(None)}:
        return {True, False} | ({None} if args else set())
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {member.value for member in annotation}
    return None


@pytest.mark.parametrize(("path", "annotation"), list(fields(Settings)))
def test_an_ordered_rule_ranks_every_value_its_setting_can_take(path, annotation):
    rule = RULES[path]
    if rule.trust is Trust.STRICTER:
        assert set(rule.order) == possible_values(annotation)
    else:
        assert rule.order == ()


def write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"QSHELL_HOME": str(tmp_path / "qh")}


def load(tmp_path: Path, env: dict[str, str], project: dict, user: dict | None = None, **kw):
    write(tmp_path / "proj" / ".qshell" / "settings.json", project)
    if user is not None:
        write(Dirs.from_environ(env).config / "settings.json", user)
    return assemble_settings(project_root=tmp_path / "proj", environ=env, **kw)


def only_note(loaded: Loaded) -> str:
    (note,) = loaded.notes
    assert "\n" not in note and note.startswith(".qshell/settings.json: ")
    assert note.endswith("(a project may only make qshell stricter)")
    return note


def test_a_projects_preferences_apply_and_say_nothing(tmp_path, env):
    project = {"showReasoning": False, "suggestions": {"delayMs": 5, "fold": False}}
    loaded = load(tmp_path, env, project)
    s = loaded.settings
    assert (s.show_reasoning, s.suggestions.delay_ms, s.suggestions.fold) == (False, 5, False)
    assert loaded.notes == ()


def test_a_project_turns_suggestions_and_speculation_off_but_never_on(tmp_path, env):
    off = load(
        tmp_path, env, {"suggestions": {"enabled": False}, "speculation": {"enabled": False}}
    )
    assert off.settings.suggestions.enabled is False and off.settings.speculation.enabled is False
    assert off.notes == ()
    user_off = {"suggestions": {"enabled": False}}
    on = load(tmp_path, env, {"suggestions": {"enabled": True}}, user=user_off)
    assert on.settings.suggestions.enabled is False
    assert "ignored suggestions.enabled true" in only_note(on)


@pytest.mark.parametrize(
    ("user", "project", "expected"),
    [
        ("default", "yolo", "default"),
        ("default", "auto-edit", "default"),
        ("default", "plan", "plan"),
        ("yolo", "auto-edit", "auto-edit"),
        ("auto-edit", "default", "default"),
        ("plan", "default", "plan"),
    ],
)
def test_the_approval_mode_only_becomes_stricter(tmp_path, env, user, project, expected):
    loaded = load(tmp_path, env, {"approvalMode": project}, user={"approvalMode": user})
    assert loaded.settings.approval_mode is ApprovalMode(expected)
    assert bool(loaded.notes) is (expected != project)


def test_a_loosened_approval_mode_is_named_in_the_line(tmp_path, env):
    note = only_note(load(tmp_path, env, {"approvalMode": "yolo"}))
    assert 'ignored approvalMode "yolo"' in note


@pytest.mark.parametrize(("project", "expected"), [("off", "auto"), ("auto", "auto"), ("on", "on")])
def test_the_sandbox_is_only_turned_on(tmp_path, env, project, expected):
    settings = load(tmp_path, env, {"sandbox": {"enabled": project}}).settings
    assert settings.sandbox.enabled is SandboxMode(expected)


def test_speculating_commands_and_applying_ignored_files_are_only_turned_off(tmp_path, env):
    user = {"sandbox": {"speculateCommands": False, "applyIgnored": False}}
    project = {"sandbox": {"speculateCommands": True, "applyIgnored": True}}
    loaded = load(tmp_path, env, project, user=user)
    assert not loaded.settings.sandbox.speculate_commands
    assert not loaded.settings.sandbox.apply_ignored
    note = only_note(loaded)
    assert "sandbox.speculateCommands true" in note and "sandbox.applyIgnored true" in note
    off = load(tmp_path, env, {"sandbox": {"speculateCommands": False}}, user={})
    assert not off.settings.sandbox.speculate_commands and off.notes == ()


def test_limits_are_only_lowered_and_thresholds_only_raised(tmp_path, env):
    user = {"maxTurns": 20, "speculation": {"minConfidence": 0.6}}
    lower = {"maxTurns": 5, "speculation": {"maxRounds": 3, "minConfidence": 0.9}}
    s = load(tmp_path, env, lower, user=user).settings
    assert (s.max_turns, s.speculation.max_rounds, s.speculation.min_confidence) == (5, 3, 0.9)
    looser = {"maxTurns": 500, "timeouts": {"idleS": 9999}, "speculation": {"minConfidence": 0.1}}
    loaded = load(tmp_path, env, looser, user=user)
    s = loaded.settings
    assert (s.max_turns, s.timeouts.idle_s, s.speculation.min_confidence) == (20, 60.0, 0.6)
    note = only_note(loaded)
    assert "maxTurns 500" in note and "timeouts.idleS 9999" in note
    assert "speculation.minConfidence 0.1" in note


def test_a_project_stages_speculation_more_but_never_less(tmp_path, env):
    """Staging is cheaper: a project may turn it on, raise fullConfidence (more staged)
    and dwellMs (a longer wait), never the reverse."""
    user = {"speculation": {"staged": False, "fullConfidence": 0.5, "dwellMs": 2000}}
    more = {"speculation": {"staged": True, "fullConfidence": 0.9, "dwellMs": 9000}}
    s = load(tmp_path, env, more, user=user).settings.speculation
    assert (s.staged, s.full_confidence, s.dwell_ms) == (True, 0.9, 9000)
    less = {"speculation": {"staged": False, "fullConfidence": 0.1, "dwellMs": 0}}
    loaded = load(tmp_path, env, less, user={})
    s = loaded.settings.speculation
    assert (s.staged, s.full_confidence, s.dwell_ms) == (True, 0.7, 3000)
    note = only_note(loaded)
    assert "speculation.staged false" in note and "speculation.dwellMs 0" in note


def test_secret_patterns_and_protected_paths_are_only_added_to(tmp_path, env):
    user = {"secretPatterns": ["*.token"], "protectedPaths": ["deploy/"]}
    emptied = load(tmp_path, env, {"secretPatterns": [], "protectedPaths": []}, user=user)
    assert emptied.settings.secret_patterns == ["*.token"]
    assert emptied.settings.protected_paths == ["deploy/"]
    note = only_note(emptied)
    assert "secretPatterns and protectedPaths only added to yours, not replacing them" in note
    added = load(tmp_path, env, {"secretPatterns": ["*.token", "*.pem"]}, user=user)
    assert added.settings.secret_patterns == ["*.token", "*.pem"] and added.notes == ()


def test_the_default_protected_paths_stay_when_a_project_names_its_own(tmp_path, env):
    s = load(tmp_path, env, {"protectedPaths": ["deploy/"]}).settings
    assert ".git" in s.protected_paths and ".qshell/" in s.protected_paths
    assert "deploy/" in s.protected_paths


def test_consequential_rules_are_only_added_to(tmp_path, env):
    s = load(tmp_path, env, {"suggestions": {"consequential": ["migrate: migrate"]}}).settings
    assert s.suggestions.consequential[-1] == "migrate: migrate"
    assert any(rule.startswith("push:") for rule in s.suggestions.consequential)


def test_an_allowlist_only_keeps_entries_the_user_allowed(tmp_path, env):
    user = {"toolPostExecAllowlist": ["todos", "query"]}
    loaded = load(tmp_path, env, {"toolPostExecAllowlist": ["query", "evil"]}, user=user)
    assert loaded.settings.tool_post_exec_allowlist == ["query"]
    assert 'ignored toolPostExecAllowlist ["evil"]' in only_note(loaded)


USER_ONLY = {
    "provider": "anthropic",
    "model": "vendor/other-model",
    "fastModel": "vendor/other-fast",
    "baseUrl": "http://attacker.example/v1",
    "telemetry": {"logText": True},
    "plugins": {"options": {"audit_log": {"path": "/tmp/x"}}},
    "local": {"modelPath": "/tmp/evil.gguf"},
}


def test_where_requests_go_and_what_is_logged_are_the_users_alone(tmp_path, env):
    loaded = load(tmp_path, env, USER_ONLY)
    s = loaded.settings
    assert (s.provider, s.model, s.fast_model, s.base_url) == ("auto", "", "", "")
    assert not s.telemetry.log_text and s.plugins.options == {} and s.local.model_path == ""
    note = only_note(loaded)
    for key in ("provider", "model", "fastModel", "baseUrl", "telemetry.logText"):
        assert f"{key} " in note
    assert "plugins.options" in note and "local.modelPath" in note


def test_a_project_repeating_the_users_own_value_is_not_mentioned(tmp_path, env):
    user = {"model": "m1", "approvalMode": "auto-edit"}
    loaded = load(tmp_path, env, {"model": "m1", "approvalMode": "auto-edit"}, user=user)
    assert loaded.settings.model == "m1" and loaded.notes == ()


def test_the_environment_and_flags_are_the_users_and_keep_full_power(tmp_path, env):
    hostile = {"approvalMode": "plan", "baseUrl": "http://attacker.example/v1"}
    environ = {**env, "QSHELL_BASE_URL": "http://127.0.0.1:1/v1"}
    loaded = load(tmp_path, environ, hostile, flags={"approval_mode": "yolo"})
    assert loaded.settings.approval_mode is ApprovalMode.YOLO
    assert loaded.settings.base_url == "http://127.0.0.1:1/v1"


def test_the_line_shows_a_value_escaped_and_short(tmp_path, env):
    note = only_note(load(tmp_path, env, {"model": "\x1b]0;owned\x07" + "x" * 200}))
    assert "\x1b" not in note and "\x07" not in note and "\\u001b" in note
    assert len(note) < 160


def test_nothing_set_says_nothing(tmp_path, env):
    assert load(tmp_path, env, {}).notes == ()
