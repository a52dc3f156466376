"""Per-run requirements (docs/dependencies.md): checked against the policy,
met by the profile where it can, else installed by pip in a sandbox from a
wheelhouse the test builds itself, into a read-only layer; cached."""
import json
import os
import shutil
import subprocess
import tempfile
import threading

import pytest

from conftest import ROOTFS_DIR, VM_TIER, saferun
from wheels import build_wheel

DEPS_WS = "/run/saferun/deps"
SITE = "/usr/local/lib/python3.11/dist-packages"

pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(ROOTFS_DIR, "minimal", "usr", "bin", "python3")),
    reason="needs the minimal profile (scripts/build-rootfs minimal)")


@pytest.fixture
def place():
    """A world-searchable temp dir (the sandbox mounts from it as an
    unprivileged host user; pytest's tmp_path is 0700) with a wheelhouse:
    tinyleaf 1.0, tinytop 2.0 (needs tinyleaf>=1.0), tinyleaf's 2.0 too."""
    d = tempfile.mkdtemp(prefix="saferun-deps-test-")
    os.chmod(d, 0o755)
    wh = os.path.join(d, "wheels")
    os.mkdir(wh, 0o755)
    build_wheel(wh, "tinyleaf", "1.0")
    build_wheel(wh, "tinytop", "2.0", requires=["tinyleaf>=1.0"],
                files={"tinytop/__init__.py": "import tinyleaf\nVERSION = '2.0'\n"})
    build_wheel(wh, "Other_Pkg", "0.3")
    yield d
    shutil.rmtree(d)


def policy(place, profile="minimal", **deps):
    spec = {"allow": ["*"], "wheelhouse": os.path.join(place, "wheels"),
            "cache": os.path.join(place, "cache")}
    spec.update(deps)
    path = os.path.join(place, f"policy-{len(os.listdir(place))}.json")
    with open(path, "w") as f:
        json.dump({"filesystem": {"profile": profile}, "dependencies": spec}, f)
    return path


# pip, the cache and the requirement rules are the same on any cgroup
# version, and each install is a minute of pip under the VM tier's emulation:
# only test_the_layer_is_read_only_to_the_code runs there (pip's sandbox and
# the layer's read-only bind mount, on cgroup v2).
HOST_ONLY = pytest.mark.host_only(reason="pip and the dependency cache do not depend on the "
                                  "cgroup version")


def run(pol, code, *reqs, extra=()):
    args = ["run", "--json", "--no-check", "--policy", pol]
    for r in reqs:
        args += ["-r", r]
    p = saferun(*args, *extra, "-c", code)
    assert p.stdout, p.stderr.decode()
    res = json.loads(p.stdout)
    res["_exit"] = p.returncode
    return res


def cache_entries(place):
    d = os.path.join(place, "cache")
    return sorted(e for e in os.listdir(d) if not e.startswith(".")) if os.path.isdir(d) else []


def deps_mounts():
    with open("/proc/self/mountinfo") as f:
        return [line for line in f if f" {DEPS_WS}/" in line]


@HOST_ONLY
def test_allowed_requirement_installs_with_its_dependency_and_imports(place):
    res = run(policy(place), "import tinytop, tinyleaf\nprint(tinytop.VERSION, tinyleaf.__file__)",
              "tinytop")
    assert res["status"] == "ok", res
    assert res["stdout"] == f"2.0 {SITE}/tinyleaf/__init__.py\n"
    d = res["dependencies"]
    assert d["installed"] == ["tinyleaf==1.0", "tinytop==2.0"]
    assert d["cached"] is False and d["install_ms"] > 0
    assert len(cache_entries(place)) == 1


@HOST_ONLY
def test_second_run_with_the_same_requirements_uses_the_cache(place):
    pol = policy(place)
    first = run(pol, "import tinytop", "tinytop")
    assert first["status"] == "ok" and first["dependencies"]["cached"] is False, first
    # the same set, written differently: normalised and sorted into one key
    second = run(pol, "import tinytop; print(tinytop.VERSION)", "TinyTop")
    assert second["status"] == "ok", second
    assert second["dependencies"] == {"installed": ["tinyleaf==1.0", "tinytop==2.0"],
                                      "from_profile": [], "ignored": [], "cached": True,
                                      "install_ms": 0}
    assert len(cache_entries(place)) == 1


