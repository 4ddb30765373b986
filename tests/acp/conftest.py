"""The ACP tests drive `qshell --acp` with the ACP SDK, the `acp` extra: without it they
are not collected (`.ci/run` installs it, so there they always run)."""

from __future__ import annotations

import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("acp") else ["test_*.py"]
