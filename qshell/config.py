"""Settings: the validated configuration of one qshell run, and how it is assembled.

Precedence, lowest first: defaults < user `settings.json` (config dir) < project
`.qshell/settings.json` (which may only make qshell stricter: settings_trust.py) <
`QSHELL_*` environment variables < command-line flags. JSON keys are camelCase, fields
snake_case; environment names are `QSHELL_` + upper snake case with nested keys joined by
`__` (`QSHELL_SUGGESTIONS__ENABLED`); the switches `QSHELL_SUGGESTIONS` and
`QSHELL_SPECULATION` (1/0, true/false, yes/no, on/off) set `suggestions.enabled` and
`speculation.enabled` and win over the long names. Every layer is validated on its own first
so an error names the file, variable or flag and the field; nothing invalid is ever ignored.
Which provider a run talks to is resolved from these settings in providers.py. This module
performs no network I/O and holds no global state.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from qshell.dirs import Dirs
from qshell.errors import ConfigError
from qshell.settings_trust import Confined, confine, notice

PROJECT_SETTINGS = Path(".qshell") / "settings.json"
USER_SETTINGS_NAME = "settings.json"
ENV_PREFIX = "QSHELL_"
# short on/off variables for a section's `enabled`
ENV_SWITCHES = {"QSHELL_SUGGESTIONS": "suggestions", "QSHELL_SPECULATION": "speculation"}
ENV_ON = frozenset({"1", "true", "yes", "on"})
ENV_OFF = frozenset({"0", "false", "no", "off"})
BUNDLED_MODEL_NAME = "Qwen2.5-Coder-0.5B-Instruct"


class ApprovalMode(enum.StrEnum):
    DEFAULT = "default"
    AUTO_EDIT = "auto-edit"
    PLAN = "plan"
    YOLO = "yolo"


class ProviderName(enum.StrEnum):
    AUTO = "auto"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    LOCAL = "local"


# Files that configure qshell, git or other tools and can make them run code or widen what
# qshell may do: writing them always asks (auto-edit mode too), is a boundary in
# speculation and is never applied by an accept. gitignore-style patterns, root-relative.
DEFAULT_PROTECTED_PATHS = (
    ".qshell/",
    ".git",  # the repository, or a submodule's .git file
    ".gitmodules",
    ".gitattributes",
    ".githooks/",
    ".husky/",
    ".pre-commit-config.yaml",
    ".envrc",
    ".vscode/",
    ".idea/",
    ".devcontainer/",
    ".github/workflows/",
    ".gitlab-ci.yml",
)


class SummaryTier(enum.StrEnum):
    ALWAYS_PRIMARY = "always_primary"
    AUTO = "auto"  # the fast model unless a veto of latency/routing.py says otherwise
    ALWAYS_FAST = "always_fast"  # still falls back when the fast stream starts a tool call


class BackgroundReasoning(enum.StrEnum):
    OFF = "off"
    INHERIT = "inherit"


class Toggle(enum.StrEnum):
    AUTO = "auto"
    ON = "on"
    OFF = "off"


class _Section(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


# suggestions that would do something hard to take back (followup/consequence.py): one
# rule a string, `kind: phrase, phrase`; shown only after the user asked for that kind
CONSEQUENTIAL_RULES: tuple[str, ...] = (
    "push: push, force-push, git push, 推送",
    "deploy: deploy, ship it, roll out, go live, 部署, 上线",
    "publish: publish, npm publish, cargo publish, twine upload, upload, 发布",
    "release: release, cut a release, tag a release, 发版",
    "delete: delete, rm -rf, rm -r, drop the table, drop table, drop database, wipe, purge,"
    " 删除, 删掉",
    "reset: reset, reset --hard, 重置, 回滚",
    "force: force, --force, 强制",
    "send: send, email it, 发送, 发邮件",
    "pay: pay, purchase, buy, 支付, 付款",
)


class SuggestionSettings(_Section):
    enabled: bool | None = None  # None: on, except with the embedded `local` provider
    cache_cold_tokens: int = Field(10_000, ge=0)
    delay_ms: int = Field(300, ge=0)  # earliest a suggestion shows, after the turn ended
    # the answer itself ends with the prediction (agent/prediction.py), so no separate
    # suggestion request is needed when it does
    fold: bool = True
    consequential: tuple[str, ...] = CONSEQUENTIAL_RULES
    # how many candidates one suggestion offers to cycle through (Alt-] / Alt-[; plain .1 .2)
    alternatives: int = Field(3, ge=1, le=3)
    # once 8 suggestions in a row were ignored, ask for one (when the answer did not fold it
    # in) only every 2nd, then every 4th turn, until one is taken (followup/gating.py `ask_gap`)
    backoff: bool = True


class SpeculationSettings(_Section):
    enabled: bool | None = None  # None: on, except with the embedded `local` provider
    max_rounds: int = Field(20, ge=1)
    max_messages: int = Field(100, ge=2)
    wall_clock_s: float = Field(120.0, gt=0)
    output_tokens: int = Field(8_000, ge=1)
    # speculate a suggestion only when the chance this user accepts it (the model's confidence,
    # corrected by their outcomes at about that confidence: followup/gating.py) reaches
    # min_confidence; unknown confidence: speculate
    gating: bool = True
    min_confidence: float = Field(0.35, ge=0.0, le=1.0)
    # a speculated suggestion whose chance is below full_confidence runs up to its first
    # expensive point (the model round after its first tool batch) and goes on when the user
    # shows intent: Tab, typing its start, or dwell_ms with it on screen (followup/gating.py
    # decides, followup/speculation.py holds)
    staged: bool = True
    full_confidence: float = Field(0.7, ge=0.0, le=1.0)
    dwell_ms: int = Field(3000, ge=0)


class SandboxMode(enum.StrEnum):
    AUTO = "auto"  # used where the machine allows it, else the proof alone (said once)
    ON = "on"  # required: without it, no command runs without asking
    OFF = "off"


class SandboxSettings(_Section):
    enabled: SandboxMode = SandboxMode.AUTO
    speculate_commands: bool = True  # run any command a speculation meets on a kernel overlay
    # apply the files such a command made under paths the project ignores (`build/`, caches),
    # as a real run leaves them; off, they are dropped and the command's result says so
    apply_ignored: bool = True
    # the processes one jailed command and all it starts may have at once (root too: a pids
    # cgroup, sandbox/pids.py; the rlimit elsewhere)
    max_processes: int = Field(4096, ge=8)


class TelemetrySettings(_Section):
    log_text: bool = False


class PluginSettings(_Section):
    # each gate plugin's own options, by the plugin's name (its file stem or entry point),
    # handed to its `qshell_configure` hook; which plugins load is chosen by QSHELL_PLUGINS,
    # --plugin and --no-plugins, never by a settings file (a project's could name its code)
    options: dict[str, dict[str, Any]] = Field(default_factory=dict)


class TimeoutSettings(_Section):
    connect_s: float = Field(10.0, gt=0)
    first_token_s: float = Field(120.0, gt=0)
    idle_s: float = Field(60.0, gt=0)


class LocalSettings(_Section):
    """The embedded llama.cpp model (`provider: local`, or the default with the extra)."""

    model_path: str = ""  # a GGUF file; empty means the bundled Qwen2.5-Coder-0.5B-Instruct
    context_size: int = Field(8192, ge=512)
    threads: int = Field(0, ge=0)  # 0: every core to read the prompt, one fewer to answer
    chat_template: str = ""  # a llama.cpp built-in chat template; empty: the GGUF's own
    # the small-model measures (compact prompt and tools, tools chosen by the prompt, the
    # round and token caps below, greedy sampling); None: on for the bundled model only
    small_model: bool | None = None
    # per turn for a small model: one with tools, then the answer without (a second tool
    # round mostly repeats a call: bench/offline_compare.py)
    max_rounds: int = Field(2, ge=1)
    # per round for a small model, which can otherwise loop inside a tool call's arguments
    # for minutes; a larger `maxTokens` does not raise it
    max_tokens: int = Field(1024, ge=1)
    start_timeout_s: float = Field(300.0, gt=0)


class Settings(_Section):
    provider: ProviderName = ProviderName.AUTO
    model: str = ""
    fast_model: str = ""
    base_url: str = ""
    approval_mode: ApprovalMode = ApprovalMode.DEFAULT
    max_turns: int = Field(50, ge=1)
    max_tokens: int = Field(8192, ge=1)
    max_retries: int = Field(3, ge=0, le=10)
    shell_timeout_s: float = Field(120.0, gt=0)
    context_window: int = Field(128_000, ge=1000)  # tokens the model accepts in one request
    compact_threshold: float = Field(0.85, gt=0, lt=1)  # fraction of it that triggers compaction
    show_reasoning: bool = True  # the model's reasoning, folded to a line /expand unfolds
    secret_patterns: list[str] = Field(default_factory=list)
    protected_paths: list[str] = Field(default_factory=lambda: list(DEFAULT_PROTECTED_PATHS))
    # post-execution directives (latency/directives.py): plugin tools whose skip_llm_round is
    # honoured, and the switch that always sends tool results back to the model
    tool_post_exec_allowlist: list[str] = Field(default_factory=list)
    always_summarize: bool = False
    # the latency plan of seed 004 (Roadmap 11), each measured by a bench in bench/:
    # D4: a read or search call starts while the response that asks for it still streams
    stream_ahead_tools: bool = True
    # D3: when every result of the last batch is terminal, the REPL's prompt comes back while
    # the summary round streams; a new message cancels that summary and drops its text
    summarize_in_background: bool = False
    # D2: which model answers a round the loop predicts is a pure summary
    summary_tier_strategy: SummaryTier = SummaryTier.ALWAYS_PRIMARY
    # on a predicted pure-summary round: tool_choice "none" and reasoning off (opt-in)
    lean_summary_rounds: bool = False
    concise_replies: bool = True  # the system prompt asks for short final answers
    # suggestion and speculation requests: "off" sends reasoning/thinking off where the
    # provider takes it (dropped once for good if the endpoint rejects it); "inherit" sends
    # what the main request sends
    background_reasoning: BackgroundReasoning = BackgroundReasoning.OFF
    # DashScope's explicit prompt cache: "auto" when the base URL is DashScope's
    dashscope_cache: Toggle = Toggle.AUTO
    timeouts: TimeoutSettings = Field(default_factory=TimeoutSettings)
    suggestions: SuggestionSettings = Field(default_factory=SuggestionSettings)
    speculation: SpeculationSettings = Field(default_factory=SpeculationSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    plugins: PluginSettings = Field(default_factory=PluginSettings)
    local: LocalSettings = Field(default_factory=LocalSettings)


DEFAULTS = Settings()
"""Every default in one place: other modules' keyword defaults are read from here."""


