"""The overlay base never lies inside the project, and recovery follows only journals it wrote
for the project it recovers — so a temp dir inside the project cannot plant a journal that
deletes files outside it."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import pytest

from qshell.overlay import Overlay, OverlayEscape, OverlayUnavailable, base_dir, sweep_stale
from qshell.overlay.journal import recover_journal
from qshell.overlay.records import JOURNAL_NAME, JOURNAL_VERSION
from qshell.overlay.seal import canonical, seal
from qshell.overlay.trust import ForeignJournal
from qshell.tools.paths import PathResolver
from tests.overlay.test_overlay import DEAD_PID, snapshot


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = (tmp_path / "project").resolve()
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    return root


@pytest.fixture
def tmpdir_inside(project: Path, monkeypatch) -> Path:
    """TMPDIR points inside the project (`cd /tmp && qshell`, `TMPDIR=$HOME/tmp`)."""
    inner = project / "tmp"
    inner.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(inner))
    return inner


def test_with_the_temp_dir_inside_the_project_the_overlay_lives_elsewhere(project, tmpdir_inside):
    with Overlay.create(project, PathResolver(project)) as overlay:
        assert not overlay.directory.resolve().is_relative_to(project)
        assert overlay.directory.parent.parent == base_dir.candidate_bases()[-1]
        assert list(tmpdir_inside.iterdir()) == []


def test_the_runtime_dir_is_the_next_choice_when_it_is_set(project, tmpdir_inside, monkeypatch):
    runtime = project.parent / "run-user"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    with Overlay.create(project, PathResolver(project)) as overlay:
        assert overlay.directory.parent.parent == runtime / base_dir.RUNTIME_BASE_NAME


def test_the_start_up_sweep_looks_in_the_runtime_dir_too(project, tmpdir_inside, monkeypatch):
    """Tests run with XDG_RUNTIME_DIR unset (tests/conftest.py): this one sets it, so the
    sweep's and the trust check's walk over that base stays covered."""
    runtime = project.parent / "run-user"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    overlay = Overlay.create(project, PathResolver(project))
    overlay.view.write_bytes(project / "a.txt", b"two\n")
    moved = runtime / base_dir.RUNTIME_BASE_NAME / str(DEAD_PID)
    overlay.directory.parent.rename(moved)
    assert sweep_stale(root=project) == 0  # still held: its lease says so, not its pid
    assert overlay.lease is not None
    overlay.lease.release()
    assert sweep_stale(root=project) == 1
    assert not moved.exists()
    assert (project / "a.txt").read_text() == "one\n"


def test_when_every_base_is_inside_the_project_speculation_is_off(tmp_path, monkeypatch):
    home = (tmp_path / "home").resolve()
    home.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(home / "tmp"))
    monkeypatch.setenv("QSHELL_HOME", str(home / ".qshell"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    with pytest.raises(OverlayUnavailable, match="inside the project root"):
        Overlay.create(home, PathResolver(home))
    assert sorted(p.name for p in home.iterdir()) == []


def test_an_explicit_base_inside_the_project_is_refused(project):
    with pytest.raises(OverlayUnavailable, match="inside the project root"):
        Overlay.create(project, PathResolver(project), base_dir=project / ".overlays")
    assert not (project / ".overlays").exists()


def test_a_speculative_write_into_a_base_of_overlays_is_an_escape(project, tmpdir_inside):
    real_base = base_dir.default_base_dir()  # inside the project: other sessions' overlays
    with Overlay.create(project, PathResolver(project)) as overlay:
        planted = real_base / str(DEAD_PID) / "overlay-x" / JOURNAL_NAME
        with pytest.raises(OverlayEscape, match="private speculation directory"):
            overlay.view.write_bytes(planted, b"{}")
        assert not overlay.has_writes


# --- recovery trusts only journals it wrote, for its own project -----------------------------


def hostile_journal(victim: Path, root: Path) -> dict:
    """A journal whose roll-back would delete `victim` (its inode and hash as "our copy")."""
    data = victim.read_bytes()
    step = {
        "rel": victim.name,
        "staged": ".qshell-stage-x",
        "backup": None,
        "mode": None,
        "expect_sha256": None,
        "sha256": hashlib.sha256(data).hexdigest(),
        "staged_ino": victim.stat().st_ino,
    }
    return {
        "root": str(root),
        "phase": "renaming",
        "dirs": [],
        "files": [step],
        "version": JOURNAL_VERSION,
        "pid": DEAD_PID,
    }


def plant(base: Path, journal: dict, *, dir_mode: int = 0o700, file_mode: int = 0o600) -> Path:
    overlay = base / str(DEAD_PID) / "overlay-planted"
    (overlay / "upper").mkdir(parents=True)
    for path in (base, base / str(DEAD_PID), overlay):
        os.chmod(path, dir_mode if path != base else 0o700)
    # sealed as this user's qshell seals its own journals (seal.py)
    body = canonical(journal)
    (overlay / JOURNAL_NAME).write_text(
        json.dumps({"seal": seal(body.encode()), "journal": journal})
    )
    os.chmod(overlay / JOURNAL_NAME, file_mode)
    return overlay


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    directory = (tmp_path / "outside").resolve()
    directory.mkdir()
    (directory / "precious.txt").write_text("do not delete\n")
    return directory


def test_a_journal_for_another_project_is_left_alone(tmp_path, project, outside):
    base = tmp_path / "base"
    planted = plant(base, hostile_journal(outside / "precious.txt", outside))
    assert sweep_stale(base, root=project) == 0
    assert (outside / "precious.txt").read_text() == "do not delete\n"
    assert (planted / JOURNAL_NAME).exists()
    with pytest.raises(ForeignJournal):
        recover_journal(planted / JOURNAL_NAME, project)


def test_a_journal_without_a_project_to_check_it_against_is_never_rolled(tmp_path, outside):
    base = tmp_path / "base"
    planted = plant(base, hostile_journal(outside / "precious.txt", outside))
    assert sweep_stale(base) == 0
    assert (outside / "precious.txt").exists() and planted.exists()


@pytest.mark.parametrize(("dir_mode", "file_mode"), [(0o755, 0o600), (0o700, 0o644)])
def test_a_journal_qshell_did_not_write_is_not_trusted(tmp_path, outside, dir_mode, file_mode):
    base = tmp_path / "base"
    journal = hostile_journal(outside / "precious.txt", outside)
    planted = plant(base, journal, dir_mode=dir_mode, file_mode=file_mode)
    with pytest.raises(ValueError, match="not a journal qshell can trust"):
        recover_journal(planted / JOURNAL_NAME, outside)
    text = (planted / JOURNAL_NAME).read_text()
    assert sweep_stale(base, root=outside) == 0
    assert (outside / "precious.txt").read_text() == "do not delete\n"
    [aside] = (base / base_dir.ASIDE_DIR_NAME).iterdir()  # never followed, never deleted
    assert (aside / JOURNAL_NAME).read_text() == text
    assert not planted.exists()


def test_a_hard_linked_journal_is_not_trusted(tmp_path, outside):
    base = tmp_path / "base"
    planted = plant(base, hostile_journal(outside / "precious.txt", outside))
    os.link(planted / JOURNAL_NAME, tmp_path / "elsewhere.json")
    with pytest.raises(ValueError, match="not a journal qshell can trust"):
        recover_journal(planted / JOURNAL_NAME, outside)
    assert (outside / "precious.txt").exists()


def test_with_the_temp_dir_inside_the_project_nothing_outside_is_ever_deleted(
    project, tmpdir_inside, outside
):
    """The whole attack: a journal written into the project's temp dir, the start-up sweep."""
    real_base = base_dir.default_base_dir()
    real_base.mkdir(mode=0o700)
    before = snapshot(outside)
    hostile = hostile_journal(outside / "precious.txt", outside)
    planted = real_base / str(DEAD_PID) / "overlay-x"
    planted.mkdir(parents=True)  # as an accepted write would make them: 0755 and 0644
    (planted / JOURNAL_NAME).write_text(json.dumps(hostile))
    for root in (project, outside, None):
        sweep_stale(root=root)
    assert snapshot(outside) == before


