"""The table of plain read-only commands: each name with the `Spec` of its flags and operands.

A command is here only when every flag not listed as writing or executing is harmless, so a
missing flag is rejected, never allowed. Data only; any thread.
"""

from __future__ import annotations

from qshell.shellproof.rules.spec import NONE, PATTERN, Spec, word_set

# ---------------------------------------------------------------- plain commands

OPEN = Spec()
OPEN_NO_PATHS = Spec(operands=NONE)
CHECKSUM = Spec(indirect=word_set("-c --check"))

SPECS: dict[str, Spec] = {
    "cat": OPEN,
    "head": Spec(short_values="nc", digits=True),
    "wc": Spec(
        long_values=word_set("files0-from"),
        path_values=word_set("--files0-from"),
        indirect=word_set("--files0-from"),
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
    "diff": Spec(  # a recursive diff follows symlinks unless --no-dereference (walkers.py)
        short_values="CUDFILxXSW",
        digits=True,
        long_values=word_set("exclude-from from-file to-file"),
        deny={"-l": "diff -l runs pr", "--paginate": "diff --paginate runs pr"},
        recursive=word_set("-r --recursive"),
        path_values=word_set("-X --exclude-from --from-file --to-file"),
    ),
    "od": Spec(short_values="AjNSt"),
    "hexdump": Spec(short_values="efns", path_values=word_set("-f")),
    "hd": Spec(short_values="efns", path_values=word_set("-f")),
    "ls": Spec(
        short_values="IwT",
        long_values=word_set("ignore hide width tabsize format sort time"),
        recursive=word_set("-R --recursive"),
        follows=word_set("-L --dereference"),
        default=".",
    ),
    "du": Spec(
        walks=True,
        follows=word_set("-L --dereference"),
        short_values="BdtX",
        long_values=word_set("max-depth block-size threshold exclude-from files0-from"),
        path_values=word_set("-X --exclude-from --files0-from"),
        indirect=word_set("--files0-from"),
    ),
    "df": Spec(short_values="Btx"),
    "stat": Spec(short_values="c", long_values=word_set("format printf")),
    "file": Spec(
        short_values="mfeFP",
        deny={"-C": "file -C writes a compiled magic file", "--compile": "file -C writes a file"},
        path_values=word_set("-m -f --magic-file --files-from"),
        indirect=word_set("-f --files-from"),
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
    "shasum": Spec(short_values="a", indirect=word_set("-c --check")),
    "base64": Spec(
        short_values="w",
        deny={"-o": "base64 -o writes a file", "--output": "base64 --output writes a file"},
        max_operands=1,
    ),
    "base32": Spec(short_values="w", max_operands=1),
    "grep": Spec(  # -d recurse walks too (walkers.py)
        recursive=word_set("-r -R --recursive --dereference-recursive"),
        follows=word_set("-R --dereference-recursive"),
        short_values="efmABCdD",
        long_values=word_set(
            "regexp file max-count after-context before-context context devices "
            "directories binary-files include exclude exclude-from exclude-dir label "
            "group-separator"
        ),
        path_values=word_set("-f --file --exclude-from"),
        pattern_flags=word_set("-e -f --regexp --file"),
        operands=PATTERN,
    ),
    "realpath": Spec(
        long_values=word_set("relative-to relative-base"),
        path_values=word_set("--relative-to --relative-base"),
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
    "users": Spec(max_operands=1),  # reads FILE instead of utmp
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
    "lscpu": Spec(  # reads its system files below --sysroot
        short_values="s",
        short_optional="epC",
        long_values=word_set("sysroot"),
        path_values=word_set("-s --sysroot"),
        operands=NONE,
    ),
    "lsblk": Spec(  # reads its system files below --sysroot
        long_values=word_set("sysroot"),
        path_values=word_set("--sysroot"),
        operands=NONE,
    ),
    "findmnt": Spec(
        short_values="F",
        long_values=word_set("tab-file"),
        deny={"-p": "never ends: findmnt --poll", "--poll": "never ends: findmnt --poll"},
        path_values=word_set("-F --tab-file"),
        operands=NONE,
    ),
    "locale": OPEN_NO_PATHS,
    "getconf": OPEN_NO_PATHS,
    "cal": OPEN_NO_PATHS,
    "pidof": OPEN_NO_PATHS,
    "lsb_release": OPEN_NO_PATHS,
    "pgrep": Spec(
        short="acfilnovwx",
        short_values="dgGPstuU",
        long=word_set(
            "list-name list-full count full newest oldest exact ignore-case inverse lightweight"
        ),
        long_values=word_set("delimiter pgroup group parent session terminal euid uid"),
        operands=NONE,
    ),
    "hostname": Spec(  # -f, -i, -A, -d, -y (and -s in some versions) ask DNS or NIS
        short="I",
        long=word_set("all-ip-addresses help version"),
        max_operands=0,
    ),
    "mount": Spec(
        short="lv",
        short_values="t",
        long=word_set("show-labels verbose"),
        long_values=word_set("types"),
        max_operands=0,
    ),
    "sort": Spec(
        short="bdfgiMhnRrVcCmsuz",
        short_values="kSt",
        long=word_set(
            "ignore-leading-blanks dictionary-order ignore-case general-numeric-sort "
            "ignore-nonprinting month-sort human-numeric-sort numeric-sort "
            "random-sort reverse version-sort check merge stable unique "
            "zero-terminated debug help version"
        ),
        long_values=word_set(
            "key field-separator buffer-size parallel files0-from random-source sort batch-size"
        ),
        deny={
            "-o": "sort -o writes a file",
            "--output": "sort --output writes a file",
            "--compress-program": "sort --compress-program runs a program",
            "-T": "sort -T writes temporary files",
            "--temporary-directory": "sort -T writes temporary files",
        },
        path_values=word_set("--files0-from --random-source"),
        indirect=word_set("--files0-from"),
    ),
    "uniq": Spec(
        short="cdDuiz",
        short_values="fsw",
        long=word_set(
            "count repeated all-repeated unique ignore-case zero-terminated group help version"
        ),
        long_values=word_set("skip-fields skip-chars check-chars"),
        max_operands=1,
    ),
    "tail": Spec(
        short="qvz",
        short_values="nc",
        long=word_set("quiet silent verbose zero-terminated help version"),
        long_values=word_set("lines bytes"),
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
    "shuf": Spec(
        short_values="in",
        deny={"-o": "shuf -o writes a file", "--output": "shuf --output writes a file"},
        long_values=word_set("random-source head-count input-range"),
        path_values=word_set("--random-source"),
    ),
    "iconv": Spec(
        short="csl",
        short_values="ft",
        long=word_set("list silent"),
        long_values=word_set("from-code to-code"),
        deny={"-o": "iconv -o writes a file", "--output": "iconv --output writes a file"},
    ),
    "rg": Spec(
        walks=True,
        follows=word_set("-L --follow"),
        short="nNiSswxvlcoFHIpLaUPqb0.u",
        short_values="efgtTABCmdrjEM",
        long=word_set(
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
        long_values=word_set(
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
        path_values=word_set("-f --file --ignore-file"),
        pattern_flags=word_set("-e -f --regexp --file --files --type-list"),
        operands=PATTERN,
    ),
    "fd": Spec(
        walks=True,
        follows=word_set("-L --follow"),
        short="HIusiFgaLp0lq1",
        short_values="dEteSocj",
        long=word_set(
            "hidden no-ignore unrestricted case-sensitive ignore-case glob regex "
            "fixed-strings absolute-path list-details follow full-path print0 prune "
            "strip-cwd-prefix one-file-system no-ignore-vcs no-ignore-parent quiet "
            "show-errors hyperlink help version"
        ),
        long_values=word_set(
            "max-depth min-depth exact-depth exclude type extension size "
            "changed-within changed-before owner color threads max-results "
            "path-separator search-path ignore-file format and"
        ),
        deny={
            "-x": "fd -x runs a command",
            "--exec": "fd --exec runs a command",
            "-X": "fd -X runs a command",
            "--exec-batch": "fd --exec-batch runs a command",
            "--base-directory": "fd --base-directory moves where its paths are read from",
        },
        path_values=word_set("--search-path --ignore-file"),
        operands=PATTERN,
    ),
}
SPECS["egrep"] = SPECS["fgrep"] = SPECS["grep"]
SPECS["fdfind"] = SPECS["fd"]
