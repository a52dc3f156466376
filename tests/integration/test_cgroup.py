"""cgroup paths: both ways into the group, group OOM, swap, delegation.

The same file runs on the host (v1/hybrid here) and in the VM tier (v2);
tests that only mean something on one path say so and skip on the other.
"""
import json
import os
import subprocess

import pytest

from conftest import SAFERUN, cgroup_mode, leftover_groups, run, sandbox_processes, swap_total

BALLOON = "x = []\nwhile True:\n    x.append(bytearray(16 << 20))\n"


def test_sandbox_sees_its_own_group_as_root():
    res = run("print(open('/proc/self/cgroup').read())")
    assert res["status"] == "ok", res
    paths = {line.split(":", 2)[2] for line in res["stdout"].split()}
    assert paths == {"/"}, res["stdout"]


@pytest.mark.parametrize("attach", ["default", "procs"])
def test_both_ways_into_the_group_enforce_limits(attach):
    """default: CLONE_INTO_CGROUP on v2, the child's own move on v1;
    procs: the supervisor writes cgroup.procs (the fallback)."""
    env = {"SAFERUN_CGROUP_ATTACH": attach} if attach == "procs" else None
    oom = run(BALLOON, "--memory", "64M", env=env)
    assert oom["status"] == "oom", oom
    bomb = run("import os\nwhile True:\n    os.fork()\n", "--pids", "16", env=env)
    assert bomb["status"] == "pids", bomb
    ok = run("print('fine')", env=env)
    assert ok["status"] == "ok" and ok["stdout"] == "fine\n", ok
    assert leftover_groups() == []
    assert sandbox_processes() == []


def test_oom_kills_the_whole_group():
    """memory.oom.group: a helper process that did not allocate dies too."""
    if cgroup_mode() != "v2":
        pytest.skip("v1 has no memory.oom.group: only the process that allocated is killed")
    code = """
import os, time
pid = os.fork()
if pid == 0:
    x = []
    while True:
        x.append(bytearray(16 << 20))
os.waitpid(pid, 0)
time.sleep(1)
print('survived')
"""
    res = run(code, "--memory", "64M")
    assert res["status"] == "oom", res
    assert "survived" not in res["stdout"]


def test_swap_cannot_extend_memory_beyond_the_limit():
    if swap_total() < (256 << 20):
        pytest.skip("no swap on this machine (the VM tier adds a swap file)")
    # 160 MiB would fit in 64 MiB of memory plus swap if swap were allowed.
    code = "x = [bytearray(16 << 20) for _ in range(10)]\nprint('fit')\n"
    res = run(code, "--memory", "64M")
    assert res["status"] == "oom", res
    allowed = run(code, "--memory", "64M", "--policy",
                  os.path.join(os.path.dirname(__file__), "policies", "swap256m.json"))
    assert allowed["status"] == "ok", allowed
    assert allowed["stdout"] == "fit\n"


def test_delegated_cgroup_is_subdivided_from_a_leaf(tmp_path):
    """As under systemd's Delegate=yes: saferun alone in a non-root cgroup
    moves itself into a leaf before enabling controllers for its sandboxes,
    and removes every sandbox group it made."""
    if cgroup_mode() != "v2":
        pytest.skip("the no-internal-processes rule is a cgroup v2 rule")
    own = open("/proc/self/cgroup").read().strip().split("::", 1)[1]
    base = f"/sys/fs/cgroup{own.rstrip('/')}/saferun-delegation-test"
    os.mkdir(base)
    try:
        script = f'echo $$ > {base}/cgroup.procs && exec {SAFERUN} run --json --profile host -c "print(7)"'
        p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
        res = json.loads(p.stdout)
        assert res["status"] == "ok" and res["stdout"] == "7\n", (res, p.stderr)
        entries = [e for e in os.listdir(base) if os.path.isdir(os.path.join(base, e))]
        assert entries == ["saferun-supervisor"], entries  # no sandbox group left
        assert "memory" in open(f"{base}/cgroup.subtree_control").read()
    finally:
        leaf = f"{base}/saferun-supervisor"
        if os.path.isdir(leaf):
            os.rmdir(leaf)
        os.rmdir(base)
