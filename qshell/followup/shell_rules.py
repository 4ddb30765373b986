"""Per-command rules of the shell read-only proof: which commands, flags and operands are read-only.

`shell_safety` walks the bash syntax tree and hands every simple command here as a name plus its
decoded arguments (`Word`); `judge` either returns what the command reads (`Judged`) or raises
`Unproven` naming the first thing it cannot prove. The tables are allowlists: a command, flag,
git subcommand or sed/awk construct missing from them is unproven, so a gap costs a false
rejection, never a write. This module never parses shell syntax, never runs a program and never
touches the filesystem. Immutable tables and pure functions: safe from any thread.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

PATHS = "paths"  # every operand is a path
NONE = "none"  # operands are names, text or numbers
PATTERN = "pattern"  # the first operand is a pattern unless a pattern flag gave one


class Unproven(Exception):
    """Something is not proven read-only; `reason` says what (first one found)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word after quote removal, with what bash may still do to it at run time."""

    text: str  # value after quote removal; run-time parts keep their source text
    raw: str  # source text
    literal: bool  # fully known before run time (no expansion, glob, brace or substitution)
    flaggable: bool  # could be, or expand into, an option
    splits: bool  # could expand into zero or several words
    prefix: str = ""  # literal text before the first run-time part (all of `text` if literal)

    @property
    def fixed_option(self) -> str:
        """`--name=` when the word is one option whose name is literal and only its value is
        computed at run time (`--author="$(…)"`), else empty."""
        if self.literal or self.splits:
            return ""
        match = LONG_OPTION_EQ.match(self.prefix)
        return match.group() if match else ""


LONG_OPTION_EQ = re.compile(r"--[A-Za-z0-9][A-Za-z0-9-]*=")


def literal_word(text: str) -> Word:
    return Word(text, text, True, text.startswith("-"), False, text)


@dataclass(frozen=True, slots=True)
class Judged:
    """A command proven read-only: its label for the verdict and the paths it may read."""

    label: str
    paths: tuple[str, ...] = ()
    dynamic: tuple[str, ...] = ()  # source text of path arguments known only at run time


@dataclass(frozen=True, slots=True)
class Spec:
    """Option grammar of one command (GNU style: options may follow operands)."""

    short: str | None = None  # value-less short flags allowed; None: any
    short_values: str = ""  # short flags taking a value (attached or next word)
    short_optional: str = ""  # short flags whose value can only be attached (-I[FMT])
    long: frozenset[str] | None = None  # long flags allowed (`--x` or `--x=v`); None: any
    long_values: frozenset[str] = frozenset()  # long flags taking a value (`--x=v` or `--x v`)
    deny: Mapping[str, str] = field(default_factory=dict)  # "-o" / "--output" -> reason
    path_values: frozenset[str] = frozenset()  # flags whose value is a path
    pattern_flags: frozenset[str] = frozenset()  # flags that supply the pattern
    indirect: frozenset[str] = frozenset()  # flags making it read files named inside a file
    operands: str = PATHS
    max_operands: int | None = None  # more operands would be written to
    digits: bool = False  # -NUM is an option (head -20)
    stop_at_operand: bool = False  # options end at the first operand (xargs)

    @property
    def open(self) -> bool:
        """Every flag is harmless: run-time arguments cannot turn the command into a writer."""
        return (
            self.short is None and self.long is None and not self.deny and self.max_operands is None
        )


@dataclass(slots=True)
class Parsed:
    flags: list[tuple[str, Word | None]]
    operands: list[Word]


def _fs(names: str) -> frozenset[str]:
    return frozenset(names.split())


def _value(name: str, spec: Spec, args: Sequence[Word], i: int, flag: str) -> Word:
    if i >= len(args):
        raise Unproven(f"{name} {flag} needs a value")
    value = args[i]
    if value.splits and value.flaggable and not spec.open:
        raise Unproven(f"{name}: value {value.raw!r} is computed at run time and could add options")
    return value


def _long(name: str, spec: Spec, text: str, args: Sequence[Word], i: int, out: Parsed) -> int:
    opt, eq, attached = text[2:].partition("=")
    key = "--" + opt
    if key in spec.deny:
        raise Unproven(spec.deny[key])
    known = opt in spec.long_values or (spec.long is not None and opt in spec.long)
    if not known:
        for denied, reason in spec.deny.items():
            if denied.startswith("--") and denied[2:].startswith(opt):
                raise Unproven(f"{reason} ({key} abbreviates {denied})")
        if spec.long is not None:  # exact names only: an abbreviation is not proven
            raise Unproven(f"unknown option {key} for {name}")
    if opt in spec.long_values and not eq:
        out.flags.append(("--" + opt, _value(name, spec, args, i, key)))
        return i + 1
    out.flags.append(("--" + opt, literal_word(attached) if eq else None))
    return i


def _short(name: str, spec: Spec, text: str, args: Sequence[Word], i: int, out: Parsed) -> int:
    body = text[1:]
    if spec.digits and body.isdigit():
        out.flags.append((text, None))
        return i
    for j, char in enumerate(body):
        key = "-" + char
        if key in spec.deny:
            raise Unproven(spec.deny[key])
        rest = body[j + 1 :]
        if char in spec.short_values:
            if rest:
                out.flags.append((key, literal_word(rest)))
                return i
            out.flags.append((key, _value(name, spec, args, i, key)))
            return i + 1
        if char in spec.short_optional:
            out.flags.append((key, literal_word(rest) if rest else None))
            return i
        if spec.short is not None and char not in spec.short:
            raise Unproven(f"unknown option {key} for {name}")
        out.flags.append((key, None))
    return i


def parse(name: str, spec: Spec, args: Sequence[Word]) -> Parsed:
    """Split `args` into flags and operands by `spec`, raising on anything not allowed."""
    out = Parsed([], [])
    i, ended, is_open = 0, False, spec.open
    while i < len(args):
        word = args[i]
        i += 1
        if ended or (spec.stop_at_operand and out.operands):
            out.operands.append(word)
            continue
        if not word.literal:
            if word.fixed_option and not is_open:
                i = _long(name, spec, word.fixed_option, args, i, out)
                out.flags[-1] = (out.flags[-1][0], word)
                continue
            if word.flaggable and not is_open:
                raise Unproven(
                    f"{name}: argument {word.raw!r} is computed at run time and could be an option"
                )
            out.operands.append(word)
            continue
        text = word.text
        if text == "--":
            ended = True
        elif len(text) < 2 or text[0] != "-":
            out.operands.append(word)
        elif text.startswith("--"):
            i = _long(name, spec, text, args, i, out)
        else:
            i = _short(name, spec, text, args, i, out)
    return out


def _collect(words: Sequence[Word], paths: list[str], dynamic: list[str]) -> None:
    for word in words:
        if not word.literal:
            dynamic.append(word.raw)
        elif word.text and word.text != "-":
            paths.append(word.text)


STDIN_NAMES = "$(</dev/stdin)"  # run-time paths: the file names arriving on stdin


def named_inside(path: str) -> str:
    """Run-time paths: the file names written inside `path`, as shell source text."""
    return f"$(<{path})"


def _names(key: str, names: frozenset[str]) -> bool:
    """`key` is one of `names`, or a GNU abbreviation of one of its long options."""
    return key in names or (
        key.startswith("--") and len(key) > 3 and any(n.startswith(key) for n in names)
    )


def judge_spec(name: str, spec: Spec, args: Sequence[Word]) -> Judged:
    parsed = parse(name, spec, args)
    operands = parsed.operands
    if spec.max_operands is not None:
        if len(operands) > spec.max_operands:
            extra = operands[spec.max_operands].raw
            raise Unproven(f"{name}: operand {extra!r} would be written to or changed")
        for word in operands:
            if word.splits:
                raise Unproven(f"{name}: {word.raw!r} may expand to several operands")
    paths: list[str] = []
    dynamic: list[str] = []
    values = [v for k, v in parsed.flags if v is not None and _names(k, spec.path_values)]
    _collect(values, paths, dynamic)
    for key, value in parsed.flags:
        if _names(key, spec.indirect):  # the files it reads are named inside another file
            lists = [value] if value is not None else parsed.operands
            dynamic.extend(named_inside(w.raw if w.literal else "…") for w in lists)
            if not lists:
                dynamic.append(STDIN_NAMES)
    if spec.operands == PATTERN and not any(_names(k, spec.pattern_flags) for k, _ in parsed.flags):
        operands = operands[1:]
    if spec.operands != NONE:
        _collect(operands, paths, dynamic)
    return Judged(name, tuple(paths), tuple(dynamic))


Rule = Callable[[str, Sequence[Word]], Judged]


def _spec_rule(spec: Spec) -> Rule:
    return lambda name, args: judge_spec(name, spec, args)


# ---------------------------------------------------------------- plain commands

OPEN = Spec()
OPEN_NO_PATHS = Spec(operands=NONE)
CHECKSUM = Spec(indirect=_fs("-c --check"))

SPECS: dict[str, Spec] = {
    "cat": OPEN,
    "head": Spec(short_values="nc", digits=True),
    "wc": Spec(
        long_values=_fs("files0-from"),
        path_values=_fs("--files0-from"),
        indirect=_fs("--files0-from"),
    ),
    "nl": Spec(short_values="bdfhilnsvw"),
    "rev": OPEN,
    "tac": Spec(short_values="s"),
    "cut": Spec(short_values="bcdf"),
    "paste": Spec(short_values="d"),
    "column": Spec(short_values="cso"),
    "fold": Spec(short_values="w"),
    "fmt": Spec(short_values="wpg"),
    "expand": Spec(short_values="t"),
    "unexpand": Spec(short_values="t"),
    "tr": OPEN_NO_PATHS,
    "comm": OPEN,
    "join": Spec(short_values="12aejotv"),
    "cmp": Spec(short_values="in"),
    "diff": Spec(
        short_values="CUDFILxXSW",
        digits=True,
        long_values=_fs("exclude-from from-file to-file"),
        path_values=_fs("-X --exclude-from --from-file --to-file"),
    ),
    "od": Spec(short_values="AjNSt"),
    "hexdump": Spec(short_values="efns", path_values=_fs("-f")),
    "hd": Spec(short_values="efns", path_values=_fs("-f")),
    "strings": Spec(short_values="nteT"),
    "xxd": Spec(short_values="cglos", max_operands=1),
    "ls": Spec(
        short_values="IwT",
        long_values=_fs("ignore hide width tabsize format sort time"),
    ),
    "du": Spec(
        short_values="BdtX",
        long_values=_fs("max-depth block-size threshold exclude-from files0-from"),
        path_values=_fs("-X --exclude-from --files0-from"),
        indirect=_fs("--files0-from"),
    ),
    "df": Spec(short_values="Btx"),
    "stat": Spec(short_values="c", long_values=_fs("format printf")),
    "file": Spec(
        short_values="mfeFP",
        deny={"-C": "file -C writes a compiled magic file", "--compile": "file -C writes a file"},
        path_values=_fs("-m -f --magic-file --files-from"),
        indirect=_fs("-f --files-from"),
    ),
    "md5sum": CHECKSUM,
    "sha1sum": CHECKSUM,
    "sha224sum": CHECKSUM,
    "sha256sum": CHECKSUM,
    "sha384sum": CHECKSUM,
    "sha512sum": CHECKSUM,
    "b2sum": CHECKSUM,
    "cksum": CHECKSUM,
    "sum": OPEN,
    "shasum": Spec(short_values="a", indirect=_fs("-c --check")),
    "base64": Spec(
        short_values="w",
        deny={"-o": "base64 -o writes a file", "--output": "base64 --output writes a file"},
        max_operands=1,
    ),
    "base32": Spec(short_values="w", max_operands=1),
    "grep": Spec(
        short_values="efmABCdD",
        long_values=_fs(
            "regexp file max-count after-context before-context context devices "
            "directories binary-files include exclude exclude-from exclude-dir label "
            "group-separator"
        ),
        path_values=_fs("-f --file --exclude-from"),
        pattern_flags=_fs("-e -f --regexp --file"),
        operands=PATTERN,
    ),
    "jq": Spec(
        short_values="fL",
        long_values=_fs("arg argjson slurpfile rawfile indent from-file"),
        path_values=_fs("-f --from-file --slurpfile --rawfile -L"),
        pattern_flags=_fs("-f --from-file"),
        operands=PATTERN,
    ),
    "realpath": Spec(
        long_values=_fs("relative-to relative-base"),
        path_values=_fs("--relative-to --relative-base"),
    ),
    "readlink": OPEN,
    "basename": Spec(short_values="s", operands=NONE),
    "dirname": OPEN_NO_PATHS,
    "echo": OPEN_NO_PATHS,
    "true": OPEN_NO_PATHS,
    "false": OPEN_NO_PATHS,
    ":": OPEN_NO_PATHS,
    "yes": OPEN_NO_PATHS,
    "seq": Spec(short_values="fs", operands=NONE),
    "expr": OPEN_NO_PATHS,
    "numfmt": OPEN_NO_PATHS,
    "which": OPEN_NO_PATHS,
    "whereis": OPEN_NO_PATHS,
    "type": Spec(short="afptP", long=frozenset(), operands=NONE),
    "pwd": Spec(short="LP", long=frozenset(), max_operands=0),
    "whoami": OPEN_NO_PATHS,
    "id": OPEN_NO_PATHS,
    "groups": OPEN_NO_PATHS,
    "users": OPEN_NO_PATHS,
    "who": OPEN_NO_PATHS,
    "w": OPEN_NO_PATHS,
    "logname": OPEN_NO_PATHS,
    "uname": OPEN_NO_PATHS,
    "arch": OPEN_NO_PATHS,
    "nproc": OPEN_NO_PATHS,
    "uptime": OPEN_NO_PATHS,
    "free": Spec(
        deny={"-s": "never ends: free -s", "--seconds": "never ends: free --seconds"},
        operands=NONE,
    ),
    "lscpu": OPEN_NO_PATHS,
    "lsblk": OPEN_NO_PATHS,
    "findmnt": Spec(
        deny={"-p": "never ends: findmnt --poll", "--poll": "never ends: findmnt --poll"},
        operands=NONE,
    ),
    "locale": OPEN_NO_PATHS,
    "getconf": OPEN_NO_PATHS,
    "cal": OPEN_NO_PATHS,
    "ps": OPEN_NO_PATHS,
    "pidof": OPEN_NO_PATHS,
    "lsb_release": OPEN_NO_PATHS,
    "ss": Spec(
        short="tuwxlnpaes46mioHOr0SM",
        short_values="fAF",
        long=_fs(
            "tcp udp raw unix listening numeric processes all extended summary "
            "memory info options resolve no-header oneline ipv4 ipv6 help version"
        ),
        long_values=_fs("family query filter"),
        deny={
            "-K": "ss -K kills sockets",
            "--kill": "ss --kill kills sockets",
            "-D": "ss -D writes a file",
            "--diag": "ss --diag writes a file",
            "-E": "never ends: ss -E",
            "--events": "never ends: ss --events",
        },
        operands=NONE,
    ),
    "netstat": Spec(
        short="tulnparisexWgov46",
        long=_fs(
            "tcp udp listening numeric programs all route interfaces statistics "
            "extended wide groups timers verbose"
        ),
        deny={"-c": "never ends: netstat -c", "--continuous": "never ends: netstat -c"},
        operands=NONE,
    ),
    "printenv": Spec(short="0", long=_fs("null help version"), operands=NONE),
    "pgrep": Spec(
        short="acfilnovwx",
        short_values="dgGPstuU",
        long=_fs(
            "list-name list-full count full newest oldest exact ignore-case inverse lightweight"
        ),
        long_values=_fs("delimiter pgroup group parent session terminal euid uid"),
        operands=NONE,
    ),
    "hostname": Spec(  # -f, -i, -A, -d and -y ask DNS or NIS: network
        short="sI",
        long=_fs("short all-ip-addresses help version"),
        max_operands=0,
    ),
    "mount": Spec(
        short="lv",
        short_values="t",
        long=_fs("show-labels verbose"),
        long_values=_fs("types"),
        max_operands=0,
    ),
    "sort": Spec(
        short="bdfgiMhnRrVcCmsuz",
        short_values="kSt",
        long=_fs(
            "ignore-leading-blanks dictionary-order ignore-case general-numeric-sort "
            "ignore-nonprinting month-sort human-numeric-sort numeric-sort "
            "random-sort reverse version-sort check merge stable unique "
            "zero-terminated debug help version"
        ),
        long_values=_fs(
            "key field-separator buffer-size parallel files0-from random-source sort batch-size"
        ),
        deny={
            "-o": "sort -o writes a file",
            "--output": "sort --output writes a file",
            "--compress-program": "sort --compress-program runs a program",
            "-T": "sort -T writes temporary files",
            "--temporary-directory": "sort -T writes temporary files",
        },
        path_values=_fs("--files0-from --random-source"),
        indirect=_fs("--files0-from"),
    ),
    "uniq": Spec(
        short="cdDuiz",
        short_values="fsw",
        long=_fs(
            "count repeated all-repeated unique ignore-case zero-terminated group help version"
        ),
        long_values=_fs("skip-fields skip-chars check-chars"),
        max_operands=1,
    ),
    "tail": Spec(
        short="qvz",
        short_values="nc",
        long=_fs("quiet silent verbose zero-terminated help version"),
        long_values=_fs("lines bytes"),
        deny={
            "-f": "never ends: tail -f",
            "-F": "never ends: tail -F",
            "--follow": "never ends: tail --follow",
            "--retry": "never ends: tail --retry",
            "-s": "tail -s only applies to -f",
            "--sleep-interval": "tail --sleep-interval only applies to -f",
            "--pid": "tail --pid only applies to -f",
        },
        digits=True,
    ),
    "tree": Spec(
        short_values="LPIHT",
        long_values=_fs("charset filelimit timefmt sort"),
        deny={"-o": "tree -o writes a file", "-R": "tree -R writes 00Tree.html files"},
    ),
    "shuf": Spec(
        short_values="in",
        deny={"-o": "shuf -o writes a file", "--output": "shuf --output writes a file"},
        long_values=_fs("random-source head-count input-range"),
        path_values=_fs("--random-source"),
    ),
    "iconv": Spec(
        short="csl",
        short_values="ft",
        long=_fs("list silent"),
        long_values=_fs("from-code to-code"),
        deny={"-o": "iconv -o writes a file", "--output": "iconv --output writes a file"},
    ),
    "rg": Spec(
        short="nNiSswxvlcoFHIpLaUPqb0.u",
        short_values="efgtTABCmdrjEM",
        long=_fs(
            "line-number no-line-number ignore-case smart-case case-sensitive "
            "word-regexp line-regexp invert-match files-with-matches "
            "files-without-match count count-matches only-matching fixed-strings "
            "with-filename no-filename heading no-heading pretty follow hidden "
            "no-ignore no-ignore-vcs no-ignore-dot no-ignore-global no-ignore-parent "
            "no-ignore-exclude no-ignore-files unrestricted files json vimgrep "
            "column byte-offset trim multiline multiline-dotall pcre2 stats quiet "
            "text binary null null-data max-columns-preview passthru "
            "glob-case-insensitive no-messages no-config mmap no-mmap "
            "one-file-system no-context-separator line-buffered block-buffered debug "
            "trace crlf include-zero no-unicode auto-hybrid-regex type-list help "
            "version"
        ),
        long_values=_fs(
            "regexp file glob iglob type type-not after-context before-context "
            "context max-count max-depth replace threads ignore-file color colors "
            "context-separator encoding engine field-context-separator "
            "field-match-separator max-columns max-filesize path-separator sort "
            "sortr type-add type-clear"
        ),
        deny={
            "--pre": "rg --pre runs a program on every file",
            "--pre-glob": "rg --pre-glob goes with --pre (runs a program)",
            "-z": "rg -z runs decompression programs",
            "--search-zip": "rg --search-zip runs decompression programs",
            "--hostname-bin": "rg --hostname-bin runs a program",
        },
        path_values=_fs("-f --file --ignore-file"),
        pattern_flags=_fs("-e -f --regexp --file --files --type-list"),
        operands=PATTERN,
    ),
    "fd": Spec(
        short="HIusiFgaLp0lq1",
        short_values="dEteSocj",
        long=_fs(
            "hidden no-ignore unrestricted case-sensitive ignore-case glob regex "
            "fixed-strings absolute-path list-details follow full-path print0 prune "
            "strip-cwd-prefix one-file-system no-ignore-vcs no-ignore-parent quiet "
            "show-errors hyperlink help version"
        ),
        long_values=_fs(
            "max-depth min-depth exact-depth exclude type extension size "
            "changed-within changed-before owner color threads max-results "
            "base-directory path-separator search-path ignore-file format and"
        ),
        deny={
            "-x": "fd -x runs a command",
            "--exec": "fd --exec runs a command",
            "-X": "fd -X runs a command",
            "--exec-batch": "fd --exec-batch runs a command",
        },
        path_values=_fs("--base-directory --search-path --ignore-file"),
        operands=PATTERN,
    ),
}
SPECS["egrep"] = SPECS["fgrep"] = SPECS["grep"]
SPECS["fdfind"] = SPECS["fd"]


# ---------------------------------------------------------------- git

GIT_GLOBAL_FLAGS = _fs(
    "--no-pager -P --no-replace-objects --literal-pathspecs --glob-pathspecs "
    "--noglob-pathspecs --icase-pathspecs --no-optional-locks --no-advice"
)
GIT_GLOBAL_DENY = {
    "-c": "git -c sets configuration, which can run programs",
    "--config-env": "git --config-env sets configuration, which can run programs",
    "--git-dir": "git --git-dir points at another repository",
    "--work-tree": "git --work-tree points at another directory",
    "--namespace": "git --namespace is not checked",
    "--exec-path": "git --exec-path changes where git finds its programs",
    "--super-prefix": "git --super-prefix is internal",
    "-p": "git -p starts a pager",
    "--paginate": "git --paginate starts a pager",
    "--bare": "git --bare is not checked",
    "--help": "git --help opens the manual",
    "-h": "git -h is not checked",
}
GIT_NETWORK = _fs(
    "fetch pull push clone ls-remote send-email fetch-pack send-pack "
    "request-pull remote-ext http-fetch"
)
GIT_WRITES = _fs(
    "add am apply archive bisect checkout cherry-pick clean commit gc init "
    "merge mv prune rebase reset restore revert rm switch "
    "update-ref update-index format-patch filter-branch replace repack "
    "maintenance sparse-checkout hash-object read-tree write-tree "
    "commit-tree mktag mktree pack-refs symbolic-ref fast-import bundle "
    "credential lfs citool gui mergetool difftool"
)
GIT_DENY_LONG = {
    "output": "git --output writes a file",
    "ext-diff": "git --ext-diff runs an external diff program",
    "textconv": "git --textconv runs conversion filters",
    "show-signature": "git --show-signature runs gpg",
    "open-files-in-pager": "git grep --open-files-in-pager runs a pager",
    "filters": "git --filters runs filter programs",
    "help": "git --help opens the manual",
    "exec": "git --exec runs a command",
    "upload-pack": "git --upload-pack runs a program",
}
GIT_LOG_LIKE = _fs(
    "log show diff whatchanged diff-tree diff-files diff-index range-diff "
    "shortlog blame annotate cherry rev-list show-branch name-rev merge-base "
    "describe status ls-files ls-tree cat-file rev-parse count-objects "
    "check-ignore check-attr for-each-ref show-ref var version grep "
    "check-ref-format"
)


def _git_paths(operands: Sequence[Word], paths: list[str], dynamic: list[str]) -> None:
    for word in operands:
        if not word.literal:
            dynamic.append(word.raw)
            continue
        paths.append(word.text)
        _, colon, inner = word.text.partition(":")
        if colon and inner:
            paths.append(inner)  # <rev>:<path> reads that file's committed content


def _git_options(sub: str, rest: Sequence[Word], deny_short: str = "") -> list[Word]:
    """Generic check of a read-only git subcommand's arguments; returns its operands."""
    operands: list[Word] = []
    ended = False
    for word in rest:
        text = word.text
        if not word.literal and not (word.fixed_option and not ended):
            if word.flaggable and not ended:
                raise Unproven(f"git {sub}: argument {word.raw!r} is computed at run time")
            operands.append(word)
            continue
        if not word.literal:
            text = word.fixed_option  # --name=$(…): judge the name, the value is data
        if "%G" in word.text:
            raise Unproven("git format %G runs gpg")
        if ended or text == "-" or not text.startswith("-"):
            operands.append(word)
        elif text == "--":
            ended = True
        elif text.startswith("--"):
            opt = text[2:].partition("=")[0]
            for denied, reason in GIT_DENY_LONG.items():
                if opt and denied.startswith(opt):
                    raise Unproven(reason)
        elif any(char in text[1:] for char in deny_short):
            raise Unproven(f"git {sub} {text} runs a pager or writes")
    return operands


