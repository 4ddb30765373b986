"""What OpenAI-compatible endpoints take beyond the plain Chat Completions body.

The dialect choices the OpenAI body makes by model name and base URL, kept apart from the
message conversion in openai.py. The output limit is `max_completion_tokens` for OpenAI's
reasoning models (gpt-5 and later, the o-series), on OpenAI, on Azure and behind routers,
since they refuse `max_tokens` with a 400 `unsupported_parameter` ("Use
'max_completion_tokens' instead"), and `max_tokens` for every other model; an endpoint that
refuses the name sent gets the other (llm/rejections.py). Usage is asked of the stream
(`stream_options.include_usage`) except on Mistral's API, which refuses the field with a
422 `extra_forbidden` and sends usage in its last chunk unasked. Reasoning off (`ChatRequest.reasoning_off`): on a
DashScope host `enable_thinking: false` (its switch for Qwen3 and the other hybrid
thinking models it serves); for a `qwen3` model elsewhere (vLLM, SGLang, llama.cpp)
`chat_template_kwargs: {"enable_thinking": false}`, which their chat templates read;
otherwise `reasoning_effort` at the lowest value the family accepts — `none` on gpt-5.1
and later, `minimal` on gpt-5, `low` on the o-series, gpt-oss and any model not known to
lack reasoning; nothing for gpt-3.5/gpt-4/chatgpt models, which have no reasoning to turn
off and reject the parameter. An endpoint that rejects what was sent gets the request again
without it (llm/rejections.py). DashScope's explicit prompt cache (`dashscopeCache`: `on`,
or `auto` on a host that is or ends in `dashscope.aliyuncs.com`,
`dashscope-intl.aliyuncs.com` or `dashscope-us.aliyuncs.com`): the header
`X-DashScope-CacheControl: enable` and `cache_control: {"type": "ephemeral"}` on the
system prompt, the last message and the last tool, with the two messages' content as a
list of text parts, the marker on the last part, as DashScope documents it. The marker of
"the last message" moves with each request: a fork's earlier last message goes back as a
plain string, which DashScope's chat template renders to the same tokens, so the cached
prefix still matches and only the fork's own new tail is written to the cache (billed at
125 % once, read at 10 % after). Pure functions over bodies; any thread.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from qshell.config import Toggle

DASHSCOPE_HOSTS = (
    "dashscope.aliyuncs.com",
    "dashscope-intl.aliyuncs.com",
    "dashscope-us.aliyuncs.com",
)
DASHSCOPE_CACHE_HEADER = "X-DashScope-CacheControl"
EPHEMERAL: dict[str, str] = {"type": "ephemeral"}

MISTRAL_HOSTS = ("api.mistral.ai", "codestral.mistral.ai")

_GPT = re.compile(r"gpt-(\d+)(?:\.(\d+))?")
_O_SERIES = re.compile(r"o\d(?:$|-)")
_NO_REASONING = re.compile(r"(gpt-3\.5|gpt-4|chatgpt-)")


def is_dashscope(base_url: str) -> bool:
    """Whether `base_url`'s host is one of DashScope's, or a subdomain of one."""
    host = _host(base_url)
    return any(host == h or host.endswith("." + h) for h in DASHSCOPE_HOSTS)


def _host(base_url: str) -> str:
    return (urlsplit(base_url).hostname or "").lower()


def token_limit_name(model: str, *, swapped: bool = False) -> str:
    """The body field of the output limit for `model`: `max_completion_tokens` for OpenAI's
    reasoning models, `max_tokens` otherwise; `swapped` (its endpoint refused that name)
    gives the other."""
    name = model.lower().rsplit("/", 1)[-1]  # "openai/gpt-5" as routers name it
    gpt = _GPT.match(name)
    reasoning = bool(_O_SERIES.match(name) or (gpt and int(gpt[1]) >= 5))
    return "max_completion_tokens" if reasoning != swapped else "max_tokens"


def asks_stream_usage(base_url: str) -> bool:
    """Whether the body asks the stream for usage (`stream_options`): not on Mistral's
    hosts, which refuse the field and send usage unasked."""
    return _host(base_url) not in MISTRAL_HOSTS


def dashscope_cache_on(setting: Toggle, base_url: str) -> bool:
    """Whether requests to `base_url` carry DashScope's explicit cache markers."""
    if setting is Toggle.AUTO:
        return is_dashscope(base_url)
    return setting is Toggle.ON


def reasoning_off_fields(model: str, base_url: str) -> dict[str, Any]:
    """The body fields that ask `model` at `base_url` for no (or the least) reasoning."""
    name = model.lower().rsplit("/", 1)[-1]  # "openai/gpt-5" as routers name it
    if is_dashscope(base_url):
        return {"enable_thinking": False}
    if name.startswith("qwen3"):
        return {"chat_template_kwargs": {"enable_thinking": False}}
    gpt = _GPT.match(name)
    if gpt and int(gpt[1]) >= 5:
        newer = (int(gpt[1]), int(gpt[2] or 0)) > (5, 0)
        return {"reasoning_effort": "none" if newer else "minimal"}
    if _NO_REASONING.match(name):
        return {}
    return {"reasoning_effort": "low"}  # o-series, gpt-oss, and models we do not know


def mark_cache(body: dict[str, Any]) -> None:
    """Put DashScope's ephemeral cache markers on `body` (in place): system prompt, last
    message, last tool. A glm model asked without tools is left alone: DashScope drops
    content parts of such a request for glm, and a one-shot request has nothing to cache."""
    tools = body.get("tools") or []
    if str(body.get("model", "")).lower().startswith("glm-") and not tools:
        return
    messages = body["messages"]
    if messages and messages[0]["role"] == "system":
        _mark(messages[0])
    if len(messages) > 1:
        _mark(messages[-1])
    if tools:
        tools[-1]["cache_control"] = dict(EPHEMERAL)


def _mark(message: dict[str, Any]) -> None:
    """The message's content as text parts, the cache marker on the last one."""
    content = message.get("content")
    if isinstance(content, str) and content:
        message["content"] = [{"type": "text", "text": content, "cache_control": dict(EPHEMERAL)}]
    elif isinstance(content, list) and content:
        content[-1] = {**content[-1], "cache_control": dict(EPHEMERAL)}