def _describe(error: ValidationError, key_style: str) -> str:
    """One line naming the first bad field and what is wrong with it."""
    first = error.errors()[0]
    parts = [str(p) for p in first["loc"]]
    if key_style == "env":
        field = ENV_PREFIX + "__".join(p.upper() for p in _snake_parts(parts))
    else:
        field = ".".join(parts) or "(top level)"
    return f"{field}: {first['msg']}"


def _snake_parts(parts: list[str]) -> list[str]:
    out = []
    for part in parts:
        snake = "".join("_" + c.lower() if c.isupper() else c for c in part)
        out.append(snake)
    return out


def _validate(data: Mapping[str, Any], source: str, key_style: str = "json") -> dict[str, Any]:
    try:
        Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid setting in {source}: {_describe(exc, key_style)}") from None
    return dict(data)


def read_settings_file(path: Path) -> dict[str, Any]:
    """Load and validate one settings file; a missing file is an empty layer."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read settings file {path}: {exc.strerror}") from None
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"settings file {path} is not valid JSON (line {exc.lineno}, column {exc.colno}): "
            f"{exc.msg}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"settings file {path} must hold a JSON object")
    data.pop("$schema", None)
    return _validate(data, str(path))


def _env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    """Settings from QSHELL_* variables; names that are not settings are left alone."""
    layer: dict[str, Any] = {}
    for name, field in Settings.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            for sub in annotation.model_fields:
                var = f"{ENV_PREFIX}{name.upper()}__{sub.upper()}"
                if var in environ:
                    layer.setdefault(name, {})[sub] = _env_value(environ[var])
            continue
        var = ENV_PREFIX + name.upper()
        if var in environ:
            layer[name] = _env_value(environ[var])
    for var, section in ENV_SWITCHES.items():
        switch = env_switch(environ, var)
        if switch is not None:
            layer.setdefault(section, {})["enabled"] = switch
    return _validate(layer, "the environment", key_style="env")


def env_switch(environ: Mapping[str, str], name: str) -> bool | None:
    """An on/off environment variable (1/0, true/false, yes/no, on/off); None when unset or
    empty. An unrecognised value raises ConfigError naming the variable."""
    raw = environ.get(name, "").strip().lower()
    if raw in ENV_ON:
        return True
    if raw in ENV_OFF:
        return False
    if raw:
        raise ConfigError(
            f"{name} must be 1 or 0 (or true/false, yes/no, on/off), not {environ[name]!r}"
        )
    return None


def _env_value(raw: str) -> Any:
    stripped = raw.strip()
    if stripped.startswith(("[", "{")):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            return raw
    return raw


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        norm = _normalise_key(key)
        if isinstance(value, Mapping) and isinstance(merged.get(norm), Mapping):
            merged[norm] = _merge(dict(merged[norm]), value)
        else:
            merged[norm] = dict(_normalise_keys(value)) if isinstance(value, Mapping) else value
    return merged


def _normalise_key(key: str) -> str:
    return "".join(_snake_parts([key]))


def _normalise_keys(value: Mapping[str, Any]) -> dict[str, Any]:
    return {_normalise_key(k): v for k, v in value.items()}


@dataclass(frozen=True, slots=True)
class Loaded:
    settings: Settings
    notes: tuple[str, ...]  # what of the project file was not applied, in one line


def assemble_settings(
    *,
    project_root: Path,
    environ: Mapping[str, str],
    flags: Mapping[str, Any] | None = None,
    dirs: Dirs | None = None,
) -> Loaded:
    """Assemble Settings from every layer, the project's confined to making qshell stricter
    (settings_trust.py); raise ConfigError naming the bad source."""
    dirs = dirs or Dirs.from_environ(environ)
    user = read_settings_file(dirs.config / USER_SETTINGS_NAME)
    project = _confined(user, read_settings_file(project_root / PROJECT_SETTINGS))
    layers = [
        user,
        project.layer,
        _env_layer(environ),
        _validate({k: v for k, v in (flags or {}).items() if v is not None}, "the command line"),
    ]
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = _merge(merged, layer)
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:  # layers are valid alone; a merge can still conflict
        raise ConfigError(f"invalid settings: {_describe(exc, 'json')}") from None
    note = notice(str(PROJECT_SETTINGS), project.refusals)
    return Loaded(settings, (note,) if note else ())


def load_settings(
    *,
    project_root: Path,
    environ: Mapping[str, str],
    flags: Mapping[str, Any] | None = None,
    dirs: Dirs | None = None,
) -> Settings:
    """`assemble_settings` without its notes."""
    loaded = assemble_settings(project_root=project_root, environ=environ, flags=flags, dirs=dirs)
    return loaded.settings


def _confined(user: Mapping[str, Any], project: Mapping[str, Any]) -> Confined:
    """The project layer as far as it only tightens the user's settings over the defaults."""
    mine = Settings.model_validate(_merge({}, user)).model_dump(mode="json")
    proposed = Settings.model_validate(project).model_dump(mode="json")
    return confine(_merge({}, project), proposed, mine)


def small_local_model(settings: Settings) -> bool:
    """Whether the embedded model gets the small-model measures (`local.smallModel`)."""
    if settings.local.small_model is not None:
        return settings.local.small_model
    return not settings.local.model_path


def project_root_for(cwd: Path | None = None) -> Path:
    """The project root: the directory qshell was started in, symlinks resolved."""
    return (cwd or Path(os.getcwd())).resolve()
