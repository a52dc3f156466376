"""1. The sandboxed code is never host root."""
import pytest

from conftest import HOST_ID_BASE, profiles, run

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
    # Sandbox ids map to an unprivileged host range, never host uid 0.
    assert lines[1] == str(["0", str(HOST_ID_BASE), "65536"])
    assert lines[2] == "[]"


def test_root_inside_cannot_be_regained():
    res = run("import os\ntry:\n    os.setuid(0)\nexcept PermissionError as e:\n    print(e.errno)\n")
    assert res["status"] == "ok", res
    assert res["stdout"].strip() == "1"  # EPERM
