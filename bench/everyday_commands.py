"""How many ordinary read-only commands run without asking in a project that holds secrets.

Run: `python -m bench.everyday_commands [--sandbox auto|off] [--corpus PATH]` (the corpus:
../shared/shell-safety/dev.jsonl beside the repository, or QSHELL_SHELL_CORPUS). Builds, in a
temporary directory, a git project with a `.env` holding a real-looking API key and a
remote whose URL carries a GitHub token (`https://alice:ghp_…@github.com/…`, in
`.git/config`), with an isolated home; then asks `permissions/audit.py` `audit_shell` —
the decision `qshell check-shell` prints, with the tool context a session in that project
gets (sessions.tool_context: the sandbox from `--sandbox`) — about every `ro` command of
the development corpus and every `rw` one. Prints the
share of `ro` commands that run without asking, each one that still asks with its
reason, and any `rw` command that would run (there must be none). tests/permissions/
test_everyday_commands.py asserts the figures; tests/e2e/test_everyday_secrets_cli.py
builds the same project for `qshell -p`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import string
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from qshell.config import load_settings
from qshell.permissions.audit import audit_shell
from qshell.sessions import tool_context
from qshell.tools.base import ToolContext

BESIDE = Path(__file__).resolve().parents[2] / "shared" / "shell-safety" / "dev.jsonl"
DEFAULT_CORPUS = Path(os.environ.get("QSHELL_SHELL_CORPUS", BESIDE))
GOAL = 0.90
ALNUM = string.ascii_letters + string.digits
FILES = {
    "README.md": "# demo\n\nKEY ideas. TODO: write more.\n",
    "src/app.py": "import os\n\nKEY = os.environ['OPENAI_API_KEY']  # TODO\n\n\ndef main():\n"
    "    print(KEY[:0])\n",
    "src/file.py": "def main() -> None:\n    pass\n",
    "package.json": '{"name": "demo", "scripts": {"test": "pytest"}}\n',
    "config.ini": "# settings\n[app]\nname = demo\n",
    "notes.txt": "-delete is a find option\n",
    "data.txt": "a 2\nb 1\n",
    ".gitignore": ".env\n",
}


@dataclass(frozen=True)
class SecretProject:
    """A project holding secrets: `env_value` in `.env`, `token` in the remote URL."""

    root: Path
    environ: dict[str, str]  # HOME inside the temporary directory, PATH as given
    env_value: str
    token: str

    @property
    def secrets(self) -> tuple[str, str]:
        return self.env_value, self.token

    def git(self, *args: str) -> None:
        """Run git in the project, as its owner (an identity, no system configuration)."""
        identity = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "a"}
        env = {**self.environ, **identity, "GIT_COMMITTER_EMAIL": "a@x", "GIT_CONFIG_NOSYSTEM": "1"}
        subprocess.run(["git", *args], cwd=self.root, env=env, check=True, capture_output=True)


def _made(prefix: str, length: int, seed: int) -> str:
    """A real-looking key, made at run time (no real-looking secret is kept in the
    repository, where a push-protection scanner would take it for a leak)."""
    draw = random.Random(seed)
    return prefix + "".join(draw.choice(ALNUM) for _ in range(length))


def secret_project(parent: Path, environ: dict[str, str] | None = None) -> SecretProject:
    """The project under `parent` (its home beside it), committed once."""
    root, home = parent / "demo", parent / "home"
    home.mkdir(parents=True, exist_ok=True)
    base = dict(os.environ if environ is None else environ)
    env = {"HOME": str(home), "PATH": base.get("PATH", os.defpath)}
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    env_value, token = _made("sk-proj-", 40, 1), _made("ghp_", 36, 2)
    (root / ".env").write_text(f"OPENAI_API_KEY={env_value}\nDEBUG=1\n")
    project = SecretProject(root.resolve(), env, env_value, token)
    project.git("init", "-q", "-b", "main")
    project.git("add", ".")
    project.git("commit", "-qm", "first")
    project.git("remote", "add", "origin", f"https://alice:{token}@github.com/acme/demo.git")
    project.git("update-ref", "refs/remotes/origin/main", "HEAD")
    project.git("branch", "-q", "--set-upstream-to=origin/main")
    return project


def load(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def session_context(project: SecretProject, sandbox: str = "auto") -> ToolContext:
    """The tool context a session in `project` gets (`sandbox.enabled: sandbox`)."""
    environ = {**project.environ, "QSHELL_SANDBOX__ENABLED": sandbox}
    settings = load_settings(project_root=project.root, environ=environ)
    return tool_context(settings, root=project.root, environ=environ)


def decisions(project: SecretProject, commands: list[str], sandbox: str) -> list[str | None]:
    """For each command, None when it runs without asking in `project` (live, default and
    auto-edit modes), else why not."""
    ctx = session_context(project, sandbox)
    found: list[str | None] = []
    for command in commands:
        audit = audit_shell(command, ctx)
        found.append(None if audit.auto_run else audit.ruling.decision.reason or "asks")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.everyday_commands")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--sandbox", choices=("auto", "off"), default="auto")
    args = parser.parse_args(argv)
    rows = load(args.corpus)
    ro = [row["command"] for row in rows if row["label"] == "ro"]
    rw = [row["command"] for row in rows if row["label"] == "rw"]
    with tempfile.TemporaryDirectory() as temp:
        project = secret_project(Path(temp))
        asked = decisions(project, ro, args.sandbox)
        ran = [
            c for c, why in zip(rw, decisions(project, rw, args.sandbox), strict=True) if not why
        ]
    allowed = sum(why is None for why in asked)
    print(
        f"everyday commands beside a .env and a token in .git/config (sandbox {args.sandbox}): "
        f"{allowed}/{len(ro)} ro run without asking ({allowed / max(len(ro), 1):.1%}; "
        f"goal {GOAL:.0%}), rw that would run: {len(ran)}/{len(rw)}"
    )
    for command, why in zip(ro, asked, strict=True):
        if why is not None:
            print(f"  asks: {command!r}: {why}")
    for command in ran:
        print(f"  RUNS (rw): {command!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
