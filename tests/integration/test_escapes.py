"""Regression tests for the container-escape classes of 2024-2026 (issue 15):
a supervisor's fd leaked into the container (runc CVE-2024-21626), masked
paths that are not what they claim and /proc written through a mount
(CVE-2025-31133, -52565, -52881), nested user namespaces and netfilter's
netlink reached from one (CVE-2024-1086). One sandbox probes them all and
reports; each test asserts one class. Runs cold, and warm again
(tests/CMakeLists.txt WARM_CONTAINMENT_TESTS)."""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import WARM, run, run_args

# runtime/lib/child/mounts_apply.c, sr_proc_masked
MASKED = ["kcore", "keys", "timer_list", "sched_debug", "sysrq-trigger", "kallsyms", "latency_stats",
          "acpi", "scsi", "asound", "firmware", "kpagecount", "kpageflags", "kpagecgroup",
          "vmallocinfo", "config.gz"]

FDS = r'''
import os
def fds():
    # The listing's own fd is closed (its link gone) when the names are read.
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            found[name] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass
    return found
'''

# What the code sees, as JSON. Plain Python and ctypes (run() has the
# checker off: these tests are about the kernel layers).
PROBE = FDS + r'''
import ctypes, errno, json, socket, stat
out = {"fds": fds(), "cwd": os.readlink("/proc/self/cwd"), "root": os.readlink("/proc/self/root")}
libc = ctypes.CDLL(None, use_errno=True)
def err(r):
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
NEWUSER = 0x10000000
out["unshare"] = err(libc.unshare(NEWUSER))
r = libc.syscall(56, NEWUSER | 17, 0, 0, 0, 0)  # clone(CLONE_NEWUSER | SIGCHLD)
if r == 0:
    os._exit(0)
out["clone"] = err(r)
class CloneArgs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("flags", "pidfd", "child_tid", "parent_tid",
                                              "exit_signal", "stack", "stack_size", "tls")]
args = CloneArgs(flags=NEWUSER, exit_signal=17)
r = libc.syscall(435, ctypes.byref(args), ctypes.sizeof(args))  # clone3
if r == 0:
    os._exit(0)
out["clone3"] = err(r)
try:
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12).close()  # NETLINK_NETFILTER
    out["netfilter"] = "ok"
except OSError as e:
    out["netfilter"] = errno.errorcode[e.errno]
def what(p):
    try:
        st = os.stat(p)
    except OSError as e:
        return errno.errorcode[e.errno]
    if stat.S_ISDIR(st.st_mode):
        return ["dir", sorted(os.listdir(p))]
    kind = "chr" if stat.S_ISCHR(st.st_mode) else "file"
    with open(p, "rb") as f:
        return [kind, os.major(st.st_rdev), os.minor(st.st_rdev), len(f.read(64))]
out["masked"] = {name: what("/proc/" + name) for name in MASKED}
out["dev"] = sorted(os.listdir("/dev"))
out["sys"] = os.path.lexists("/sys")
# Every file of the kernel's procfs (not a process's own dir) opened for
# writing: what opens, and every errno seen.
opened, errors, tried = [], {}, 0
def try_write(p):
    global tried
    tried += 1
    try:
        fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as e:
        errors.setdefault(errno.errorcode[e.errno], p)  # an example of each
        return
    st = os.fstat(fd)
    os.close(fd)
    if not (stat.S_ISCHR(st.st_mode) and (os.major(st.st_rdev), os.minor(st.st_rdev)) == (1, 3)):
        opened.append(p)
for top in sorted(os.listdir("/proc")):
    if top.isdigit() or top in ("self", "thread-self"):
        continue
    p = "/proc/" + top
    if os.path.islink(p):
        continue  # into self/ (mounts, net): this process's own
    if not os.path.isdir(p):
        try_write(p)
        continue
    for dirpath, _, files in os.walk(p):
        for f in files:
            if not os.path.islink(os.path.join(dirpath, f)):
                try_write(os.path.join(dirpath, f))
out["proc"] = {"opened": opened, "errors": errors, "tried": tried}
# the mounts over /proc's kernel-wide dirs, and whether each is read-only
with open("/proc/self/mountinfo") as f:
    out["proc_mounts"] = {l.split()[4]: "ro" in l.split()[5].split(",") for l in f
                          if l.split()[4].startswith("/proc/")}
print(json.dumps(out))
'''.replace("MASKED", repr(MASKED))


@pytest.fixture(scope="module")
def probed():
    res = run(PROBE)
    assert res["status"] == "ok", res
    return json.loads(res["stdout"])


