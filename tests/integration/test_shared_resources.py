"""What a run shares with the host and with other runs (docs/security.md,
"What a run shares"): while one sandbox holds each kernel resource at its
limit, host root (this test process) and a second sandbox can still get it.

The holder takes everything it can, says how far it got on stdout, renames
itself sr-holder and waits; the checks run while it waits; then it is
killed. The same checks run on the host and in the second sandbox. Cold and
warm (tests/CMakeLists.txt runs this file again with SAFERUN_TEST_PATH=warm,
where the second sandbox is another `saferun run --warm`, so another zygote:
the sandboxes of one pool share its counts, docs/warm.md).

The kernel (4.11+ for inotify, 5.14+ for signals and message queues)
charges these per-user counts up the user namespace tree to the namespace's
owner: they reach host root unless each sandbox's namespace has an owner of
its own.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import SAFERUN, WARM, run, run_args, saferun_env

POLICY = os.path.join(os.path.dirname(__file__), "policies", "open_files_1024.json")

PRELUDE = r"""
import ctypes, errno, fcntl, json, os, select, signal, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
class MqAttr(ctypes.Structure):
    _fields_ = [('flags', ctypes.c_long), ('maxmsg', ctypes.c_long),
                ('msgsize', ctypes.c_long), ('curmsgs', ctypes.c_long),
                ('pad', ctypes.c_long * 4)]
MQ_ATTR = MqAttr(0, 10, 8192, 0)
def err(r):
    return errno.errorcode.get(ctypes.get_errno(), '?') if r < 0 else None
def io_setup(n):
    ctx = ctypes.c_ulong(0)
    return err(libc.syscall(206, n, ctypes.byref(ctx)))
def mq_open(name):
    r = libc.mq_open(name.encode(), os.O_CREAT | os.O_RDWR, 0o600, ctypes.byref(MQ_ATTR))
    return r, err(r)
"""

HOLD = PRELUDE + r"""
got = {}
ino = []
while len(ino) < 1000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    ino.append(fd)
got['inotify_instances'] = [len(ino), err(-1)]
paths = [d for d, _, _ in os.walk('/usr')][:2000]
watches, e = 0, None
for p in paths:
    for fd in ino:
        if libc.inotify_add_watch(fd, p.encode(), 0x100) < 0:
            e = err(-1)
            break
        watches += 1
    if e:
        break
got['inotify_watches'] = [watches, e]
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
n, e = 0, None
while n < 200000:
    try:
        # tgkill (SI_TKILL): a queued signal past the limit is EAGAIN,
        # where kill's would be merged into the pending bit.
        signal.pthread_kill(threading.get_ident(), signal.SIGRTMIN)
    except OSError as x:
        e = errno.errorcode[x.errno]
        break
    n += 1
got['pending_signals'] = [n, e]
n, e = 0, None
while n < 100:
    r, e = mq_open(f'/sr-hold-{n}')
    if r < 0:
        break
    n += 1
got['message_queues'] = [n, e]
pipes, e = [], None
while len(pipes) < 100:
    r, w = os.pipe()
    pipes.append((r, w))
    try:
        fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
    except OSError as x:
        e = errno.errorcode[x.errno]
        break
got['pipe_pages'] = [len(pipes), e]
ctxs, e = 0, None
size = 65536
while size and ctxs < 200:
    e = io_setup(size)
    if e is None:
        ctxs += 1
    else:
        size //= 2
got['aio'] = [ctxs, e]
eps = [select.epoll() for _ in range(4)]
n = 0
for ep in eps:
    for fd in ino:
        ep.register(fd, select.EPOLLIN)
        n += 1
got['epoll_watches'] = [n, None]
stop = threading.Event()
threads, e = [], None
while len(threads) < 1000:
    t = threading.Thread(target=stop.wait)
    try:
        t.start()
    except RuntimeError as x:
        e = 'EAGAIN'
        break
    threads.append(t)
got['threads'] = [len(threads), e]
n, e = 0, None
while n < 30000:
    try:
        open(f'/tmp/{n}', 'w').close()
    except OSError as x:
        e = errno.errorcode[x.errno]
        break
    n += 1
got['tmpfs_inodes'] = [n, e]
files, e = [], None
while len(files) < 5000:
    try:
        files.append(os.open('/dev/null', os.O_RDONLY))
    except OSError as x:
        e = errno.errorcode[x.errno]
        break
