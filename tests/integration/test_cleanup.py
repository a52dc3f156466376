"""11. Cleanup: many mixed runs leave no group, mount, process, temp dir or fd."""
import json
import os
import subprocess

from conftest import VM_TIER, leftover_groups, sandbox_processes
from sandbox_host import host_leftovers, leftovers_since

RUN_MANY = os.environ.get("SAFERUN_RUN_MANY")
# 200 here; 100 in the VM tier, where each run is ~1 s of emulated python
# (every way a run ends still comes 20 times over on cgroup v2).
RUNS = 100 if VM_TIER else 200


def test_mixed_runs_leave_nothing_behind():
    before = host_leftovers()
    p = subprocess.run([RUN_MANY, str(RUNS), "host"], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    each = RUNS // 5
    assert out["statuses"] == {"ok": each, "error": each, "timeout": each, "oom": each,
                               "pids": each, "output_limit": 0, "killed": 0, "rejected": 0,
                               "internal_error": 0}, (out, p.stderr[-4000:])
    assert out["fds_after"] == out["fds_before"], out
    assert out["children"] == 0
    assert leftover_groups() == []
    assert sandbox_processes() == []
    assert leftovers_since(before) == {}
