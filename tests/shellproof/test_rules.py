"""The per-command rules of the shell read-only proof: what each command reads (option values
that name files, recursive walks, the directory walked when no path is given), and the
forms refused because they follow symlinks, resolve names over the network, read outside
the project by design or print a process environment."""

from __future__ import annotations

import pytest

from qshell.shellproof import Read, check


def reads(command: str) -> tuple[Read, ...]:
    verdict = check(command)
    assert verdict.read_only, verdict.reason
    return verdict.reads


def walked(command: str) -> list[str]:
    """The paths `command` reads recursively."""
    return [r.text for r in reads(command) if r.recursive]


def flat(command: str) -> list[str]:
    """The paths `command` reads without walking below them."""
    return [r.text for r in reads(command) if not r.recursive]


def refused(command: str, reason: str) -> None:
    verdict = check(command)
    assert not verdict.read_only, f"{command!r} was proven read-only"
    assert reason in verdict.reason, verdict.reason


def test_xxd_reads_only_its_first_operand():
    assert flat("xxd -s 2 -c 4 data.bin") == ["data.bin"]
    assert flat("xxd -r -p hex.txt -") == ["hex.txt"]
    assert flat("xxd - < in") == ["in"]


def test_tree_walks_each_directory_and_the_current_one_by_default():
    assert walked("tree -L 2 src tests") == ["src", "tests"]
    assert walked("tree -PI '*.py' build src") == ["src"]
    assert walked("tree -a") == ["."]
    assert flat("tree --gitfile=ignore.txt --infofile info.txt --hintro h.html") == [
        "ignore.txt",
        "info.txt",
        "h.html",
    ]
    assert flat("tree --fromfile listing.txt") == ["listing.txt"]


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("tree -Lo 1 out", "tree -o writes"),
        ("tree -l src", "follows symbolic links"),
        ("xxd in -r", "writes its second operand"),
    ],
)
def test_tool_model_bypasses_are_refused(command: str, reason: str):
    refused(command, reason)


def test_tar_old_style_key_letters_take_the_following_words_in_order():
    assert flat("tar tvf archive.tar") == ["archive.tar"]
    assert flat("tar tff a.tar b.tar member") == ["a.tar", "b.tar"]
    refused("tar tfv host:file", "remote")
    assert flat("tar tf -v") == ["-v"]  # the archive is a file named -v


def test_sed_r_and_R_report_the_file_they_read_up_to_the_end_of_the_line():
    assert flat("sed 'r /etc/shadow' f") == ["/etc/shadow", "f"]
    assert flat("sed -e '1R notes; p' f") == ["notes; p", "f"]
    assert flat("sed '$r /dev/stdin' f") == ["f"]


@pytest.mark.parametrize(
    "script",
    [":a w f", ":a\te id", "bx w f\n:x", "ta w f", ":a#c", ":a\\b", "b x}", ":"],
)
def test_sed_labels_that_seds_end_at_different_places_are_refused(script: str):
    verdict = check(f"sed -n '{script}' file")
    assert not verdict.read_only


@pytest.mark.parametrize("script", [":a;N;$!ba;p", ": a;b a", "/x/{p;b};p", "bend;p;:end", "tx"])
def test_sed_labels_that_end_at_a_semicolon_newline_or_brace_are_allowed(script: str):
    assert check(f"sed -n '{script}' file").read_only


@pytest.mark.parametrize(
    ("command", "paths"),
    [
        ("grep -rn TODO src tests", ["src", "tests"]),
        ("grep -r TODO", ["."]),
        ("grep -d recurse x", ["."]),
        ("grep --directories=rec x lib", ["lib"]),
        ("rg foo", ["."]),
        ("rg -e foo src", ["src"]),
        ("rg --files", ["."]),
        ("fd -e py", ["."]),
        ("fd x src", ["src"]),
        ("ls -R", ["."]),
        ("ls -lR src", ["src"]),
        ("du -sh .", ["."]),
        ("du", ["."]),
        ("diff -r --no-dereference a b", ["a", "b"]),
        ("find src -name x", ["src"]),
        ("find", ["."]),
        ("tree", ["."]),
        ("git grep TODO", ["TODO", "."]),
        ("git grep -e a -e b", ["a", "b", "."]),
        ("git grep -l TODO src", ["TODO", "src"]),
    ],
)
def test_commands_that_walk_a_tree_report_recursive_reads(command: str, paths: list[str]):
    assert walked(command) == paths


def test_commands_that_do_not_walk_report_flat_reads():
    assert walked("grep TODO file") == []
    assert walked("ls -la src") == []
    assert walked("diff a b") == []


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("grep -R x .", "follows symbolic links"),
        ("grep -rR x .", "follows symbolic links"),
        ("grep --dereference-rec x", "follows symbolic links"),
        ("rg -L x", "follows symbolic links"),
        ("rg --follow x", "follows symbolic links"),
        ("fd -L x", "follows symbolic links"),
        ("find -L . -name x", "follows symbolic links"),
        ("find . -follow", "follows symbolic links"),
        ("ls -RL", "follows symbolic links"),
        ("ls -R --dereference", "follows symbolic links"),
        ("du -L .", "follows symbolic links"),
        ("du --dereference", "follows symbolic links"),
        ("tree -l", "follows symbolic links"),
        ("diff -r a b", "--no-dereference"),
        ("grep $p file", "could be an option"),
        ("grep -r $p", "could be an option"),
    ],
)
def test_walks_that_follow_symlinks_are_refused(command: str, reason: str):
    refused(command, reason)


