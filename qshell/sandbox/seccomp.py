"""A seccomp filter that keeps a jailed command off Unix sockets and the kernel's keyrings.

The jail's file system is read-only, but connecting to a Unix socket writes nothing: a
command that could reach `/var/run/docker.sock`, an ssh agent or a desktop bus would be
out of the sandbox in one step. The network namespace already cuts abstract sockets and
every IP address; this filter makes `socket(AF_UNIX, …)` fail with EPERM (`socketpair`,
which only connects a process to itself, stays allowed). The session keyring is not a
namespace a sandbox can leave behind (a `keyctl read` of a key the user's session holds, a
token a credential helper stored there), so `keyctl`, `add_key` and `request_key` fail
with ENOSYS, as on a kernel built without keys, which programs already handle. Every
system call of another architecture's ABI (x32, 32-bit compat), whose numbers the filter
does not check, is refused. It is a classic BPF program, assembled here as bytes (struct
sock_filter: u16 code, u8 jt, u8 jf, u32 k; jumps counted in instructions) for
bubblewrap's `--seccomp FD`. Pure; no I/O but `filter_file`.
"""

from __future__ import annotations

import errno
import os
import platform
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

# BPF instruction classes and fields (linux/filter.h, linux/seccomp.h)
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_JGE_K = 0x35
BPF_RET_K = 0x06
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16
X32_SYSCALL_BIT = 0x40000000
AF_UNIX = 1


@dataclass(frozen=True, slots=True)
class Arch:
    """One architecture's AUDIT_ARCH_* value and the numbers of the calls the filter names."""

    audit: int
    socket: int
    keyrings: tuple[int, ...]  # add_key, request_key, keyctl


ARCHES: dict[str, Arch] = {
    "x86_64": Arch(0xC000003E, 41, (248, 249, 250)),
    "aarch64": Arch(0xC00000B7, 198, (217, 218, 219)),
}
ALLOW, REFUSE, NO_KEYS = "allow", "refuse", "no-keys"  # the program's three answers


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _assemble(lines: list[tuple[int, int, str | None, str | None] | str]) -> bytes:
    """Bytes of `lines`: (code, k, label if true, label if false) instructions and the
    label strings that name the next one; a jump's offset is counted to its label."""
    where: dict[str, int] = {}
    ops: list[tuple[int, int, str | None, str | None]] = []
    for line in lines:
        if isinstance(line, str):
            where[line] = len(ops)
        else:
            ops.append(line)

    def skip(index: int, label: str | None) -> int:
        return 0 if label is None else where[label] - index - 1

    return b"".join(
        _op(code, k, skip(i, true), skip(i, false)) for i, (code, k, true, false) in enumerate(ops)
    )


def program(machine: str | None = None) -> bytes | None:
    """The filter for this machine's architecture; None for one it does not know."""
    arch = ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    keyrings = [(BPF_JEQ_K, nr, NO_KEYS, None) for nr in arch.keyrings]
    return _assemble(
        [
            (BPF_LD_W_ABS, OFFSET_ARCH, None, None),
            (BPF_JEQ_K, arch.audit, None, REFUSE),  # another ABI: refuse everything
            (BPF_LD_W_ABS, OFFSET_NR, None, None),
            (BPF_JGE_K, X32_SYSCALL_BIT, REFUSE, None),  # x32 numbers on x86_64
            *keyrings,
            (BPF_JEQ_K, arch.socket, None, ALLOW),
            (BPF_LD_W_ABS, OFFSET_ARG0, None, None),
            (BPF_JEQ_K, AF_UNIX, REFUSE, None),
            ALLOW,
            (BPF_RET_K, SECCOMP_RET_ALLOW, None, None),
            REFUSE,
            (BPF_RET_K, SECCOMP_RET_ERRNO | errno.EPERM, None, None),
            NO_KEYS,
            (BPF_RET_K, SECCOMP_RET_ERRNO | errno.ENOSYS, None, None),
        ]
    )


def filter_file(directory: Path | None = None) -> Path | None:
    """A file holding this machine's filter (written once per directory), for `Jail`."""
    code = program()
    if code is None:
        return None
    where = directory or Path(tempfile.gettempdir())
    path = where / f"qshell-seccomp-{os.getuid()}-{len(code)}.bpf"
    try:
        mine = path.is_file() and not path.is_symlink() and path.stat().st_uid == os.getuid()
        if mine and path.read_bytes() == code:
            return path
        where.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=where, prefix=".seccomp-")
        with os.fdopen(fd, "wb") as out:
            out.write(code)
        os.replace(temp, path)
    except OSError:
        return None
    return path