def _git_listing(sub: str, rest: Sequence[Word], flags: str, longs: frozenset[str]) -> None:
    """git branch / tag: listing flags only; names allowed only in list mode."""
    list_mode = sub == "tag" and not rest
    names = False
    pending = False
    for word in rest:
        if pending:
            pending = False
            continue
        text = word.text
        if not word.literal:
            if word.flaggable:
                raise Unproven(f"git {sub}: argument {word.raw!r} is computed at run time")
            names = True
        elif text.startswith("--"):
            opt, eq, _ = text[2:].partition("=")
            if opt not in longs:
                raise Unproven(f"git {sub} {text} changes {sub}es")
            list_mode |= opt in (
                "list",
                "contains",
                "no-contains",
                "merged",
                "no-merged",
                "points-at",
            )
            pending = not eq and opt in ("sort", "format", "points-at")
        elif text.startswith("-") and len(text) > 1:
            if sub == "tag" and re.fullmatch(r"-n\d*", text):
                list_mode = True
                continue
            if any(char not in flags for char in text[1:]):
                raise Unproven(f"git {sub} {text} changes {sub}es")
            list_mode |= "l" in text
        else:
            names = True
    if names and not list_mode:
        raise Unproven(f"git {sub} NAME creates a {sub}")


BRANCH_LONGS = _fs(
    "all remotes list verbose ignore-case show-current no-color no-column "
    "omit-empty no-abbrev contains no-contains merged no-merged points-at "
    "sort format color column abbrev"
)
TAG_LONGS = _fs(
    "list contains no-contains merged no-merged points-at sort format column "
    "no-column color ignore-case omit-empty"
)
CONFIG_READS = _fs("--get --get-all --get-regexp --get-urlmatch --list -l")
CONFIG_FLAGS = _fs(
    "--local --global --system --worktree --show-origin --show-scope "
    "--name-only -z --null --bool --int --bool-or-int --path --expiry-date "
    "--includes --no-includes --all --regexp --fixed-value"
)
CONFIG_VALUES = _fs("--type --default --file -f --blob --url --value")