@pytest.mark.parametrize(
    ("command", "paths"),
    [
        ("jq --rawfile k secret.txt -n '$k'", ["secret.txt"]),
        ("jq --slurpfile k a.json . b.json", ["a.json", "b.json"]),
        ("jq --arg name value -r . in.json", ["in.json"]),
        ("jq -L lib -n 1", ["lib"]),
        ("jq -Llib .", ["lib"]),
        ("grep -f pats.txt --exclude-from=skip.txt x f", ["pats.txt", "skip.txt", "x", "f"]),
        ("wc --f=list", ["list", "$(<list)"]),
        ("findmnt -F tab.txt", ["tab.txt"]),
        ("lscpu -s sysroot", ["sysroot"]),
        ("ss -F filter.txt", ["filter.txt"]),
        ("sed '1r inc.txt' f", ["inc.txt", "f"]),
        ("tree --gitfile=ignore --hintro intro.html -L 1", ["ignore", "intro.html"]),
        ("who /var/log/wtmp", ["/var/log/wtmp"]),
        ("ls", ["."]),
    ],
)
def test_option_values_that_name_files_are_reported_as_reads(command: str, paths: list[str]):
    assert flat(command) == paths


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("jq -f prog.jq data.json", "program file"),
        ("jq -nrf prog.jq", "program file"),
        ("jq --run-tests t.txt", "--run-tests"),
        ("jq 'include \"m\"; .' f", "loads modules"),
        ("strings @options.txt", "options inside the file"),
        ("cat /proc/self/environ", "process environment"),
        ("sort < /proc/1/environ", "process environment"),
    ],
)
def test_files_whose_content_is_never_shown_are_refused(command: str, reason: str):
    refused(command, reason)


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("printenv", "process environment"),
        ("env", "process environment"),
        ("env -0", "process environment"),
        ("ps e", "environment"),
        ("ps auxe", "environment"),
        ("ps -efx", "not checked"),
        ("ps -auxe", "value ps may refuse"),
        ("jq -n env", "process environment"),
        ("jq -n '$ENV.HOME'", "process environment"),
        ("jq -n '[env[]]'", "process environment"),
        ("jq -n '\"\\(env)\"'", "process environment"),
        ("awk 'BEGIN { print ENVIRON[\"HOME\"] }'", "ENVIRON"),
        ("cat /proc/1/environ", "process environment"),
        ("head -c 100 /proc/self/task/1/environ", "process environment"),
    ],
)
def test_commands_that_print_a_process_environment_are_refused(command: str, reason: str):
    refused(command, reason)


@pytest.mark.parametrize(
    "command",
    ["printenv PATH", "ps aux", "ps -ef", "ps -eo pid,args", "jq .env f.json", "jq '$env' f"],
)
def test_forms_that_print_no_environment_stay_allowed(command: str):
    assert check(command).read_only, check(command).reason


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("git config --list", "outside the project"),
        ("git config -l", "outside the project"),
        ("git config list", "outside the project"),
        ("git config --get-regexp '.*'", "outside the project"),
        ("git config --global user.name", "outside the project"),
        ("git config --system -l", "outside the project"),
        ("git config --includes --local -l", "includes"),
        ("git config --get credential.helper", "credential"),
        ("git config url.https://x.insteadof", "credential"),
        ("git var -l", "outside the project"),
        ("git for-each-ref --format='%(signature)'", "gpg"),
        ("git log --format=%GS", "gpg"),
        ("git --upload-pack=x log", "unknown git option"),
        ("git -c core.fsmonitor=x status", "git -c"),
        ("git --config-env=core.pager=P log", "git --config-env"),
        ("git --exec-path=/tmp log", "git --exec-path"),
        ("git --git-dir=x log", "git --git-dir"),
        ("git --work-tree=x status", "git --work-tree"),
        ("git diff --ext", "external diff"),
        ("git show --textconv HEAD", "textconv"),
        ("git log --show-sig", "gpg"),
    ],
)
def test_git_forms_that_read_outside_or_run_programs_are_refused(command: str, reason: str):
    refused(command, reason)


@pytest.mark.parametrize(
    ("command", "paths"),
    [
        ("git config --local --list", []),
        ("git config -f .gitmodules -l", [".gitmodules"]),
        ("git config --get user.email", []),
        ("git blame --contents=work.txt f.py", ["work.txt", "f.py"]),
        ("git blame -Srevs.txt f.py", ["revs.txt", "f.py"]),
        ("git blame --ignore-revs-file=.git-blame-ignore-revs f", [".git-blame-ignore-revs", "f"]),
        ("git ls-files --exclude-from=ex.txt -o", ["ex.txt"]),
        ("git diff -Oorder.txt", ["order.txt"]),
        ("git log -L:main:src/a.py", ["src/a.py"]),
        ("git --no-lazy-fetch log", []),
    ],
)
def test_git_option_values_that_name_files_are_reported(command: str, paths: list[str]):
    assert flat(command) == paths
