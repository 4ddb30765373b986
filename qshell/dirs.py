"""Where qshell keeps its files: config, state and cache directories.

`QSHELL_HOME`, when set, moves all of them under one folder (`config/`, `state/`,
`cache/`), which is what the tests rely on; otherwise platformdirs decides. Directories
are created `0700` on demand. Pure functions of the environment passed in; thread-safe.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

APP_NAME = "qshell"
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


@dataclass(frozen=True, slots=True)
class Dirs:
    config: Path
    state: Path
    cache: Path

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Dirs:
        home = environ.get("QSHELL_HOME")
        if home:
            base = Path(home).expanduser()
            return cls(config=base / "config", state=base / "state", cache=base / "cache")
        import platformdirs

        return cls(
            config=platformdirs.user_config_path(APP_NAME),
            state=platformdirs.user_state_path(APP_NAME),
            cache=platformdirs.user_cache_path(APP_NAME),
        )


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and parents) with mode 0700 and return it."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    os.chmod(path, PRIVATE_DIR_MODE)
    return path
