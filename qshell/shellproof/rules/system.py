"""Rules for system listings: network state, processes and the environment.

Network listings are allowed only in forms that resolve no name over the network (ip
without -resolve, netstat -n, ss without -r); process and environment listings only in
forms that print no process environment. Pure functions; any thread.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from qshell.shellproof.rules.spec import (
    NONE,
    Judged,
    Spec,
    Unproven,
    Word,
    judge_spec,
    parse,
    word_set,
)

# ---------------------------------------------------------------- ip

# ip takes any prefix of an option or object name, the first one in its own order winning
# (`-r` is -resolve, `-b` is -batch, `-f` is -family, `-n` is -netns, `r` is route).
IP_OPTION_ORDER = [
    "-loops",
    "-family",
    "-4",
    "-6",
    "-0",
    "-M",
    "-B",
    "-human",
    "-human-readable",
    "-iec",
    "-stats",
    "-statistics",
    "-details",
    "-resolve",
    "-oneline",
    "-timestamp",
    "-tshort",
    "-Version",
    "-force",
    "-batch",
    "-brief",
    "-json",
    "-pretty",
    "-rcvbuf",
    "-color",
    "-help",
    "-netns",
    "-Numeric",
    "-all",
    "-echo",
]
IP_OPTIONS_ALLOWED = word_set(
    "-4 -6 -0 -human -human-readable -iec -stats -statistics -details -oneline -timestamp "
    "-tshort -Version -brief -json -pretty -color -help -Numeric -all"
)
IP_OPTION_REASONS = {
    "-resolve": "ip -resolve looks names up over the network",
    "-batch": "ip -batch runs the commands in a file",
    "-netns": "ip -netns switches network namespace",
}
IP_OBJECT_ORDER = [
    "address",
    "addrlabel",
    "maddress",
    "route",
    "rule",
    "neighbor",
    "neighbour",
    "ntable",
    "ntbl",
    "link",
    "l2tp",
    "fou",
    "ila",
    "macsec",
    "tunnel",
    "tuntap",
    "tap",
    "token",
    "tcpmetrics",
    "tcp_metrics",
    "monitor",
    "xfrm",
    "mroute",
    "mrule",
    "netns",
    "netconf",
    "vrf",
    "sr",
    "nexthop",
    "mptcp",
    "ioam",
    "stats",
    "help",
]
IP_LISTINGS = word_set("address maddress route rule neighbor neighbour link")
IP_VERBS = word_set("show list ls lst")


def _first_match(word: str, names: list[str]) -> str:
    return next((name for name in names if word and name.startswith(word)), "")


def ip_option(text: str) -> str:
    """The option ip reads `text` as (`--json` is -json), or "" when it knows none."""
    opt = text[1:] if text.startswith("--") else text
    if opt in ("-4", "-6", "-0", "-M", "-B"):
        return opt
    name = _first_match(opt.partition("=")[0], IP_OPTION_ORDER)
    return name if name == "-color" or "=" not in opt else ""


def ip_rule(name: str, args: Sequence[Word]) -> Judged:
    texts = [w.text if w.literal else "$" for w in args]
    while texts and texts[0].startswith("-"):
        if texts[0] == "--":
            texts.pop(0)
            break
        option = ip_option(texts[0])
        if option not in IP_OPTIONS_ALLOWED:
            reason = IP_OPTION_REASONS.get(option, f"ip option {texts[0]} is not checked")
            raise Unproven(reason)
        texts.pop(0)
    listing = _first_match(texts[0], IP_OBJECT_ORDER) if texts else ""
    if listing not in IP_LISTINGS:
        raise Unproven(f"ip {texts[0] if texts else ''}".rstrip() + " is not a listing")
    if len(texts) > 1 and texts[1] not in IP_VERBS:
        raise Unproven(f"ip {texts[0]} {texts[1]} changes the network (only show/list)")
    if "$" in texts:
        raise Unproven("ip argument computed at run time")
    return Judged("ip")


# ---------------------------------------------------------------- netstat, ss

NETSTAT_SPEC = Spec(
    short="tulnparisexWgov46",
    long=word_set(
        "tcp udp listening numeric programs all route interfaces statistics "
        "extended wide groups timers verbose"
    ),
    deny={"-c": "never ends: netstat -c", "--continuous": "never ends: netstat -c"},
    operands=NONE,
)
NETSTAT_NUMERIC = word_set("-n --numeric")
NETSTAT_COUNTS = word_set("-s --statistics -i --interfaces")  # print no address
NETSTAT_ADDRESSES = word_set("-r --route -g --groups -t --tcp -u --udp -a --all -l --listening")


def netstat_rule(name: str, args: Sequence[Word]) -> Judged:
    """netstat looks up the name of every address it prints unless given -n."""
    judged = judge_spec(name, NETSTAT_SPEC, args)
    parsed = parse(name, NETSTAT_SPEC, args)
    counts_only = parsed.has(NETSTAT_COUNTS) and not parsed.has(NETSTAT_ADDRESSES)
    if not parsed.has(NETSTAT_NUMERIC) and not counts_only:
        raise Unproven("netstat without -n looks names up over the network")
    return judged


SS_SPEC = Spec(
    short="tuwxlnpaes46mioHO0SM",
    short_values="fAF",
    long=word_set(
        "tcp udp raw unix listening numeric processes all extended summary "
        "memory info options no-header oneline ipv4 ipv6 help version"
    ),
    long_values=word_set("family query filter"),
    deny={
        "-r": "ss -r looks names up over the network",
        "--resolve": "ss --resolve looks names up over the network",
        "-K": "ss -K kills sockets",
        "--kill": "ss --kill kills sockets",
        "-D": "ss -D writes a file",
        "--diag": "ss --diag writes a file",
        "-E": "never ends: ss -E",
        "--events": "never ends: ss --events",
    },
    path_values=word_set("-F --filter"),
    operands=NONE,
)
# a filter word with a letter is a keyword, a state or an interface name; a host name in
# `dst NAME` would be looked up over the network
SS_KEYWORDS = word_set(
    "state exclude dst src dport sport dev autobound and or not eq neq ne gt lt ge le "
    "established syn-sent syn-recv fin-wait-1 fin-wait-2 time-wait closed close-wait "
    "last-ack listening closing all connected synchronized bucket big"
)
SS_NUMERIC = re.compile(r"[0-9.:/*\[\]()!&|=<>]+|:[A-Za-z0-9_-]+")
SS_INTERFACE = re.compile(r"[A-Za-z0-9_.@-]+")


def ss_rule(name: str, args: Sequence[Word]) -> Judged:
    judged = judge_spec(name, SS_SPEC, args)
    previous = ""
    for word in parse(name, SS_SPEC, args).operands:
        if not word.literal:
            raise Unproven(f"ss filter word {word.raw!r} is computed at run time")
        for text in word.text.split():
            ok = (
                text in SS_KEYWORDS
                or SS_NUMERIC.fullmatch(text) is not None
                or (previous == "dev" and SS_INTERFACE.fullmatch(text) is not None)
            )
            if not ok:
                raise Unproven(f"ss filter word {text!r} may be a host name to look up")
            previous = text
    return judged


# ---------------------------------------------------------------- ps

# procps: a word without a dash holds BSD options, where `e` shows each process's
# environment; a dash word holds System V options, but when any word fails to parse that
# way ps parses every word again as BSD (`ps -efx` shows environments). So `e` may appear
# only in dash words, and then only when every word is one ps surely parses System V style.
PS_SYSV_FLAGS = frozenset("AadeFfHjlLNTwycZ")
PS_SYSV_VALUES = frozenset("CGgoOpqstuU")
PS_BSD_FLAGS = frozenset("auxwlfjvsrScmhHXZn")
PS_LONG = word_set("forest headers no-headers cumulative help version")
PS_LONG_VALUES = word_set("sort cols columns width lines rows format pid ppid user group")


PS_FORMAT = re.compile(r"[a-z0-9_,:=%+-]+")


def _ps_word(word: Word, following: Word | None) -> tuple[int, bool, bool]:
    """(words taken, whether it holds System V `e`, whether it gives a value System V ps
    may refuse where BSD ps would not)."""
    text = word.text
    if text.startswith("--"):
        opt, eq, _ = text[2:].partition("=")
        if opt in PS_LONG and not eq:
            return 1, False, False
        if opt not in PS_LONG_VALUES:
            raise Unproven(f"unknown option {text} for ps")
        return (1 if eq else _ps_value(following, text)), False, False
    if not text.startswith("-"):
        if "e" in text:
            raise Unproven("ps e shows every process's environment (secrets)")
        if any(char not in PS_BSD_FLAGS for char in text):
            raise Unproven(f"ps BSD options {text} are not checked")
        return 1, False, False
    for j, char in enumerate(text[1:], 1):
        if char in PS_SYSV_VALUES:
            attached = text[j + 1 :]
            value = attached or (following.text if following and following.literal else "")
            risky = char not in "oO" or PS_FORMAT.fullmatch(value) is None
            return (1 if attached else _ps_value(following, "-" + char)), "e" in text, risky
        if char not in PS_SYSV_FLAGS:
            raise Unproven(f"ps option -{char} is not checked")
    return 1, "e" in text, False


def _ps_value(following: Word | None, option: str) -> int:
    if following is None or following.splits:
        raise Unproven(f"ps {option} needs one value")
    return 2


def ps_rule(name: str, args: Sequence[Word]) -> Judged:
    has_e = risky = False
    i = 0
    while i < len(args):
        word = args[i]
        if not word.literal:
            raise Unproven(f"ps: argument {word.raw!r} is computed at run time")
        taken, e, refusable = _ps_word(word, args[i + 1] if i + 1 < len(args) else None)
        has_e, risky = has_e or e, risky or refusable
        i += taken
    if has_e and risky:
        raise Unproven("ps -e with a value ps may refuse, which makes it read -e as BSD e")
    return Judged(name)
