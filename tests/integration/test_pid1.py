"""pid 1 is not trusted (issue 15, item 3): the code cannot read, patch or
trace the sandbox's init, and an init that misbehaves is killed with the
rest of the sandbox by the run's deadline and reported."""
import errno
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import SAFERUN, WARM, own_cgroup_dirs, run, run_args
from test_processes import descendants, exe

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


# The code waits for the test's word (SIGUSR1 from the host, once it says
# it is ready) and ends: the test has stopped or held pid 1 by then. It
# ends with os._exit, which skips a warm run's own "done" message (the
# runner's, docs/warm.md), so on both paths pid 1's report is the end.
WAIT_FOR_GO = ("import os, signal\nsignal.signal(signal.SIGUSR1, lambda *a: None)\n"
               "open('/tmp/ready', 'w').close()\nsignal.pause()\nos._exit(0)\n")
WALL_S = 8


def start_run():
    return subprocess.Popen([SAFERUN, *run_args("run", "--json", "--no-check", "--profile", "host",
                                                "--timeout", str(WALL_S), "-c", WAIT_FOR_GO)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def run_init_and_python(p):
    """Host pids of the run's pid 1 (once it has exec'd the init) and the
    python that runs the code, its child. On the warm path the zygote's
    init and the pool's spare sandboxes are below the CLI too: the run's
    python is the one that says it is ready."""
    for _ in range(600):
        below = descendants(p.pid)
        for init in [pid for pid, comm in below if comm == "saferun-init"]:
            if not exe(init).startswith("/memfd:saferun-init"):
                continue
            for py, comm in descendants(init):
                if comm == "python3" and parent(py) == init and \
                        os.path.exists(f"/proc/{py}/root/tmp/ready"):
                    return init, py
        assert p.poll() is None, p.communicate()
        time.sleep(0.05)
    raise AssertionError(f"no sandbox below {p.pid}: {below}")


def finish(p, py):
    """Let the code end, then take the run's result (it must come by itself,
    well before the CLI is killed) and how long the run took from here."""
    t0 = time.monotonic()
    os.kill(py, signal.SIGUSR1)
    try:
        out, err = p.communicate(timeout=WALL_S + 40)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    res = json.loads(out)
    res["_took"] = time.monotonic() - t0
    # the whole group was killed and removed (a cold run's group is named
    # after the run; a warm one's after the sandbox the pool made)
    if not WARM:
        assert not [d for d in own_cgroup_dirs() if os.path.exists(os.path.join(d, res["id"]))]
    return res


def test_a_stopped_pid1_is_killed_at_the_deadline_and_reported():
    # pid 1 never reports the end of the code (here: stopped from the
    # host, as a patched or stuck init would be): at the deadline the
    # code is gone, so it is pid 1's fault, not a timeout of the code.
    p = start_run()
    init, py = run_init_and_python(p)
    os.kill(init, signal.SIGSTOP)
    res = finish(p, py)
    assert res["status"] == "internal_error", res
    assert "pid 1 did not report the end of the code" in res["message"], res
    assert res["_took"] < WALL_S + 20, res


@pytest.mark.host_only(reason="strace is not in the VM guest; the SIGSTOP test covers "
                              "the v2 group kill")
def test_a_pid1_that_reports_but_stays_is_killed_by_the_deadline():
    # strace turns pid 1's exit_group, right after its report, into a
    # no-op and a SIGSTOP (the report arrives, pid 1 does not exit): the
    # run still ends by the deadline, the whole group killed, and says pid
    # 1 misbehaved. (A delay_exit injection would do too, but strace then
    # holds the killed process in its exit stop: a tracer's artefact.)
    p = start_run()
    init, py = run_init_and_python(p)
    tracer = subprocess.Popen(["strace", "-qq", "-o", "/dev/null", "-p", str(init),
                               "-e", "trace=exit_group",
                               "-e", "inject=exit_group:retval=0:signal=SIGSTOP"],
                              stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        # strace has attached when pid 1's status says it is traced
        for _ in range(400):
            with open(f"/proc/{init}/status") as f:
                if "TracerPid:\t0\n" not in f.read():
                    break
            time.sleep(0.05)
        res = finish(p, py)
    finally:
        tracer.kill()
        tracer.communicate()
    assert res["status"] == "internal_error", res
    assert "pid 1 reported the end of the code but did not exit" in res["message"], res
    assert res["_took"] < WALL_S + 20, res
