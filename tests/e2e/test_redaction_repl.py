"""In the REPL a redaction is one dim line: after a read whose result lost a token, and after
an `@path` attachment that held one; the model is sent the marker in both cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.helpers import main_requests
from tests.e2e.test_redaction_cli import CONFIG, MARK, READ, TOKEN
from tests.e2e.test_repl import quit_cleanly, start
from tests.fakes.llm_server import Reply, always, has_tool_result

DIM = "\x1b[2m"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "config.ini").write_text(CONFIG)
    return root


def test_a_read_whose_result_lost_a_token_shows_one_dim_line(llm_server, project):
    llm_server.add_rule(has_tool_result(MARK), Reply.text("It has a token."))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    child = start(llm_server, project)
    child.submit("what is in config.ini")
    child.wait_for(f"{DIM}redacted 1 secret (github-token) from read_file's result")
    child.expect("It has a token")
    quit_cleanly(child)
    assert not [r.index for r in llm_server.requests if TOKEN.encode() in r.raw]


def test_an_attached_file_reaches_the_model_with_the_marker(llm_server, project):
    llm_server.add_rule(always(), Reply.text("Attached and read."))
    child = start(llm_server, project)
    child.submit("look at @config.ini")
    child.expect(r"redacted 1 secret \(github-token\) from @config\.ini")
    child.expect("Attached and read")
    quit_cleanly(child)
    (sent,) = main_requests(llm_server)
    assert MARK in sent.last_user_text and TOKEN.encode() not in sent.raw