def _git_config(rest: Sequence[Word]) -> list[str]:
    reads = False
    paths: list[str] = []
    operands = 0
    i = 0
    while i < len(rest):
        word = rest[i]
        i += 1
        if not word.literal:
            raise Unproven(f"git config: argument {word.raw!r} is computed at run time")
        opt, eq, value = word.text.partition("=")
        if word.text in CONFIG_READS:
            reads = True
        elif opt in CONFIG_VALUES:
            if not eq:
                if i >= len(rest) or not rest[i].literal:
                    raise Unproven(f"git config {opt} needs a literal value")
                value = rest[i].text
                i += 1
            if opt in ("--file", "-f"):
                paths.append(value)
        elif word.text in CONFIG_FLAGS:
            pass
        elif word.text.startswith("-"):
            raise Unproven(f"git config {word.text} is not a read")
        else:
            reads |= operands == 0 and word.text in ("get", "list")
            operands += 1
    single_key = operands == 1 and "." in rest[-1].text and not rest[-1].text.startswith("-")
    if not reads and not single_key:
        raise Unproven("git config without --get or --list sets values")
    return paths


def _git_sub(sub: str, rest: Sequence[Word]) -> Judged:
    paths: list[str] = []
    dynamic: list[str] = []
    label = f"git {sub}"
    if sub in GIT_LOG_LIKE:
        _git_paths(_git_options(sub, rest, "O" if sub == "grep" else ""), paths, dynamic)
    elif sub in ("reflog", "stash"):
        # both dispatch on their first argument only; anything else there may write
        verbs = ("show", "exists") if sub == "reflog" else ("list", "show")
        verb = rest[0].text if rest and rest[0].literal else None
        if verb in verbs:
            rest = rest[1:]
        elif sub == "stash" or (rest and not (verb or "").startswith("-")):
            shown = verb if verb is not None else (rest[0].raw if rest else "")
            raise Unproven(f"git {sub} {shown}".rstrip() + " writes")
        _git_paths(_git_options(sub, rest), paths, dynamic)
    elif sub == "worktree":
        texts = [w.text if w.literal else "$" for w in rest]
        if (
            not texts
            or texts[0] != "list"
            or any(t not in ("--porcelain", "-v", "--verbose", "-z") for t in texts[1:])
        ):
            raise Unproven("git worktree changes worktrees (only 'list' is read-only)")
    elif sub == "branch":
        _git_listing(sub, rest, "arlvi", BRANCH_LONGS)
    elif sub == "tag":
        _git_listing(sub, rest, "li", TAG_LONGS)
    elif sub == "remote":
        texts = [w.text if w.literal else "$" for w in rest]
        if texts and not all(t in ("-v", "--verbose") for t in texts):
            names = [t for t in texts[1:] if t not in ("--push", "--all", "-n")]
            local = all(not t.startswith(("-", "$")) for t in names) and (
                texts[0] == "get-url"  # show asks the remote unless -n or no name is given
                or (texts[0] == "show" and ("-n" in texts or not names))
            )
            if not local:
                raise Unproven(f"git remote {texts[0]} changes remotes or uses the network")
    elif sub == "config":
        paths += _git_config(rest)
    elif sub in ("submodule", "notes"):
        verbs = ("status",) if sub == "submodule" else ("list", "show")
        verb = rest[0].text if rest and rest[0].literal else None
        if rest and verb not in verbs:
            raise Unproven(f"git {sub} {rest[0].raw} writes or runs commands")
        _git_paths(_git_options(sub, rest[1:]), paths, dynamic)
    elif sub in GIT_NETWORK:
        raise Unproven(f"git subcommand '{sub}' uses the network")
    elif sub == "help":
        raise Unproven("git help opens the manual")
    elif sub in GIT_WRITES:
        raise Unproven(f"git subcommand '{sub}' writes")
    else:
        raise Unproven(f"unknown git subcommand '{sub}'")
    return Judged(label, tuple(paths), tuple(dynamic))


