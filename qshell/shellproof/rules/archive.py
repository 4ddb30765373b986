"""Rules for tools whose operands may be outputs: compressors, tar and xxd.

A compressor is read-only only when it writes to standard output (-c) or lists or tests; tar
only lists (-t) a local archive named with -f; xxd only with no output file. Their option
grammars are modelled exactly as the tools read them (tar's old-style key letters, xxd's
prefix-matched options that end at the first operand), and anything else is unproven. Pure
functions; any thread.
"""

from __future__ import annotations

from collections.abc import Sequence

from qshell.shellproof.rules.spec import (
    NONE,
    Judged,
    Spec,
    Unproven,
    Word,
    judge_spec,
    literal_word,
    parse,
    read_of,
    word_set,
)

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


TAR_OLD_FLAGS = frozenset("tvzjJ")
TAR_OLD_VALUES = frozenset("f")


def _tar_new_style(args: Sequence[Word]) -> list[Word]:
    """The arguments with an old-style key (`tar tfv host:file`) spelled as new-style options:
    GNU tar gives each of its letters that takes a value the next unused word, in order, and
    only then reads the rest (`f` takes `host:file`, not `v`)."""
    words = list(args)
    if not words or not words[0].literal or words[0].text.startswith("-"):
        return words
    key, rest = words[0].text, words[1:]
    options: list[Word] = []
    used = 0
    for char in key:
        if char in TAR_OLD_VALUES:
            if used >= len(rest):
                raise Unproven(f"tar key letter {char} needs a value")
            options += [literal_word("-" + char), rest[used]]
            used += 1
        elif char in TAR_OLD_FLAGS:
            options.append(literal_word("-" + char))
        else:
            raise Unproven(f"tar key letter {char} is not checked")
    return options + rest[used:]


def tar_rule(name: str, args: Sequence[Word]) -> Judged:
    parsed = parse(name, TAR_SPEC, _tar_new_style(args))
    keys = parsed.flag_names()
    if "-t" not in keys and "--list" not in keys:
        raise Unproven("tar without -t (list) writes or extracts")
    archives = [v for k, v in parsed.flags if k in ("-f", "--file") and v is not None]
    if not archives:
        raise Unproven("tar without -f reads $TAPE, which may be remote")
    for archive in archives:
        if not archive.literal or ":" in archive.text:
            raise Unproven("tar archive that may be remote (rsh) or computed at run time")
    return Judged(name, tuple(read_of(a) for a in archives if a.text != "-"))


# ---------------------------------------------------------------- xxd

# xxd matches each option word by its first two characters (`-ps` is `-p`, `-revert` is
# `-r`; `--x` is `-x`), reads options only up to its first operand, and writes its second
# operand: `xxd in -r` writes a file named `-r`.
XXD_FLAGS = frozenset("abeupiCdrE")
XXD_VALUES = {"c": "ols", "g": "roup", "o": "ffset", "s": "eek", "l": "en", "n": "ame", "R": ""}


def _xxd_option(word: Word, following: Word | None) -> int:
    """How many words the option `word` takes (1, or 2 with its value); raises on others."""
    text = word.text
    pp = text[1:] if text.startswith("--") and len(text) > 2 else text
    letter, rest = pp[1:2], pp[2:]
    if letter in XXD_FLAGS or (letter == "c" and rest.startswith("apitalize")):
        return 1
    if letter not in XXD_VALUES:
        raise Unproven(f"xxd option {text} is not checked")
    long_rest = XXD_VALUES[letter]
    attached = bool(rest) and not (long_rest and rest.startswith(long_rest))
    if letter == "s" and rest.startswith("kip"):
        attached = False
    if attached:
        return 1
    if following is None:
        raise Unproven(f"xxd {text} needs a value")
    if following.splits:
        raise Unproven(f"xxd: value {following.raw!r} may expand to several words")
    return 2


def xxd_rule(name: str, args: Sequence[Word]) -> Judged:
    i = 0
    while i < len(args):
        word = args[i]
        if not word.literal:
            if word.flaggable:
                raise Unproven(f"xxd: {word.raw!r} could be an option at run time")
            break
        text = word.text
        pp = text[1:] if text.startswith("--") and len(text) > 2 else text
        if pp == "--":
            i += 1
            break
        if not (pp.startswith("-") and len(pp) > 1):
            break  # `-` and every other word: the first operand, options end here
        i += _xxd_option(word, args[i + 1] if i + 1 < len(args) else None)
    operands = args[i:]
    for word in operands:
        if word.splits:
            raise Unproven(f"xxd: {word.raw!r} may expand to several operands")
    if len(operands) > 1 and not (operands[1].literal and operands[1].text == "-"):
        raise Unproven(f"xxd writes its second operand {operands[1].raw!r}")
    if len(operands) > 2:
        raise Unproven("xxd takes at most two operands")
    reads = tuple(read_of(w) for w in operands[:1] if not (w.literal and w.text == "-"))
    return Judged(name, reads)
