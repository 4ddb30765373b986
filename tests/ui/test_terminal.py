"""Type-ahead: the printable text of bytes typed while a turn ran."""

from __future__ import annotations

import pytest

from qshell.ui.terminal import quiet_input, take_typeahead, typeahead_text


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"plain text", "plain text"),
        (b"ab\x1b[Acd", "abcd"),  # arrow up (CSI)
        (b"\x1b[D\x1b[C\x1b[B", ""),  # arrows only
        (b"\x1bOAx", "x"),  # arrow up in application mode (SS3)
        (b"\x1b[1;5Cword", "word"),  # Ctrl-Right: CSI with parameters
        (b"a\x1b[3~b", "ab"),  # Delete key
        (b"\x1b[200~pasted\x1b[201~", "pasted"),  # bracketed paste markers
        (b"\x1bbback", "back"),  # Alt-b: ESC and one character
        (b"end\x1b", "end"),  # a lone ESC at the end
        (b"end\x1b[1;", "end"),  # a sequence cut off at the end
    ],
)
def test_escape_sequences_are_dropped(raw, expected):
    assert typeahead_text(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"abc\x7f\x7fd", "ad"),  # DEL, what Backspace sends
        (b"ab\x08c", "ac"),  # ^H
        (b"\x7f\x7fhi", "hi"),  # nothing to erase
        ("caf\u00e9\x7fe".encode(), "cafe"),  # erases one character, not one byte
    ],
)
def test_backspace_erases_the_previous_character(raw, expected):
    assert typeahead_text(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"one\rtwo\r", "one\ntwo"),
        (b"one\ntwo\n", "one\ntwo"),
        (b"\r\rhi", "hi"),
    ],
)
def test_enter_becomes_a_newline_and_outer_newlines_are_trimmed(raw, expected):
    assert typeahead_text(raw) == expected


def test_control_characters_other_than_tab_are_dropped():
    assert typeahead_text(b"a\x03b\x04c\td\x00") == "abc\td"


def test_utf8_text_is_kept_and_a_cut_off_character_dropped():
    assert typeahead_text("héllo ✓ 日本".encode()) == "héllo ✓ 日本"
    assert typeahead_text("ok ✓".encode()[:-1]) == "ok "


def test_without_a_terminal_nothing_is_taken_and_quiet_input_does_nothing(tmp_path):
    with (tmp_path / "f").open("w+") as handle:
        assert take_typeahead(handle.fileno()) == b""
        with quiet_input(handle.fileno()):
            handle.write("still writable")


def test_cr_lf_is_one_line_break_and_c1_controls_are_dropped():
    from qshell.ui.terminal import typeahead_text

    assert typeahead_text("a\r\nb\u0085c".encode()) == "a\nbc"
