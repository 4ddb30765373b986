"""Git rules of the shell read-only proof: global options, read-only subcommands and their flags.

Global options that run programs, change the repository or page (`-c`, `--git-dir`, `-p`, …) and
every writing or network subcommand are unproven; listing forms of branch/tag/config/stash are
allowed only with their listing flags. Pure functions; any thread.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from qshell.shellproof.rules.spec import (
    Judged,
    Read,
    Unproven,
    Word,
    literal_read,
    literal_word,
    named_inside,
    read_of,
    runtime_read,
    word_set,
)

# ---------------------------------------------------------------- git

GIT_GLOBAL_FLAGS = word_set(
    "--no-pager -P --no-replace-objects --literal-pathspecs --glob-pathspecs "
    "--noglob-pathspecs --icase-pathspecs --no-optional-locks --no-advice --no-lazy-fetch"
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
GIT_NETWORK = word_set(
    "fetch pull push clone ls-remote send-email fetch-pack send-pack "
    "request-pull remote-ext http-fetch"
)
GIT_WRITES = word_set(
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
GIT_LOG_LIKE = word_set(
    "log show diff whatchanged diff-tree diff-files diff-index range-diff "
    "shortlog blame annotate cherry rev-list show-branch name-rev merge-base "
    "describe status ls-files ls-tree cat-file rev-parse count-objects "
    "check-ignore check-attr for-each-ref show-ref var version grep "
    "check-ref-format"
)


def _git_paths(operands: Sequence[Word], reads: list[Read]) -> None:
    for word in operands:
        reads.append(read_of(word))
        if not word.literal:
            continue
        _, colon, inner = word.text.partition(":")
        if colon and inner:
            reads.append(literal_read(inner))  # <rev>:<path> reads that file's committed content
            last = inner.rpartition(":")[2]
            if last and last != inner:
                reads.append(literal_read(last))  # -L :<func>:<file> given as two words


# a revision expression's object id as written (`3f2a9c`, `^3f2a9c`, `3f2a9c~2`, `3f2a9c:path`),
# in each side of a range (`a..b`, `a...b`)
RAW_OBJECT = re.compile(r"\^?([0-9a-fA-F]{4,40})(?=$|[\^~:@])")
RANGE_SPLIT = re.compile(r"\.\.\.?")
# options that make git read object names at run time (stdin) or take every object there is
RUNTIME_OBJECTS = re.compile(r"--(stdin|batch(=.*)?|batch-command(=.*)?|batch-all-objects)")


def _git_objects(rest: Sequence[Word]) -> tuple[str, ...]:
    """The objects a git subcommand's arguments name by id (`Judged.objects`): each raw id in
    an operand before `--`, and `*` for a computed operand or an option that reads names at
    run time (`--stdin`, `cat-file --batch`) or takes them all (`--batch-all-objects`)."""
    found: list[str] = []
    for word in rest:
        if word.literal and word.text == "--":
            break
        if not word.literal:
            if not word.fixed_option:
                found.append("*")
        elif RUNTIME_OBJECTS.fullmatch(word.text):
            found.append("*")
        elif not word.text.startswith("-"):
            for side in RANGE_SPLIT.split(word.text):
                raw = RAW_OBJECT.match(side)
                if raw:
                    found.append(raw.group(1).lower())
    return tuple(dict.fromkeys(found))


GREP_PATTERN_OPTION = re.compile(r"-[A-Za-z]*[ef]")  # -e/-f, maybe last in a cluster
GREP_FILE_ATTACHED = re.compile(r"-[A-Za-z]*?f(.+)")


def _git_grep(rest: Sequence[Word], reads: list[Read]) -> None:
    """git grep walks the tree below each pathspec (the current directory without one); its
    operands are patterns, revisions and paths, all reported as recursive reads."""
    operands = _git_options("grep", rest, "O")
    values = sum(1 for w in rest if w.literal and GREP_PATTERN_OPTION.fullmatch(w.text) is not None)
    explicit = any(w.literal and GREP_PATTERN_OPTION.match(w.text) for w in rest)
    for word in operands:
        reads.append(read_of(word, recursive=True))
    for word in rest:
        attached = GREP_FILE_ATTACHED.fullmatch(word.text) if word.literal else None
        if attached:
            reads.append(literal_read(attached.group(1)))  # -fFILE: patterns from FILE
    if len(operands) - values - (0 if explicit else 1) <= 0:
        reads.append(literal_read(".", recursive=True))


# options whose value is a file git reads (`--contents=F`; a value given as the next word is
# an operand, reported anyway), and short ones taking it attached (`-Ofile`)
GIT_PATH_OPTIONS = word_set(
    "contents ignore-revs-file exclude-from pathspec-from-file orderfile exclude-per-directory"
)
GIT_SHORT_PATHS = {"blame": "S", "annotate": "S", "ls-files": "X"}
GIT_DIFF_ORDER = word_set(
    "log show diff whatchanged diff-tree diff-files diff-index range-diff"
)  # -O<orderfile>


def _short_paths(sub: str) -> str:
    return GIT_SHORT_PATHS.get(sub, "") + ("O" if sub in GIT_DIFF_ORDER else "")


def _git_option_reads(sub: str, word: Word, reads: list[Read]) -> None:
    """The file named in an option's own word (`--contents=F`, `-SF`, `-Ofile`)."""
    text = word.text
    if text.startswith("--"):
        opt, eq, value = text[2:].partition("=")
        if eq and opt in GIT_PATH_OPTIONS:
            reads.append(read_of(word) if not word.literal else literal_read(value))
            if opt == "pathspec-from-file":
                reads.append(runtime_read(named_inside(value)))
    elif len(text) > 2 and text[1] in _short_paths(sub):
        reads.append(literal_read(text[2:]))
    elif text.startswith("-L") and ":" in text:  # -L<range>:<file>, -L:<func>:<file>
        reads.append(literal_read(text.rpartition(":")[2]))


