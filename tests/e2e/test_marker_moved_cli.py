"""Adversarial review of redaction write-back (68ff80c): a marker moved where the scanner is blind.

`Vault.restore` puts a secret back wherever the model wrote its marker, as long as the file
already holds the value. So the model, in `qshell -p --approval-mode auto-edit` (writes in
the project run without asking), reads `deploy.cfg` — shown `token: [redacted: github-token
#1]` — and writes it back as `note: x[redacted: github-token #1]`. The token is restored
glued to an `x`, where no pattern finds it (a token must start a word, and `note` is no
secret's key): the write's own diff, and `cat deploy.cfg` after it (the file no longer
holds a secret the content judge sees, so the jail shows it as it is), would carry it to
the model. No request the scripted server receives may hold the token.
"""

from __future__ import annotations

from pathlib import Path

from tests.e2e.helpers import provider_env, run_qshell
from tests.fakes.llm_server import Reply, ToolCallSpec, always, has_tool_result
from tests.redaction.fakes import github_token

TOKEN = github_token(5)
MARK = "[redacted: github-token #1]"  # the first secret redacted in the session


def test_a_restored_marker_glued_to_a_word_is_never_sent(llm_server, tmp_path: Path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "deploy.cfg").write_text(f"token: {TOKEN}\n")
    read = ToolCallSpec("read_file", {"path": "deploy.cfg"}, id="r1")
    write = ToolCallSpec(
        "write_file", {"path": "deploy.cfg", "content": f"note: x{MARK}\n"}, id="w1"
    )
    cat = ToolCallSpec("shell", {"command": "cat deploy.cfg"}, id="s1")
    llm_server.add_rule(has_tool_result("[exit code"), Reply.text("done"))
    llm_server.add_rule(has_tool_result("deploy.cfg"), Reply.tool_calls([cat]))
    llm_server.add_rule(has_tool_result(MARK), Reply.tool_calls([write]))
    llm_server.add_rule(always(), Reply.tool_calls([read]))
    env = provider_env(llm_server, "openai")
    run = run_qshell("-p", "tidy the config", "--approval-mode", "auto-edit", cwd=root, env=env)
    assert run.code == 0, run.stderr
    assert len(llm_server.requests) >= 3  # the write was made, and its result sent
    for request in llm_server.requests:
        assert TOKEN[4:].encode() not in request.raw, "the token reached the model"
