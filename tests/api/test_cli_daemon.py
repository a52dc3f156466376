"""`saferun run` through a running saferund (docs/cli.md, "Through the
daemon"): the same output, exit codes, statuses and --json as the run in
the CLI's own process, and a clean fall-back to that run when the daemon is
down, refuses, or the socket is another user's."""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import SAFERUND, wait_for

SAFERUN = os.environ.get("SAFERUN") or os.path.join(os.path.dirname(SAFERUND), "saferun")
ROOTFS_DIR = os.environ.get("SAFERUN_ROOTFS_DIR", "/var/lib/saferun/rootfs")
NOBODY = 65534

# (code, extra args, exit code, stdout, stderr pattern)
CASES = [
    ("print('hi')", [], 0, "hi\n", ""),
    ("import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)", [], 3, "out\n",
     "err\n"),
    ("raise ValueError('bad')", [], 1, "",
     r"(?s)Traceback .*ValueError: bad\n"),
    ("import time\ntime.sleep(5)", ["--timeout", "0.3"], 124, "",
     r"saferun: timeout: the run passed its wall-clock limit of 0\.3 s\n"),
    ("import os\nos.kill(os.getpid(), 9)", ["--allow", "os.kill"], 137, "", r"saferun: killed: .*\n"),
    ("eval('1')", [], 3, "", r"saferun: rejected: .*eval.*\n"),
    ("print(eval('6*7'))", ["--allow", "eval"], 0, "42\n", ""),
    ("import os, sys\nprint(os.environ['MODE'], open('in.txt').read(), sys.stdin.read())",
     ["--env", "MODE=m", "--file", "in.txt=@IN", "--stdin", "@IN"], 0, "m data data\n", ""),
]


def cli(args, socket_path, stdin=None):
    env = {**os.environ, "SAFERUN_SOCKET": socket_path}
    return subprocess.run([SAFERUN, "run", *args], capture_output=True, text=True, env=env,
                          timeout=60, input=stdin)


def runs_logged(d):
    return [l["id"] for l in d.lines("run")]


def expand(args, tmp):
    path = os.path.join(tmp, "in.txt")
    with open(path, "w") as f:
        f.write("data")
    return [a.replace("@IN", path) for a in args]


@pytest.mark.parametrize("path", ["daemon", "in-process"])
def test_output_exit_codes_statuses_and_json_on_both_paths(make_daemon, tmp_path, path):
    """The daemon's default policy is the host profile here; the in-process
    run gets --profile host (which keeps it out of the daemon) and
    --no-daemon, with the daemon listening all the same."""
    d = make_daemon()
    own = ["--no-daemon", "--profile", "host"] if path == "in-process" else []
    for code, args, rc, out, err in CASES:
        before = len(runs_logged(d))
        p = cli([*own, *expand(args, str(tmp_path)), "-c", code], d.socket)
        assert (p.returncode, p.stdout) == (rc, out), (code, p)
        assert re.fullmatch(err, p.stderr), (code, p.stderr)
        assert len(runs_logged(d)) == before + (path == "daemon"), (code, d.text()[-1500:])
    # --json: the result as the daemon answered it (its id is in its log)
    p = cli([*own, "--json", "-c", "import sys\nprint('j')\nsys.exit(4)"], d.socket)
    res = json.loads(p.stdout)
    assert p.returncode == 4 and p.stdout.count("\n") == 1, p
    assert (res["status"], res["exit_code"], res["stdout"], res["message"]) == \
        ("error", 4, "j\n", "error: the code exited with status 4"), res
    assert (res["id"] in runs_logged(d)) == (path == "daemon"), res
    p = cli([*own, "--json", "--timeout", "0.2", "-c", "while True: pass"], d.socket)
    res = json.loads(p.stdout)
    assert (p.returncode, res["status"], res["limits_hit"]) == (124, "timeout", ["wall_time"])


