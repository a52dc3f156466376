"""3. Processes: own pid namespace, host processes out of reach, pids limit."""
import os
import subprocess
import time

from conftest import run


def test_code_runs_in_its_own_pid_namespace():
    res = run("import os; print(os.getpid(), os.getppid(), open('/proc/1/comm').read().strip())")
    assert res["status"] == "ok", res
    pid, ppid, init = res["stdout"].split()
    # saferun's init is pid 1 of the namespace; the code is its child.
    assert (pid, ppid) == ("2", "1")
    assert init == "saferun-init"


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
