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
