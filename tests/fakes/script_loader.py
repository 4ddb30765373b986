"""Build fake-server rules from a JSON script (a file path or an already-parsed dict).

Format: `{"rules": [{"match": {...}, "reply": {...} | "replies": [...], "times": 1}]}`.
Match keys (all must hold; missing or `{}` means always): `always`, `last_user_text_contains`,
`has_tool_result` (true, false or a text the result contains), `system_contains`,
`any_text_contains`, `model`, `protocol`. Reply: `{"text": ...}`, `{"tool_calls": [{"name",
"arguments", "id"?}], "text"?: ...}` with optional `usage`, `latency` ({"ttft", "tps"}),
`stop_reason`, `model`, `repeat_id_and_name`, `legacy_function_call`, `interleave`; or
`{"fault": "http_500" | "rate_limited" | "cut_midway" | "malformed_json" |
"context_too_long" | {"stall": 2} | {"http": 503} | {"rate_limited": 0.5}}`, where a
`text` beside a streaming fault is the partial stream. Pure parsing: no I/O besides
reading the file, no server state; safe from any thread.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.fakes.matchers import (
    Match,
    all_of,
    always,
    any_text_contains,
    has_tool_result,
    last_user_text_contains,
    model_is,
    protocol_is,
    system_contains,
)
from tests.fakes.script import Answer, Fault, Latency, Reply, Rule, ToolCallSpec, Usage


def _match(spec: Mapping[str, Any]) -> Match:
    predicates: list[Match] = []
    for key, value in spec.items():
        if key == "always":
            predicates.append(always() if value else ~always())
        elif key == "has_tool_result":
            if isinstance(value, str):
                predicates.append(has_tool_result(value))
            else:
                predicates.append(has_tool_result() if value else ~has_tool_result())
        elif key == "last_user_text_contains":
            predicates.append(last_user_text_contains(str(value)))
        elif key == "system_contains":
            predicates.append(system_contains(str(value)))
        elif key == "any_text_contains":
            predicates.append(any_text_contains(str(value)))
        elif key == "model":
            predicates.append(model_is(str(value)))
        elif key == "protocol":
            predicates.append(protocol_is(str(value)))
        else:
            raise ValueError(f"unknown match key {key!r}")
    return all_of(*predicates) if predicates else always()


def _latency(spec: Mapping[str, Any]) -> Latency:
    return Latency(
        ttft_s=float(spec.get("ttft", spec.get("ttft_s", 0.0))),
        tokens_per_s=spec.get("tps", spec.get("tokens_per_s")),
    )


def _reply(spec: Mapping[str, Any]) -> Reply:
    usage = Usage(**spec["usage"]) if "usage" in spec else None
    latency = _latency(spec["latency"]) if "latency" in spec else None
    common: dict[str, Any] = {
        "usage": usage,
        "latency": latency,
        "stop_reason": spec.get("stop_reason"),
        "model": spec.get("model"),
    }
    if "tool_calls" in spec:
        calls = [
            ToolCallSpec(call["name"], call.get("arguments", {}), call.get("id"))
            for call in spec["tool_calls"]
        ]
        return Reply.tool_calls(
            calls,
            str(spec.get("text", "")),
            repeat_id_and_name=bool(spec.get("repeat_id_and_name", False)),
            legacy_function_call=bool(spec.get("legacy_function_call", False)),
            interleave=bool(spec.get("interleave", False)),
            **common,
        )
    return Reply.text(str(spec.get("text", "")), **common)


def _fault(value: Any, spec: Mapping[str, Any]) -> Fault:
    partial = Reply.text(str(spec["text"])) if "text" in spec else None
    if isinstance(value, Mapping):
        if "stall" in value:
            return Fault.stall(float(value["stall"]), reply=partial)
        if "http" in value:
            return Fault.http(int(value["http"]), spec.get("message"))
        if "rate_limited" in value:
            return Fault.rate_limited(value["rate_limited"])
        raise ValueError(f"unknown fault {dict(value)!r}")
    name = str(value)
    if name.startswith("http_"):
        return Fault.http(int(name.removeprefix("http_")), spec.get("message"))
    if name == "rate_limited":
        return Fault.rate_limited(spec.get("retry_after_s", 1))
    if name == "context_too_long":
        return Fault.context_too_long()
    if name == "cut_midway":
        return Fault.cut_midway(partial, after_chunks=int(spec.get("after_chunks", 2)))
    if name == "malformed_json":
        return Fault.malformed_json(partial, after_chunks=int(spec.get("after_chunks", 2)))
    raise ValueError(f"unknown fault {name!r}")


def _answer(spec: Mapping[str, Any]) -> Answer:
    if "fault" in spec:
        return _fault(spec["fault"], spec)
    return _reply(spec)


def _rule(entry: Mapping[str, Any], position: int) -> Rule:
    match = _match(entry.get("match") or {})
    times = entry.get("times")
    name = str(entry.get("name") or f"rule {position}: {match.description}")
    if "replies" in entry:
        answers = [_answer(spec) for spec in entry["replies"]]
        return Rule(match=match, replies=answers, times=times, name=name)
    return Rule(match=match, reply=_answer(entry.get("reply") or {}), times=times, name=name)


def load_script(source: str | Path | Mapping[str, Any]) -> list[Rule]:
    """Rules, in file order, from a script file path or a parsed script dict."""
    if isinstance(source, (str, Path)):
        data: Any = json.loads(Path(source).read_text(encoding="utf-8"))
    else:
        data = source
    entries = data.get("rules", []) if isinstance(data, Mapping) else data
    if not isinstance(entries, list):
        raise ValueError("a script needs a list under 'rules'")
    return [_rule(entry, position) for position, entry in enumerate(entries)]