def _git(name: str, args: Sequence[Word]) -> Judged:
    i = 0
    while i < len(args) and args[i].literal and args[i].text.startswith("-"):
        text = args[i].text
        opt = text.partition("=")[0]
        if text == "--version":
            return Judged("git --version")
        if opt in GIT_GLOBAL_DENY:
            raise Unproven(GIT_GLOBAL_DENY[opt])
        if text == "-C":
            target = args[i + 1] if i + 1 < len(args) else None
            if target is None or not target.literal or target.text not in (".", "./"):
                raise Unproven("git -C runs in another directory, whose config can run programs")
            i += 2
            continue
        if text not in GIT_GLOBAL_FLAGS:
            raise Unproven(f"unknown git option {opt}")
        i += 1
    if i >= len(args):
        raise Unproven("git without a subcommand")
    if not args[i].literal:
        raise Unproven("git subcommand computed at run time")
    return _git_sub(args[i].text, args[i + 1 :])


# ---------------------------------------------------------------- find

FIND_DENY = {
    "-exec": "find -exec runs a command",
    "-execdir": "find -execdir runs a command",
    "-ok": "find -ok runs a command",
    "-okdir": "find -okdir runs a command",
    "-delete": "find -delete deletes files",
    "-fls": "find -fls writes a file",
    "-fprint": "find -fprint writes a file",
    "-fprint0": "find -fprint0 writes a file",
    "-fprintf": "find -fprintf writes a file",
}
FIND_NULLARY = _fs(
    "-depth -d -mount -xdev -noleaf -ignore_readdir_race "
    "-noignore_readdir_race -daystart -follow -warn -nowarn -empty "
    "-executable -readable -writable -false -true -nogroup -nouser -print "
    "-print0 -prune -quit -ls -not -a -and -o -or ! ( ) ,"
)
FIND_UNARY = _fs(
    "-maxdepth -mindepth -amin -anewer -atime -cmin -cnewer -ctime -fstype "
    "-gid -group -ilname -iname -inum -ipath -iregex -iwholename -links "
    "-lname -mmin -mtime -name -newer -path -perm -regex -samefile -size "
    "-type -uid -used -user -wholename -xtype -context -regextype -printf "
    "-files0-from"
)
FIND_PATH_VALUES = _fs("-anewer -cnewer -newer -samefile -files0-from")
FIND_NEWER_XY = re.compile(r"-newer[aBcm][aBcmt]")
FIND_SIGNED = re.compile(r"-\d")  # -mtime -7, -size -10k
FIND_SYMBOLIC_MODE = re.compile(r"-[ugoa]*[-+=][rwxXstugo]*(,[ugoa]*[-+=][rwxXstugo]*)*")