got['open_files'] = [len(files), e]
os.close(files.pop())  # for the print below
print(json.dumps(got), flush=True)
libc.prctl(15, b'sr-holder', 0, 0, 0)  # PR_SET_NAME: the test finds us by it
import time
time.sleep(300)
"""

# One probe per resource, on the host and in a sandbox: None is success.
CHECK = PRELUDE + r"""
import tempfile
out = {}
fd = libc.inotify_init1(0)
out['inotify_instances'] = err(fd)
if fd >= 0:
    out['inotify_watches'] = err(libc.inotify_add_watch(fd, b'/usr', 0x100))
    os.close(fd)
else:
    out['inotify_watches'] = 'no instance'
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN + 1])
try:
    signal.pthread_kill(threading.get_ident(), signal.SIGRTMIN + 1)
    signal.sigtimedwait([signal.SIGRTMIN + 1], 1)
    out['pending_signals'] = None
except OSError as x:
    out['pending_signals'] = errno.errorcode[x.errno]
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGRTMIN + 1])
name = f'/sr-check-{os.getpid()}'
r, out['message_queues'] = mq_open(name)
if r >= 0:
    os.close(r)
    libc.mq_unlink(name.encode())
r, w = os.pipe()
try:
    fcntl.fcntl(w, 1031, 1 << 20)
    out['pipe_pages'] = None if fcntl.fcntl(w, 1032) == 1 << 20 else 'small'
except OSError as x:
    out['pipe_pages'] = errno.errorcode[x.errno]
ep = select.epoll()
ep.register(r, select.EPOLLIN)
out['epoll_watches'] = None
os.close(r); os.close(w); ep.close()
out['aio'] = io_setup(1)
t = threading.Thread(target=lambda: None)
t.start(); t.join()
out['threads'] = None
with tempfile.NamedTemporaryFile(dir='/tmp') as f:
    out['tmpfs_inodes'] = None
os.close(os.open('/dev/null', os.O_RDONLY))
out['open_files'] = None
print(json.dumps(out))
"""

# What the holder must have reached: the limit, and the errno it got there.
HELD = {
    "inotify_instances": "EMFILE",
    "inotify_watches": "ENOSPC",
    "pending_signals": "EAGAIN",
    "message_queues": "EMFILE",
    "pipe_pages": "EPERM",
    "aio": "ENOSYS",
    "threads": "EAGAIN",
    "tmpfs_inodes": "ENOSPC",
    "open_files": "EMFILE",
}


def descendants(root):
    """Pids under root (any depth), with their names."""
    kids, names = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d))
        names[int(d)] = name
    out, todo = {}, [root]
    while todo:
        for k in kids.get(todo.pop(), []):
            out[k] = names[k]
            todo.append(k)
    return out


@pytest.fixture(scope="module")
def held():
    """The holder running, at its limits: (its result, host checks,
    second sandbox's checks)."""
    args = run_args("run", "--json", "--no-check", "--profile", "host", "--policy", POLICY,
                    "--timeout", "300", "-c", HOLD)
    holder = subprocess.Popen([SAFERUN, *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        pid, deadline = None, time.monotonic() + 180
        while pid is None and time.monotonic() < deadline and holder.poll() is None:
            pid = next((p for p, n in descendants(holder.pid).items() if n == "sr-holder"),
                       None)
            time.sleep(0.2)
        assert pid, f"the holder never got to hold: {holder.communicate(timeout=60)}"
        host = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)
        second = run(CHECK, "--policy", POLICY)
        os.kill(pid, signal.SIGKILL)
        out, errs = holder.communicate(timeout=120)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    res = json.loads(out)
    assert res["status"] in ("killed", "pids"), res  # SIGKILL; its threads hit pids.max
    got = json.loads(res["stdout"])
    assert host.returncode == 0, host.stderr
    assert second["status"] == "ok", second
    return got, json.loads(host.stdout), json.loads(second["stdout"])


@pytest.mark.parametrize("resource", sorted(HELD))
def test_held_by_one_sandbox_still_there_for_host_root_and_another(held, resource):
    got, host, second = held
    # The holder really got to its limit (or was refused outright: AIO).
    assert got[resource][1] == HELD[resource], got
    if resource == "aio":
        # Refused to every sandbox (ENOSYS); the host keeps fs.aio-max-nr.
        assert host["aio"] is None and second["aio"] == "ENOSYS", (host, second)
        return
    assert host[resource] is None, host
    assert second[resource] is None, second


def test_epoll_watches_are_bounded_by_open_files(held):
    """fs.epoll.max_user_watches is far past what open_files lets one run
    register (each watch is an (epoll, fd) pair of its own fds)."""
    got, host, second = held
    limit = int(open("/proc/sys/fs/epoll/max_user_watches").read())
    assert 0 < got["epoll_watches"][0] < limit
    assert host["epoll_watches"] is None and second["epoll_watches"] is None
