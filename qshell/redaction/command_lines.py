"""Secrets recognised by their place in a command line: the password a client is given as
an option's value, as shell history, scripts and CI files hold them.

`mysql -u root -p… db` (and `mysqldump`, `mysqladmin`: the password is glued to `-p`),
`sshpass -p … ssh host`, and `curl -u user:… https://…` (the part after the
first colon). Each pattern starts with the program's name and looks along its line (up to
a pipe, `;` or `&`) for the option; the judge checks that the name is the command, not an
argument (`find / -name mysql -print`), and that the value is not a template or
placeholder (`-p"$MYSQL_PWD"`, `-u "$USER:$TOKEN"`; judgement.explicit_password).
`--password=…` options are assignments.py's. Pure: safe from any thread.
"""

from __future__ import annotations

import re

from qshell.redaction.base import VALUE, Detector, Finding, Judge, quoted_group, starts_word
from qshell.redaction.judgement import explicit_password

_LINE = r"[^\n|;&]"  # the rest of one command
_OPTION_BEFORE = re.compile(r"(?:^|[ \t])-[^-\s]\S*[ \t]*\Z")  # `-name mysql`: an argument


def _command(text: str, start: int, lead: str) -> bool:
    """The program's name (`lead` and then the match) starts a word and is not an option's
    argument (`--` is not one: `kubectl exec pod -- mysql …`)."""
    begin = start - len(lead)
    if begin < 0 or not text.startswith(lead, begin) or not starts_word(text, begin):
        return False
    return _OPTION_BEFORE.search(text, max(0, begin - 40), begin) is None


def _option_password(*, after_user: bool = False, lead: str = "") -> Judge:
    """The option's value as a password; `after_user`: the part after its first colon
    (`user:password`; `-u user` alone makes curl ask); `lead`: the letters of the
    program's name before the pattern's start."""

    def judge(match: re.Match[str], text: str) -> tuple[Finding, ...]:
        group = quoted_group(match)
        if group is None or not _command(text, match.start(), lead):
            return ()
        start, end = match.span(group)
        if after_user:
            colon = text.find(":", start, end)
            if colon < 0:
                return ()
            start = colon + 1
        ok = start < end and explicit_password(text[start:end])
        return (Finding("password", start, end),) if ok else ()

    return judge


COMMAND_DETECTORS: tuple[Detector, ...] = (
    Detector(re.compile(rf"mysql{_LINE}{{0,200}}?[ \t]-p{VALUE}"), _option_password()),
    # `sshpass` found from its `hpass` ('s' is a commoner first letter: 0.08 against 0.04 ms)
    Detector(
        re.compile(rf"hpass{_LINE}{{0,100}}?[ \t]-p[ \t]*{VALUE}"), _option_password(lead="ss")
    ),
    Detector(
        re.compile(rf"curl{_LINE}{{0,300}}?[ \t](?:-u[ \t]*|--user[ \t=]+){VALUE}"),
        _option_password(after_user=True),
    ),
)
