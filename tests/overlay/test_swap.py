"""The final swap of an apply: an editor's save that lands between the check and the swap (or
during it) is caught, put back and reported, never deleted — with the atomic exchange and
with the fallback where the filesystem refuses it. Races are staged deterministically by
wrapping the journal's rename primitives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qshell.overlay import ApplyConflict, Overlay, journal, renameat
from qshell.overlay.journal import CHANGED, JOURNAL_NAME, recover_journal
from qshell.overlay.records import APPEARED
from qshell.tools.paths import PathResolver
from tests.overlay.test_apply import (
    CRASH_POINTS,
    NEW_CONTENT,
    CrashingOs,
    expected_after,
    fresh,
    no_litter,
    speculate,
)
from tests.overlay.test_overlay import snapshot


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("app v1\n")
    (root / "run.sh").write_text("#!/bin/sh\necho v1\n")
    return root


@pytest.fixture
def overlay(project: Path, tmp_path: Path):
    with Overlay.create(project, PathResolver(project), base_dir=tmp_path / "base") as ov:
        yield ov


def unsupported(*args: object) -> None:
    raise renameat.Unsupported("refused by this filesystem")


@pytest.fixture(params=["exchange", "fallback"])
def swap_kind(request, monkeypatch) -> str:
    if request.param == "fallback":
        monkeypatch.setattr(renameat, "exchange", unsupported)
    return str(request.param)


def save_by_rename(path: Path, text: str) -> None:
    """What most editors do: write a new file, rename it over the old one."""
    temp = path.with_name(path.name + ".swp")
    temp.write_text(text)
    os.replace(temp, path)


def save_in_place(path: Path, text: str) -> None:
    with open(path, "r+") as out:
        out.write(text)


def before_the_swap_of(rel: str, action, monkeypatch) -> None:
    """Run `action` right before the journal swaps `rel` in (after every check)."""
    real_swap = journal._swap

    def swap(root_fd, step):
        if step.rel == rel:
            action()
        return real_swap(root_fd, step)

    monkeypatch.setattr(journal, "_swap", swap)


def written(overlay: Overlay, project: Path) -> dict[str, bytes | None]:
    before = snapshot(project)
    overlay.view.write_bytes(project / "src" / "app.py", b"app v2\n")
    overlay.view.write_bytes(project / "run.sh", b"#!/bin/sh\necho v2\n")
    overlay.view.write_bytes(project / "docs" / "new.md", b"new\n")
    return before


@pytest.mark.parametrize("save", [save_by_rename, save_in_place])
def test_a_save_after_the_check_is_caught_at_the_swap_and_kept(
    overlay, project, monkeypatch, swap_kind, save
):
    before = written(overlay, project)
    target = project / "src" / "app.py"
    before_the_swap_of("src/app.py", lambda: save(target, "app v9\n"), monkeypatch)
    with pytest.raises(ApplyConflict, match=CHANGED):
        overlay.apply()
    before["src/app.py"] = b"app v9\n"
    assert snapshot(project) == before
    assert no_litter(project)


def test_a_second_save_during_the_swap_back_wins_and_the_first_is_kept(
    overlay, project, monkeypatch
):
    before = written(overlay, project)
    target = project / "src" / "app.py"
    before_the_swap_of("src/app.py", lambda: save_by_rename(target, "first save\n"), monkeypatch)
    real_exchange = renameat.exchange
    calls: list[str] = []

    def exchange(dir_fd, first, second):
        calls.append(second)
        if second == "app.py" and len(calls) == 2:  # undoing the swap: a second save lands
            save_by_rename(target, "second save\n")
        return real_exchange(dir_fd, first, second)

    monkeypatch.setattr(renameat, "exchange", exchange)
    with pytest.raises(ApplyConflict) as caught:
        overlay.apply()
    assert target.read_text() == "second save\n"
    kept = [p for p in (project / "src").iterdir() if p.name.startswith(".qshell-")]
    assert [p.read_text() for p in kept] == ["first save\n"]  # left for the user, reported
    assert "src/app.py was kept as found" in str(caught.value)
    assert (project / "run.sh").read_bytes() == before["run.sh"]


def test_a_file_made_where_a_new_one_goes_is_never_replaced(
    overlay, project, monkeypatch, swap_kind
):
    before = written(overlay, project)
    new = project / "docs" / "new.md"
    before_the_swap_of("docs/new.md", lambda: new.write_text("the user's\n"), monkeypatch)
    with pytest.raises(ApplyConflict, match=APPEARED):
        overlay.apply()
    assert new.read_text() == "the user's\n"
    assert (project / "src" / "app.py").read_bytes() == before["src/app.py"]


def test_the_fallback_without_hard_links_or_noreplace_still_applies(overlay, project, monkeypatch):
    monkeypatch.setattr(renameat, "exchange", unsupported)
    monkeypatch.setattr(renameat, "rename_noreplace", unsupported)
    real_link = os.link

    def no_links(*args, **kwargs):
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    written(overlay, project)
    overlay.apply()
    monkeypatch.setattr(os, "link", real_link)
    assert (project / "src" / "app.py").read_text() == "app v2\n"
    assert (project / "docs" / "new.md").read_text() == "new\n"
    assert no_litter(project)


def test_the_fallback_applies_every_file(overlay, project, monkeypatch):
    monkeypatch.setattr(renameat, "exchange", unsupported)
    before = written(overlay, project)
    overlay.apply()
    after = snapshot(project)
    assert after["src/app.py"] == b"app v2\n" and after["docs/new.md"] == b"new\n"
    assert set(after) == {*before, "docs", "docs/new.md"}
    assert no_litter(project)


class CrashingRenames:
    """renameat's functions dying at the same count as a CrashingOs."""

    def __init__(self, fake: CrashingOs, *, exchange: bool) -> None:
        self.fake = fake
        self.real_exchange, self.real_noreplace = renameat.exchange, renameat.rename_noreplace
        self.can_exchange = exchange

    def _step(self, name: str) -> None:
        if self.fake.count == self.fake.crash_at:
            from tests.overlay.test_apply import Crash

            raise Crash(name)
        self.fake.count += 1

    def exchange(self, *args: object) -> None:
        if not self.can_exchange:
            raise renameat.Unsupported("refused")
        self._step("exchange")
        self.real_exchange(*args)  # type: ignore[arg-type]

    def rename_noreplace(self, *args: object) -> None:
        self._step("rename_noreplace")
        self.real_noreplace(*args)  # type: ignore[arg-type]


@pytest.mark.parametrize("can_exchange", [True, False])
@pytest.mark.parametrize("crash_at", range(CRASH_POINTS))
def test_a_crash_at_any_rename_recovers_to_all_old_or_all_new(
    tmp_path, monkeypatch, crash_at, can_exchange
):
    root, overlay = fresh(tmp_path, "crash")
    before = speculate(overlay, root)
    fake = CrashingOs(crash_at)
    renames = CrashingRenames(fake, exchange=can_exchange)
    monkeypatch.setattr(journal, "os", fake)
    monkeypatch.setattr(renameat, "exchange", renames.exchange)
    monkeypatch.setattr(renameat, "rename_noreplace", renames.rename_noreplace)
    monkeypatch.setattr(journal, "_abort", lambda *args: None)
    try:
        overlay.apply()
    except BaseException as exc:
        assert type(exc).__name__ == "Crash"
    finally:
        monkeypatch.undo()
    recover_journal(overlay.directory / JOURNAL_NAME)
    assert snapshot(root) in (before, expected_after(before))
    assert no_litter(root)
    overlay.discard()
    assert set(NEW_CONTENT) <= set(expected_after(before))
