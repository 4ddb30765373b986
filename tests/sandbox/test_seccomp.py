"""The seccomp filter's answers on every architecture it knows, read by a classic-BPF
interpreter of the three instructions it uses (the jail tests run it in the kernel on this
machine only): keyring calls fail with ENOSYS, a Unix socket with EPERM, every other call
runs, and another ABI's calls (x32, 32-bit compat) are refused. The system call numbers
are the kernel's tables', written out here rather than taken from the module."""

from __future__ import annotations

import errno
import struct

import pytest

from qshell.sandbox.seccomp import program

ALLOW, ERRNO = 0x7FFF0000, 0x00050000
AF_UNIX, AF_INET = 1, 2
# machine: (AUDIT_ARCH, read, socket, add_key, request_key, keyctl)
TABLES = {
    "x86_64": (0xC000003E, 0, 41, 248, 249, 250),
    "aarch64": (0xC00000B7, 63, 198, 217, 218, 219),
}


def answer(code: bytes, arch: int, nr: int, arg0: int = 0) -> int:
    """What the filter returns for a call: ld [k] (0 nr, 4 arch, 16 arg0), jeq, jge, ret."""
    ops = [struct.unpack("=HBBI", code[i : i + 8]) for i in range(0, len(code), 8)]
    data = {0: nr, 4: arch, 16: arg0}
    pc, acc = 0, 0
    while True:
        op, jt, jf, k = ops[pc]
        if op == 0x20:
            acc, pc = data[k], pc + 1
        elif op in (0x15, 0x35):
            taken = acc == k if op == 0x15 else acc >= k
            pc += 1 + (jt if taken else jf)
        else:
            assert op == 0x06, hex(op)
            return k


@pytest.mark.parametrize("machine", list(TABLES))
def test_the_filter_refuses_keyrings_and_unix_sockets_and_nothing_else(machine):
    code = program(machine)
    assert code is not None
    arch, read, socket, *keyrings = TABLES[machine]
    for nr in keyrings:
        assert answer(code, arch, nr) == ERRNO | errno.ENOSYS
    assert answer(code, arch, socket, AF_UNIX) == ERRNO | errno.EPERM
    assert answer(code, arch, socket, AF_INET) == ALLOW
    assert answer(code, arch, read) == ALLOW
    assert answer(code, 0x40000003, read) == ERRNO | errno.EPERM  # i386 on the same kernel
    if machine == "x86_64":
        assert answer(code, arch, 0x40000000 | read) == ERRNO | errno.EPERM  # x32


def test_an_unknown_architecture_gets_no_filter():
    assert program("riscv64") is None
