"""The everyday-prompts bench without a model: its project, its runs, its judgements.

The fixture is run with real pytest (exactly `test_discount` fails, and the one-line fix
makes all pass); a bench run is played through the real `qshell -p -o stream-json` on the
scripted server (read app.py, fix it, answer), so the stream reading, the tools and their
arguments, the diff and pytest afterwards are what the bench records from a model; and a
fabricated run's report shows that a judgement counts only for the answer it was made on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from bench.offline_everyday import AUTO_EDIT, FAILING_TEST, PROJECT, PROMPTS
from bench.offline_everyday_report import (
    Answered,
    BenchRun,
    Judgement,
    Prompt,
    answer_sha256,
    load_judgements,
    markdown,
    run_from_json,
    run_to_json,
    summary_lines,
)
from bench.offline_runs import (
    PrintRun,
    Streamed,
    UsedTool,
    isolated_env,
    project_diff,
    pytest_after,
    read_stream,
    run_print,
    write_project,
)
from tests.e2e.helpers import provider_env
from tests.fakes.llm_server import Reply, ScriptedLLMServer, ToolCallSpec, always

BUG = "    return price * pct / 100\n"
FIX = "    return price * (1 - pct / 100)\n"


def test_the_project_has_exactly_one_failing_test_and_a_one_line_fix(tmp_path: Path) -> None:
    project = write_project(tmp_path / "pricetag", PROJECT)
    env = isolated_env(tmp_path / "home")
    passes, summary = pytest_after(project, env)
    assert (passes, summary.split(" in ")[0]) == (False, "1 failed, 3 passed")
    assert FAILING_TEST in (project / "test_app.py").read_text()
    app = project / "app.py"
    app.write_text(app.read_text().replace(BUG, FIX))
    passes, summary = pytest_after(project, env)
    assert (passes, summary.split(" in ")[0]) == (True, "4 passed")
    changed = [line for line in project_diff(project, PROJECT).splitlines() if line[:1] in "+-"]
    assert changed == ["--- a/app.py", "+++ b/app.py", "-" + BUG.rstrip(), "+" + FIX.rstrip()]
    (project / "README.md").unlink()
    (project / "file.txt").write_text("")  # what a tiny model's write_file may leave
    (project / "__pycache__").mkdir(exist_ok=True)
    diff = project_diff(project, PROJECT)
    assert "--- a/README.md\n+++ /dev/null\n" in diff
    assert "--- /dev/null\n+++ b/file.txt\n(an empty file)\n" in diff
    assert "pycache" not in diff


def test_the_twelve_prompts_are_two_of_each_kind_with_unique_keys() -> None:
    kinds = [p.kind for p in PROMPTS]
    assert len(PROMPTS) == 12 and len({p.key for p in PROMPTS}) == 12
    assert all(kinds.count(kind) == 2 for kind in kinds) and len(set(kinds)) == 6


def test_a_run_records_the_answer_tools_diff_and_tests_of_a_real_print_mode_turn(
    tmp_path: Path, llm_server: ScriptedLLMServer
) -> None:
    read = ToolCallSpec("read_file", {"path": "app.py"})
    edit = ToolCallSpec("edit", {"path": "app.py", "old_string": BUG, "new_string": FIX})
    llm_server.add_rule(
        always(), replies=[Reply.tool_calls([read]), Reply.tool_calls([edit]), Reply.text("Fixed.")]
    )
    project = write_project(tmp_path / "pricetag", PROJECT)
    env = isolated_env(tmp_path / "home", provider_env(llm_server, "openai"))
    run = run_print("fix the bug in discount", cwd=project, env=env, flags=AUTO_EDIT)
    assert (run.code, run.answer, run.model) == (0, "Fixed.", "m1"), run.stderr
    assert [(t.name, dict(t.args), t.status) for t in run.tools] == [
        ("read_file", {"path": "app.py"}, "success"),
        ("edit", {"path": "app.py", "old_string": BUG, "new_string": FIX}, "success"),
    ]
    assert "def discount" in run.tools[0].output
    assert run.first_text_s is not None and run.answer_text_s is not None
    assert run.result_s is not None
    assert 0 < run.first_text_s <= run.answer_text_s <= run.result_s <= run.total_s
    assert f"-{BUG}+{FIX}" in project_diff(project, PROJECT)
    assert pytest_after(project, env)[0]


def test_the_answer_text_starts_after_the_last_tool_call_else_at_the_result() -> None:
    def line(record: Mapping[str, object]) -> str:
        return json.dumps(record)

    use = {"type": "tool_use", "tool_name": "ls", "tool_id": "c1", "parameters": {"path": "."}}
    done = {"type": "tool_result", "tool_id": "c1", "status": "success", "output": "app.py"}
    streamed = [
        (0.5, line({"type": "init", "model": "tiny"})),
        (0.9, line({"type": "message", "content": ""})),
        (1.5, line({"type": "message", "content": "Let me look."})),
        (2.0, line(use)),
        (2.1, line(done)),
        (3.0, line({"type": "message", "content": "It holds app.py."})),
        (4.0, line({"type": "result", "result": "It holds app.py."})),
    ]
    assert read_stream(streamed) == Streamed(
        "It holds app.py.",
        (UsedTool("ls", {"path": "."}, "success", "app.py"),),
        "tiny",
        first_text_s=1.5,
        answer_text_s=3.0,
        result_s=4.0,
    )
    failed = line({"type": "result", "result": "", "error": {"message": "no model"}})
    assert read_stream([(0.5, "not json"), (3.0, failed)]) == Streamed(
        "no model", first_text_s=3.0, answer_text_s=3.0, result_s=3.0
    )


def answered(prompt: Prompt, answer: str, diff: str = "") -> Answered:
    run = PrintRun(
        0, answer, (UsedTool("read_file", {"path": "app.py"}, "success", "x"),), 1.0, 4.0
    )
    return Answered(prompt, run, diff, False, "1 failed, 3 passed in 0.1s")


def test_a_judgement_counts_only_for_the_answer_and_diff_it_was_made_on(tmp_path: Path) -> None:
    explain, fix = PROMPTS[0], PROMPTS[10]
    kept = answered(explain, "app.py holds four price functions.")
    changed = answered(fix, "Fixed it.", diff=f"-{BUG}+{FIX}")
    path = tmp_path / "judgement.json"
    path.write_text(
        json.dumps(
            {
                explain.key: {"answer_sha256": kept.sha256, "useful": True, "why": "names them"},
                fix.key: {
                    "answer_sha256": answer_sha256("Fixed it.", ""),  # judged before the diff
                    "useful": True,
                    "why": "fixed",
                },
            }
        )
    )
    judgements = load_judgements(path)
    assert judgements[explain.key] == Judgement(True, "names them", kept.sha256)
    warm = PrintRun(0, "Hello.", (), 0.8, 9.5, "tiny")
    bench = BenchRun(warm, (kept, changed), "0.5", "1.0", tmp_path, PROJECT, "today")
    report = markdown(bench, judgements, total=12)
    assert "**Judgement:** useful: names them" in report
    assert "**Judgement:** unjudged (answer changed; it was judged useful: fixed)" in report
    assert f"answer_sha256: `{changed.sha256}`" in report
    assert "- useful: 1 / 12 (of 2 run, 1 unjudged)" in report
    assert "```diff\n" + f"-{BUG}+{FIX}".rstrip() + "\n```" in report
    assert "def discount" in report  # the project is in the report
    printed = summary_lines(bench, judgements, total=12)
    assert [row.split()[0] for row in printed[1:3]] == [explain.key, fix.key]
    assert "warm-up (first run, one-time model preparation): 9.5 s" in "\n".join(printed)


def test_an_answer_with_a_code_fence_stays_inside_its_own_fence(tmp_path: Path) -> None:
    fenced_answer = answered(PROMPTS[0], "Run:\n```bash\npytest\n```")
    bench = BenchRun(PrintRun(0, "Hi", (), 1.0, 1.0), (fenced_answer,), "", "", tmp_path, {}, "")
    assert "````text\nRun:\n```bash\npytest\n```\n````" in markdown(bench, {}, total=12)


def test_a_malformed_judgement_file_stops_the_bench_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "judgement.json"
    path.write_text(json.dumps({"explain-app": {"useful": True}}))
    with pytest.raises(SystemExit, match=re.escape("want {key: {answer_sha256, useful, why}}")):
        load_judgements(path)
    assert load_judgements(tmp_path / "none.json") == {}


def test_a_kept_run_renders_the_same_report_again_with_the_judgements_made_since(
    tmp_path: Path,
) -> None:
    """Judging comes after reading, and a second run may not give the same answers (a test
    run's output carries its duration): `--rerender` writes the report from the kept run."""
    explain = answered(PROMPTS[0], "app.py holds four price functions.")
    fix = answered(PROMPTS[10], "Fixed it.", diff=f"-{BUG}+{FIX}")
    warm = PrintRun(0, "Hello.", (), 0.8, 9.5, "tiny", "qshell: ready", 0.8, 9.4)
    bench = BenchRun(warm, (explain, fix), "0.5", "1.0", tmp_path, PROJECT, "today")
    again = run_from_json(run_to_json(bench))
    assert again == bench
    judgements = {PROMPTS[0].key: Judgement(True, "names them", explain.sha256)}
    assert markdown(again, judgements, total=12) == markdown(bench, judgements, total=12)
    assert "- useful: 1 / 12 (of 2 run, 1 unjudged)" in markdown(again, judgements, total=12)
