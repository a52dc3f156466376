"""envd, E2B's in-sandbox agent, through E2B's own JS SDK (npm `e2b`, pinned
in tests/e2b/package.json and installed by `scripts/bootstrap --test`):
files (read, write, list, exists, makeDir, rename, remove, watch, binary
uploads of several files), commands (exit code, stderr, stdin, kill,
background, output as it comes), paths outside the sandbox's files refused,
commands confined (the host's /etc/shadow unreadable, a fork bomb stopped
by the pids limit), two sandboxes isolated, and a policy without commands.
One node script makes every call; this test asserts on what it printed."""
import json
import os
import shutil
import socket
import subprocess

import pytest

from conftest import own_sandbox_processes, wait_for

SOURCE_DIR = (os.environ.get("SAFERUN_SOURCE_DIR")
              or os.path.join(os.path.dirname(__file__), "..", ".."))
E2B_DIR = os.path.join(SOURCE_DIR, "tests", "e2b")
KEY = "envd-test-key-" + "5" * 24
BOOTSTRAP = "run `sudo scripts/bootstrap --test` (it installs node and runs npm ci in tests/e2b)"
# cold: an E2B sandbox never takes from a warm pool, whose zygote would be
# left among the daemon's processes at the end
POLICY = {"filesystem": {"profile": "host"}, "limits": {"pids": 32}, "warm": {"enabled": False}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module", autouse=True)
def sdk():
    if not shutil.which("node"):
        pytest.fail(f"node is not installed: {BOOTSTRAP}", pytrace=False)
    with open(os.path.join(E2B_DIR, "package.json")) as f:
        pinned = json.load(f)["dependencies"]["e2b"]
    path = os.path.join(E2B_DIR, "node_modules", "e2b", "package.json")
    if not os.path.exists(path):
        pytest.fail(f"tests/e2b/node_modules has no e2b: {BOOTSTRAP}", pytrace=False)
    with open(path) as f:
        installed = json.load(f)["version"]
    if installed != pinned:
        pytest.fail(f"tests/e2b/node_modules has e2b {installed}, package.json pins {pinned}: "
                    f"{BOOTSTRAP}", pytrace=False)


def test_envd_through_the_e2b_sdk(make_daemon):
    port = free_port()
    d = make_daemon("--e2b-listen", f"127.0.0.1:{port}", token=KEY,
                    policies={"default": POLICY, "host": POLICY,
                              "nocmd": {**POLICY, "commands": {"enabled": False}}})
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("E2B_")}
    env.update(E2B_API_URL=url, E2B_SANDBOX_URL=url, E2B_API_KEY=KEY, NOCMD_TEMPLATE="nocmd")
    p = subprocess.run(["node", os.path.join(E2B_DIR, "envd.mjs")], capture_output=True,
                       text=True, env=env, cwd=E2B_DIR, timeout=120, stdin=subprocess.DEVNULL)
    lines = p.stdout.strip().splitlines()
    assert p.returncode == 0 and lines, f"envd.mjs failed ({p.returncode}):\n{p.stderr}\n{d.text()[-3000:]}"
    out = json.loads(lines[-1])

    f = out["files"]
    assert "error" not in f, f
    assert f["info"] == {"name": "a.txt", "path": "/home/user/a.txt", "type": "file"}
    assert f["text"] == "hello envd" and f["relative"] == "hello envd"
    assert f["made"] is True and f["madeAgain"] is False
    assert f["moved"] == {"name": "b.txt", "path": "/home/user/d/b.txt", "type": "file"}
    assert ["d", "dir"] in f["list"] and ["a.txt", "file"] not in f["list"]
    assert ["src", "dir"] in f["list"]  # the session's own layout
    assert "/home/user/d/e" in f["deep"] and "/home/user/d/b.txt" in f["deep"]
    assert f["stat"] == {"name": "b.txt", "type": "file", "size": 10,
                         "permissions": "-rw-r--r--", "mtime": True}
    assert f["existsMoved"] == [False, True] and f["afterRemove"] is False
    assert f["missing"]["error"] == "FileNotFoundError", f["missing"]

    b = out["binary"]
    assert b == {"written": ["/home/user/bin/one.bin", "/home/user/bin/three.txt",
                             "/home/user/bin/two.bin"],
                 "same": True, "twoLen": 300, "twoFirst": [0, 7, 14, 21]}, b

    assert ["create", "new.txt"] in out["watch"] and ["remove", "new.txt"] in out["watch"], \
        out["watch"]

    # 1: EVENT_TYPE_CREATE (the atomic write's rename), then nothing new;
    # a removed watcher is gone (5: not_found)
    assert out["pollWatch"] == {"got": [[1, "f.txt"]], "drained": 0, "gone": ["ConnectError", 5]}, \
        out["pollWatch"]
    assert out["connect"] == {"stdout": "got later\n", "exitCode": 0}, out["connect"]

    t = out["traversal"]
    for name in ("dotdot", "outside", "list_outside", "write_outside"):
        assert isinstance(t[name], dict), (name, t[name])
    assert "..\" part" in t["dotdot"]["message"], t["dotdot"]
    assert "outside the sandbox's files" in t["outside"]["message"], t["outside"]
    assert "NUL byte" in t["nul_read"]["message"], t["nul_read"]
    assert t["nul_stat"]["code"] == 3 and "NUL" in t["nul_stat"]["message"], t["nul_stat"]

    r = out["run"]
    assert r["ok"]["exitCode"] == 0, r
    assert r["ok"]["stdout"].startswith("out\n/work\n1000\n"), r
    assert r["ok"]["stderr"] == "err\n"
    assert r["bad"]["error"] == "CommandExitError" and r["bad"]["exitCode"] == 3, r
    assert r["bad"]["stdout"] == "partial\n" and r["bad"]["stderr"] == "oops\n"
    assert r["envCwd"] == "bar baz\n/work/bin\n", r  # envs, and cwd under /home/user

    assert out["stream"] == ["one\n", "two\n"], out["stream"]  # two chunks, in order
    assert out["stdin"] == {"exitCode": 0, "stdout": "hello stdin\n"}, out["stdin"]

    k = out["kill"]
    assert k["listed"] is True and k["killed"] is True and k["after"] is False, k
    assert k["waited"]["error"] == "CommandExitError" and k["waited"]["exitCode"] == -1, k
    assert k["again"] is False
    assert out["background"] == {"stdout": "bg\n", "file": "done\n"}, out["background"]

    c = out["confinement"]
    # masked in the sandbox (or unreadable): never the host's file
    assert c["shadow"]["exitCode"] == 1 and "/etc/shadow" in c["shadow"]["stderr"], c
    assert not c["shadow"]["stdout"]
    started = int(c["bomb"].split("started=")[1].split()[0])
    assert 0 < started < 32, c["bomb"]  # the pids limit stopped it
    assert "fork" in c["bomb"].lower(), c["bomb"]
    assert c["alive"] == "still here\n"

    i = out["isolated"]
    # sb2's first command, entering a sandbox just started: its own files and
    # /proc, never the host's (entered before the sandbox had set itself up,
    # it would see the host's /work and processes)
    assert i["ls"].startswith("artifacts\nsrc\n"), i
    assert i["file"] is False and "only-a.txt" not in i["ls"], i
    assert "sleep" not in i["ls"] and i["procs"] == [], i

    n = out["nocmd"]
    assert "policy does not allow commands" in n["run"]["message"], n
    assert n["files"] is True

    # Every sandbox was killed: its commands went with its kernel.
    assert wait_for(lambda: own_sandbox_processes(d.cgroups) == []), \
        own_sandbox_processes(d.cgroups)