def expected_fds(fds):
    # 0 stdin (/dev/null, or the stdin memfd), 1 and 2 the output pipes; on
    # the warm path 255 is the runner's socket for the status (runner.py).
    kinds = {"0": ("/dev/null", "/memfd:saferun-stdin (deleted)"), "1": ("pipe:",), "2": ("pipe:",)}
    if WARM:
        kinds["255"] = ("socket:",)
    assert sorted(fds, key=int) == sorted(kinds, key=int), fds
    for fd, link in fds.items():
        assert link.startswith(kinds[fd]), (fd, link)


def test_no_fd_of_the_supervisor_reaches_the_code(probed):
    expected_fds(probed["fds"])
    assert probed["cwd"] == "/work" and probed["root"] == "/"


def test_no_fd_reaches_the_code_with_the_checker_and_stdin(tmp_path):
    # The checker works while the sandbox is built (its memfd and pipe
    # must stay on the supervisor's side), and stdin is a memfd.
    stdin = tmp_path / "in.txt"
    stdin.write_text("x")
    code = FDS + "import json\nprint(json.dumps(fds()))\n"
    p = subprocess.run([os.environ["SAFERUN"], *run_args("run", "--json", "--profile", "host",
                                                         "--allow", "SR401", "--stdin", str(stdin),
                                                         "-c", code)],
                       capture_output=True, timeout=120)
    res = json.loads(p.stdout)
    assert res["status"] == "ok", res
    fds = json.loads(res["stdout"])
    assert fds["0"] == "/memfd:saferun-stdin (deleted)", fds
    expected_fds(fds)


@pytest.mark.skipif(WARM, reason="a kernel is its own path: the cold pass covers it")
def test_no_fd_reaches_a_kernels_runs():
    driver = os.environ.get("SAFERUN_KERNEL_DRIVER") or os.path.join(
        os.path.dirname(__file__), "..", "..", "build", "tests", "kernel_driver")
    base = tempfile.mkdtemp(prefix="saferun-ws-", dir=tempfile.gettempdir())
    os.chmod(base, 0o711)
    cell = "#!nocheck\n" + FDS + "import json\nprint(json.dumps(fds()))\n"
    try:
        p = subprocess.run([driver, "host", base, cell, cell], capture_output=True, timeout=120)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert p.returncode == 0, p.stderr.decode()
    runs = [json.loads(line) for line in p.stdout.decode().splitlines()[1:-1]]
    for res in runs:  # the second run sees nothing the first left (its code's memfd)
        assert res["status"] == "ok", res
        fds = json.loads(res["stdout"])
        # 3 is the kernel's control socket to the supervisor (runner.py, kernel mode)
        assert sorted(fds, key=int) == ["0", "1", "2", "3"], fds
        assert fds["0"] == "/dev/null" and fds["3"].startswith("socket:"), fds
        assert fds["1"].startswith("pipe:") and fds["2"].startswith("pipe:"), fds


def test_nested_user_namespaces_are_refused(probed):
    # seccomp: unshare and clone with namespace flags EPERM; clone3 ENOSYS
    # (its flags are behind a pointer seccomp cannot read: libc falls back)
    assert (probed["unshare"], probed["clone"], probed["clone3"]) == ("EPERM", "EPERM", "ENOSYS")


def test_netlink_netfilter_is_refused(probed):
    assert probed["netfilter"] == "EAFNOSUPPORT"


def test_masked_paths_are_what_they_claim(probed):
    for name, seen in probed["masked"].items():
        if not os.path.exists("/proc/" + name):
            assert seen == "ENOENT", (name, seen)  # this kernel has none
        elif os.path.isdir("/proc/" + name):
            assert seen == ["dir", []], (name, seen)  # an empty read-only tmpfs
        else:
            assert seen == ["chr", 1, 3, 0], (name, seen)  # the sandbox's /dev/null, reads empty


def test_no_console_and_no_sysfs(probed):
    # /dev/console (CVE-2025-52565) and /sys are not there to be written
    assert probed["dev"] == ["fd", "full", "null", "random", "shm", "stderr", "stdin", "stdout",
                             "urandom", "zero"], probed["dev"]
    assert probed["sys"] is False


def test_nothing_of_the_hosts_procfs_opens_for_writing(probed):
    proc = probed["proc"]
    assert proc["tried"] > 200, proc
    assert proc["opened"] == [], proc
    # refused by the file's mode (EACCES: the code is uid 1000, not the
    # owner) or, for those open to all (pressure/*), the read-only mount
    assert set(proc["errors"]) <= {"EROFS", "EACCES"}, proc
    # and the kernel-wide dirs are read-only mounts whatever their modes
    mounts = probed["proc_mounts"]
    for d in ("sys", "irq", "bus", "fs", "pressure"):
        if os.path.isdir("/proc/" + d):
            assert mounts.get("/proc/" + d) is True, (d, mounts)
