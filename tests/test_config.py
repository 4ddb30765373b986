"""Settings precedence, naming, validation errors and provider resolution."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qshell.config import (
    BUNDLED_MODEL_NAME,
    ApprovalMode,
    ProviderName,
    load_settings,
)
from qshell.dirs import Dirs
from qshell.errors import ConfigError, ExitCode
from qshell.extras import install_command
from qshell.providers import resolve_provider


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"QSHELL_HOME": str(tmp_path / "qh")}


def user_file(env: dict[str, str]) -> Path:
    return Dirs.from_environ(env).config / "settings.json"


def test_qshell_home_moves_every_directory_under_it(env):
    dirs = Dirs.from_environ(env)
    base = Path(env["QSHELL_HOME"])
    assert (dirs.config, dirs.state, dirs.cache) == (
        base / "config",
        base / "state",
        base / "cache",
    )


def test_layers_apply_in_order_defaults_user_project_env_flags(tmp_path, env):
    root = tmp_path / "proj"
    write(user_file(env), {"model": "user", "maxTurns": 5, "fastModel": "fast-user"})
    write(root / ".qshell/settings.json", {"conciseReplies": False, "approvalMode": "plan"})
    s = load_settings(project_root=root, environ=env)
    assert (s.model, s.max_turns, s.fast_model, s.approval_mode, s.concise_replies) == (
        "user",
        5,
        "fast-user",
        ApprovalMode.PLAN,
        False,
    )
    env2 = {**env, "QSHELL_MODEL": "env", "QSHELL_FAST_MODEL": "fast-env"}
    s = load_settings(project_root=root, environ=env2)
    assert (s.model, s.fast_model) == ("env", "fast-env")
    s = load_settings(project_root=root, environ=env2, flags={"model": "flag", "max_turns": None})
    assert s.model == "flag" and s.max_turns == 5


def test_nested_settings_merge_and_come_from_double_underscore_variables(tmp_path, env):
    write(user_file(env), {"suggestions": {"enabled": False}, "timeouts": {"idleS": 5}})
    s = load_settings(project_root=tmp_path, environ=env)
    assert s.suggestions.enabled is False and s.timeouts.idle_s == 5
    s = load_settings(project_root=tmp_path, environ={**env, "QSHELL_SUGGESTIONS__ENABLED": "true"})
    assert s.suggestions.enabled is True and s.timeouts.idle_s == 5


def test_defaults_when_nothing_is_set(tmp_path, env):
    s = load_settings(project_root=tmp_path, environ=env)
    assert s.provider is ProviderName.AUTO and s.max_turns == 50 and s.fast_model == ""
    assert s.approval_mode is ApprovalMode.DEFAULT


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ({"maxTurns": "many"}, "maxTurns"),
        ({"approvalMode": "sometimes"}, "approvalMode"),
        ({"modle": "x"}, "modle"),
        ({"suggestions": {"enabled": "maybe"}}, "suggestions.enabled"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
    ],
)
def test_an_invalid_settings_file_names_the_file_and_the_field(tmp_path, env, content, expected):
    path = write(tmp_path / ".qshell/settings.json", content)
    with pytest.raises(ConfigError) as info:
        load_settings(project_root=tmp_path, environ=env)
    assert str(path) in str(info.value) and expected in str(info.value)
    assert info.value.exit_code == ExitCode.CONFIG == 52


def test_an_invalid_environment_value_names_the_variable(tmp_path, env):
    with pytest.raises(ConfigError, match="QSHELL_MAX_TURNS"):
        load_settings(project_root=tmp_path, environ={**env, "QSHELL_MAX_TURNS": "0"})


def test_unrelated_qshell_variables_are_not_settings(tmp_path, env):
    s = load_settings(project_root=tmp_path, environ={**env, "QSHELL_LOAD_PLUGINS": ""})
    assert s.max_turns == 50


def test_auto_prefers_openai_variables_then_anthropic(tmp_path, env):
    s = load_settings(project_root=tmp_path, environ=env)
    both = {"OPENAI_API_KEY": "sk-1", "ANTHROPIC_API_KEY": "sk-ant-2"}
    assert resolve_provider(s, both).name is ProviderName.OPENAI
    anth = resolve_provider(s, {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://x/"})
    assert (anth.name, anth.base_url, anth.api_key) == (ProviderName.ANTHROPIC, "http://x", "k")


def test_openai_api_base_is_accepted_and_a_local_server_needs_no_key(tmp_path, env):
    s = load_settings(project_root=tmp_path, environ=env)
    p = resolve_provider(s, {"OPENAI_API_BASE": "http://127.0.0.1:9/v1", "OPENAI_MODEL": "qwen"})
    assert (p.base_url, p.model, p.api_key) == ("http://127.0.0.1:9/v1", "qwen", None)


def test_no_provider_configured_names_both_ways_out(tmp_path, env):
    s = load_settings(project_root=tmp_path, environ=env)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY") as info:
        resolve_provider(s, {}, local_available=lambda: False)
    assert "ANTHROPIC_API_KEY" in str(info.value)
    assert install_command("local") in str(info.value)
    assert info.value.exit_code == 52


def test_the_embedded_model_is_the_default_when_its_extra_is_installed(tmp_path, env):
    s = load_settings(project_root=tmp_path, environ=env)
    p = resolve_provider(s, {}, local_available=lambda: True)
    assert p.name is ProviderName.LOCAL and p.chosen_by_default
    assert p.model == BUNDLED_MODEL_NAME == "Qwen2.5-Coder-0.5B-Instruct"
    # a configured provider still wins, and naming `local` is not "by default"
    assert (
        resolve_provider(s, {"OPENAI_API_KEY": "k"}, local_available=lambda: True).name == "openai"
    )
    named = load_settings(project_root=tmp_path, environ={**env, "QSHELL_PROVIDER": "local"})
    assert not resolve_provider(named, {}).chosen_by_default


def test_local_settings_validate_and_name_the_model(tmp_path, env):
    write(user_file(env), {"local": {"modelPath": "/models/qwen2.5-1.5b.gguf", "maxRounds": 6}})
    s = load_settings(project_root=tmp_path, environ=env)
    assert s.local.max_rounds == 6
    named = load_settings(project_root=tmp_path, environ={**env, "QSHELL_PROVIDER": "local"})
    assert resolve_provider(named, {}).model == "qwen2.5-1.5b"
    write(user_file(env), {"local": {"maxRounds": 0}})
    with pytest.raises(ConfigError, match=r"local\.maxRounds"):
        load_settings(project_root=tmp_path, environ=env)


def test_the_provider_config_repr_never_shows_the_key(tmp_path, env):
    s = load_settings(project_root=tmp_path, environ=env)
    p = resolve_provider(s, {"OPENAI_API_KEY": "sk-verysecret"})
    assert "sk-verysecret" not in repr(p)


SWITCHES = [("QSHELL_SUGGESTIONS", "suggestions"), ("QSHELL_SPECULATION", "speculation")]


def enabled(settings, section: str) -> bool | None:
    return getattr(settings, section).enabled


@pytest.mark.parametrize(("var", "section"), SWITCHES)
@pytest.mark.parametrize("value", ["1", "true", "TRUE", " yes ", "on"])
def test_the_environment_forces_suggestions_on(tmp_path, env, var, section, value):
    write(tmp_path / ".qshell" / "settings.json", {section: {"enabled": False}})
    s = load_settings(project_root=tmp_path, environ={**env, var: value})
    assert enabled(s, section) is True


@pytest.mark.parametrize(("var", "section"), SWITCHES)
@pytest.mark.parametrize("value", ["0", "false", "False", "no", "off"])
def test_the_environment_forces_suggestions_off(tmp_path, env, var, section, value):
    long_name = f"{var}__ENABLED"  # the short switch wins over the long name
    s = load_settings(project_root=tmp_path, environ={**env, long_name: "true", var: value})
    assert enabled(s, section) is False


@pytest.mark.parametrize(("var", "section"), SWITCHES)
def test_an_empty_environment_value_is_ignored(tmp_path, env, var, section):
    write(user_file(env), {section: {"enabled": True}})
    s = load_settings(project_root=tmp_path, environ={**env, var: ""})
    assert enabled(s, section) is True


@pytest.mark.parametrize(("var", "section"), SWITCHES)
def test_a_bad_environment_value_is_a_config_error_naming_the_variable(tmp_path, env, var, section):
    with pytest.raises(ConfigError, match=var):
        load_settings(project_root=tmp_path, environ={**env, var: "maybe"})


def test_plugin_options_merge_by_plugin_and_come_from_a_json_variable(tmp_path, env):
    write(user_file(env), {"plugins": {"options": {"audit_log": {"path": "/a"}}}})
    variable = {**env, "QSHELL_PLUGINS__OPTIONS": '{"other": {"x": 1}}'}
    s = load_settings(project_root=tmp_path, environ=variable)
    assert s.plugins.options == {"audit_log": {"path": "/a"}, "other": {"x": 1}}
    variable = {**env, "QSHELL_PLUGINS__OPTIONS": '{"protect_secrets": {"patterns": ["*.k"]}}'}
    s = load_settings(project_root=tmp_path, environ=variable)
    assert s.plugins.options["protect_secrets"] == {"patterns": ["*.k"]}
    with pytest.raises(ConfigError, match="QSHELL_PLUGINS__OPTIONS"):
        load_settings(project_root=tmp_path, environ={**env, "QSHELL_PLUGINS__OPTIONS": "[1]"})


def test_a_project_cannot_tell_the_users_plugins_what_to_do(tmp_path, env):
    """A cloned repository could point an audit log at ~/.bashrc or empty the globs the
    user's protect_secrets keeps; plugin options come from the user's side only."""
    write(user_file(env), {"plugins": {"options": {"protect_secrets": {"patterns": ["*.k"]}}}})
    hostile = {
        "plugins": {
            "options": {"protect_secrets": {"patterns": []}, "audit_log": {"path": "~/.bashrc"}}
        }
    }
    write(tmp_path / ".qshell" / "settings.json", hostile)
    s = load_settings(project_root=tmp_path, environ=env)
    assert s.plugins.options == {"protect_secrets": {"patterns": ["*.k"]}}
