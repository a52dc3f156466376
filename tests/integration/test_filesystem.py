"""2. Filesystem: read-only root, host files invisible, capped writable tmpfs."""
import os

import pytest

from conftest import profiles, run


@pytest.mark.parametrize("profile", profiles())
@pytest.mark.parametrize("path", ["/usr/x", "/x", "/etc/passwd", "/dev/x"])
def test_root_is_read_only(profile, path):
    code = f"""
import errno
try:
    open({path!r}, 'w')
except OSError as e:
    print(errno.errorcode[e.errno])
"""
    res = run(code, profile=profile)
    assert res["status"] == "ok", res
    assert res["stdout"].strip() in ("EROFS", "EACCES") if path == "/etc/passwd" \
        else res["stdout"].strip() == "EROFS"


@pytest.mark.parametrize("profile", profiles())
def test_host_files_are_invisible(profile, marker):
    code = f"""
import errno, os
for p in [{marker!r}, '/var/lib/saferun', {os.path.dirname(marker)!r}]:
    try:
        os.stat(p)
        print(p, 'VISIBLE')
    except OSError as e:
        print(p, errno.errorcode[e.errno])
try:
    print(os.listdir('/root'))
except OSError as e:
    print(errno.errorcode[e.errno])
"""
    res = run(code, profile=profile)
    assert res["status"] == "ok", res
    lines = res["stdout"].splitlines()
    assert lines[:3] == [f"{marker} ENOENT", "/var/lib/saferun ENOENT",
                         f"{os.path.dirname(marker)} ENOENT"]
    assert lines[3] in ("[]", "EACCES")  # the profile's own /root, never the host's


@pytest.mark.parametrize("profile", profiles())
def test_writable_tmpfs_is_capped(profile):
    code = """
import errno
try:
    with open('/work/big', 'wb') as f:
        for _ in range(64):
            f.write(b'x' * (1 << 20))
except OSError as e:
    print(errno.errorcode[e.errno])
"""
    res = run(code, "--policy", os.path.join(os.path.dirname(__file__), "policies", "tmpfs16m.json"),
              profile=profile)
    assert res["status"] == "ok", res
    assert res["stdout"].strip() == "ENOSPC"
    assert res["limits_hit"] == ["disk"]  # handled, and still said


def test_writable_tmpfs_has_an_inode_cap_reported_as_disk():
    """Empty files cost no pages: only nr_inodes (one per 4 KiB of the
    tmpfs, 4096 for 16M) stops a run making millions of them."""
    code = """
import errno, os
print(os.statvfs('/tmp').f_files)
n = 0
try:
    while n < 20000:
        open(f'/tmp/{n}', 'w').close()
        n += 1
    print('no cap', n)
except OSError as e:
    print(errno.errorcode[e.errno], n)
"""
    res = run(code, "--policy", os.path.join(os.path.dirname(__file__), "policies", "tmpfs16m.json"))
    assert res["status"] == "ok", res
    lines = res["stdout"].splitlines()
    assert lines[0] == "4096", res["stdout"]
    err, made = lines[1].split()
    # The dirs of the tmpfs (its root, /work, /tmp, /dev/shm, artifacts/)
    # and main.py hold a few of the 4096.
    assert err == "ENOSPC" and 4096 - 32 <= int(made) < 4096, res["stdout"]
    assert "disk" in res["limits_hit"], res


def test_tmpfs_full_uncaught_is_an_error_status():
    code = "open('/tmp/big', 'wb').write(b'x' * (80 << 20))\n"
    res = run(code)
    assert res["status"] == "error", res
    assert res["exit_code"] == 1
    assert "No space left on device" in res["stderr"]
    assert res["limits_hit"] == ["disk"]
    # a run that leaves room has none
    almost = "open('/tmp/big', 'wb').write(b'x' * (60 << 20))\n"
    assert run(almost)["limits_hit"] == []


def test_writable_dirs_vanish_after_the_run():
    first = run("open('/work/kept.txt','w').write('x'); open('/tmp/kept','w').write('x')")
    assert first["status"] == "ok", first
    second = run("import os; print(sorted(os.listdir('/work')), os.listdir('/tmp'))")
    # the runner makes artifacts/ (docs/artifacts.md); nothing of the first run
    assert second["stdout"].strip() == "['artifacts', 'main.py'] []"


def test_host_mount_table_is_unchanged():
    before = open("/proc/self/mountinfo").read()
    res = run("print('hi')")
    assert res["status"] == "ok"
    assert open("/proc/self/mountinfo").read() == before


def test_proc_shows_only_the_sandbox():
    res = run("import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    assert res["status"] == "ok", res
    assert res["stdout"].strip() == "[1, 2]"


@pytest.mark.parametrize("profile", profiles())
def test_kernel_paths_are_not_reachable(profile):
    code = """
import errno, os
for p in ['/proc/kcore', '/proc/keys', '/proc/timer_list', '/proc/sysrq-trigger']:
    try:
        print(p, len(open(p, 'rb').read()))
    except OSError as e:
        print(p, errno.errorcode[e.errno])
for p in ['/sys/firmware', '/sys/kernel']:
    print(p, os.path.exists(p))
try:
    open('/proc/sys/kernel/hostname', 'w').write('x')
except OSError as e:
    print('proc/sys', errno.errorcode[e.errno])
"""
    res = run(code, profile=profile)
    assert res["status"] == "ok", res
    out = res["stdout"].splitlines()
    # Masked with /dev/null where the host kernel has them; absent otherwise.
    for line, path in zip(out[0:4], ["/proc/kcore", "/proc/keys", "/proc/timer_list",
                                     "/proc/sysrq-trigger"]):
        assert line == (f"{path} 0" if os.path.exists(path) else f"{path} ENOENT"), line
    assert out[4:6] == ["/sys/firmware False", "/sys/kernel False"]
    assert out[6] in ("proc/sys EROFS", "proc/sys EACCES")


def test_proc_keys_is_masked():
    """The host's /proc/keys lists keys; the sandbox's copy reads empty."""
    res = run("print(repr(open('/proc/keys').read()), repr(open('/proc/timer_list', 'rb').read()[:10]))")
    assert res["status"] == "ok", res
    assert res["stdout"].strip() == "'' b''"


def test_policy_workdir_can_be_nested():
    """A working dir deeper than one level gets its parents in the root."""
    res = run("import os; open('out.txt', 'w').write('x'); print(os.getcwd(), sorted(os.listdir('.')))",
              "--policy", os.path.join(os.path.dirname(__file__), "policies", "nested-workdir.json"))
    assert res["status"] == "ok", res
    assert res["stdout"].strip() == "/home/user/work ['artifacts', 'main.py', 'out.txt']"