def _git_options(
    sub: str, rest: Sequence[Word], deny_short: str = "", reads: list[Read] | None = None
) -> list[Word]:
    """Generic check of a read-only git subcommand's arguments; returns its operands and
    adds the files named inside option words to `reads`."""
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
        if "%G" in word.text or "%(signature" in word.text:
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
        if reads is not None and not ended and text.startswith("-"):
            _git_option_reads(sub, word, reads)
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


BRANCH_LONGS = word_set(
    "all remotes list verbose ignore-case show-current no-color no-column "
    "omit-empty no-abbrev contains no-contains merged no-merged points-at "
    "sort format color column abbrev"
)
TAG_LONGS = word_set(
    "list contains no-contains merged no-merged points-at sort format column "
    "no-column color ignore-case omit-empty"
)
CONFIG_DUMPS = word_set("--list -l --get-regexp --get-urlmatch")  # every matching value
CONFIG_GETS = word_set("--get --get-all")
CONFIG_SCOPES = word_set("--local --worktree --file -f")  # the repository's own files
CONFIG_FLAGS = word_set(
    "--show-origin --show-scope --name-only -z --null --bool --int --bool-or-int --path "
    "--expiry-date --no-includes --all --regexp --fixed-value"
)
CONFIG_VALUES = word_set("--type --default --file -f --url --value")
CONFIG_OUTSIDE = {
    "--global": "git config --global reads the user's configuration outside the project",
    "--system": "git config --system reads the system configuration outside the project",
    "--includes": "git config --includes reads the files the configuration includes",
    "--blob": "git config --blob is not checked",
}
# a key read from every scope (the user's ~/.gitconfig too) is proven only in sections that
# hold no credentials (credential.*, http.*.extraHeader, url.*.insteadOf, tokens do)
CONFIG_SAFE_SECTIONS = word_set(
    "user core remote branch init pull push merge diff log color alias status fetch "
    "rebase tag commit submodule format advice gc"
)


def _config_value(rest: Sequence[Word], i: int, word: Word, option: str) -> tuple[Word, int]:
    _, eq, attached = word.text.partition("=")
    if eq:
        return literal_word(attached), i
    if i >= len(rest) or not rest[i].literal:
        raise Unproven(f"git config {option} needs a literal value")
    return rest[i], i + 1


def _git_config(rest: Sequence[Word]) -> list[Read]:
    """git config reads: a value by key, or a listing of the project's own files only."""
    paths: list[Read] = []
    names: list[str] = []
    dump = get = scoped = False
    i = 0
    while i < len(rest):
        word = rest[i]
        i += 1
        if not word.literal:
            raise Unproven(f"git config: argument {word.raw!r} is computed at run time")
        opt = word.text.partition("=")[0]
        if opt in CONFIG_OUTSIDE:
            raise Unproven(CONFIG_OUTSIDE[opt])
        scoped |= opt in CONFIG_SCOPES
        if opt in CONFIG_VALUES:
            value, i = _config_value(rest, i, word, opt)
            if opt in ("--file", "-f"):
                paths.append(read_of(value))
        elif word.text in CONFIG_DUMPS:
            dump = True
        elif word.text in CONFIG_GETS:
            get = True
        elif word.text in CONFIG_FLAGS or word.text in CONFIG_SCOPES:
            pass
        elif word.text.startswith("-"):
            raise Unproven(f"git config {word.text} is not a read")
        else:
            names.append(word.text)
    if names[:1] in (["list"], ["get"]):  # git 2.46 subcommands
        dump, get, names = dump or names[0] == "list", get or names[0] == "get", names[1:]
    if dump:
        if not scoped:
            raise Unproven(
                "git config --list/--get-regexp reads the user's configuration outside the project"
            )
        return paths
    if not names or len(names) > (2 if get else 1) or "." not in names[0]:
        raise Unproven("git config without --get or --list sets values")
    section = names[0].partition(".")[0].lower()
    if not scoped and section not in CONFIG_SAFE_SECTIONS:
        raise Unproven(f"git config {names[0]} may read a credential outside the project")
    return paths


