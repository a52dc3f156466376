"""1. The sandboxed code is never host root."""
import subprocess

import pytest

from conftest import HOST_ID_BASE, WARM, WARM_DEFAULT_PRELOAD, profiles, run

STATUS = """
fields = {}
for line in open('/proc/self/status'):
    k, _, v = line.partition(':')
    fields[k] = v.split()
import os
print(fields['Uid'][0], fields['Gid'][0], fields['CapEff'][0], fields['CapBnd'][0],
      fields['CapPrm'][0], fields['CapAmb'][0], fields['NoNewPrivs'][0], fields['Seccomp'][0])
print(open('/proc/self/uid_map').read().split())
print(os.getgroups())
"""


@pytest.mark.parametrize("profile", profiles())
def test_runs_unprivileged_with_no_caps_nnp_and_seccomp(profile):
    res = run(STATUS, profile=profile)
    assert res["status"] == "ok", res
    lines = res["stdout"].splitlines()
    assert lines[0].split() == ["1000", "1000", "0000000000000000", "0000000000000000",
                                "0000000000000000", "0000000000000000", "1", "2"]
    # Sandbox ids map to an unprivileged host range of their own (a slot of
    # the pool from HOST_ID_BASE), never host uid 0.
    inside, outside, count = eval(lines[1])
    assert (inside, count) == ("0", "65536")
    assert int(outside) >= HOST_ID_BASE and (int(outside) - HOST_ID_BASE) % 65536 == 0, lines[1]
    assert lines[2] == "[]"


def test_root_inside_cannot_be_regained():
    res = run("import os\ntry:\n    os.setuid(0)\nexcept PermissionError as e:\n    print(e.errno)\n")
    assert res["status"] == "ok", res
    assert res["stdout"].strip() == "1"  # EPERM


OWNER = """
import fcntl, os, struct
fd = os.open('/proc/self/ns/user', os.O_RDONLY)
# NS_GET_OWNER_UID: the uid that created the namespace, as seen from inside
# (65534 when it is not mapped here, as host root is not).
print(struct.unpack('I', fcntl.ioctl(fd, 0xb704, bytes(4)))[0])
for name in ('max_inotify_instances', 'max_inotify_watches', 'max_user_namespaces'):
    print(open('/proc/sys/user/' + name).read().strip())
"""


def test_user_namespace_is_owned_by_its_own_slot_not_host_root():
    """Per-user kernel counts are charged up to the namespace's owner: it is
    the sandbox's own root (its slot's first host uid), and its own counts
    are bounded from inside."""
    res = run(OWNER)
    assert res["status"] == "ok", res
    assert res["stdout"].split() == ["0", "128", "8192", "0"], res


def test_concurrent_sandboxes_get_different_host_ranges():
    import subprocess
    from conftest import SAFERUN, run_args
    code = "import time\nprint(open('/proc/self/uid_map').read().split()[1])\ntime.sleep(2)\n"
    args = [SAFERUN, *run_args("run", "--no-check", "--profile", "host", "-c", code)]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=120)[0].decode().strip() for p in procs]
    assert all(o.isdigit() for o in outs) and outs[0] != outs[1], outs



@pytest.mark.skipif(not WARM, reason="the preload is the warm path's")
def test_the_warm_zygote_imported_the_preload_chosen():
    # With the shipped preload (SAFERUN_TEST_WARM_PRELOAD=default: this
    # file's warm pass, tests/CMakeLists.txt) the identity above held in a
    # sandbox forked from a zygote that imported it; the other files' warm
    # passes preload nothing (conftest.run_args).
    shipped = ["numpy", "pandas", "matplotlib.pyplot"]
    p = subprocess.run(["/usr/bin/python3", "-c", "import importlib.util, sys\n"
                        "print([m for m in sys.argv[1:] if importlib.util.find_spec(m)])",
                        *shipped], capture_output=True, text=True, timeout=60)
    on_host = eval(p.stdout)
    res = run(f"import sys\nprint([m for m in {shipped!r} if m in sys.modules])")
    assert res["status"] == "ok", res
    assert eval(res["stdout"]) == (on_host if WARM_DEFAULT_PRELOAD else []), (res, on_host)
