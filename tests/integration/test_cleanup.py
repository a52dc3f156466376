"""11. Cleanup: many mixed runs leave no group, mount, process, temp dir or fd."""
import json
import os
import subprocess

from conftest import leftover_groups, sandbox_processes
from sandbox_host import host_leftovers

RUN_MANY = os.environ.get("SAFERUN_RUN_MANY")


def test_200_mixed_runs_leave_nothing_behind():
    before = host_leftovers()
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
    assert host_leftovers() == before
