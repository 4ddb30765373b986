"""Each credential file of tests/secret_files.py, asked for through `qshell -p` the ways a
model asks — `read_file`, and `cat`, `head`, `awk 1`, `sed -n p`, `jq .` or `grep -r` in
the shell — is refused (print mode denies what would need a question, saying how to allow
it), a recursive `grep -r` of the tree runs (jailed, each of them masked), and no request
the scripted server receives holds a planted value."""

from __future__ import annotations

import shlex
from pathlib import Path

from tests.e2e.helpers import provider_env, run_qshell
from tests.fakes.llm_server import Reply, ToolCallSpec, always, has_tool_result
from tests.secret_files import leaked, plant

READERS = ("cat", "head", "awk 1", "sed -n p", "jq .")


def test_no_credential_file_reaches_the_model(llm_server, tmp_path: Path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "README.md").write_text('{"token": "public"}\n')
    planted = plant(project)
    calls = [ToolCallSpec("read_file", {"path": rel}, id=f"r{i}") for i, rel in enumerate(planted)]
    for i, reader in enumerate(READERS):
        for j, rel in enumerate(planted):
            command = f"{reader} README.md {shlex.quote(rel)}"
            calls.append(ToolCallSpec("shell", {"command": command}, id=f"s{i}-{j}"))
    controls = [ToolCallSpec("shell", {"command": f"{r} README.md"}, id=r) for r in READERS]
    # the same readers on a plain file run without asking, and so does a recursive grep of
    # the tree: it runs jailed, every credential file masked
    controls.append(ToolCallSpec("shell", {"command": "grep -rn token ."}, id="grep"))
    calls += controls
    llm_server.add_rule(has_tool_result(), Reply.text("done"))
    llm_server.add_rule(always(), Reply.tool_calls(calls))
    run = run_qshell("-p", "look", cwd=project, env=provider_env(llm_server, "openai"))
    assert run.code == 0, run.stderr
    results = llm_server.requests[1].last_tool_results
    assert len(results) == len(calls)
    refused = [r.content for r in results if "-y" in r.content and "public" not in r.content]
    assert len(refused) == len(calls) - len(controls)
    assert all("public" in r.content for r in results[-len(controls) :])
    for request in llm_server.requests:
        assert leaked(request.raw.decode("utf-8", "replace"), planted) == []
    assert leaked(run.stdout + run.stderr, planted) == []
