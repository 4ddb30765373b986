"""Rules for commands whose flags need more than a table: find, xargs, printf, env, command,
date, test/[, ip, compressors and tar.

Each returns what the command reads or raises `Unproven` (find -exec/-delete/-fprint, xargs with
a command that is not itself proven, compressors that would write files, …). Pure functions;
any thread.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from qshell.shellproof.rules.plain import SPECS
from qshell.shellproof.rules.spec import (
    NONE,
    STDIN_NAMES,
    TRUSTED_DIRS,
    Judged,
    Read,
    Spec,
    Unproven,
    Word,
    collect,
    judge_spec,
    literal_read,
    literal_word,
    named_inside,
    parse,
    read_of,
    runtime_read,
    word_set,
)

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
FIND_NULLARY = word_set(
    "-depth -d -mount -xdev -noleaf -ignore_readdir_race "
    "-noignore_readdir_race -daystart -follow -warn -nowarn -empty "
    "-executable -readable -writable -false -true -nogroup -nouser -print "
    "-print0 -prune -quit -ls -not -a -and -o -or ! ( ) ,"
)
FIND_UNARY = word_set(
    "-maxdepth -mindepth -amin -anewer -atime -cmin -cnewer -ctime -fstype "
    "-gid -group -ilname -iname -inum -ipath -iregex -iwholename -links "
    "-lname -mmin -mtime -name -newer -path -perm -regex -samefile -size "
    "-type -uid -used -user -wholename -xtype -context -regextype -printf "
    "-files0-from"
)
FIND_PATH_VALUES = word_set("-anewer -cnewer -newer -samefile -files0-from")
FIND_NEWER_XY = re.compile(r"-newer[aBcm][aBcmt]")
FIND_SIGNED = re.compile(r"-\d")  # -mtime -7, -size -10k
FIND_SYMBOLIC_MODE = re.compile(r"-[ugoa]*[-+=][rwxXstugo]*(,[ugoa]*[-+=][rwxXstugo]*)*")


def find_rule(name: str, args: Sequence[Word]) -> Judged:
    reads: list[Read] = []
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
        collect((word,), reads, recursive=True)
        starts += 1
        i += 1
    if not starts:
        reads.append(literal_read(".", recursive=True))
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
        value_word = args[i + 1]
        mode = text == "-perm" and FIND_SYMBOLIC_MODE.fullmatch(value)
        if value.startswith("-") and not FIND_SIGNED.match(value) and not mode:
            raise Unproven(f"find {text} {value}: the value looks like an option")
        if text in FIND_PATH_VALUES or (FIND_NEWER_XY.fullmatch(text) and text[-1] != "t"):
            reads.append(read_of(value_word))
        if text == "-files0-from":
            reads.append(runtime_read(named_inside(value)))
        i += 2
    return Judged("find", tuple(reads))


# ---------------------------------------------------------------- small custom rules

XARGS_SPEC = Spec(
    short="0rtx",
    short_values="dnLsPEa",
    long=word_set("null no-run-if-empty verbose exit help version"),
    long_values=word_set("delimiter max-args max-lines max-chars max-procs eof arg-file"),
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
    path_values=word_set("-a --arg-file"),
    operands=NONE,
    stop_at_operand=True,
)


def xargs_rule(name: str, args: Sequence[Word]) -> Judged:
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
    inputs = tuple(runtime_read(named_inside(path)) for path in lists)
    return Judged(f"xargs {command}", (*judged.reads, *(inputs or (runtime_read(STDIN_NAMES),))))


def printf_rule(name: str, args: Sequence[Word]) -> Judged:
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


def env_rule(name: str, args: Sequence[Word]) -> Judged:
    if all(w.literal and w.text in ("-0", "--null") for w in args):
        return Judged(name)
    raise Unproven("env with arguments runs a command or changes the environment")


def command_rule(name: str, args: Sequence[Word]) -> Judged:
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
    long=word_set(
        "utc universal rfc-email rfc-2822 debug help version iso-8601 rfc-3339 resolution"
    ),
    long_values=word_set("date file reference"),
    deny={"-s": "date -s sets the clock", "--set": "date --set sets the clock"},
    path_values=word_set("-f --file -r --reference"),
    operands=NONE,
    max_operands=1,
)


def date_rule(name: str, args: Sequence[Word]) -> Judged:
    judged = judge_spec(name, DATE_SPEC, args)
    for word in parse(name, DATE_SPEC, args).operands:
        if not word.text.startswith("+"):
            raise Unproven("date with an operand other than +FORMAT sets the clock")
    return judged


TEST_BINARY = word_set("= == != < > -eq -ne -lt -le -gt -ge -nt -ot -ef -a -o")
TEST_FILE_OPS = word_set("-b -c -d -e -f -g -h -k -p -r -s -u -w -x -G -L -N -O -S")


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
    reads = tuple(
        read_of(words[i + 1])
        for i in range(len(words) - 1)
        if words[i].literal and words[i].text in TEST_FILE_OPS and words[i + 1].literal
    )
    return Judged("test", reads)


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


COMPRESS_SPEC = Spec(
    short="cdklntqvN123456789",
    long=word_set(
        "stdout to-stdout decompress uncompress keep list test quiet verbose "
        "name no-name help version"
    ),
)
COMPRESS_STREAMING = word_set("zcat bzcat xzcat")


def compressor_rule(name: str, args: Sequence[Word]) -> Judged:
    judged = judge_spec(name, COMPRESS_SPEC, args)
    if name not in COMPRESS_STREAMING:
        keys = {k for k, _ in parse(name, COMPRESS_SPEC, args).flags}
        if not keys & {"-c", "-l", "-t", "--stdout", "--to-stdout", "--list", "--test"}:
            raise Unproven(f"{name} without -c, -l or -t writes files")
    return judged


TAR_SPEC = Spec(
    short="tvzjJ",
    short_values="f",
    long=word_set(
        "list verbose gzip gunzip bzip2 xz zstd force-local numeric-owner "
        "no-wildcards wildcards help version"
    ),
    long_values=word_set("file exclude"),
    operands=NONE,
)


def tar_rule(name: str, args: Sequence[Word]) -> Judged:
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
    return Judged(name, tuple(read_of(a) for a in archives))