@HOST_ONLY
def test_a_changed_wheelhouse_is_a_new_cache_entry(place):
    pol = policy(place)
    assert run(pol, "import tinyleaf", "tinyleaf")["status"] == "ok"
    build_wheel(os.path.join(place, "wheels"), "tinyleaf", "1.1")
    res = run(pol, "import tinyleaf; print(tinyleaf.VERSION)", "tinyleaf")
    assert res["status"] == "ok" and res["stdout"] == "1.1\n", res
    assert res["dependencies"]["cached"] is False
    assert len(cache_entries(place)) == 2


@HOST_ONLY
def test_not_allowed_is_an_error_naming_it_and_installs_nothing(place):
    res = run(policy(place, allow=["tinyleaf"]), "print('ran')", "tinyleaf", "Tiny_Top")
    assert res["status"] == "error" and res["_exit"] != 0
    assert res["message"] == ('error: dependencies: "tiny-top" is not allowed by '
                              'policy.dependencies.allow (nothing was installed)')
    assert res["stdout"] == ""  # the code never ran
    assert cache_entries(place) == []
    p = saferun("run", "--policy", policy(place, allow=[]), "-r", "tinyleaf", "-c", "print(1)")
    assert p.returncode == 1 and p.stdout == b""
    assert p.stderr.decode() == ('saferun: error: dependencies: "tinyleaf" is not allowed by '
                                 'policy.dependencies.allow (nothing was installed)\n')


@HOST_ONLY
def test_a_requirement_the_profile_meets_needs_no_allow_entry():
    # The built-in default policy allows no installs and has no wheelhouse;
    # the host profile has Debian's numpy (python3-matplotlib, bootstrap --test).
    meta = subprocess.run(
        ["/usr/bin/python3", "-c", "import importlib.metadata as m; print(m.version('numpy'))"],
        capture_output=True, text=True)
    assert meta.returncode == 0, "scripts/bootstrap --test installs numpy: " + meta.stderr
    v = meta.stdout.strip()
    p = saferun("run", "--json", "--profile", "host", "-r", "numpy", "-r", "NumPy>=1",
                "-c", "import numpy; print(numpy.__version__)")
    res = json.loads(p.stdout)
    assert p.returncode == 0 and res["status"] == "ok", res
    assert res["stdout"] == f"{v}\n"
    assert res["dependencies"]["from_profile"] == [f"numpy=={v}", f"numpy=={v}"]
    assert res["dependencies"]["installed"] == [] and res["dependencies"]["install_ms"] == 0
    # a version the profile does not have would need an install: the allow list decides
    p = saferun("run", "--profile", "host", "-r", f"numpy>{v}", "-c", "print('ran')")
    assert p.returncode == 1 and p.stdout == b""
    assert p.stderr.decode() == ('saferun: error: dependencies: "numpy" is not allowed by '
                                 'policy.dependencies.allow (nothing was installed)\n')


@HOST_ONLY
def test_ignored_requirements_are_dropped(place):
    res = run(policy(place, allow=["tinyleaf"], ignore=["tinytop"]), "import tinyleaf",
              "tinyleaf", "tinytop")
    assert res["status"] == "ok", res
    assert res["dependencies"]["ignored"] == ["tinytop"]
    assert res["dependencies"]["installed"] == ["tinyleaf==1.0"]


@HOST_ONLY
def test_missing_package_is_an_error_with_pips_line(place):
    res = run(policy(place), "print('ran')", "nosuchpkg")
    assert res["status"] == "error"
    assert res["message"] == ("error: dependencies: pip install failed: "
                              "No matching distribution found for nosuchpkg")
    assert res["stdout"] == ""
    res = run(policy(place), "print('ran')", "tinyleaf>=5")
    assert res["message"].endswith("No matching distribution found for tinyleaf>=5"), res
    assert cache_entries(place) == []


@HOST_ONLY
def test_the_profile_has_it_so_nothing_is_installed(place):
    # no wheelhouse at all: had pip been needed, this would be an error
    pol = policy(place, profile="host", wheelhouse=None)
    host_attrs = subprocess.run(
        ["/usr/bin/python3", "-c", "import importlib.metadata as m; print(m.version('attrs'))"],
        capture_output=True, text=True)
    if host_attrs.returncode:
        pytest.skip("the host has no attrs")
    v = host_attrs.stdout.strip()
    res = run(pol, "import attrs", "attrs", f"attrs>={v.split('.')[0]}")
    assert res["status"] == "ok", res
    assert res["dependencies"]["from_profile"] == [f"attrs=={v}", f"attrs=={v}"]
    assert res["dependencies"]["installed"] == [] and res["dependencies"]["install_ms"] == 0
    # a version the profile does not have needs a source
    res = run(pol, "pass", "attrs>999")
    assert res["message"] == ("error: dependencies: no package source: set "
                              "policy.dependencies.wheelhouse (a directory of wheels) or "
                              "policy.dependencies.index_url")


