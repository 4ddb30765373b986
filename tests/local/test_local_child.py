"""The server child renders chat templates as plain text, not HTML (llama.cpp's own code).

llama-cpp-python builds its `chatml-function-calling` template with HTML autoescaping, so
without `plain_text_templates()` a prompt's quotes reach the model as `&#34;`. The child
patches the template module before it serves; this renders through that module the same
way, in a fresh interpreter, before and after the patch.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RENDER = """
from jinja2.sandbox import ImmutableSandboxedEnvironment
from llama_cpp import llama_chat_format
from qshell.llm.local_child import plain_text_templates

def render():
    jinja2 = llama_chat_format.jinja2  # what the chat handlers look up at each request
    env = ImmutableSandboxedEnvironment(
        autoescape=jinja2.select_autoescape(["html", "xml"]), undefined=jinja2.StrictUndefined
    )
    return env.from_string("{{ message.content }}").render(message={"content": TEXT})

TEXT = 'read "a.py" & show <main>'
print(render())
plain_text_templates()
print(render())
"""


def test_the_child_sends_prompts_to_the_model_unescaped(local_model_cache: Path):
    out = subprocess.run(
        [sys.executable, "-c", RENDER], capture_output=True, text=True, check=True, timeout=60
    ).stdout.splitlines()
    assert out[0] != 'read "a.py" & show <main>'  # llama-cpp-python's own setting escapes
    assert out[1] == 'read "a.py" & show <main>'
