"""cgroup paths: both ways into the group, group OOM, swap, delegation, and
the group kill itself (cgroup_driver.c).

The same file runs on the host (v1/hybrid here) and in the VM tier (v2);
tests that only mean something on one path say so and skip on the other.
"""
import errno
import glob
import json
import os
import subprocess
import time

import pytest

from conftest import (SAFERUN, cgroup_mode, leftover_groups, own_cgroup_dirs, run,
                      sandbox_processes, swap_total)

BALLOON = "x = []\nwhile True:\n    x.append(bytearray(16 << 20))\n"
POLICIES = os.path.join(os.path.dirname(__file__), "policies")
CGROUP_DRIVER = os.environ.get("SAFERUN_CGROUP_DRIVER") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "tests", "cgroup_driver")


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


def test_the_child_is_born_in_its_group_with_clone_into_cgroup():
    """Which way the default path took: saferun runs alone in a cgroup
    whose pids.max is 1, so a child born there (clone3 without
    CLONE_INTO_CGROUP, then moved: the fallback, silent on EINVAL, E2BIG or
    EBUSY) is refused with EAGAIN, while a child born straight into the
    sandbox's group is charged to that group only. The default run works and
    the supervisor's group never refused a fork; the forced fallback fails
    in the same place, so the set-up does tell the two apart."""
    if cgroup_mode() != "v2":
        pytest.skip("CLONE_INTO_CGROUP is a cgroup v2 feature (v1: the child joins "
                    "its groups itself, test_both_ways_into_the_group_enforce_limits)")
    # A plain run first: saferun enables the controllers for the children
    # of the group we run in, which base needs.
    assert run("pass")["status"] == "ok"
    own = open("/proc/self/cgroup").read().strip().split("::", 1)[1]
    base = f"/sys/fs/cgroup{own.rstrip('/')}/saferun-into-test"
    leaf = f"{base}/saferun-supervisor"
    res = {}
    try:
        os.mkdir(base)
        with open(f"{base}/cgroup.subtree_control", "w") as f:
            f.write("+memory +pids +cpu")
        os.mkdir(leaf)
        with open(f"{leaf}/pids.max", "w") as f:
            f.write("1")
        for attach in ("default", "procs"):
            res[attach] = saferun_in_leaf(leaf, attach)
            with open(f"{leaf}/pids.events") as f:
                res[attach]["_refused_in_leaf"] = int(f.read().split()[1])
        entries = [e for e in os.listdir(base) if os.path.isdir(os.path.join(base, e))]
    finally:
        for d in (f"{base}/saferun", leaf, base):
            if os.path.isdir(d):
                os.rmdir(d)
    ok, procs = res["default"], res["procs"]
    assert ok["status"] == "ok" and ok["stdout"] == "7\n", ok
    assert ok["cgroup_mode"] == "v2"
    assert ok["_refused_in_leaf"] == 0, ok  # no fork was tried in the supervisor's group
    assert procs["status"] == "internal_error", procs
    assert procs["message"] == ("internal_error: create the sandbox namespaces: "
                                "Resource temporarily unavailable"), procs
    assert procs["_refused_in_leaf"] >= 1, procs
    assert entries == ["saferun-supervisor"], entries  # both sandbox groups removed


def saferun_in_leaf(leaf, attach):
    """One run of saferun moved into leaf first (exec: it stays one process)."""
    env = dict(os.environ)
    env.pop("SAFERUN_CGROUP_ATTACH", None)
    if attach == "procs":
        env["SAFERUN_CGROUP_ATTACH"] = "procs"
    # --no-check: the checker would run in a child of its own.
    script = (f'echo $$ > {leaf}/cgroup.procs && exec {SAFERUN} run --json --no-check '
              '--profile host -c "print(7)"')
    p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60,
                       env=env)
    assert p.stdout, (attach, p.returncode, p.stderr)
    return json.loads(p.stdout)


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


def test_swap_allowance_is_an_upper_bound():
    """A run allowed N of swap gets memory + N and no more: with 64M of
    memory and 64M of swap, 96 MiB fits (so the swap is really there: swap 0
    is oom for the same code) and 192 MiB is oom (memory.swap.max on v2,
    memory.memsw.limit_in_bytes on v1; left at max, it would fit)."""
    if swap_total() < (256 << 20):
        pytest.skip("no swap on this machine (the VM tier adds a swap file)")
    swap64 = os.path.join(POLICIES, "swap64m.json")
    fit = "x = [bytearray(16 << 20) for _ in range({})]\nprint('fit')\n"
    without = run(fit.format(6), "--memory", "64M")
    assert without["status"] == "oom", without
    within = run(fit.format(6), "--memory", "64M", "--policy", swap64)
    assert within["status"] == "ok" and within["stdout"] == "fit\n", within
    assert within["limits"]["swap_bytes"] == 64 << 20
    beyond = run(fit.format(12), "--memory", "64M", "--policy", swap64)
    assert beyond["status"] == "oom", beyond
    assert beyond["stdout"] == ""


