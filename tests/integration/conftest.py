"""Shared helpers for the integration tier: real sandboxes, run as root."""
import atexit
import json
import os
import sys
import subprocess
import tempfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
from sandbox_host import HOST_ID_BASE  # noqa: E402,F401
from sandbox_host import sandbox_processes as all_sandbox_processes  # noqa: E402
from sandbox_host import own_mount_namespace  # noqa: E402

own_mount_namespace()

SAFERUN = os.environ.get("SAFERUN") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "saferun")
ROOTFS_DIR = os.environ.get("SAFERUN_ROOTFS_DIR", "/var/lib/saferun/rootfs")
# The in-process run, whatever saferund listens on this machine: `saferun
# run` would hand some runs to it (docs/cli.md; tests/api/test_cli_daemon.py).
os.environ["SAFERUN_SOCKET"] = ""


def profiles():
    """The profiles the filesystem tests run on: host always, built ones too."""
    found = ["host"]
    if os.path.exists(os.path.join(ROOTFS_DIR, "minimal", "usr", "bin", "python3")):
        found.append("minimal")
    return found


# SAFERUN_TEST_PATH=warm (tests/CMakeLists.txt registers the containment
# tests a second time with it): every `saferun run` goes through the warm
# path (--warm: a zygote forks the sandbox), and run() checks it did.
WARM = os.environ.get("SAFERUN_TEST_PATH") == "warm"
# The warm pass proves the fork of a zygote, not what the zygote imported:
# its zygotes preload nothing (the run's policy, or the built-in default,
# with warm.preload []). Each `--warm` run starts a zygote of its own, and
# the shipped preload (numpy, pandas, matplotlib.pyplot) costs it seconds of
# CPU on the host profile. SAFERUN_TEST_WARM_PRELOAD=default keeps the
# shipped preload (tests/CMakeLists.txt: one file runs so, proving the
# default preload works warm).
WARM_DEFAULT_PRELOAD = os.environ.get("SAFERUN_TEST_WARM_PRELOAD") == "default"
_light_policies = {}


