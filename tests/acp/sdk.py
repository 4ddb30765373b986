"""Whether the Agent Client Protocol SDK (the `acp` extra) is installed, for the ACP tests.

The README's test install (`pip install -e '.[test]'`) has no SDK. Then a test module that
imports it (or qshell's ACP server, which does) skips whole — `pytest.importorskip(SDK,
reason=NO_SDK)` before those imports — and a test that needs `qshell --acp` to get past
its start carries `needs_sdk`; the run's skip summary says why for each. Every test under
tests/acp carries the `acp` marker (conftest.py): `.ci/run`'s step with the extras
installed runs them by it.
"""

from __future__ import annotations

import importlib.util

import pytest

SDK = "acp"
NO_SDK = "the `acp` extra (agent-client-protocol) is not installed: pip install -e '.[acp]'"
needs_sdk = pytest.mark.skipif(importlib.util.find_spec(SDK) is None, reason=NO_SDK)