# subcommands that print files of the history whole (patches, blobs) or pick lines of them
GIT_PRINTS_HISTORY = word_set(
    "show diff diff-tree diff-files diff-index range-diff whatchanged cat-file stash reflog notes"
)
GIT_PICKS_LINES = word_set("grep blame annotate")
# subcommands that print commit or tag messages (`log --oneline`, `branch -v`, `tag -n`)
GIT_PRINTS_MESSAGES = word_set(
    "log shortlog rev-list tag for-each-ref branch cherry show-branch describe"
)
# options that make `log` print patches, and those that pick a few lines of each
GIT_PATCH_LONGS = word_set(
    "patch patch-with-stat patch-with-raw cc dd remerge-diff word-diff color-words binary "
    "unified function-context"
)
GIT_PATCH_SHORT = frozenset("pucUL")
GIT_LINE_PICKERS = re.compile(
    r"-(?:[A-Za-z]*[LUGSI]|-unified\b|-word-diff|-color-words|-binary\b"
    r"|-pickaxe|-find-object|-ignore-matching-lines|-(?:format|pretty)=.*%[<>])"
)  # lines, words of them (`--word-diff=porcelain` prints a changed password alone), what
# matches a guess (`-G'password: c'`: an oracle), or messages cut to a width (`%<(8,trunc)`)


def _git_history(sub: str, rest: Sequence[Word]) -> str:
    """What of the history `git SUB REST` prints (`Judged.history`): "lines" for `grep`,
    `blame` and any option that picks lines or words (`-L`, `-U0`, `--word-diff`), searches
    them (`-G`, `-S`: each answer tells whether a guess is in them), cuts messages to a
    width (`--format=%<(8,trunc)%s`) or encodes them (`--binary`),
    "whole" for patches and blobs (`show`, `diff`, `log -p`), "messages" for commit and
    tag messages (`log --oneline`, `branch -v`), "" for none (`status`, `ls-files`)."""
    options = [w.text for w in rest if w.literal and w.text.startswith("-")]
    computed = any(not w.literal for w in rest)
    if sub in GIT_PICKS_LINES or any(GIT_LINE_PICKERS.match(text) for text in options):
        return "lines"
    if sub in GIT_PRINTS_HISTORY or computed:
        return "whole"
    if sub == "log" and any(_patch_option(text) for text in options):
        return "whole"
    return "messages" if sub in GIT_PRINTS_MESSAGES else ""


def _patch_option(text: str) -> bool:
    if text.startswith("--"):
        return text[2:].partition("=")[0] in GIT_PATCH_LONGS
    return any(char in GIT_PATCH_SHORT for char in text[1:])


def _git_sub(sub: str, rest: Sequence[Word]) -> Judged:
    judged = _git_sub_reads(sub, rest)
    return Judged(judged.label, judged.reads, _git_objects(rest), _git_history(sub, rest))


def _git_sub_reads(sub: str, rest: Sequence[Word]) -> Judged:
    reads: list[Read] = []
    label = f"git {sub}"
    if sub == "grep":
        _git_grep(rest, reads)
    elif sub == "var" and any(w.text in ("-l", "--list") for w in rest):
        raise Unproven("git var -l lists the user's configuration outside the project")
    elif sub in GIT_LOG_LIKE:
        _git_paths(_git_options(sub, rest, reads=reads), reads)
    elif sub in ("reflog", "stash"):
        # both dispatch on their first argument only; anything else there may write
        verbs: tuple[str, ...] = ("show", "exists") if sub == "reflog" else ("list", "show")
        verb = rest[0].text if rest and rest[0].literal else None
        if verb in verbs:
            rest = rest[1:]
        elif sub == "stash" or (rest and not (verb or "").startswith("-")):
            shown = verb if verb is not None else (rest[0].raw if rest else "")
            raise Unproven(f"git {sub} {shown}".rstrip() + " writes")
        _git_paths(_git_options(sub, rest), reads)
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
        reads += _git_config(rest)
    elif sub in ("submodule", "notes"):
        verbs = ("status",) if sub == "submodule" else ("list", "show")
        verb = rest[0].text if rest and rest[0].literal else None
        if rest and verb not in verbs:
            raise Unproven(f"git {sub} {rest[0].raw} writes or runs commands")
        _git_paths(_git_options(sub, rest[1:]), reads)
    elif sub in GIT_NETWORK:
        raise Unproven(f"git subcommand '{sub}' uses the network")
    elif sub == "help":
        raise Unproven("git help opens the manual")
    elif sub in GIT_WRITES:
        raise Unproven(f"git subcommand '{sub}' writes")
    else:
        raise Unproven(f"unknown git subcommand '{sub}'")
    return Judged(label, tuple(reads))


def git_rule(name: str, args: Sequence[Word]) -> Judged:
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