def light_policy(policy):
    """A temp copy of policy (a path or a shipped policy's name; None: the
    built-in default) whose warm path preloads nothing."""
    if policy not in _light_policies:
        doc = {}
        if policy:
            path = policy if "/" in policy or os.path.exists(policy) else os.path.join(
                os.path.dirname(__file__), "..", "..", "policies", policy + ".json")
            with open(path) as f:
                doc = json.load(f)
        doc.setdefault("warm", {})["preload"] = []
        fd, tmp = tempfile.mkstemp(prefix="saferun-test-light-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f)
        atexit.register(os.unlink, tmp)
        _light_policies[policy] = tmp
    return _light_policies[policy]


def run_args(*args):
    """A `saferun run`'s args (args[0] == "run") on the path under test: as
    given on the cold path; with --warm on the warm path, and a policy with
    nothing preloaded (above)."""
    args = list(args)
    if not (WARM and args and args[0] == "run"):
        return args
    if not WARM_DEFAULT_PRELOAD:
        if "--policy" in args:
            i = args.index("--policy") + 1
            args[i] = light_policy(args[i])
        else:
            args[1:1] = ["--policy", light_policy(None)]
    return ["run", "--warm", *args[1:]]


def saferun_env(*args, env=None, input=None, timeout=120):
    args = run_args(*args)
    return subprocess.run([SAFERUN, *args], input=input, capture_output=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def saferun(*args, input=None, timeout=120):
    return saferun_env(*args, input=input, timeout=timeout)


def run(code, *args, profile="host", env=None):
    """Run code with --json; return the parsed result (asserting it parsed)."""
    # These tests prove the kernel layers, so the pre-execution checker is
    # off here (tests/integration/test_checker.py tests it).
    p = saferun_env("run", "--json", "--no-check", "--profile", profile, *args, "-c", code,
                    env=env)
    assert p.stdout, f"no JSON from saferun (exit {p.returncode}): {p.stderr.decode()}"
    res = json.loads(p.stdout)
    assert res["path"] == ("warm" if WARM else "cold"), res
    res["_exit"] = p.returncode
    res["_stderr"] = p.stderr.decode()
    return res


# The VM tier (scripts/vm-test) runs these files again in a qemu guest with
# only cgroup v2, under software emulation (a sandbox run costs ~1 s
# there). A test whose subject does not depend on the cgroup version or the
# kernel is marked host_only(reason) and skips in the guest
# (SAFERUN_VM_TIER=1), saying why; docs/testing.md lists them.
VM_TIER = bool(os.environ.get("SAFERUN_VM_TIER"))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "host_only(reason): not run in the VM tier (cgroup v2 guest): "
        "its subject does not depend on the cgroup version or the kernel")


def pytest_collection_modifyitems(config, items):
    if not VM_TIER:
        return
    for item in items:
        m = item.get_closest_marker("host_only")
        if m:
            why = m.kwargs.get("reason") or (m.args[0] if m.args else "")
            item.add_marker(pytest.mark.skip(reason=f"host only (VM tier): {why}"))


def cgroup_mode():
    return json.loads(saferun("info").stdout)["cgroup_mode"]


def pytest_report_header(config):
    """Say which cgroup path these tests exercise: v2 (in the VM tier) or
    v1/hybrid (this development machine)."""
    try:
        return f"saferun cgroup path: {cgroup_mode()}  (binary {SAFERUN})"
    except Exception as e:  # the tests will say what is wrong
        return f"saferun info failed: {e}"


def swap_total():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("SwapTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def own_cgroup_dirs():
    """The dirs where saferun puts its groups, one per mounted controller."""
    dirs = []
    with open("/proc/self/cgroup") as f:
        lines = [l.rstrip("\n").split(":", 2) for l in f]
    for hid, ctrls, path in lines:
        if hid == "0":
            base = "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") \
                else "/sys/fs/cgroup"
            dirs.append(base + path)
        for c in ctrls.split(","):
            if c in ("memory", "cpu", "cpuacct", "pids", "freezer"):
                dirs.append(f"/sys/fs/cgroup/{c}{path}")
    return [os.path.join(d.rstrip("/"), "saferun") for d in dirs]


OWN_GROUP = f"saferun-test-{os.getpid()}"


def pure_v2():
    with open("/proc/self/cgroup") as f:
        return all(l.startswith("0::") for l in f)


@pytest.fixture(scope="session", autouse=True)
def own_cgroups():
    """Run this test process (and so every saferun it starts) in cgroups of
    its own, children of the ones it was started in: what it counts as
    leftover groups and sandbox processes is then its own, though other
    jobs on the machine run sandboxes too. Not on a pure cgroup v2 machine
    (the VM tier's guest, where the suite runs alone): a v2 group that holds
    this process could not enable controllers for saferun's groups below it."""
    if pure_v2():
        yield
        return
    moved = []
    for d in own_cgroup_dirs():
        parent = os.path.dirname(d)
        child = os.path.join(parent, OWN_GROUP)
        os.makedirs(child, exist_ok=True)
        with open(os.path.join(child, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        moved.append((parent, child))
    yield
    for parent, child in moved:
        with open(os.path.join(parent, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        for d in (os.path.join(child, "saferun"), child):
            try:
                os.rmdir(d)
            except OSError:
                pass


def sandbox_processes():
    """Host pids in the sandbox uid range that are this test process's: in
    its own cgroups (see own_cgroups), not another job's."""
    if pure_v2():
        return all_sandbox_processes()
    own = []
    for pid in all_sandbox_processes():
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                if f"/{OWN_GROUP}/" in f.read():
                    own.append(pid)
        except OSError:
            pass
    return own


def leftover_groups():
    left = []
    for d in own_cgroup_dirs():
        if os.path.isdir(d):
            left += [os.path.join(d, e) for e in os.listdir(d)
                     if os.path.isdir(os.path.join(d, e))]
    return left


@pytest.fixture
def marker(tmp_path):
    """A file on the host the sandbox must not be able to read."""
    path = tmp_path / "host-secret.txt"
    path.write_text("host secret")
    os.chmod(tmp_path, 0o755)
    os.chmod(path, 0o644)
    return str(path)
