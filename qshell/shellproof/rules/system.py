"""Rules for system listings: network state, processes and the environment.

Network listings are allowed only in forms that resolve no name over the network (ip
without -resolve, netstat -n, ss without -r); process and environment listings only in
forms that print no process environment. Pure functions; any thread.
"""

from __future__ import annotations

from collections.abc import Sequence

from qshell.shellproof.rules.spec import Judged, Unproven, Word, word_set

IP_OBJECTS = word_set(
    "address addr a link l route r ro neighbour neighbor neigh n rule ru maddress maddr"
)
IP_OPTIONS = word_set(
    "-4 -6 -br -brief -c -color -d -details -s -stats -statistics -h -human "
    "-j -json -p -pretty -o -oneline -r -resolve -a -all"
)


def ip_rule(name: str, args: Sequence[Word]) -> Judged:
    texts = [w.text if w.literal else "$" for w in args]
    while texts and texts[0].startswith("-"):
        if texts[0].split("=")[0] not in IP_OPTIONS:
            raise Unproven(f"ip option {texts[0]} is not checked")
        texts.pop(0)
    if not texts or texts[0] not in IP_OBJECTS:
        raise Unproven(f"ip {texts[0] if texts else ''}".rstrip() + " is not a listing")
    if len(texts) > 1 and texts[1] not in ("show", "list", "ls", "lst"):
        raise Unproven(f"ip {texts[0]} {texts[1]} changes the network (only show/list)")
    if "$" in texts:
        raise Unproven("ip argument computed at run time")
    return Judged("ip")
