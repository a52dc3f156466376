"""pid 1 is not trusted (issue 15, item 3): the code cannot read, patch or
trace the sandbox's init, and an init that misbehaves is killed with the
rest of the sandbox by the run's deadline and reported."""
import errno
import os

from conftest import run

POLICIES = os.path.join(os.path.dirname(__file__), "policies")

PROBE = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
for path, mode in (("/proc/1/mem", "r+b"), ("/proc/1/mem", "rb"), ("/proc/1/environ", "rb")):
    try:
        open(path, mode).close()
        print(path, mode, "opened")
    except OSError as e:
        print(path, mode, e.errno)
print("ptrace", libc.ptrace(16, 1, 0, 0), ctypes.get_errno())  # PTRACE_ATTACH
"""


def probe(*args):
    res = run(PROBE, *args)
    assert res["status"] == "ok", res
    return dict((" ".join(l.split()[:-1]), int(l.split()[-1]) if l.split()[-1] != "opened"
                 else "opened") for l in res["stdout"].splitlines())


def test_pid1_memory_cannot_be_opened():
    # The init is exec'd from an execute-only memfd, so it is non-dumpable
    # from its first instruction: its /proc files belong to host root and
    # the code's uid (the init's own) gets EACCES, not a way to rewrite it.
    got = probe()
    assert got["/proc/1/mem r+b"] == errno.EACCES, got
    assert got["/proc/1/mem rb"] == errno.EACCES, got
    assert got["/proc/1/environ rb"] == errno.EACCES, got


def test_pid1_cannot_be_traced_even_where_seccomp_allows_ptrace():
    # The default filter refuses ptrace; here it is allowed, so what
    # refuses PTRACE_ATTACH is the kernel's check of a non-dumpable target.
    got = probe("--policy", os.path.join(POLICIES, "ptrace-allowed.json"))
    assert got["ptrace -1"] == errno.EPERM, got
    assert got["/proc/1/mem r+b"] == errno.EACCES, got