def _find(name: str, args: Sequence[Word]) -> Judged:
    paths: list[str] = []
    dynamic: list[str] = []
    i = 0
    while i < len(args) and args[i].literal and args[i].text in ("-H", "-L", "-P", "-D"):
        i += 2 if args[i].text == "-D" else 1
    starts = 0
    while i < len(args):
        word = args[i]
        if word.literal and (word.text.startswith("-") or word.text in ("(", "!", ")", ",")):
            break
        if word.flaggable:
            raise Unproven(f"find: starting point {word.raw!r} could be an option at run time")
        _collect((word,), paths, dynamic)
        starts += 1
        i += 1
    if not starts:
        paths.append(".")
    while i < len(args):
        word = args[i]
        if not word.literal:
            raise Unproven(f"find: expression word {word.raw!r} is computed at run time")
        text = word.text
        if text in FIND_DENY:
            raise Unproven(FIND_DENY[text])
        if text in FIND_NULLARY:
            i += 1
            continue
        if text not in FIND_UNARY and not FIND_NEWER_XY.fullmatch(text):
            raise Unproven(f"unknown find expression {text}")
        if i + 1 >= len(args) or not args[i + 1].literal:
            raise Unproven(f"find {text} needs a literal value")
        value = args[i + 1].text
        mode = text == "-perm" and FIND_SYMBOLIC_MODE.fullmatch(value)
        if value.startswith("-") and not FIND_SIGNED.match(value) and not mode:
            raise Unproven(f"find {text} {value}: the value looks like an option")
        if text in FIND_PATH_VALUES or (FIND_NEWER_XY.fullmatch(text) and text[-1] != "t"):
            paths.append(value)
        if text == "-files0-from":
            dynamic.append(named_inside(value))
        i += 2
    return Judged("find", tuple(paths), tuple(dynamic))


# ---------------------------------------------------------------- sed

SED_SPEC = Spec(
    short="nErszub",
    short_values="el",
    long=_fs(
        "quiet silent regexp-extended separate null-data zero-terminated "
        "unbuffered posix debug sandbox binary follow-symlinks help version"
    ),
    long_values=_fs("expression line-length"),
    deny={
        "-i": "sed -i edits files",
        "--in-place": "sed -i edits files",
        "-f": "sed -f runs a script file that is not shown",
        "--file": "sed -f runs a script file that is not shown",
    },
)
SED_PLAIN = frozenset("pPdDnNgGhHxz=F")
SED_FORBIDDEN = {
    "w": "sed w writes a file",
    "W": "sed W writes a file",
    "r": "sed r reads a file that is not shown",
    "R": "sed R reads a file that is not shown",
    "e": "sed e runs a command",
    "v": "sed v is not checked",
}