def test_cgroup_kill_ends_every_process_in_the_group():
    """sr_cgroup_kill on its own (cgroup.kill on v2, freezer + kill on v1).
    In a sandbox the pid namespace's end does the killing first, so no run
    shows it; cgroup_driver.c puts host processes that nothing else would
    reach into a group: a daemon in its own session, two process groups, a
    stopped process, a fork bomb at pids.max whose pids keep changing, and
    on v2 one in a nested group (only cgroup.kill ends that one: the
    fallback signals the group's own cgroup.procs). On v1 the driver must
    see the freezer at work during the kill; it has three tries, though on a
    throttled group the freeze lasts long enough to be seen on the first (a
    kill loop without the freezer is seen on none)."""
    mode = cgroup_mode()
    v2 = mode == "v2"
    for _ in range(3):
        driver = subprocess.Popen([CGROUP_DRIVER, "kill"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        try:
            stdout, stderr = driver.communicate(timeout=120)
        finally:
            driver.kill()
            driver.wait()
            remove_driver_group(f"srcg-kill-{driver.pid}")
        assert driver.returncode == 0, (stdout, stderr)
        out = json.loads(stdout)
        assert out["mode"] == mode
        # the set-up
        nested = v2 and out["cgroup_kill_file"]
        assert out["members"] == out["expected_members"] == (7 if nested else 6), out
        assert out["sessions"] == 2 and out["process_groups"] == 4, out
        assert out["stopped"] is True and out["pidfds"] is True, out
        assert out["bomb_at_pids_max"] is True and out["procs_before"] >= 40, out
        assert out["nested"] is nested, out
        # the kill: the group empty, every process gone, the group removed
        assert out["kill_rc"] == 0 and out["kill_error"] == "", out
        assert out["procs_after"] == 0, out
        assert out["survivors"] == [] and out["live_named"] == 0, out
        assert out["destroy_rc"] == 0 and out["groups_left"] == [], out
        if v2:
            assert out["populated_after"] == 0, out
            break
        assert out["freezer_watched"] is True, out
        if out["freezer_seen_frozen"]:
            break
    if v2:
        # 5.14+ (the VM's kernel): the nested process died, so cgroup.kill ran
        assert out["cgroup_kill_file"] is True, out
    else:
        assert out["freezer_seen_frozen"] is True, out


def test_a_freeze_returns_once_the_group_is_frozen():
    """sr_cgroup_freeze (a stateful kernel between runs, E2B's pause) waits
    for the kernel to finish the freeze: busy multi-threaded processes in a
    group throttled to a tenth of a CPU are frozen 8 times, and right after
    each return the group reads frozen (v1 freezer.state FROZEN, v2
    cgroup.events "frozen 1"). Without the wait it reads FREEZING while the
    throttled tasks wait for their next CPU period."""
    driver = subprocess.Popen([CGROUP_DRIVER, "freeze", "8"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = driver.communicate(timeout=120)
    finally:
        driver.kill()
        driver.wait()
        remove_driver_group(f"srcg-freeze-{driver.pid}")
    assert driver.returncode == 0, (stdout, stderr)
    out = json.loads(stdout)
    assert out["mode"] == cgroup_mode() and out["members"] == 3, out
    assert out["errors"] == 0 and out["first_error"] == "", out
    assert out["frozen_at_return"] == out["rounds"] == 8, out
    assert out["thawed"] is True and out["destroy_rc"] == 0, out


def remove_driver_group(name):
    """After a driver that died half-way: kill what its group holds and
    remove it (the freezer's first: frozen, the fork bomb cannot outrun the
    kill, and the other hierarchies hold the same processes)."""
    for parent in sorted(own_cgroup_dirs(), key=lambda d: "/freezer/" not in d):
        for g in glob.glob(os.path.join(parent, name)):
            for _ in range(100):
                if os.path.exists(f"{g}/cgroup.kill"):
                    open(f"{g}/cgroup.kill", "w").write("1")
                else:
                    if os.path.exists(f"{g}/freezer.state"):
                        open(f"{g}/freezer.state", "w").write("FROZEN")
                    for pid in open(f"{g}/cgroup.procs").read().split():
                        try:
                            os.kill(int(pid), 9)
                        except ProcessLookupError:
                            pass
                    if os.path.exists(f"{g}/freezer.state"):
                        open(f"{g}/freezer.state", "w").write("THAWED")
                try:
                    for sub in glob.glob(f"{g}/*/"):
                        os.rmdir(sub)
                    os.rmdir(g)
                    break
                except OSError:
                    time.sleep(0.05)


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


def test_a_share_group_carries_its_cpu_weight_and_holds_its_groups():
    """A daemon's tenant group (sr_cgroup_share_create, cgroup_driver.c):
    v2 cpu.weight is the weight, v1 cpu.shares weight * 1024 / 100; a
    sandbox group made in it holds its process there; it outlives that
    group; a name like a sandbox's or a weight of 0 is refused (EINVAL)."""
    out = subprocess.run([CGROUP_DRIVER, "share", "250"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert (r["knob"], r["value"]) == (("cpu.weight", 250) if r["mode"] == "v2"
                                       else ("cpu.shares", 2560)), r
    assert r["in_group"] and r["share_kept"] and r["share_removed"], r
    assert (r["bad_name"], r["bad_weight"]) == (errno.EINVAL, errno.EINVAL), r
