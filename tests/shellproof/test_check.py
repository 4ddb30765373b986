"""The shell read-only proof: bypasses one by one, everyday read-only commands, cd and
substitution rules, path extraction, the sanitised environment, and never raising."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qshell.shellproof import (
    DEFAULT_PATH,
    GIT_HARDENING,
    SHELL_TIMEOUT_S,
    Proof,
    check,
    sanitized_env,
    walker,
)

READ_ONLY = [
    "ls -la",
    "git status",
    "git log --oneline -20 | head",
    "git diff --stat HEAD~3..HEAD",
    "git show HEAD:README.md",
    "git branch -vv",
    "git tag -l 'v*'",
    "git remote -v",
    "git config --get user.email",
    "git config user.name",
    "git stash list",
    "git reflog -n 5",
    "git --no-pager log -n 3",
    'git log --author="$(git config user.name)" --oneline',
    "cat README.md | wc -l",
    "head -n 20 file.txt; tail -n 5 file.txt",
    "tail -20 log.txt",
    "grep -rn 'def main' --include=*.py .",
    "rg -n foo -g '*.py' src",
    "rg -- -z file",
    "find . -name '*.py' -not -path './.venv/*' | head",
    "find . -maxdepth 2 -type f -mtime -1",
    "find . -path ./node_modules -prune -o -name '*.js' -print",
    "sort -k2 -n data.txt | uniq -c | sort -rn",
    "sort -- -o output",
    "uniq -c sorted.txt",
    "sed -n '1,5p' file",
    "sed 's/a/woutput/' file",
    "sed -e 's/a/b/' -e '/^#/d' file",
    "sed -n '3{p;q}' file",
    "sed '1i inserted' file",
    "sed '$a appended' file",
    "sed '/x/c changed' file",
    "awk -F: '{print $1}' /etc/passwd",
    "awk 'NR>1 {sum+=$5} END {print sum}' file",
    "awk '$3 > 0 { print $1 / $3 }' file",
    "jq -r '.name' package.json",
    "du -sh * | sort -h",
    "ls -d */",
    "cat {a,b}.txt",
    "echo {1..5}",
    'echo "hi ${USER}" ${X:-default}',
    "printf '%s\\n' *.md",
    "wc -l $(git ls-files '*.py')",
    "diff <(sort a.txt) <(sort b.txt)",
    'grep foo <<< "$(git status)"',
    "cat <<'EOF'\n$(rm -rf x)\nEOF",
    "cat <<EOF\nhello $USER\nEOF",
    "ls 2>/dev/null",
    "ls >/dev/null 2>&1",
    "echo hi >&2",
    "grep foo 2>/dev/null file",
    "cat < input.txt",
    "test -f setup.py && cat setup.py",
    "[[ -f x ]] || echo missing",
    '[ -z "$X" ] && echo empty',
    "if [ -f x ]; then cat x; else echo no; fi",
    "{ ls; pwd; }",
    "! grep -q x file",
    "command -v rg",
    "ls # ; rm -rf /",
    "'ls' -la",
    '"l"s -la',
    "\\ls",
    "/usr/bin/git status",
    "git ls-files | xargs grep -l TODO",
    "find . -name '*.py' -print0 | xargs -0 wc -l",
    "yes | head -n 3",
    "tar -tzf archive.tar.gz",
    "gzip -l archive.gz",
    "ip addr show",
    "date +%Y-%m-%d",
    "echo '$\\\n(touch /tmp/pwned)'",
    'echo "\\$\\\n(touch /tmp/pwned)"',
    "ls -la \\\n  | head",
    "echo ${var:0:5} ${PWD##*/}",
    'echo "${x:-a b}" ${PATH//:/ }',
    "find . -perm -u+x -type f",
    "git remote show",
    "git remote show -n origin",
    "git submodule status",
    "git notes show HEAD",
    "git rev-parse --abbrev-ref --symbolic-full-name @{u}",
    "awk '!seen[$0]++' file",
    "sed -n '/BEGIN/,/END/{//!p}' file",
]

BYPASSES = [
    # redirections
    ("cat a > b", "redirection to a file"),
    ("ls | head > out.txt", "redirection to a file"),
    ("> out echo hi", "redirection to a file"),
    ("echo hi > /dev/stderr", "redirection to a file"),
    ("ls 3> fd3.txt", "redirection to a file"),
    ("echo >| out", "redirection to a file"),
    ("ls > $(echo out)", "redirection to a file"),
    ("cat < /dev/tcp/10.0.0.1/80", "network"),
    ("cat <<EOF > out\nx\nEOF", "redirection to a file"),
    # substitutions
    ("ls $(rm -rf x)", "'rm'"),
    ("echo `touch f`", "'touch'"),
    ("echo $(echo $(rm foo))", "'rm'"),
    ("echo ${x:-$(rm y)}", "'rm'"),
    ('cat <<< "$(rm -rf x)"', "'rm'"),
    ("cat < <(rm target)", "'rm'"),
    ("tee >(wc -l) < file.txt", "process substitution"),
    ("[[ $(rm x) ]]", "'rm'"),
    ("FOO=$(rm target)", "variable assignment"),
    ("$(echo rm) -rf build", "command name computed"),
    # heredocs feeding commands
    ("cat <<EOF | sh\nrm -rf x\nEOF", "interpreter 'sh'"),
    ("cat <<EOF && rm -rf build\nhi\nEOF", "'rm'"),
    ("bash <<EOF\nls\nEOF", "interpreter 'bash'"),
    ("cat <<EOF\n$(rm x)\nEOF", "'rm'"),
    ("cat <<EOF\n$\\\n(rm x)\nEOF", "expansion"),
    ("cat <<EOF\nhi $USER \\$(x) `rm y`\nEOF", "expansion the parser did not see"),
    # env prefixes and launchers
    ("LESSOPEN='|rm -rf ~ %s' less README.md", "environment prefix"),
    ("GIT_PAGER=cat git log", "environment prefix"),
    ("LC_ALL=C sort file", "environment prefix"),
    ("LD_PRELOAD=/tmp/evil.so ls", "environment prefix"),
    ("env X=1 rm file", "env with arguments"),
    ("env -i ls", "env with arguments"),
    ("time ls", "launcher 'time'"),
    ("nice -n 10 rm x", "launcher 'nice'"),
    ("exec ls", "launcher 'exec'"),
    ("eval ls", "launcher 'eval'"),
    (". ./venv/bin/activate", "launcher '.'"),
    ("source ./env.sh", "launcher 'source'"),
    ("python3 --version", "interpreter 'python3'"),
    ("command rm x", "command runs its arguments"),
    # command identity
    ("./cat README.md", "outside the system directories"),
    ("/tmp/ls -la", "outside the system directories"),
    ("bin/grep x", "outside the system directories"),
    ("\\rm -rf build", "'rm' deletes files"),
    ("'r''m' -rf build", "'rm' deletes files"),
    ("$'\\x72m' -f y", "ANSI-C"),
    ("$'git\\u0000junk' push --force", "ANSI-C"),
    ("$CMD arg", "command name computed"),
    ("${SHELL} -c ls", "command name computed"),
    # find
    ("find . -exec rm {} \\;", "find -exec"),
    ("find . -type f -exec grep -l foo {} +", "find -exec"),
    ("find . -execdir ls \\;", "find -execdir"),
    ("find . -name x -ok rm {} \\;", "find -ok"),
    ("find . -delete", "find -delete"),
    ("find . -fprint out", "find -fprint"),
    ("find . -fprintf /root/x '%p'", "find -fprintf"),
    ("find . -fls out", "find -fls"),
    ("find . -name *.py", "literal value"),
    ("find . -name -delete", "looks like an option"),
    # sed
    ("sed -i 's/a/b/' f", "sed -i edits files"),
    ("sed -ni p f", "sed -i edits files"),
    ("sed --in-pl=.bak 's/a/b/' f", "sed -i edits files"),
    ("sed 'w out' f", "sed w writes"),
    ("sed 'W out' f", "sed W writes"),
    ("sed 's/a/b/w out' f", "s///w"),
    ("sed 's/a/b/e' f", "s///e"),
    ("sed '1etouch marker' f", "sed e runs"),
    ("sed -e 's/a/b/' -e 'woutput' f", "sed w writes"),
    ("sed -f script.sed f", "sed -f"),
    # awk
    ("awk 'BEGIN {system(\"rm -rf /\")}'", "system()"),
    ("awk '{s+=$5system(\"rm x\")}' f", "system()"),
    ("awk '{x=1getline}' f", "getline"),
    ("awk '{ if (1) /#/; print > \"out\" }' f", "print > writes"),
    ('awk \'{ if (x) /"/; print > "f"; y = "/" }\' f', "could hide code"),
    ("awk '{ x = a / b } # c' f", "comment after a division"),
    ("awk '{print > \"out\"}' f", "print > writes"),
    ("awk '{print >> \"out\"}' f", "print >> writes"),
    ("awk '{ print > output }' f", "print > writes"),
    ('awk \'{printf("%s", $1) > "x"}\' f', "print > writes"),
    ("awk '{print | \"sort\"}' f", "awk | runs"),
    ("awk 'BEGIN { \"date\" | getline d }'", "getline"),
    ("awk -i inplace '{sub(/a/,\"b\")}1' f", "awk -i"),
    ("awk -f prog.awk f", "awk -f"),
    ("awk '@load \"x\"; {print}' f", "gawk @"),
    ("awk 'BEGIN { ARGV[1]=\"/etc/shadow\" } {print}'", "ARGV"),
    # sort, uniq, tree, rg, fd, base64, xargs
    ("sort -o out input", "sort -o writes"),
    ("sort -uo out input", "sort -o writes"),
    ("sort -roout input", "sort -o writes"),
    ("sort --o out input", "--o abbreviates --output"),
    ("sort --output=out input", "sort --output writes"),
    ("sort -S1k --compress-program=./payload big.txt", "compress-program"),
    ("sort {-o,output} input", "could be an option"),
    ("sort *", "could be an option"),
    ("uniq input output", "would be written"),
    ("tree -o out", "tree -o writes"),
    ("rg --pre cat needle", "rg --pre"),
    ("rg --pre=cat needle", "rg --pre"),
    ("rg -iz pattern archive.gz", "rg -z"),
    ("rg foo *", "could be an option"),
    ("fd -x rm", "fd -x"),
    ("fd -X wc -l", "fd -X"),
    ("base64 -o out.bin", "base64 -o"),
    ("xargs rm", "xargs runs 'rm'"),
    ("echo f | xargs sh -c 'rm \"$0\"'", "xargs runs 'sh'"),
    ("find . -print0 | xargs -0 -I{} mv {} /tmp/", "xargs -I"),
    ("printf -v PATH /tmp", "printf -v"),
    ("date -s '2020-01-01'", "date -s"),
    ("date 010101012020", "sets the clock"),
    ("hostname newname", "would be written"),
    ("ip link set eth0 down", "only show/list"),
    ("tar -xf archive.tar", "unknown option -x"),
    ("tar -tf host:archive.tar", "remote"),
    ("gzip file", "writes files"),
    # git
    ("git -c core.pager=cat log -n 1", "git -c"),
    ("git --config-env=core.pager=X log", "git --config-env"),
    ("git --git-dir=/tmp/x log", "git --git-dir"),
    ("git --work-tree=/tmp status", "git --work-tree"),
    ("git --exec-path=/tmp log", "git --exec-path"),
    ("git -p log", "git -p starts a pager"),
    ("git --paginate status", "pager"),
    ("git -C /tmp/untrusted-repo status", "git -C"),
    ("git push", "uses the network"),
    ("git fetch", "uses the network"),
    ("git commit -am msg", "git subcommand 'commit' writes"),
    ("git log --output=x", "git --output writes"),
    ("git log --outp=x", "git --output writes"),
    ("git diff --ext-diff", "external diff"),
    ("git diff --textconv", "textconv"),
    ("git log --show-signature", "gpg"),
    ("git log --format='%G?'", "gpg"),
    ("git grep -O foo", "pager"),
    ("git grep --open-files-in-pager foo", "pager"),
    ("git log --help", "manual"),
    ("git help log", "manual"),
    ("git branch -d feature", "git branch -d"),
    ("git branch newname", "creates a branch"),
    ("git tag v1.0", "creates a tag"),
    ("git tag -d v1.0", "git tag -d"),
    ("git remote add origin url", "git remote add"),
    ("git remote show origin", "git remote show"),
    ("git config user.name alice", "sets values"),
    ("git config --unset user.name", "not a read"),
    ("git stash", "writes"),
    ("git stash pop", "writes"),
    ("git reflog expire --all", "writes"),
    ("git worktree add ../wt feature", "git worktree"),
    ("git $sub", "computed at run time"),
    ("git log $range", "computed at run time"),
    ("(cd sub && git status)", "git after cd"),
    # never ends
    ("tail -f log", "never ends: tail -f"),
    ("tail -n 5 -F log", "never ends: tail -F"),
    ("tail --follow=name log", "never ends: tail --follow"),
    ("tail --fo log", "tail --follow"),
    ("yes", "never ends: yes"),
    ("while true; do ls; done", "loop"),
    ("top", "interactive"),
    ("git log | less", "interactive"),
    # shell state and syntax
    ("cd src && ls", "cd outside a subshell"),
    ("cd /tmp", "cd outside a subshell"),
    ("pushd /tmp", "shell builtin 'pushd'"),
    ("FOO=bar", "variable assignment"),
    ("a=ls; $a", "variable assignment"),
    ("export FOO=bar", "'export' changes the shell"),
    ("foo() { ls; }; foo", "function definition"),
    ("for f in *; do wc -l $f; done", "loop"),
    ("case x in x) ls;; esac", "case statement"),
    ("ls &", "background job"),
    ("ls & cat file", "background job"),
    ("ls ;; pwd", "unexpected ';;'"),
    ("ls |", "parse error"),
    ("echo ${y:=v}", "assigns a variable"),
    ('echo "${x@P}"', "transformations"),
    ("echo $((z=5))", "arithmetic assignment"),
    ("echo $((x))", "arithmetic on a variable"),
    ("echo ${x:n}", "variable offset"),
    ("echo ${x-$\\\n(rm y)}", "unparsed operand"),
    ("echo ${x/a/`rm y`}", "unparsed operand"),
    ("echo a\\\n$x", "line continuation joins"),
    ("git remote show origin", "git remote show"),
    ("git submodule update", "git submodule update"),
    ("git submodule foreach rm x", "git submodule foreach"),
    ("git notes add -m x", "git notes add"),
    ("hostname -f", "unknown option -f"),
    ("(( i++ ))", "arithmetic command"),
    ("[[ $x -eq 1 ]]", "arithmetic"),
    ("test -v 'a[$(rm x)]'", "test -v"),
    ("[ -v x ]", "test -v"),
    # quoting and escape tricks that make bash and the parser disagree
    ('echo "$\\\n(touch /tmp/pwned)"', "line continuation"),
    ("sort -\\\no out f", "line continuation joins"),
    ("sort \\ -o out f", "skipped"),
    ("grep\n\\rm x", "blank inside one word"),
    ("ls >&2\r\n", "carriage return"),
    ("grep ^Install README.md\ncurl evil.com", "'curl' uses the network"),
    ("ls\x00rm", "control"),
    ("- 2>&1", "text the parser skipped"),
    ("ls\u00a0-la", "unusual whitespace"),
    ("", "empty command"),
    ("   \n", "empty command"),
    ('cat <<"E"OF\nhi\nEOF\necho PWN', "parse error"),
    ("cat <<A\na\nA\ncat <<B\nb\nB", "more than one heredoc"),
]


@pytest.mark.parametrize("command", READ_ONLY)
def test_everyday_read_only_commands_are_allowed(command: str):
    verdict = check(command)
    assert verdict.read_only, verdict.reason
    assert verdict.reason == "read-only"
    assert check(command).read_only


@pytest.mark.parametrize(("command", "reason"), BYPASSES)
def test_each_bypass_is_rejected_with_a_reason(command: str, reason: str):
    verdict = check(command)
    assert not verdict.read_only
    assert not check(command).read_only
    assert reason in verdict.reason, verdict.reason


def test_commands_are_listed_in_order_with_git_subcommands():
    verdict = check("git log -n 3 | head && echo $(pwd)")
    assert verdict.commands == ("git log", "head", "pwd", "echo")


def test_cd_is_read_only_only_inside_a_subshell():
    assert check("(cd src && ls)").read_only
    assert check("echo $(cd src; ls)").read_only
    assert check("cd src && ls").reason == "cd outside a subshell"
    assert check("(cd src) && cd src").reason == "cd outside a subshell"
    assert "computed at run time" in check("(cd $DIR && ls)").reason
    assert "cd -" in check("(cd - && ls)").reason


def test_relative_paths_after_cd_are_reported_from_both_directories():
    verdict = check("(cd src && cat ../.env)")
    assert verdict.read_only
    assert verdict.paths == ("src", "../.env", "src/../.env")
    assert check("(cd) ; cat x").paths == ("~", "x")


def test_a_substitution_is_allowed_only_when_every_inner_command_is_read_only():
    assert check("ls -l $(which python3)").read_only
    assert check('echo "$(git rev-parse HEAD)"').read_only
    assert check("cat $(git ls-files | head -1)").read_only
    assert not check("ls $(cat x; rm x)").read_only
    assert not check("ls $(ls > out)").read_only
    assert not check('echo "$(echo $(rm x))"').read_only


def test_paths_are_the_literal_path_arguments_after_quote_removal():
    verdict = check("cat ~/.ssh/id_rsa 'my file.txt' -- -n < in.txt | grep -f pats.txt x")
    assert verdict.paths == ("in.txt", "~/.ssh/id_rsa", "my file.txt", "-n", "pats.txt", "x")
    assert check("grep -rn pattern src tests").paths == ("src", "tests")
    assert check("git show HEAD:.env").paths == ("HEAD:.env", ".env")
    assert check("find /etc -newer ref -name '*.conf'").paths == ("/etc", "ref")
    assert check("find -type f").paths == (".",)
    assert check("echo /etc/passwd; wc -l").paths == ()
    assert check("sed -n 1p /etc/hosts").paths == ("/etc/hosts",)
    assert check("[ -f /etc/shadow ]").paths == ("/etc/shadow",)


def test_run_time_path_arguments_are_reported_by_their_source_text():
    verdict = check('cat *.md "$HOME/notes" $(git ls-files)')
    assert verdict.read_only
    assert verdict.paths == ()
    assert verdict.dynamic_paths == ("*.md", '"$HOME/notes"', "$(git ls-files)")
    # files named on stdin or inside another file are only known at run time too
    assert check("git ls-files | xargs wc -l").dynamic_paths == ("$(</dev/stdin)",)
    assert check("xargs -a list.txt cat").dynamic_paths == ("$(<list.txt)",)
    assert check("sort --files0-from=list").dynamic_paths == ("$(<list)",)
    assert check("sha256sum -c sums.txt").dynamic_paths == ("$(<sums.txt)",)
    assert check("find -files0-from names").dynamic_paths == ("$(<names)",)


def test_rejections_carry_no_paths():
    verdict = check("cat secret && rm x")
    assert verdict == Proof(False, "'rm' deletes files", ("cat",))


def test_an_internal_failure_is_reported_as_not_read_only(monkeypatch: pytest.MonkeyPatch):
    def broken(name: str, args: object) -> None:
        raise KeyError(name)

    monkeypatch.setattr(walker, "judge", broken)
    assert check("ls") == Proof(False, "internal error")


def test_deep_nesting_fails_closed():
    deep = "echo " + "$(" * 200 + "ls" + ")" * 200
    verdict = check(deep)
    assert not verdict.read_only
    assert verdict.reason in ("too deeply nested", "parse error")


def test_over_long_input_is_rejected_before_parsing():
    assert check("ls " + "a" * 10_000).reason == "command too long"


def test_checks_from_many_threads_agree():
    commands = [c for c, _ in BYPASSES[:40]] + READ_ONLY[:40]
    expected = [check(c) for c in commands]
    results: list[list[Proof]] = []

    def work() -> None:
        results.append([check(c) for c in commands])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 4


def test_sanitized_env_disables_pagers_and_hardens_git(tmp_path: Path):
    base = {
        "PATH": f"{tmp_path}/bin:.:/usr/bin::relative/bin:/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "PAGER": "less",
        "LESS": "-R",
        "LESSOPEN": "|lesspipe %s",
        "GIT_EXTERNAL_DIFF": "evil",
        "GIT_DIR": "/elsewhere",
        "GIT_CONFIG_PARAMETERS": "'core.pager=evil'",
        "LD_PRELOAD": "/tmp/x.so",
        "BASH_ENV": "/tmp/rc",
        "BASH_FUNC_ls%%": "() { rm -rf x; }",
        "RIPGREP_CONFIG_PATH": "/tmp/rg",
        "TAR_OPTIONS": "--to-command=sh",
        "GCONV_PATH": "/tmp/gconv",
        "PERL5OPT": "-Mevil",
        "PYTHONPATH": "/tmp/py",
        "OPENAI_API_KEY": "sk-secret",
        "GITHUB_TOKEN": "ghp_secret",
    }
    env = sanitized_env(base, root=str(tmp_path))
    assert env["PATH"] == "/usr/bin:/bin"
    assert env["HOME"] == "/home/u" and env["LANG"] == "C.UTF-8"
    assert env["PAGER"] == env["GIT_PAGER"] == env["MANPAGER"] == "cat"
    assert env["TERM"] == "dumb" and env["NO_COLOR"] == "1"
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_OPTIONAL_LOCKS"] == "0"
    assert env["GIT_ATTR_NOSYSTEM"] == "1"
    for name in (
        "LESS",
        "LESSOPEN",
        "GIT_EXTERNAL_DIFF",
        "GIT_DIR",
        "LD_PRELOAD",
        "BASH_ENV",
        "BASH_FUNC_ls%%",
        "RIPGREP_CONFIG_PATH",
        "TAR_OPTIONS",
        "GCONV_PATH",
        "PERL5OPT",
        "PYTHONPATH",
        "OPENAI_API_KEY",
        "GITHUB_TOKEN",
    ):
        assert name not in env, name
    pairs = {
        env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"]
        for i in range(int(env["GIT_CONFIG_COUNT"]))
    }
    assert pairs == dict(GIT_HARDENING)
    assert pairs["core.fsmonitor"] == "false" and pairs["core.pager"] == "cat"
    assert "'core.fsmonitor=false'" in env["GIT_CONFIG_PARAMETERS"]
    assert "evil" not in env["GIT_CONFIG_PARAMETERS"]
    assert base["PAGER"] == "less"  # the caller's mapping is left alone
    assert sanitized_env({})["PATH"] == DEFAULT_PATH
    assert 0 < SHELL_TIMEOUT_S <= 60


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_git_hardening_overrides_a_repository_fsmonitor(tmp_path: Path):
    marker = tmp_path / "ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    hook.chmod(0o755)
    repo = tmp_path / "repo"
    env = sanitized_env(os.environ)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "config", "core.fsmonitor", str(hook)], check=True)
    (repo / "f").write_text("x")
    subprocess.run(
        ["git", "status", "--short"],
        cwd=repo,
        env=env,
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=SHELL_TIMEOUT_S,
    )
    assert not marker.exists()


SHELL_TOKENS = [
    "ls", "cat", "echo", "grep", "sort", "sed", "awk", "git", "log", "find", "xargs", "rm", "sh",
    "-o", "-i", "-n", "-exec", "{}", "\\;", "w", "'", '"', "\\", "$", "$(", "`", ")", "(", "{",
    "}", ";", "&&", "||", "|", "&", ">", "<", ">>", "<<", "<<<", "EOF", "\n", "\\\n", "#", "=",
    "/dev/null", "*", "?", "[[", "]]", "~", "{a,b}", "${x}", "$x", "${x:-$(rm)}", "$((1+2))",
    "<(", ">(", "$'\\x41'", "2>&1", ">&2", "@P", ":=", "!", "-v", "x=1", "cd", "\r", "\t", " ",
]  # fmt: skip


@given(st.text(max_size=200))
def test_check_never_raises_on_arbitrary_text(text: str):
    verdict = check(text)
    assert isinstance(verdict, Proof)
    assert verdict.reason
    assert verdict.read_only == (verdict.reason == "read-only")


@given(st.lists(st.sampled_from(SHELL_TOKENS), max_size=30).map(" ".join))
def test_check_never_raises_on_shell_like_token_soup(text: str):
    verdict = check(text)
    assert isinstance(verdict, Proof)
    assert verdict.reason
    if not verdict.read_only:
        assert verdict.paths == () and verdict.dynamic_paths == ()


STUBBED = ("rm", "touch", "sh", "mkdir", "tee", "zzz", "cp", "mv")
DIFFERENTIAL_TOKENS = [
    "echo", "cat", "ls", "grep", "sort", "sed", "awk", "head", "printf", "wc", "tr", "uniq",
    "xargs", "find", *STUBBED, "a.txt", "b", "x", "-o", "-i", "-n", "-e", "w", "p", "'s/a/b/'",
    "'", '"', "\\", "$", "$(", "`", ")", "(", "{", "}", ";", "&&", "|", ">", "<", "<<", "<<<",
    "EOF", "\n", "\\\n", "#", "=", "/dev/null", "*", "{a,b}", "$x", "${x:-$(zzz)}", "<(", "2>&1",
    ">&2", "\r", "\r\n", "\t", "-\\\no", "$\\\n(zzz)", '"$\\\n(zzz)"', "$'\\x41'", "'zz'z",
    "${x-", "${x/a/", "`zzz`", "\\$", "<<'EOF'\n", "$[1]",
]  # fmt: skip


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(DIFFERENTIAL_TOKENS), min_size=1, max_size=10).map("".join))
def test_bash_runs_nothing_unexpected_for_a_proven_command(tmp_path: Path, text: str):
    """Run each proven command under real bash, with every non-read-only command name a stub
    that logs its call: no stub runs and the scratch directory is unchanged."""
    if not check(text).read_only:
        return
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    log = tmp_path / "stub.log"
    for name in STUBBED:
        stub = stubs / name
        stub.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\n')
        stub.chmod(0o755)
    work = tmp_path / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    for name, body in (("a.txt", "a\nb\n"), ("b", "x\n"), ("x", "q\n")):
        (work / name).write_text(body)
    before = sorted((p.name, p.read_bytes()) for p in work.iterdir())
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "HOME": str(work), "LANG": "C"}
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(
            ["bash", "-c", text],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=5,
        )
    assert not log.exists(), log.read_text()
    assert sorted((p.name, p.read_bytes()) for p in work.iterdir()) == before


def test_sanitized_env_pins_the_locale_the_proof_reads_text_in():
    base = {"LANG": "ja_JP.SJIS", "LC_CTYPE": "zh_CN.GBK", "LANGUAGE": "ja", "PATH": "/bin"}
    env = sanitized_env(base)
    assert env["LC_ALL"] == env["LANG"] == "C.UTF-8"
    assert "LC_CTYPE" not in env and "LANGUAGE" not in env


def test_sanitized_env_keeps_only_a_few_of_the_users_variables():
    base = {
        "HOME": "/home/u",
        "USER": "u",
        "DATABASE_URL": "postgres://u:pw@db/app",
        "MYSQL_PWD": "pw",
        "SENTRY_DSN": "https://key@sentry.io/1",
        "PATH": "/usr/bin",
    }
    env = sanitized_env(base)
    assert env["HOME"] == "/home/u" and env["USER"] == "u"
    assert not {"DATABASE_URL", "MYSQL_PWD", "SENTRY_DSN"} & set(env)
    assert not any("pw" in value for value in env.values())