class _SedScript:
    """A conservative reader of one sed script: addresses plus print/delete/substitute/… only."""

    def __init__(self, script: str) -> None:
        self.s = script
        self.i = 0

    def _peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def _blank(self) -> None:
        while self._peek() in (" ", "\t"):
            self.i += 1

    def _until(self, delim: str) -> None:
        """Move past the next unescaped `delim` (a regex or replacement part)."""
        s = self.s
        while self.i < len(s):
            char = s[self.i]
            if char == "\\":
                self.i += 2
                continue
            self.i += 1
            if char == delim:
                return
            if char == "\n" and delim != "\n":
                raise Unproven("sed: newline inside a regular expression")
        raise Unproven("sed: unterminated regular expression")

    def _address(self) -> bool:
        char = self._peek()
        if char.isdigit():
            while self._peek().isdigit():
                self.i += 1
            if self._peek() == "~":
                self.i += 1
                while self._peek().isdigit():
                    self.i += 1
        elif char == "$":
            self.i += 1
        elif char in ("/", "\\"):
            if char == "\\":
                self.i += 1
                char = self._peek()
                if not char or char in "\n\\":
                    raise Unproven("sed: bad address delimiter")
            self.i += 1
            self._until(char)
            while self._peek() in ("I", "M"):
                self.i += 1
        elif char in ("+", "~"):
            self.i += 1
            if not self._peek().isdigit():
                raise Unproven("sed: bad address")
            while self._peek().isdigit():
                self.i += 1
        else:
            return False
        return True

    def _end(self) -> None:
        self._blank()
        if self._peek() not in ("", ";", "\n", "}", "#"):
            raise Unproven(f"sed: unexpected {self._peek()!r} after a command")

    def _substitute(self, command: str) -> None:
        delim = self._peek()
        if not delim or delim in "\n\\":
            raise Unproven(f"sed {command}: bad delimiter")
        self.i += 1
        self._until(delim)
        self._until(delim)
        if command == "y":
            return
        while self._peek() and self._peek() in "gpiImMew0123456789":
            flag = self._peek()
            if flag == "w":
                raise Unproven("sed s///w writes a file")
            if flag == "e":
                raise Unproven("sed s///e runs a command")
            self.i += 1

    def check(self) -> None:
        s = self.s
        depth = 0
        while True:
            while self._peek() in (" ", "\t", "\n", ";"):
                self.i += 1
            char = self._peek()
            if not char:
                break
            if char == "#":
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
                continue
            if char == "}":
                depth -= 1
                if depth < 0:
                    raise Unproven("sed: unbalanced braces")
                self.i += 1
                continue
            if self._address():
                self._blank()
                if self._peek() == ",":
                    self.i += 1
                    self._blank()
                    if not self._address():
                        raise Unproven("sed: bad address range")
            self._blank()
            while self._peek() == "!":
                self.i += 1
                self._blank()
            command = self._peek()
            self.i += 1
            if command == "{":
                depth += 1
            elif command in SED_PLAIN:
                self._end()
            elif command and command in "qQlL":
                self._blank()
                while self._peek().isdigit():
                    self.i += 1
                self._end()
            elif command in ("s", "y"):
                self._substitute(command)
                self._end()
            elif command and command in "btT:":
                while self._peek() not in ("", ";", "\n"):
                    self.i += 1
            elif command and command in "aic":
                self._text()
            elif command in SED_FORBIDDEN:
                raise Unproven(SED_FORBIDDEN[command])
            else:
                raise Unproven(f"sed command {command!r} is not checked")
        if depth:
            raise Unproven("sed: unbalanced braces")

    def _text(self) -> None:
        """a/i/c text: to the end of the line, continued by a trailing backslash."""
        s = self.s
        while self.i < len(s):
            end = s.find("\n", self.i)
            if end < 0:
                self.i = len(s)
                return
            line = s[self.i : end]
            self.i = end + 1
            if (len(line) - len(line.rstrip("\\"))) % 2 == 0:
                return


def _sed(name: str, args: Sequence[Word]) -> Judged:
    parsed = parse(name, SED_SPEC, args)
    scripts = [v for k, v in parsed.flags if k in ("-e", "--expression") and v is not None]
    operands = parsed.operands
    if not scripts:
        if not operands:
            raise Unproven("sed without a script")
        scripts, operands = [operands[0]], operands[1:]
    for script in scripts:
        if not script.literal:
            raise Unproven("sed script computed at run time")
    _SedScript("\n".join(s.text for s in scripts)).check()
    paths: list[str] = []
    dynamic: list[str] = []
    _collect(operands, paths, dynamic)
    return Judged(name, tuple(paths), tuple(dynamic))


# ---------------------------------------------------------------- awk

AWK_SPEC = Spec(
    short="bcNPrsSMOtV",
    short_values="Fv",
    long=_fs(
        "posix traditional sandbox characters-as-bytes use-lc-numeric "
        "re-interval no-optimize optimize bignum help version copyright"
    ),
    long_values=_fs("field-separator assign"),
    deny={
        "-f": "awk -f runs a program file that is not shown",
        "--file": "awk -f runs a program file that is not shown",
        "-i": "awk -i loads a library (-i inplace edits files)",
        "--include": "awk -i loads a library",
        "-l": "awk -l loads a shared library",
        "--load": "awk -l loads a shared library",
        "-o": "awk -o writes a file",
        "--pretty-print": "awk --pretty-print writes a file",
        "-p": "awk -p writes a profile file",
        "--profile": "awk --profile writes a file",
        "-d": "awk -d writes a file",
        "--dump-variables": "awk --dump-variables writes a file",
        "-D": "awk -D starts a debugger",
        "--debug": "awk --debug starts a debugger",
        "-E": "awk -E runs a program file",
        "--exec": "awk --exec runs a program file",
        "-W": "awk -W options are not checked",
        "-e": "awk -e programs are not checked",
        "--source": "awk --source programs are not checked",
    },
)
# awk lexes `$5system(…)` as `$5` then `system(…)`: only a letter or `_` can glue on in front
AWK_WORDS = re.compile(r"(?<![A-Za-z_])(system|getline|close|ARGV|ARGC)(?![A-Za-z0-9_])")
AWK_WORD_REASONS = {
    "system": "awk system() runs a command",
    "getline": "awk getline reads other files or commands",
    "close": "awk close() is only needed for pipes and files",
    "ARGV": "awk ARGV changes which files are read",
    "ARGC": "awk ARGC changes which files are read",
}
AWK_TWO = frozenset(
    (
        "||",
        "&&",
        ">=",
        "<=",
        "==",
        "!=",
        "++",
        "--",
        "+=",
        "-=",
        "*=",
        "/=",
        "%=",
        "^=",
        ">>",
        "|&",
        "**",
    )
)
AWK_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _awk_regex_end(prog: str, i: int) -> int:
    """Index of the `/` closing the regex that opens at `i`; raises where awks could disagree."""
    j = i + 1
    bracket = -1
    while j < len(prog):
        char = prog[j]
        if char == "\\":
            j += 2
            continue
        if char in ';{}"\n':
            raise Unproven("awk: a regular expression that could hide code")
        if bracket >= 0:
            if char == "]" and j > bracket + 1 and not (j == bracket + 2 and prog[j - 1] == "^"):
                bracket = -1
            elif char == "/":
                raise Unproven("awk: '/' inside a bracket expression")
        elif char == "[":
            bracket = j
        elif char == "/":
            return j
        j += 1
    raise Unproven("awk: unterminated regular expression")


AWK_CONDITION_WORDS = _fs("if while for switch")  # `if (…) /re/`: a statement follows
AWK_OPERAND_BEFORE = _fs("print printf in return case do else")  # a regex may follow these