def test_a_journal_an_agent_wrote_is_never_followed_even_with_qshells_modes(
    tmp_path, project, outside
):
    """Owner and modes can be had by any process of this user (an agent's write with umask
    077): only the seal, under a key outside every project, makes a journal qshell's."""
    base = tmp_path / "base"
    hostile = hostile_journal(outside / "precious.txt", outside)
    for forged in (hostile, {"seal": "0" * 64, "journal": hostile}):  # no seal, a forged one
        planted = plant(base, hostile)
        (planted / JOURNAL_NAME).write_text(json.dumps(forged))
        assert sweep_stale(base, root=outside) == 0
        assert (outside / "precious.txt").read_text() == "do not delete\n"
        assert not planted.exists()  # set aside, never followed


def test_a_base_inside_the_project_is_never_swept(tmp_path, outside):
    """Whatever lies in the project was written by its tools, never by qshell's overlays."""
    base = outside / "tmp" / "qshell-speculation"
    planted = plant(base, hostile_journal(outside / "precious.txt", outside))
    assert sweep_stale(base, root=outside) == 0
    assert (outside / "precious.txt").read_text() == "do not delete\n"
    assert planted.exists()


def test_a_journal_from_before_directory_attrs_is_still_recovered(tmp_path, project):
    """A version 5 journal (no directory attrs) is rolled back as it always was."""
    (project / "sub").mkdir()
    os.chmod(project / "sub", 0o700)  # the crashed apply's chmod
    journal = {
        "root": str(project),
        "phase": "renaming",
        "dirs": [],
        "files": [],
        "modes": [{"rel": "sub", "mode": 0o700, "before": 0o755}],
        "version": 5,
        "pid": DEAD_PID,
    }
    assert JOURNAL_VERSION != 5
    planted = plant(tmp_path / "base", journal)
    recovery = recover_journal(planted / JOURNAL_NAME, project)
    assert recovery is not None and recovery.direction == "rolled back"
    assert os.stat(project / "sub").st_mode & 0o777 == 0o755
