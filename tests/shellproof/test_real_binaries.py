"""Every tool rule against the real tool: each argument form the proof accepts leaves a
throwaway directory and HOME byte-identical when the tool really runs, and the forms it
refuses because they write (or print the environment) really do, where that is harmless.
Each form skips when its tool is not installed (.ci/run installs them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.shellproof.sandbox import NO, WRITES, Case, Sandbox, run_case

XXD = [
    Case("xxd data.txt"),
    Case("xxd -ps data.txt"),
    Case("xxd -p data.txt"),
    Case("xxd -plain data.txt"),
    Case("xxd --ps data.txt"),
    Case("xxd -c 4 data.txt"),
    Case("xxd -c4 data.txt"),
    Case("xxd -cols 4 data.txt"),
    Case("xxd -s 2 data.txt"),
    Case("xxd -s -2 data.txt"),
    Case("xxd -seek 2 data.txt"),
    Case("xxd -s2 -l 3 -g 1 data.txt"),
    Case("xxd -len 3 -u data.txt"),
    Case("xxd -r -p hex.txt"),
    Case("xxd -r -ps hex.txt"),
    Case("xxd -revert -plain hex.txt -"),
    Case("xxd -i data.txt"),
    Case("xxd -n name -i data.txt"),
    Case("xxd -capitalize -i data.txt"),
    Case("xxd -b -R never data.txt"),
    Case("xxd -- data.txt"),
    Case("xxd --- data.txt"),
    Case("xxd data.txt -"),
    Case("xxd - < data.txt"),
    Case("xxd < data.txt"),
    Case("xxd -r -ps hex.txt out", "writes its second operand", WRITES),
    Case("xxd -ps hex.txt out", "writes its second operand", WRITES),
    Case("xxd data.txt -r", "writes its second operand", WRITES),
    Case("xxd data.txt -c", "writes its second operand", WRITES),
    Case("xxd -s 1 data.txt out", "writes its second operand", WRITES),
    Case("xxd -- data.txt -- ", "writes its second operand", WRITES),
    Case("xxd -c 4 data.txt out extra", "writes its second operand", NO),
    Case("xxd $opt data.txt", "could be an option", NO),
    Case('xxd data.txt "$out"', "writes its second operand", NO),
    Case("xxd data.txt $out", "several operands", NO),
    Case("xxd -x data.txt", "not checked", NO),
]

TREE = [
    Case("tree"),
    Case("tree -L 1"),
    Case("tree -L1 sub"),
    Case("tree -a -L 2 sub"),
    Case("tree -dL 1"),
    Case("tree -P '*.txt' -I sub"),
    Case("tree -PI '*.txt' sub"),
    Case("tree -LP 1 '*.txt' sub"),
    Case("tree -J"),
    Case("tree -X -L 1"),
    Case("tree --charset ascii"),
    Case("tree --charset=ascii -L 1"),
    Case("tree -H . -L 1"),
    Case("tree -TH title . sub"),
    Case("tree --du -h -- sub"),
    Case("tree --noreport --filelimit 5 --sort=name"),
    Case("tree --timefmt %Y -L 1 --dirsfirst"),
    Case("tree --gitignore --prune -f"),
    Case("tree --fromfile data.txt"),
    Case("tree --infofile=data.txt -L 1"),
    Case("tree -Lo 1 out", "tree -o writes", WRITES),
    Case("tree -o out", "tree -o writes", WRITES),
    Case("tree -ao out sub", "tree -o writes", WRITES),
    Case("tree -L 1 sub -o out", "tree -o writes", WRITES),
    Case("tree -PLo '*.txt' 1 out", "tree -o writes", WRITES),
    Case("tree -R -L 1 -H .", "tree -R writes", WRITES),
    Case("tree -L2o out", "tree -o writes", NO),
    Case("tree -l", "follows symbolic links", NO),
    Case("tree -Ll 1", "follows symbolic links", NO),
    Case("tree $x", "could be an option", NO),
    Case("tree -P $x", "several words", NO),
    Case("tree --bogus", "unknown option", NO),
    Case("tree -L", "needs a value", NO),
]

TAR = [
    Case("tar tf archive.tar"),
    Case("tar tvf archive.tar"),
    Case("tar tzf archive.tar.gz"),
    Case("tar tfv archive.tar"),
    Case("tar tff archive.tar archive.tar"),
    Case("tar -tf archive.tar"),
    Case("tar -tvf archive.tar member.txt"),
    Case("tar -tzvf archive.tar.gz"),
    Case("tar -t -f archive.tar --verbose"),
    Case("tar --list --file=archive.tar"),
    Case("tar --list --file archive.tar member.txt"),
    Case("tar tf - < archive.tar"),
    Case("tar tf archive.tar -v"),
    Case("tar xf archive.tar", "key letter x", WRITES),
    Case("tar -xf archive.tar", "unknown option -x", WRITES),
    Case("tar cf new.tar data.txt", "key letter c", WRITES),
    Case("tar -cf new.tar data.txt", "unknown option -c", WRITES),
    Case("tar tfv host:file", "remote", NO),
    Case("tar tvf user@host:archive.tar", "remote", NO),
    Case("tar -tf host:archive.tar", "remote", NO),
    Case("tar tf", "needs a value", NO),
    Case("tar tf $archive", "computed at run time", NO),
    Case("tar --rsh-command=/bin/sh -tf a:b", "unknown option", NO),
    Case("tar -tf archive.tar --to-command=sh", "unknown option", NO),
    Case("tar -tf archive.tar -I sh", "unknown option -I", NO),
]

TABLE = XXD + TREE + TAR


@pytest.mark.parametrize("case", TABLE, ids=[c.command for c in TABLE])
def test_each_argument_form_matches_what_the_real_tool_does(case: Case, tmp_path: Path):
    run_case(case, Sandbox(tmp_path))