def awk_program_reason(prog: str) -> str | None:
    """Why the awk program is not proven read-only, or None: no commands, pipes or writes.

    A small tokenizer: strings and regexes are skipped, `print … >`/`>>` at the print's own
    parenthesis depth is a redirection, any `|` runs a command. awk tells a regex from a
    division by grammar, so a `/` right after a condition's `)` starts a regex, and a comment
    after a division on the same line is refused (a regex read as division could hide code)."""
    found = AWK_WORDS.search(prog)
    if found:
        return AWK_WORD_REASONS[found.group(1)]
    i, n = 0, len(prog)
    operand = False  # the last token ends an operand, so '/' divides
    parens: list[bool] = []  # open ( and [: True for an if/while/for condition
    condition_next = False
    printing = -1  # paren depth of the current print statement, -1 outside one
    divided = False  # a '/' was read as division on this line
    try:
        while i < n:
            char = prog[i]
            if char in " \t" or (char == "\\" and prog.startswith("\n", i + 1)):
                i += 2 if char == "\\" else 1
                continue
            if char == "#":
                if divided:
                    return "awk: a comment after a division is ambiguous"
                end = prog.find("\n", i)
                i = n if end < 0 else end
                continue
            if char == '"':
                i += 1
                while i < n and prog[i] != '"':
                    if prog[i] == "\n":
                        return "awk: unterminated string"
                    i += 2 if prog[i] == "\\" else 1
                if i >= n:
                    return "awk: unterminated string"
                i += 1
                operand, condition_next = True, False
                continue
            if char == "/" and not operand:
                i = _awk_regex_end(prog, i) + 1
                operand, condition_next = True, False
                continue
            if char.isdigit() or char == ".":
                while i < n and (prog[i].isdigit() or prog[i] == "."):
                    i += 1
                operand, condition_next = True, False
                continue
            if char.isalpha() or char == "_":
                j = i
                while j < n and (prog[j].isalnum() or prog[j] == "_"):
                    j += 1
                word = prog[i:j]
                i = j
                if word in ("print", "printf"):
                    printing = len(parens)
                operand = word not in AWK_OPERAND_BEFORE
                condition_next = word in AWK_CONDITION_WORDS
                continue
            two = prog[i : i + 2]
            if two in AWK_TWO:
                if two == "|&":
                    return "awk |& runs a coprocess"
                if two == ">>" and printing == len(parens):
                    return "awk print >> writes a file"
                divided |= two == "/="
                i += 2
                operand, condition_next = two in ("++", "--"), False
                continue
            if char == "|":
                return "awk | runs a command"
            if char == "@":
                return "gawk @ directives load code"
            if char == ">" and printing == len(parens):
                return "awk print > writes a file"
            operand = False
            if char in "([":
                parens.append(condition_next and char == "(")
            elif char in ")]":
                if not parens:
                    return "awk: unbalanced parentheses"
                operand = not parens.pop()  # after a condition a statement (maybe /re/) follows
            elif char in "{};\n":
                printing = -1
                divided = divided and char != "\n"
            elif char == "/":
                divided = True
            condition_next = False
            i += 1
    except Unproven as exc:
        return exc.reason
    return None


def _awk(name: str, args: Sequence[Word]) -> Judged:
    parsed = parse(name, AWK_SPEC, args)
    if not parsed.operands:
        raise Unproven("awk without a program")
    program, operands = parsed.operands[0], parsed.operands[1:]
    if not program.literal:
        raise Unproven("awk program computed at run time")
    reason = awk_program_reason(program.text)
    if reason:
        raise Unproven(reason)
    paths: list[str] = []
    dynamic: list[str] = []
    for word in operands:
        if word.literal and AWK_ASSIGNMENT.match(word.text):
            continue
        if word.text.startswith("/inet"):
            raise Unproven("gawk /inet files open network connections")
        _collect((word,), paths, dynamic)
    return Judged(name, tuple(paths), tuple(dynamic))


# ---------------------------------------------------------------- small custom rules

XARGS_SPEC = Spec(
    short="0rtx",
    short_values="dnLsPEa",
    long=_fs("null no-run-if-empty verbose exit help version"),
    long_values=_fs("delimiter max-args max-lines max-chars max-procs eof arg-file"),
    deny={
        "-I": "xargs -I substitutes input into the command",
        "-i": "xargs -i substitutes input into the command",
        "--replace": "xargs --replace substitutes input into the command",
        "-p": "xargs -p is interactive",
        "--interactive": "xargs --interactive is interactive",
        "-o": "xargs -o opens the terminal",
        "--open-tty": "xargs --open-tty opens the terminal",
        "--process-slot-var": "xargs --process-slot-var is not checked",
    },
    path_values=_fs("-a --arg-file"),
    operands=NONE,
    stop_at_operand=True,
)


def _xargs(name: str, args: Sequence[Word]) -> Judged:
    parsed = parse(name, XARGS_SPEC, args)
    target = parsed.operands
    if not target:
        return Judged("xargs echo")
    head = target[0]
    command = head.text.rsplit("/", 1)[-1] if head.literal else ""
    if not head.literal or ("/" in head.text and head.text.rsplit("/", 1)[0] not in TRUSTED_DIRS):
        raise Unproven(f"xargs runs {head.raw!r}, which is not a known command")
    spec = SPECS.get(command)
    if spec is None or not spec.open or command == "yes":
        raise Unproven(
            f"xargs runs '{command}', whose options are not all read-only (input becomes arguments)"
        )
    judged = judge_spec(command, spec, target[1:])
    lists = [v.raw for k, v in parsed.flags if k in ("-a", "--arg-file") and v is not None]
    inputs = tuple(named_inside(path) for path in lists) or (STDIN_NAMES,)
    return Judged(f"xargs {command}", judged.paths, (*judged.dynamic, *inputs))


def _printf(name: str, args: Sequence[Word]) -> Judged:
    rest = list(args)
    if rest and rest[0].literal and rest[0].text == "--":
        rest = rest[1:]
    if rest:
        first = rest[0]
        if first.literal and first.text.startswith("-") and first.text != "-":
            raise Unproven(
                "printf -v assigns a variable"
                if first.text.startswith("-v")
                else f"unknown option {first.text} for printf"
            )
        if first.flaggable and not first.literal:
            raise Unproven("printf format computed at run time could be an option")
    return Judged(name)


def _env(name: str, args: Sequence[Word]) -> Judged:
    if all(w.literal and w.text in ("-0", "--null") for w in args):
        return Judged(name)
    raise Unproven("env with arguments runs a command or changes the environment")


def _command(name: str, args: Sequence[Word]) -> Judged:
    lookup = False
    for word in args:
        if not (word.literal and word.text.startswith("-")):
            break
        if word.text == "--":
            break
        if any(char not in "vVp" for char in word.text[1:]):
            raise Unproven(f"unknown option {word.text} for command")
        lookup |= "v" in word.text or "V" in word.text
    if not lookup:
        raise Unproven("command runs its arguments (only command -v/-V looks up)")
    return Judged("command -v")


DATE_SPEC = Spec(
    short="uR",
    short_values="dfr",
    short_optional="I",
    long=_fs("utc universal rfc-email rfc-2822 debug help version iso-8601 rfc-3339 resolution"),
    long_values=_fs("date file reference"),
    deny={"-s": "date -s sets the clock", "--set": "date --set sets the clock"},
    path_values=_fs("-f --file -r --reference"),
    operands=NONE,
    max_operands=1,
)


