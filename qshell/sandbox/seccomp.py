"""A seccomp filter that keeps a jailed command off Unix sockets.

The jail's file system is read-only, but connecting to a Unix socket writes nothing: a
command that could reach `/var/run/docker.sock`, an ssh agent or a desktop bus would be
out of the sandbox in one step. The network namespace already cuts abstract sockets and
every IP address; this filter makes `socket(AF_UNIX, …)` fail with EPERM (`socketpair`,
which only connects a process to itself, stays allowed), and refuses every system call
of another architecture's ABI (x32, 32-bit compat), whose numbers the filter does not
check. It is a classic BPF program, built here as bytes (struct sock_filter: u16 code,
u8 jt, u8 jf, u32 k) for bubblewrap's `--seccomp FD`. Pure; no I/O but `filter_file`.
"""

from __future__ import annotations

import errno
import os
import platform
import struct
import tempfile
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
# machine -> (AUDIT_ARCH_*, __NR_socket)
ARCHES: dict[str, tuple[int, int]] = {
    "x86_64": (0xC000003E, 41),
    "aarch64": (0xC00000B7, 198),
}


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter for this machine's architecture; None for one it does not know."""
    known = ARCHES.get(machine or platform.machine())
    if known is None:
        return None
    arch, socket_nr = known
    deny = SECCOMP_RET_ERRNO | errno.EPERM
    return b"".join(
        [
            _op(BPF_LD_W_ABS, OFFSET_ARCH),
            _op(BPF_JEQ_K, arch, jt=1),  # another ABI: refuse everything
            _op(BPF_RET_K, deny),
            _op(BPF_LD_W_ABS, OFFSET_NR),
            _op(BPF_JGE_K, X32_SYSCALL_BIT, jf=1),  # x32 numbers on x86_64
            _op(BPF_RET_K, deny),
            _op(BPF_JEQ_K, socket_nr, jf=3),
            _op(BPF_LD_W_ABS, OFFSET_ARG0),
            _op(BPF_JEQ_K, AF_UNIX, jf=1),
            _op(BPF_RET_K, deny),
            _op(BPF_RET_K, SECCOMP_RET_ALLOW),
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