def test_the_layer_is_read_only_to_the_code(place):
    code = (f"import errno, os, tinyleaf\n"
            f"for path in ['{SITE}/tinyleaf/__init__.py', '{SITE}/new.py']:\n"
            f"    try:\n"
            f"        open(path, 'a').write('x')\n"
            f"        print('wrote', path)\n"
            f"    except OSError as e:\n"
            f"        print(errno.errorcode[e.errno])\n"
            f"try:\n"
            f"    os.chmod('{SITE}/tinyleaf/__init__.py', 0o777)\n"
            f"except OSError as e:\n"
            f"    print(errno.errorcode[e.errno])\n")
    # a cache entry's files are root's, a private layer's those of pip's
    # sandbox (host ids of its own, unmapped in the run's): EACCES comes
    # first either way, and the mount is read-only all the same
    # (in the VM tier only the private layer: one pip install proves pip's
    # sandbox on cgroup v2, and each is ~15 s of emulated pip)
    caches = (False,) if VM_TIER else (os.path.join(place, "cache"), False)
    for cache in caches:
        res = run(policy(place, cache=cache), code, "tinyleaf")
        assert res["status"] == "ok", res
        assert res["stdout"] == "EACCES\nEROFS\nEROFS\n"
    if VM_TIER:
        return
    # the cache entry belongs to root and nobody may write it
    entry = os.path.join(place, "cache", cache_entries(place)[0])
    for top, dirs, files in os.walk(entry):
        for name in dirs + files:
            st = os.lstat(os.path.join(top, name))
            assert st.st_uid == 0 and st.st_mode & 0o022 == 0, (top, name)


@HOST_ONLY
def test_nothing_is_left_behind(place):
    before = set(os.listdir(DEPS_WS)) if os.path.isdir(DEPS_WS) else set()
    res = run(policy(place, cache=False), "import tinytop", "tinytop")
    assert res["status"] == "ok", res
    res = run(policy(place), "import tinytop", "nosuchpkg")
    assert res["status"] == "error"
    after = set(os.listdir(DEPS_WS)) if os.path.isdir(DEPS_WS) else set()
    assert not {e for e in after - before if e.startswith(res["id"])}
    assert not [e for e in after if e.startswith(res["id"])]
    assert cache_entries(place) == []  # cache: false stored nothing; the failure neither
    assert not [m for m in deps_mounts() if res["id"] in m]
    assert not [e for e in os.listdir(os.path.join(place, "cache")) if e.startswith(".")]


@HOST_ONLY
@pytest.mark.parametrize("bad", [
    "x @ https://example.com/x.whl", "-e .", "--index-url=http://evil", "../pkg", "/tmp/pkg",
    "pkg; python_version < '4'", "pkg[extra]", "", "pkg==", "pkg>=1,", "pkg 1.0",
    "a" * 201, "pkg\n--find-links=/", "pkg==1.0 --hash=sha256:00",
])
def test_bad_requirement_strings_are_refused(place, bad):
    p = saferun("run", "--policy", policy(place), "-r", "tinyleaf", "-r", bad, "-c", "pass")
    assert p.returncode == 2
    err = p.stderr.decode()
    assert err.startswith("saferun: requirements[1]: "), err
    assert cache_entries(place) == []


@HOST_ONLY
def test_requirements_file(place):
    req = os.path.join(place, "reqs.txt")
    with open(req, "w") as f:
        f.write("# what the job needs\n\ntinytop   # and what it pulls in\n  tinyleaf>=1\n")
    res = run(policy(place), "import tinytop", extra=("--requirements-file", req))
    assert res["status"] == "ok", res
    assert res["dependencies"]["installed"] == ["tinyleaf==1.0", "tinytop==2.0"]


@HOST_ONLY
def test_install_time_limit(place):
    res = run(policy(place, install_time="1s", cache=False), "pass", "tinyleaf")
    assert res["status"] == "error", res
    assert res["message"] == ("error: dependencies: pip install failed: pip passed the install "
                              "time limit of 1 s (policy.dependencies.install_time)")


@HOST_ONLY
def test_unreadable_wheelhouse_is_explained(place):
    os.chmod(os.path.join(place, "wheels"), 0o700)
    res = run(policy(place), "pass", "tinyleaf")
    assert res["message"] == (
        f"error: dependencies: policy.dependencies.wheelhouse {place}/wheels is not a "
        "directory the sandbox can read (it and every dir above it need o+x, it needs o+r)")


