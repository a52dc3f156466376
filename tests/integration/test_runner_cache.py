"""The compiled runner (runtime/lib/box/runner_cache.c, docs/performance.md):
a cold run's python loads the runner compiled once by the rootfs's own
python, from fd 4, instead of compiling its source on every start. Each
test has a cache dir of its own (SAFERUN_CACHE_DIR)."""
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

from conftest import ROOTFS_DIR, run

# What the code sees of how its python was started, and whether the
# runner left anything behind: fd 4 closed, no loader name in __main__.
PROBE = r"""
import os
cmd = open('/proc/self/cmdline', 'rb').read().split(b'\0')
src = cmd[cmd.index(b'-c') + 1]
print('source' if src.startswith(b'# The in-sandbox runner') else 'stub' if b'_saferun_load' in src else src[:40])
try:
    os.fstat(4)
    print('fd4 open')
except OSError as e:
    print('fd4', e.errno)
print(sorted(k for k in globals() if k.startswith('_saferun')))
"""


def entries(cache):
    d = cache / "runner"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def probe(cache, profile="minimal", rootfs_dir=None):
    env = {"SAFERUN_CACHE_DIR": str(cache)}
    if rootfs_dir:
        env["SAFERUN_ROOTFS_DIR"] = rootfs_dir
    res = run(PROBE, env=env, profile=profile)
    assert res["status"] == "ok", res
    return res["stdout"].split("\n")[:3]


@pytest.mark.parametrize("profile", ["host", "minimal"])
def test_first_run_compiles_then_every_run_loads(tmp_path, profile):
    if profile == "minimal" and not os.path.exists(os.path.join(ROOTFS_DIR, "minimal")):
        pytest.skip("no minimal rootfs")
    # The first run makes the entry (a compile sandbox before it) and
    # already uses it; the entry is root's alone.
    assert probe(tmp_path, profile) == ["stub", "fd4 9", "[]"]
    made = entries(tmp_path)
    assert len(made) == 1 and made[0].endswith(".code")
    st = os.stat(tmp_path / "runner" / made[0])
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o600)
    assert os.stat(tmp_path / "runner").st_mode & 0o777 == 0o700
    mtime = st.st_mtime_ns
    assert probe(tmp_path, profile) == ["stub", "fd4 9", "[]"]
    assert entries(tmp_path) == made
    assert os.stat(tmp_path / "runner" / made[0]).st_mtime_ns == mtime  # not made again


def test_a_policys_small_output_cap_does_not_stop_the_compile(tmp_path):
    # The compile sandbox has its own limits: the runner's code (~40 KB)
    # is more than this policy lets a run print, and without them every
    # run would try the compile again and fall back to the source.
    policy = tmp_path / "small.json"
    policy.write_text('{"limits": {"output": "1K"}}')
    cache = tmp_path / "cache"
    for _ in range(2):
        res = run(PROBE, "--policy", str(policy), env={"SAFERUN_CACHE_DIR": str(cache)},
                  profile="minimal")
        assert res["status"] == "ok", res
        assert res["stdout"].split("\n")[:3] == ["stub", "fd4 9", "[]"]
    assert len(entries(cache)) == 1


def test_cache_off_compiles_the_source_every_time(tmp_path):
    res = run(PROBE, env={"SAFERUN_CACHE_DIR": "off"}, profile="minimal")
    assert res["status"] == "ok", res
    assert res["stdout"].split("\n")[:3] == ["source", "fd4 9", "[]"]


def test_tracebacks_and_exit_statuses_are_unchanged(tmp_path):
    env = {"SAFERUN_CACHE_DIR": str(tmp_path)}
    res = run("def f():\n    1/0\nf()\n", env=env, profile="minimal")
    assert res["status"] == "error" and res["exit_code"] == 1, res
    assert res["stderr"] == (
        "Traceback (most recent call last):\n"
        '  File "main.py", line 3, in <module>\n'
        "    f()\n"
        '  File "main.py", line 2, in f\n'
        "    1/0\n"
        "    ~^~\n"
        "ZeroDivisionError: division by zero\n"), res["stderr"]
    res = run("import sys; sys.exit(7)", env=env, profile="minimal")
    assert (res["status"], res["exit_code"]) == ("error", 7), res


def test_a_torn_or_foreign_entry_is_made_again(tmp_path):
    assert probe(tmp_path)[0] == "stub"
    (name,) = entries(tmp_path)
    path = tmp_path / "runner" / name
    good = path.read_bytes()
    for bad in (good[:100], b"saferun-runner\n" + b"\0" * 8, b"not a cache file"):
        path.write_bytes(bad)
        assert probe(tmp_path) == ["stub", "fd4 9", "[]"]
        assert path.read_bytes() == good


def test_code_from_another_python_is_refused_not_run(tmp_path):
    # An entry whose key matches but whose code carries another
    # interpreter's magic number (the key should make this impossible;
    # the stub's check is the second line): the run fails and says why.
    assert probe(tmp_path)[0] == "stub"
    (name,) = entries(tmp_path)
    path = tmp_path / "runner" / name
    data = bytearray(path.read_bytes())
    # The code starts after magic, key length (u64), key, code length (u64).
    klen = int.from_bytes(data[15:23], "little")
    start = 15 + 8 + klen + 8
    data[start:start + 2] = b"\xff\xff"
    path.write_bytes(bytes(data))
    res = run("print('must not run')", env={"SAFERUN_CACHE_DIR": str(tmp_path)},
              profile="minimal")
    assert res["status"] == "error" and res["exit_code"] == 1, res
    assert res["stdout"] == ""
    assert res["stderr"] == "saferun: the cached runner was compiled by another python\n"


def test_another_python_in_the_same_rootfs_gets_its_own_entry(tmp_path, request):
    src = os.path.join(ROOTFS_DIR, "minimal")
    if not os.path.exists(src):
        pytest.skip("no minimal rootfs")
    # A copy of the rootfs at a path of its own: hard links (cheap), so on
    # the rootfs's own file system (/tmp may be another).
    rootfs_dir = pathlib.Path(tempfile.mkdtemp(prefix=".test-runner-cache-",
                                               dir=os.path.dirname(os.path.abspath(ROOTFS_DIR))))
    request.addfinalizer(lambda: shutil.rmtree(rootfs_dir, ignore_errors=True))
    subprocess.run(["cp", "-al", src, str(rootfs_dir / "minimal")], check=True)
    cache = tmp_path / "cache"
    assert probe(cache, rootfs_dir=str(rootfs_dir)) == ["stub", "fd4 9", "[]"]
    first = entries(cache)
    assert len(first) == 1
    # An upgraded python: a new file where the old one was.
    py = rootfs_dir / "minimal" / "usr" / "bin" / os.readlink(
        rootfs_dir / "minimal" / "usr" / "bin" / "python3")
    shutil.copy2(py, str(py) + ".new")
    os.rename(str(py) + ".new", py)
    assert probe(cache, rootfs_dir=str(rootfs_dir)) == ["stub", "fd4 9", "[]"]
    after = entries(cache)
    assert len(after) == 2 and set(first) < set(after)
