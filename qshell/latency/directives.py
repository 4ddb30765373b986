"""Post-execution directives (seed 004, D1): when a tool batch's output is the turn's answer.

A tool may mark its `ToolResult` `skip_llm_round` — its output is self-contained, no
model round is needed to read it back. The rule is batch-level: only when EVERY result
of a batch says so, and none failed, does the loop end the turn with the outputs as its
answer (`skipped_answer`); one call without the flag means a normal round. Plugin tools
are not trusted with it: their flag counts only when their name is in the
`toolPostExecAllowlist` setting (the same holds for their `result_is_terminal`, which
`terminal` reads for D3). `alwaysSummarize` turns the skip off. The
history then ends with the batch's tool-result message and no assistant answer; the
next turn's prompt follows it as a user message, which each provider adapter already
sends validly (Anthropic's merges consecutive user messages into one, OpenAI's sends a
`tool` message then a `user` one), so nothing synthetic is written to the history or
transcript and the cached prefix stays the one the provider saw. Pure functions over
immutable values.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from qshell.config import DEFAULTS
from qshell.tools.base import Tool, ToolResult
from qshell.tools.registered import RegisteredTool


@dataclass(frozen=True, slots=True)
class Directives:
    """Which directives a session honours (from `alwaysSummarize` and the allowlist)."""

    enabled: bool = not DEFAULTS.always_summarize
    allowlist: frozenset[str] = frozenset(DEFAULTS.tool_post_exec_allowlist)

    @classmethod
    def of(cls, *, always_summarize: bool, allowlist: Collection[str]) -> Directives:
        return cls(enabled=not always_summarize, allowlist=frozenset(allowlist))

    def skips(self, tool: Tool | None, result: ToolResult) -> bool:
        """Whether this one result asks, and may ask, to skip the next model round."""
        if not self.enabled or tool is None or not result.skip_llm_round:
            return False
        if result.error is not None:
            return False  # a failure is for the model to read
        return not isinstance(tool, RegisteredTool) or tool.name in self.allowlist

    def terminal(self, tool: Tool | None, result: ToolResult) -> bool:
        """Whether this result's output is already what the user wants to see
        (`result_is_terminal`, D3); a plugin tool's flag counts only when allowlisted."""
        if tool is None or not result.result_is_terminal or result.error is not None:
            return False
        return not isinstance(tool, RegisteredTool) or tool.name in self.allowlist

    def skipped_answer(self, batch: Sequence[tuple[Tool | None, ToolResult]]) -> str | None:
        """The turn's answer when the whole batch skips the next round, else None."""
        if not batch or not all(self.skips(tool, result) for tool, result in batch):
            return None
        return "\n\n".join(result.llm_content for _, result in batch)


HONOURED = Directives()  # the defaults: directives on, no plugin tool allowlisted