@HOST_ONLY
def test_concurrent_installs_of_one_set_share_one_entry(place):
    pol = policy(place)
    results = []

    def one():
        results.append(run(pol, "import tinytop; print(tinytop.VERSION)", "tinytop"))

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r["stdout"] for r in results] == ["2.0\n"] * 3, results
    assert len(cache_entries(place)) == 1
    assert not [e for e in os.listdir(os.path.join(place, "cache")) if e.startswith(".")]


@HOST_ONLY
def test_cache_keeps_at_most_cache_entries(place):
    pol = policy(place, cache_entries=1)
    assert run(pol, "import tinyleaf", "tinyleaf")["status"] == "ok"
    assert run(pol, "import Other_Pkg", "other-pkg")["status"] == "ok"
    entries = cache_entries(place)
    assert len(entries) == 1
    with open(os.path.join(place, "cache", entries[0], "key")) as f:
        assert "req other-pkg\n" in f.read()


@HOST_ONLY
def test_auto_detect_installs_missing_imports_the_policy_allows(place):
    code = ("import json, tinytop\nfrom tinyleaf import VERSION\n"
            "try:\n    import Other_Pkg\nexcept ImportError:\n    print('no other')\n"
            "s = 'import notreal'\nprint(tinytop.VERSION, VERSION)\n")
    pol = policy(place, allow=["tinytop", "tinyleaf"], ignore=[], auto_detect=True)
    res = run(pol, code)
    assert res["status"] == "ok", res
    assert res["stdout"] == "no other\n2.0 1.0\n"
    d = res["dependencies"]
    assert d["installed"] == ["tinyleaf==1.0", "tinytop==2.0"]
    assert d["ignored"] == ["other-pkg"]  # imported, not allowed: left out, not an error
    # the ignore list holds for detected imports too
    res = run(policy(place, allow=["*"], ignore=["tinytop"], auto_detect=True),
              "import tinyleaf\ntry:\n    import tinytop\nexcept ImportError:\n    print('no')\n")
    assert res["status"] == "ok" and res["stdout"] == "no\n", res
    assert res["dependencies"]["ignored"] == ["tinytop"]


@HOST_ONLY
def test_without_auto_detect_imports_install_nothing(place):
    res = run(policy(place), "import tinyleaf")
    assert res["status"] == "error" and "No module named 'tinyleaf'" in res["stderr"]
    assert "dependencies" not in res
    assert cache_entries(place) == []


@HOST_ONLY
def test_a_restrictive_umask_still_gives_a_readable_layer(place):
    pol = policy(place)
    p = subprocess.run([os.environ.get("SAFERUN") or "saferun", "run", "--json", "--no-check",
                        "--policy", pol, "-r", "tinytop", "-c",
                        "import tinytop; print(tinytop.VERSION)"],
                       capture_output=True, preexec_fn=lambda: os.umask(0o077), timeout=300)
    res = json.loads(p.stdout)
    assert res["status"] == "ok" and res["stdout"] == "2.0\n", res
    entry = os.path.join(place, "cache", cache_entries(place)[0])
    assert os.stat(os.path.join(entry, "layer", "tinytop", "__init__.py")).st_mode & 0o777 == 0o644
    assert os.stat(os.path.join(place, "cache")).st_mode & 0o777 == 0o711


@HOST_ONLY
def test_an_install_removes_workspaces_of_dead_processes(place):
    # what a saferun killed in the middle of an install leaves: a mounted tmpfs
    p = subprocess.Popen(["sleep", "0"])
    p.wait()  # a pid that is gone
    stale = os.path.join(DEPS_WS, f"sr-0123456789abcdef-{p.pid}-pip")
    live = os.path.join(DEPS_WS, f"sr-0123456789abcdef-{os.getpid()}-pip")
    for d in (stale, live):
        os.makedirs(d)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", d], check=True)
        open(os.path.join(d, "layer"), "w").close()
    try:
        res = run(policy(place, cache=False), "import tinyleaf", "tinyleaf")
        assert res["status"] == "ok", res
        assert not os.path.exists(stale)
        assert not [m for m in deps_mounts() if stale in m]
        assert os.path.exists(os.path.join(live, "layer"))  # a live pid's stays
    finally:
        for d in (stale, live):
            subprocess.run(["umount", d], capture_output=True)
            if os.path.isdir(d):
                shutil.rmtree(d)