def test_the_daemon_path_is_warm_streams_and_options_it_cannot_honour_stay_in_process(
        make_daemon):
    d = make_daemon()
    assert wait_for(lambda: all(w.get("zygote_up") and w["ready"] == w["pool_size"]
                                for w in d.get("/v1/health").json()["warm"]), timeout=30)
    p = cli(["--json", "-c", "print(1)"], d.socket)
    assert json.loads(p.stdout)["path"] == "warm", p
    # the output as it comes (the daemon's NDJSON stream): the first line is
    # printed before the code takes the time it prints last
    code = ("import sys, time\nprint('first', flush=True)\ntime.sleep(0.5)\n"
            "print('err', file=sys.stderr)\nprint(time.time())\nsys.exit(3)")
    s = subprocess.Popen([SAFERUN, "run", "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env={**os.environ, "SAFERUN_SOCKET": d.socket})
    first = s.stdout.readline()
    first_t = time.time()
    rest, err = s.communicate(timeout=60)
    assert (first, err, s.returncode) == (b"first\n", b"err\n", 3), (first, rest, err)
    assert first_t < float(rest.decode()), (first_t, rest)
    assert len(runs_logged(d)) == 2
    n = len(runs_logged(d))
    for own in (["--profile", "host"], ["--no-check"], ["--pids", "48"], ["--preset", "small"],
                ["--no-daemon"]):
        p = cli([*own, "--profile", "host", "--json", "-c", "print(2)"], d.socket)
        assert (p.returncode, json.loads(p.stdout)["path"]) == (0, "cold"), (own, p)
    assert len(runs_logged(d)) == n


def fallback_ok(p):
    """The in-process run with the CLI's own default policy: its output
    when that policy's profile (datascience) is built, else its error."""
    if os.path.exists(os.path.join(ROOTFS_DIR, "datascience", "usr", "bin", "python3")):
        return (p.returncode, p.stdout) == (0, "hi\n")
    return p.returncode == 2 and p.stdout == "" and \
        p.stderr.startswith('saferun: rootfs profile "datascience" is not built')


def test_falls_back_in_process_when_the_daemon_is_down_refuses_or_is_another_users(
        make_daemon, tmp_path):
    # down: no socket, and a socket nobody listens on
    stale = str(tmp_path / "stale.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(stale)
    s.close()
    for path in (str(tmp_path / "none.sock"), stale):
        p = cli(["-c", "print('hi')"], path)
        assert fallback_ok(p), p
    # refuses: a request over the policy's limit (400), no tenant (403)
    d = make_daemon()
    p = cli(["--memory", "4G", "-c", "print('hi')"], d.socket)
    assert fallback_ok(p), p
    assert [l["status"] for l in d.lines("request")] == [400] and not runs_logged(d)
    tenants = str(tmp_path / "tenants.json")
    with open(tenants, "w") as f:
        json.dump({"tenants": [{"name": "b", "uids": [NOBODY]}]}, f)
    t = make_daemon("--tenants", tenants)
    p = cli(["-c", "print('hi')"], t.socket)
    assert fallback_ok(p), p
    assert [l["status"] for l in t.lines("request")] == [403] and not runs_logged(t)
    # another user's: a server run by nobody gets a connection, never the code
    sock_dir = tempfile.mkdtemp(prefix="srd-theirs-")
    os.chmod(sock_dir, 0o777)
    theirs = os.path.join(sock_dir, "s.sock")
    server = subprocess.Popen(
        [sys.executable, "-c",
         "import socket, sys\n"
         "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4)\n"
         "print('up', flush=True)\n"
         "c, _ = s.accept(); c.settimeout(10)\n"
         "print('got', len(c.recv(65536)), flush=True)\n", theirs],
        stdout=subprocess.PIPE, text=True,
        preexec_fn=lambda: (os.setgid(NOBODY), os.setuid(NOBODY)))
    try:
        assert server.stdout.readline() == "up\n"
        p = cli(["-c", "print('hi')"], theirs)
        assert fallback_ok(p), p
        assert server.stdout.readline() == "got 0\n"
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(sock_dir, ignore_errors=True)
