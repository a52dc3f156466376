"""9. Seccomp: dangerous system calls are refused with a documented errno.

Refused calls return EPERM (docs/security.md); clone3 returns ENOSYS so libc
falls back to clone and threads keep working; unknown syscalls are ENOSYS.
Several of these would succeed without the filter (unshare of a user
namespace, keyctl, ptrace(TRACEME), io_uring_setup, clone3, TIOCSTI on a
non-tty gives ENOTTY), so the test fails if the filter is missing.
"""
import pytest

from conftest import run

PRELUDE = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    args = [ctypes.c_ulong(a) for a in args]
    r = libc.syscall(ctypes.c_long(nr), *args)
    return errno.errorcode.get(ctypes.get_errno(), 'OK') if r < 0 else 'OK'
"""

# x86_64 numbers, with arguments that would get past argument checks.
CASES = {
    "mount": "sc(165, 0, 0, 0, 0, 0)",
    "umount2": "sc(166, 0, 0)",
    "unshare": "sc(272, 0x10000000)",          # CLONE_NEWUSER
    "setns": "sc(308, 0, 0)",
    "ptrace": "sc(101, 0, 0, 0, 0)",           # PTRACE_TRACEME
    "keyctl": "sc(250, 0, 0xfffffffd, 0)",     # KEYCTL_GET_KEYRING_ID
    "add_key": "sc(248, 0, 0, 0, 0, 0)",
    "bpf": "sc(321, 0, 0, 0)",
    "perf_event_open": "sc(298, 0, 0, 0xffffffffffffffff, 0xffffffffffffffff, 0)",
    "userfaultfd": "sc(323, 0)",
    "io_uring_setup": "sc(425, 1, ctypes.addressof(ctypes.create_string_buffer(120)))",
    "kexec_load": "sc(246, 0, 0, 0, 0)",
    "init_module": "sc(175, 0, 0, 0)",
    "open_by_handle_at": "sc(304, 0, 0, 0)",
    "ioctl_TIOCSTI": "sc(16, 0, 0x5412, ctypes.addressof(ctypes.c_char(b'x')))",
    "ioctl_TIOCSTI_high_bits": "sc(16, 0, 0x5412 | (1 << 32), ctypes.addressof(ctypes.c_char(b'x')))",
    "clone_newuser": "sc(56, 0x10000000 | 17, 0, 0, 0, 0)",
    "clone_newns": "sc(56, 0x00020000 | 17, 0, 0, 0, 0)",
    "clone_newnet": "sc(56, 0x40000000 | 17, 0, 0, 0, 0)",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dangerous_syscall_is_refused_with_eperm(name):
    res = run(PRELUDE + f"print(({CASES[name]}))\n")
    assert res["status"] == "ok", res
    assert res["stdout"].strip() == "EPERM", (name, res)


def test_clone3_is_enosys_and_threads_still_work():
    code = PRELUDE + """
print(sc(435, ctypes.addressof(ctypes.create_string_buffer(88)), 88))
import threading
out = []
ts = [threading.Thread(target=out.append, args=(i,)) for i in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print(sorted(out))
"""
    res = run(code)
    assert res["status"] == "ok", res
    assert res["stdout"].splitlines() == ["ENOSYS", "[0, 1, 2, 3]"]


def test_unknown_syscall_is_enosys():
    res = run(PRELUDE + "print(sc(1000))\n")
    assert res["stdout"].strip() == "ENOSYS", res


def test_plain_fork_and_subprocess_work():
    code = "import subprocess\nprint(subprocess.run(['/usr/bin/python3', '-c', 'print(42)'],"\
           " capture_output=True, text=True).stdout.strip())\n"
    res = run(code)
    assert res["status"] == "ok", res
    assert res["stdout"].strip() == "42"


def test_aio_is_enosys():
    """AIO contexts come out of fs.aio-max-nr, one count for the whole host
    (test_shared_resources.py shows the host keeps it)."""
    ctx = "ctypes.addressof(ctypes.c_ulong(0))"
    res = run(PRELUDE + f"print(sc(206, 1, {ctx}), sc(207, 0), sc(208, 0, 0, 0), sc(209, 0, 0, 0), "
              "sc(210, 0, 0, 0, 0), sc(333, 0, 0, 0, 0, 0, 0))\n")
    assert res["status"] == "ok", res
    assert res["stdout"].split() == ["ENOSYS"] * 6, res

