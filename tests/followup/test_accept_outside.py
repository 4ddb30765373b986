"""Accept against a real run at the edges of the overlay (issue 25): the project's secrets and
the world outside the project.

A speculated command runs jailed on the kernel overlay, its live counterpart unjailed. Where
the command reads or writes a secret the jail hides — by a name the shell or a program
computes, so no look at the command line sees it — or writes outside the project (the home,
a directory beside the project), the speculated run cannot stand: it must be refused (the
call then runs live, asked), never applied as if the read or write had worked. New files
directly in /tmp, and caches in `~/.cache`, are temporary files, which a live run leaves
behind as well: a command whose only writes outside the project are those stands
(overlay_reach.py, README). Each
test runs through `run_on_overlay` and `Overlay.apply()` on the real kernel overlay with
test_accept_differential.py's rig, and, where the command stands or is refused, compares
the tree with the live run of what was taken in (test_accept_attacks.py `like_live`).
Skipped with the probe's reason where a user-namespace overlay cannot be mounted.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.followup import test_accept_differential as differential_test
from tests.followup.differential import Start, build
from tests.followup.test_accept_attacks import like_live
from tests.followup.test_accept_differential import Rig, speculate

pytestmark = differential_test.pytestmark
rig = differential_test.rig

ENV = Start(((".env", b"KEY=secret\n", 0o600), ("a", b"a\n", 0o644)))
KEYS = Start((("deploy/.ssh/id_deploy", b"PRIVATE\n", 0o600), ("a", b"a\n", 0o644)))
COMPUTED = '"$(echo .e)nv"'  # `.env`, as bash computes it: no word names it


def _python(code: str) -> str:
    return f'python3 -c "{code}"'


@pytest.mark.parametrize(
    "call",
    [
        f"sed 's/=.*/=/' {COMPUTED} > env.template",
        _python("open('env.template', 'w').write(open('.e' + 'nv').read().split('=')[0])"),
        f"cp {COMPUTED} env.copy",  # copy_file_range: no access time moves
        f"echo MORE=1 >> {COMPUTED}",
        f"rm -f {COMPUTED}; echo gone > a",
        f"mv {COMPUTED} env.old",
        f"cat {COMPUTED} > copy 2>/dev/null; true",
    ],
)
def test_a_secret_reached_by_a_computed_name_runs_live(rig: Rig, call: str) -> None:
    """The stand-in of `.env` shows the read, write, copy, rename or deletion; the call is
    refused (it runs live), so nothing derived from the stand-in is applied."""
    outcome = like_live(rig, ENV, [call])
    assert outcome.refused is not None and ".env" in outcome.refused, outcome


@pytest.mark.parametrize(
    "call",
    [
        'ls "$(echo deploy/.s)sh" > listing',
        'cat "$(echo deploy/.s)sh/id_deploy" > key.copy 2>/dev/null; true',
        'echo new > "$(echo deploy/.s)sh/known_hosts"',
    ],
)
def test_a_secret_directory_reached_by_a_computed_name_runs_live(rig: Rig, call: str) -> None:
    outcome = like_live(rig, KEYS, [call])
    assert outcome.refused is not None and "deploy/.ssh" in outcome.refused, outcome


def test_a_command_naming_a_secret_is_refused_before_it_runs(rig: Rig) -> None:
    """The fast path: a word of the command names the masked file."""
    build(rig.root, ENV)
    outcome = speculate(rig, ["touch ran; cat .e{nv,x} > copy"], None)
    assert outcome.refused is not None and "names .env" in outcome.refused, outcome
    assert not (rig.root / "ran").exists() and not (rig.root / "copy").exists()


def test_a_command_that_leaves_the_secrets_alone_stands(rig: Rig) -> None:
    """A project with a secret speculates as before when the command does not reach it:
    the stand-ins leave nothing in what is applied."""
    outcome = like_live(rig, KEYS, ["ls > listing; echo b >> a; mkdir -p deploy/out"])
    assert outcome.refused is None and outcome.ran, outcome
    assert (rig.root / "a").read_bytes() == b"a\nb\n"
    assert (rig.root / "deploy/.ssh/id_deploy").read_bytes() == b"PRIVATE\n"


def test_a_write_to_the_home_runs_live(rig: Rig) -> None:
    build(rig.root, ENV)
    name = f"qshell-made-{secrets.token_hex(4)}"
    outcome = speculate(rig, [f"mkdir -p ~/.local/bin && echo tool > ~/.local/bin/{name}"], None)
    assert outcome.refused is not None and name in outcome.refused, outcome
    assert "outside the project" in outcome.refused
    assert not (rig.ctx.paths.home / ".local/bin" / name).exists()


def test_a_write_into_a_sibling_directory_runs_live(rig: Rig) -> None:
    build(rig.root, ENV)
    sibling = rig.root.parent / "sibling"
    sibling.mkdir(exist_ok=True)
    outcome = speculate(rig, ["echo made > ../sibling/out.txt && echo done"], None)
    assert outcome.refused is not None and "sibling/out.txt" in outcome.refused, outcome
    assert not (sibling / "out.txt").exists()


def test_temporary_files_in_tmp_stand(rig: Rig) -> None:
    """Our rule: new entries directly in /tmp (the jail's TMPDIR) are temporary files, as a
    live run leaves them: the command stands, what it wrote into the project is applied,
    and nothing reaches the real /tmp."""
    build(rig.root, ENV)
    name = f"qshell-temp-{secrets.token_hex(4)}"
    call = f"mkdir /tmp/{name} && echo t > /tmp/{name}/log && cp /tmp/{name}/log out.txt"
    outcome = speculate(rig, [call], None)
    assert outcome.refused is None and outcome.conflict is None, outcome
    assert (rig.root / "out.txt").read_bytes() == b"t\n"
    assert not Path("/tmp", name).exists()


def test_a_cache_in_the_home_stands(rig: Rig) -> None:
    """A formatter's or compiler's cache in `~/.cache` (black, go build) is temporary too:
    the command stands; the real home gets nothing."""
    build(rig.root, ENV)
    call = "mkdir -p ~/.cache/fmt && echo c > ~/.cache/fmt/state && echo formatted > a"
    outcome = speculate(rig, [call], None)
    assert outcome.refused is None and outcome.conflict is None, outcome
    assert (rig.root / "a").read_bytes() == b"formatted\n"
    assert not (rig.ctx.paths.home / ".cache" / "fmt").exists()


PYTEST_LIKE = """
import pathlib, tempfile
work = pathlib.Path(tempfile.mkdtemp(prefix='{prefix}'))  # in the jail's /tmp
(work / 'basetemp.txt').write_text('ok')
cache = pathlib.Path('.pytest_cache/v/cache')
cache.mkdir(parents=True, exist_ok=True)
(cache / 'lastfailed').write_text('{}')
pathlib.Path('__pycache__').mkdir(exist_ok=True)
pathlib.Path('__pycache__/a.cpython.pyc').write_bytes(b'pyc')
print('1 passed')
"""


def test_a_pytest_like_command_writing_the_project_and_tmp_stands(rig: Rig) -> None:
    """A test run's usual writes — caches in the project, a temporary directory in /tmp —
    stand, and accept leaves the project as the live run does."""
    prefix = f"qshell-pytest-like-{secrets.token_hex(4)}-"
    code = PYTEST_LIKE.replace("{prefix}", prefix).encode()
    script = Start(((".env", b"KEY=secret\n", 0o600), ("run.py", code, 0o644)))
    try:
        outcome = like_live(rig, script, ["python3 run.py"])
    finally:
        for left in Path(tempfile.gettempdir()).glob(f"{prefix}*"):  # the live run's
            shutil.rmtree(left)
        for left in Path("/tmp").glob(f"{prefix}*"):
            shutil.rmtree(left)
    assert outcome.refused is None and outcome.ran == ["python3 run.py"], outcome
    assert (rig.root / ".pytest_cache/v/cache/lastfailed").read_text() == "{}"
