"""3. Processes: own pid namespace, host processes out of reach, pids limit."""
import os
import subprocess
import time

from conftest import SAFERUN, WARM, run, run_args


def test_code_runs_in_its_own_pid_namespace():
    res = run("import os; print(os.getpid(), os.getppid(), open('/proc/1/comm').read().strip())")
    assert res["status"] == "ok", res
    pid, ppid, init = res["stdout"].split()
    # saferun's init is pid 1 of the namespace; the code is its child.
    assert (pid, ppid) == ("2", "1")
    assert init == "saferun-init"


def descendants(pid):
    """Host pids below pid, with their comm."""
    kids = {}
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append((int(d), comm))
    out, todo = [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child[0])
    return out


def exe(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def test_init_holds_nothing_of_the_supervisor():
    # Pid 1 of the sandbox keeps its report pipe and nothing else: no copy
    # of the supervisor's stdin (here a host file), no other fd, no copy of
    # the supervisor's memory.
    with open(__file__, "rb") as stdin:
        p = subprocess.Popen([SAFERUN, *run_args("run", "--no-check", "--profile", "host",
                                                 "-c", "import time; time.sleep(2)")],
                             stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # The CLI prints the output at the end: wait for the sandbox's
        # python instead (pid 1 has forked it by then).
        # On the warm path the zygote is a sandbox too, and the run's
        # sandbox is below it: both inits are checked.
        for _ in range(200):
            below = descendants(p.pid)
            inits = [pid for pid, comm in below if comm == "saferun-init"]
            # (and it has exec'd its program: before that it is the fork
            # that started python, with the fds python takes)
            if len(inits) == (2 if WARM else 1) and any(
                    comm == "python3" for pid, comm in descendants(inits[-1])) and all(
                    exe(i).startswith("/memfd:saferun-init") for i in inits):
                break
            time.sleep(0.05)
        assert len(inits) == (2 if WARM else 1), (below, p.poll(), p.poll() is not None
                                                  and p.communicate())
        for init in inits:
            fds = {fd: os.readlink(f"/proc/{init}/fd/{fd}") for fd in os.listdir(f"/proc/{init}/fd")}
            assert len(fds) == 1 and list(fds.values())[0].startswith("pipe:"), fds
            # and no copy of its memory: pid 1 is the small static init
            # (runtime/zygote/init.c), exec'd from a sealed memfd
            assert os.readlink(f"/proc/{init}/exe").startswith("/memfd:saferun-init")
            with open(f"/proc/{init}/status") as f:
                rss = int(f.read().split("VmRSS:")[1].split()[0])
            assert rss < 2048, rss
    finally:
        # A killed CLI would leave its groups: the run ends by itself.
        p.communicate(timeout=60)
    assert p.returncode == 0


def test_host_processes_are_invisible_and_unkillable():
    victim = subprocess.Popen(["sleep", "60"])
    try:
        code = f"""
import errno, os
try:
    os.kill({victim.pid}, 9)
    print('killed')
except OSError as e:
    print(errno.errorcode[e.errno])
print(os.path.exists('/proc/{victim.pid}'))
"""
        res = run(code)
        assert res["status"] == "ok", res
        assert res["stdout"].split() == ["ESRCH", "False"]
        assert victim.poll() is None, "the host process was killed"
    finally:
        victim.kill()
        victim.wait()


def test_fork_bomb_hits_the_pids_limit_and_host_stays_responsive():
    code = "import os\nwhile True:\n    os.fork()\n"
    start = time.monotonic()
    res = run(code, "--pids", "32", "--timeout", "20")
    assert res["status"] == "pids", res
    assert "pids" in res["limits_hit"]
    assert res["limits"]["pids"] == 32
    assert time.monotonic() - start < 15
    # The host can still start processes.
    assert subprocess.run(["true"], timeout=5).returncode == 0


def test_threads_count_against_the_pids_limit():
    code = """
import threading, time
started = 0
try:
    for _ in range(100):
        threading.Thread(target=time.sleep, args=(1,), daemon=True).start()
        started += 1
except RuntimeError as e:
    print('refused after', started)
"""
    res = run(code, "--pids", "16")
    assert res["status"] == "ok", res
    # 16 tasks: init, the main thread and 14 more threads.
    assert res["stdout"].strip() == "refused after 14"
