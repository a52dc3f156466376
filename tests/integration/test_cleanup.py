"""11. Cleanup: many mixed runs leave no group, mount, process, temp dir or fd."""
import json
import os
import subprocess

from conftest import HOST_ID_BASE, leftover_groups, sandbox_processes

RUN_MANY = os.environ.get("SAFERUN_RUN_MANY")


def snapshot():
    """What a run could leave on the host. /tmp and /run are shared with
    other programs on the machine, so only entries a sandbox could have
    made count there: saferun's names or the sandbox uid range."""
    def ours(d):
        found = []
        for e in os.listdir(d) if os.path.isdir(d) else []:
            try:
                st = os.lstat(os.path.join(d, e))
            except FileNotFoundError:
                continue
            if e.startswith("sr-") or st.st_uid >= HOST_ID_BASE:
                found.append(e)
        return sorted(found)
    return {
        "mounts": open("/proc/self/mountinfo").read(),
        "tmp": ours("/tmp"),
        "run": ours("/run"),
        "dev_shm": ours("/dev/shm"),
    }


def test_200_mixed_runs_leave_nothing_behind():
    before = snapshot()
    p = subprocess.run([RUN_MANY, "200", "host"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["statuses"] == {"ok": 40, "error": 40, "timeout": 40, "oom": 40, "pids": 40,
                               "output_limit": 0, "killed": 0, "rejected": 0,
                               "internal_error": 0}, out
    assert out["fds_after"] == out["fds_before"], out
    assert out["children"] == 0
    assert leftover_groups() == []
    assert sandbox_processes() == []
    assert snapshot() == before
