"""The secret scanner's cost and false positives, on this repository's own text.

Run: `python -m bench.secret_scan [--repeat 5] [--chunks 0] [--also DIR]`. Every file git tracks here
that is UTF-8 text is read; for the cost they are concatenated and cut into 100 kB chunks,
and `Vault.redact` (scan plus markers, as every tool result pays it) is timed on each
chunk `--repeat` times; the same for shell-output-like text (this repository's own
`git log --stat` and `git ls-files -s` output, the kind of listing a command prints), for
prose that holds no anchor at all (the patterns' floor) and for a worst case made of
nothing but `…_TOKEN=` lines. Prints the median and
p99 in ms per 100 kB against the 2 ms budget. For false positives each file is scanned on
its own and every finding is printed as `path:line kind` with the value's first four
characters and its length (never the value), files under tests/ apart: those are
deliberate fake secrets of tests. `--also DIR` counts the same way the findings in the
text files under another tree (a virtual environment's `site-packages`: other people's
code, where a finding is almost always a false one). Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from qshell.redaction import Finding, Vault, scan

ROOT = Path(__file__).resolve().parents[1]
CHUNK_CHARS = 100_000
BUDGET_MS = 2.0


def tracked_texts() -> dict[str, str]:
    """Each tracked file that decodes as UTF-8, by its path in the repository."""
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    texts = {}
    for name in filter(None, names):
        path = ROOT / name.decode()
        try:
            texts[name.decode()] = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return texts


def chunks(text: str, limit: int) -> list[str]:
    cut = [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)]
    whole = [c for c in cut if len(c) == CHUNK_CHARS]
    return whole[:limit] if limit else whole


def shell_output() -> str:
    """What commands print: a long log with file statistics, and an index listing."""
    runs = (["git", "log", "--stat", "--format=fuller", "-n", "400"], ["git", "ls-files", "-s"])
    return "".join(
        subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True).stdout
        for argv in runs
    )


def settings_lines() -> str:
    """The worst case: nothing but assignments to secret-sounding keys, a third of them
    real-looking secrets (a `.env` or a credentials file of 100 kB)."""
    lines = []
    for n in range(CHUNK_CHARS // 30):
        value = f"v{n:06d}Xk9{n * 7919 % 100000:05d}q" if n % 3 == 0 else f"os.environ[{n}]"
        lines.append(f"SERVICE_{n}_TOKEN={value}")
    return "\n".join(lines)[:CHUNK_CHARS]


def prose() -> str:
    sentence = "The quick brown fox jumps over the lazy dog while it rains in the valley. "
    return sentence * (CHUNK_CHARS // len(sentence) + 1)


def timed(pieces: list[str], repeat: int, work: Callable[[str], object]) -> list[float]:
    """ms per 100 kB of each run of `work` over each piece."""
    times = []
    for piece in pieces:
        for _ in range(repeat):
            started = time.perf_counter()
            work(piece)
            times.append((time.perf_counter() - started) * 1000 * CHUNK_CHARS / len(piece))
    return times


def row(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    median = statistics.median(ordered)
    verdict = "within" if median <= BUDGET_MS else "OVER"
    return (
        f"{name:<28} median {median:6.3f} ms/100kB  p99 {p99:6.3f}  "
        f"({len(ordered)} runs; {verdict} the {BUDGET_MS} ms budget)"
    )


def line_of(text: str, finding: Finding) -> int:
    return text.count("\n", 0, finding.start) + 1


TEXT_SUFFIXES: tuple[str, ...] = (".py", ".pyi", ".md", ".rst", ".txt", ".json", ".toml")
TEXT_SUFFIXES += (".cfg", ".ini", ".yaml", ".yml", ".xml", ".html", ".js", ".sh")


def texts_under(root: Path) -> dict[str, str]:
    """Each UTF-8 text file under `root` (by its suffix), by its path below `root`."""
    texts = {}
    for path in sorted(root.rglob("*")):
        if path.suffix in TEXT_SUFFIXES and path.is_file():
            try:
                texts[str(path.relative_to(root))] = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
    return texts


def print_findings(title: str, group: dict[str, list[Finding]], texts: dict[str, str]) -> None:
    count = sum(len(f) for f in group.values())
    print(f"  {title}: {count} findings in {len(group)} files")
    for name, findings in sorted(group.items()):
        text = texts[name]
        for f in findings:
            value = text[f.start : f.end]
            print(f"    {name}:{line_of(text, f)} {f.kind} {value[:4]!r}… ({len(value)} chars)")


def false_positives(texts: dict[str, str], where: str = "this repository") -> None:
    """Every finding in `texts`, those under tests/ apart."""
    found = {name: scan(text) for name, text in texts.items()}
    hits = {name: f for name, f in found.items() if f}
    in_tests = {n: f for n, f in hits.items() if n.startswith("tests/")}
    elsewhere = {n: f for n, f in hits.items() if not n.startswith("tests/")}
    size = sum(len(t) for t in texts.values())
    print(f"\nfalse positives in {where}: {len(texts)} files, {size / 1e6:.2f} MB one by one")
    print_findings("outside tests/", elsewhere, texts)
    print_findings("in tests/ (fake secrets)", in_tests, texts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.secret_scan")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each chunk")
    parser.add_argument("--chunks", type=int, default=0, help="at most this many (0: all)")
    parser.add_argument("--also", type=Path, action="append", default=[], help="another tree")
    args = parser.parse_args(argv)
    texts = tracked_texts()
    source = chunks("".join(texts.values()), args.chunks)
    output = chunks(shell_output(), args.chunks)
    vault = Vault()
    print(f"secret scanner: {len(source)} + {len(output)} chunks of {CHUNK_CHARS} chars")
    print(row("repository files", timed(source, args.repeat, vault.redact)))
    print(row("shell output (git log etc.)", timed(output, args.repeat, vault.redact)))
    print(row("prose, no anchor", timed([prose()], args.repeat * 4, vault.redact)))
    print(row("assignments only (worst)", timed([settings_lines()], args.repeat * 4, vault.redact)))
    false_positives(texts)
    for tree in args.also:
        false_positives(texts_under(tree), str(tree))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
