"""Per-command rules of the shell read-only proof: which commands, flags and operands are read-only.

`walker.py` walks the bash syntax tree and hands every simple command here as a name plus its
decoded arguments (`Word`); `judge` either returns what the command reads (`Judged`: every
path, option values naming files included, walks marked recursive) or raises `Unproven`
naming the first thing it cannot prove. The rules model each tool's own argument grammar
(spec.py: the flag vocabulary and GNU-style parser; plain.py: the table; walkers.py: find,
tree, grep -r, diff -r; archive.py: compressors, tar, xxd; sed.py, awk.py, jq.py: their
languages; system.py: network, process and environment listings; git.py; custom.py: xargs,
printf, env, date, test, …; conditions.py: which words of test, `[` and `[[ … ]]` are files). They are allowlists: a command, flag, git subcommand or script
construct missing from them is unproven, so a gap costs a false rejection, never a write;
walks that follow symlinks, name lookups over the network, reads outside the project by
design and printed process environments are refused. Nothing here parses shell syntax, runs
a program or touches the filesystem. Immutable tables and pure functions: safe from any
thread.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from qshell.shellproof.rules.archive import (
    COMPRESS_STREAMING,
    compressor_rule,
    tar_rule,
    xxd_rule,
)
from qshell.shellproof.rules.awk import awk_rule
from qshell.shellproof.rules.custom import (
    check_test,
    command_rule,
    date_rule,
    env_rule,
    printenv_rule,
    printf_rule,
    strings_rule,
    who_rule,
    xargs_rule,
)
from qshell.shellproof.rules.git import git_rule
from qshell.shellproof.rules.jq import jq_rule
from qshell.shellproof.rules.plain import SPECS
from qshell.shellproof.rules.sed import sed_rule
from qshell.shellproof.rules.spec import (
    TRUSTED_DIRS,
    Judged,
    Read,
    Rule,
    ShellproofError,
    Unproven,
    Word,
    literal_word,
    read_of,
    spec_rule,
    word_set,
)
from qshell.shellproof.rules.system import ip_rule, netstat_rule, ps_rule, ss_rule
from qshell.shellproof.rules.walkers import diff_rule, find_rule, grep_rule, tree_rule

__all__ = [
    "TRUSTED_DIRS",
    "Judged",
    "Read",
    "ShellproofError",
    "Unproven",
    "Word",
    "check_test",
    "judge",
    "literal_word",
    "read_of",
]

RULES: dict[str, Rule] = {name: spec_rule(spec) for name, spec in SPECS.items()}
RULES.update(
    {
        "git": git_rule,
        "jq": jq_rule,
        "who": who_rule,
        "strings": strings_rule,
        "find": find_rule,
        "grep": grep_rule,
        "egrep": grep_rule,
        "fgrep": grep_rule,
        "diff": diff_rule,
        "tree": tree_rule,
        "sed": sed_rule,
        "gsed": sed_rule,
        "awk": awk_rule,
        "gawk": awk_rule,
        "mawk": awk_rule,
        "nawk": awk_rule,
        "xargs": xargs_rule,
        "printf": printf_rule,
        "env": env_rule,
        "printenv": printenv_rule,
        "ps": ps_rule,
        "command": command_rule,
        "date": date_rule,
        "test": check_test,
        "[": check_test,
        "ip": ip_rule,
        "ss": ss_rule,
        "netstat": netstat_rule,
        "tar": tar_rule,
        "xxd": xxd_rule,
        **dict.fromkeys(("gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz"), compressor_rule),
        **dict.fromkeys(COMPRESS_STREAMING, compressor_rule),
    }
)

# ---------------------------------------------------------------- reasons for unknown commands

INTERPRETER = re.compile(
    r"(sh|bash|zsh|dash|ksh|mksh|fish|csh|tcsh|busybox|python|pypy|perl|ruby|node|nodejs|deno"
    r"|bun|php|lua|luajit|tclsh|wish|Rscript|R|julia|java|jshell|osascript|pwsh|powershell"
    r"|irb|swift|groovy|scala|erl|escript|elixir|iex|expect)[0-9.]*"
)
LAUNCHERS = word_set(
    "sudo doas su nohup timeout nice ionice time watch setsid flock chroot "
    "strace ltrace stdbuf taskset unbuffer parallel at batch crontab "
    "systemd-run runuser firejail coproc script builtin exec eval source . "
    "nsenter unshare chrt prlimit"
)
BUILTINS = word_set(
    "cd pushd popd dirs alias unalias hash shopt set export history trap "
    "ulimit umask read wait jobs fg bg disown exit return shift let local "
    "declare typeset readonly unset enable getopts mapfile readarray "
    "complete compgen bind fc suspend logout kill"
)
INTERACTIVE = word_set("less more most man info vi vim nvim nano emacs view top htop tmux screen")
PROJECT_TOOLS = word_set(
    "make cmake ninja npm npx yarn pnpm cargo rustc go gcc cc clang pip pip3 "
    "pipx uv poetry pytest tox docker podman kubectl helm terraform gh mvn "
    "gradle dotnet bundle gem composer ldd sqlite3 psql mysql aws gcloud az"
)
NETWORK = word_set(
    "curl wget ssh scp sftp rsync nc ncat netcat telnet ftp ping dig nslookup host traceroute"
)
# what a command that changes files does, as a reason says it ("'rm' deletes files")
CHANGES_FILES = {
    "rm": "deletes files",
    "rmdir": "deletes directories",
    "unlink": "deletes a file",
    "shred": "overwrites and deletes files",
    "mv": "moves and renames files",
    "rename": "renames files",
    "cp": "copies files, writing the copies",
    "install": "copies files into place",
    "ln": "makes links",
    "mkdir": "makes directories",
    "mktemp": "makes a file or directory",
    "touch": "makes files or changes their times",
    "truncate": "changes the size of files",
    "tee": "writes files",
    "dd": "writes files or devices",
    "patch": "changes files",
    "chmod": "changes the modes of files",
    "chown": "changes the owners of files",
    "chgrp": "changes the groups of files",
    "chattr": "changes the attributes of files",
    "setfacl": "changes the access lists of files",
}


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
    if name in CHANGES_FILES:
        return f"'{name}' {CHANGES_FILES[name]}"
    return f"unknown command '{name}'"


def judge(name: str, args: Sequence[Word]) -> Judged:
    """Judge one simple command (name already resolved, arguments decoded)."""
    rule = RULES.get(name)
    if rule is None:
        raise Unproven(unknown_reason(name))
    return rule(name, args)