def _date(name: str, args: Sequence[Word]) -> Judged:
    judged = judge_spec(name, DATE_SPEC, args)
    for word in parse(name, DATE_SPEC, args).operands:
        if not word.text.startswith("+"):
            raise Unproven("date with an operand other than +FORMAT sets the clock")
    return judged


TEST_BINARY = _fs("= == != < > -eq -ne -lt -le -gt -ge -nt -ot -ef -a -o")
TEST_FILE_OPS = _fs("-b -c -d -e -f -g -h -k -p -r -s -u -w -x -G -L -N -O -S")


def check_test(name: str, args: Sequence[Word]) -> Judged:
    """`test`/`[` arguments: no -v/-R (they evaluate array indexes as code) and, with run-time
    words, only the argument counts whose meaning does not depend on the words' values."""
    words = list(args)
    if name == "[":
        if not words or not words[-1].literal or words[-1].text != "]":
            raise Unproven("[ without a closing ]")
        words.pop()
    for word in words:
        if word.literal and word.text in ("-v", "-R"):
            raise Unproven(f"test {word.text} evaluates an array index as code")
        if word.splits:
            raise Unproven(f"test argument {word.raw!r} may expand to several words")
    dynamic = {i for i, word in enumerate(words) if not word.literal}
    if dynamic:
        count = len(words)
        fixed = (
            count == 1
            or (count == 2 and 0 not in dynamic)
            or (
                count == 3
                and 1 not in dynamic
                and (words[1].text in TEST_BINARY or (0 not in dynamic and words[0].text == "!"))
            )
        )
        if not fixed:
            raise Unproven("test with run-time words where an operator could be")
    paths = tuple(
        words[i + 1].text
        for i in range(len(words) - 1)
        if words[i].literal and words[i].text in TEST_FILE_OPS and words[i + 1].literal
    )
    return Judged("test", paths)


IP_OBJECTS = _fs(
    "address addr a link l route r ro neighbour neighbor neigh n rule ru maddress maddr"
)
IP_OPTIONS = _fs(
    "-4 -6 -br -brief -c -color -d -details -s -stats -statistics -h -human "
    "-j -json -p -pretty -o -oneline -r -resolve -a -all"
)


def _ip(name: str, args: Sequence[Word]) -> Judged:
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


COMPRESS_SPEC = Spec(
    short="cdklntqvN123456789",
    long=_fs(
        "stdout to-stdout decompress uncompress keep list test quiet verbose "
        "name no-name help version"
    ),
)
COMPRESS_STREAMING = _fs("zcat bzcat xzcat")


def _compressor(name: str, args: Sequence[Word]) -> Judged:
    judged = judge_spec(name, COMPRESS_SPEC, args)
    if name not in COMPRESS_STREAMING:
        keys = {k for k, _ in parse(name, COMPRESS_SPEC, args).flags}
        if not keys & {"-c", "-l", "-t", "--stdout", "--to-stdout", "--list", "--test"}:
            raise Unproven(f"{name} without -c, -l or -t writes files")
    return judged


TAR_SPEC = Spec(
    short="tvzjJ",
    short_values="f",
    long=_fs(
        "list verbose gzip gunzip bzip2 xz zstd force-local numeric-owner "
        "no-wildcards wildcards help version"
    ),
    long_values=_fs("file exclude"),
    operands=NONE,
)


def _tar(name: str, args: Sequence[Word]) -> Judged:
    words = list(args)
    if words and words[0].literal and not words[0].text.startswith("-"):
        words[0] = literal_word("-" + words[0].text)  # old style: `tar tzf a.tgz`
    parsed = parse(name, TAR_SPEC, words)
    keys = [k for k, _ in parsed.flags]
    if "-t" not in keys and "--list" not in keys:
        raise Unproven("tar without -t (list) writes or extracts")
    archives = [v for k, v in parsed.flags if k in ("-f", "--file") and v is not None]
    if not archives:
        raise Unproven("tar without -f reads $TAPE, which may be remote")
    for archive in archives:
        if not archive.literal or ":" in archive.text:
            raise Unproven("tar archive that may be remote or computed at run time")
    return Judged(name, tuple(a.text for a in archives))


TRUSTED_DIRS = _fs("/bin /usr/bin /usr/local/bin /sbin /usr/sbin")

RULES: dict[str, Rule] = {name: _spec_rule(spec) for name, spec in SPECS.items()}
RULES.update(
    {
        "git": _git,
        "find": _find,
        "sed": _sed,
        "gsed": _sed,
        "awk": _awk,
        "gawk": _awk,
        "mawk": _awk,
        "nawk": _awk,
        "xargs": _xargs,
        "printf": _printf,
        "env": _env,
        "command": _command,
        "date": _date,
        "test": check_test,
        "[": check_test,
        "ip": _ip,
        "tar": _tar,
        **dict.fromkeys(("gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz"), _compressor),
        **dict.fromkeys(COMPRESS_STREAMING, _compressor),
    }
)

# ---------------------------------------------------------------- reasons for unknown commands

INTERPRETER = re.compile(
    r"(sh|bash|zsh|dash|ksh|mksh|fish|csh|tcsh|busybox|python|pypy|perl|ruby|node|nodejs|deno"
    r"|bun|php|lua|luajit|tclsh|wish|Rscript|R|julia|java|jshell|osascript|pwsh|powershell"
    r"|irb|swift|groovy|scala|erl|escript|elixir|iex|expect)[0-9.]*"
)
LAUNCHERS = _fs(
    "sudo doas su nohup timeout nice ionice time watch setsid flock chroot "
    "strace ltrace stdbuf taskset unbuffer parallel at batch crontab "
    "systemd-run runuser firejail coproc script builtin exec eval source . "
    "nsenter unshare chrt prlimit"
)
BUILTINS = _fs(
    "cd pushd popd dirs alias unalias hash shopt set export history trap "
    "ulimit umask read wait jobs fg bg disown exit return shift let local "
    "declare typeset readonly unset enable getopts mapfile readarray "
    "complete compgen bind fc suspend logout kill"
)
INTERACTIVE = _fs("less more most man info vi vim nvim nano emacs view top htop tmux screen")
PROJECT_TOOLS = _fs(
    "make cmake ninja npm npx yarn pnpm cargo rustc go gcc cc clang pip pip3 "
    "pipx uv poetry pytest tox docker podman kubectl helm terraform gh mvn "
    "gradle dotnet bundle gem composer ldd sqlite3 psql mysql aws gcloud az"
)
NETWORK = _fs(
    "curl wget ssh scp sftp rsync nc ncat netcat telnet ftp ping dig nslookup host traceroute"
)


def unknown_reason(name: str) -> str:
    if INTERPRETER.fullmatch(name):
        return f"interpreter '{name}' runs arbitrary code"
    if name in LAUNCHERS:
        return f"launcher '{name}' runs another command"
    if name in BUILTINS:
        return f"shell builtin '{name}' changes the shell"
    if name in INTERACTIVE:
        return f"'{name}' is interactive (pager or editor)"
    if name in PROJECT_TOOLS:
        return f"'{name}' runs project code or uses the network"
    if name in NETWORK:
        return f"'{name}' uses the network"
    return f"unknown command '{name}'"


def judge(name: str, args: Sequence[Word]) -> Judged:
    """Judge one simple command (name already resolved, arguments decoded)."""
    rule = RULES.get(name)
    if rule is None:
        raise Unproven(unknown_reason(name))
    return rule(name, args)
