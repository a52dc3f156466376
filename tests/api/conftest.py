"""The API tier: a real saferund, real clients (curl, Python requests).

Each test gets a daemon in cgroups of its own (like systemd gives the
service), so the daemon's start-up cleanup and the leftover checks concern
only its sandboxes, never other saferun runs on the machine."""
import http.client
import json
import os
import sys
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse

import pytest
import requests
import requests_unixsocket

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
from sandbox_host import HOST_ID_BASE, sandbox_processes  # noqa: E402,F401
from sandbox_host import own_mount_namespace  # noqa: E402

own_mount_namespace()

SAFERUND = os.environ.get("SAFERUND") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "saferund")
CONTROLLERS = ("memory", "cpu", "cpuacct", "pids", "freezer")
# Warm, as the shipped default is (docs/warm.md), with nothing preloaded (the
# host profile here has numpy, pandas and matplotlib: importing them costs
# seconds of CPU per test daemon) and no sandbox forked ahead: each run's is
# forked as it arrives, so a test daemon costs one zygote, not a pool.
HOST_POLICY = {"filesystem": {"profile": "host"}, "warm": {"preload": [], "pool_size": 0}}
# The second policy every test daemon has: cold, so that a test daemon starts one
# zygote, not two (each costs start-up and shutdown time, ~0.2 s under load).
HOST_COLD_POLICY = {"filesystem": {"profile": "host"}, "warm": {"enabled": False}}


def cgroup_dirs(name):
    """Dirs for a group `name` below our own cgroup, one per hierarchy
    saferun uses (v1 and hybrid), or the unified one (v2)."""
    dirs = []
    with open("/proc/self/cgroup") as f:
        lines = [l.rstrip("\n").split(":", 2) for l in f]
    v1 = any(c in CONTROLLERS for _, ctrls, _ in lines for c in ctrls.split(","))
    for hid, ctrls, path in lines:
        if hid == "0" and not v1:
            dirs.append(f"/sys/fs/cgroup{path.rstrip('/')}/{name}")
        elif any(c in CONTROLLERS for c in ctrls.split(",")):
            dirs.append(f"/sys/fs/cgroup/{ctrls}{path.rstrip('/')}/{name}")
    return dirs


class Daemon:
    """A saferund on a temp unix socket (and TCP if asked), in its own cgroups."""

    def __init__(self, args=(), policies=None, tcp=False, token=None, env=None):
        self.dir = tempfile.mkdtemp(prefix="srd-")
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "s.sock")
        self.policies = os.path.join(self.dir, "policies")
        os.mkdir(self.policies)
        for name, doc in (policies or {"default": HOST_POLICY, "host": HOST_COLD_POLICY}).items():
            self.write_policy(name, doc)
        self.token = token
        self.workspaces = os.path.join(self.dir, "workspaces")
        self.args = ["--socket", self.socket, "--policies-dir", self.policies,
                     "--workspaces-dir", self.workspaces, *args]
        if tcp:
            self.args += ["--listen", "127.0.0.1:0"]
        if token:
            self.token_file = os.path.join(self.dir, "token")
            with open(self.token_file, "w") as f:
                f.write(token + "\n")
            os.chmod(self.token_file, 0o600)
            self.args += ["--token-file", self.token_file]
        self.env = {k: v for k, v in os.environ.items() if k != "SAFERUND_TOKEN"}
        self.env.update(env or {})
        self.cgroups = cgroup_dirs("srd-test-" + secrets.token_hex(4))
        self.log_path = os.path.join(self.dir, "log")
        self.proc = None
        self.tcp_addr = None

    def write_policy(self, name, doc):
        with open(os.path.join(self.policies, name + ".json"), "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))

    def _enter_cgroups(self):
        for d in self.cgroups:
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write("0")

    def start(self, wait=True, argv_prefix=(), pass_fds=()):
        for d in self.cgroups:
            os.makedirs(d, exist_ok=True)
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([*argv_prefix, SAFERUND, *self.args], stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log, env=self.env,
                                     preexec_fn=self._enter_cgroups, pass_fds=pass_fds)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            ready = [l for l in self.lines() if l.get("event") == "ready"]
            if ready and ready[-1].get("pid") == self.proc.pid:
                for l in ready[-1]["listeners"]:
                    if "tcp" in l:
                        self.tcp_addr = l["tcp"]
                return ready[-1]
            if self.proc.poll() is not None:
                raise AssertionError(f"saferund exited {self.proc.returncode}: {self.text()}")
            time.sleep(0.02)
        raise AssertionError(f"saferund not ready: {self.text()}")

    def text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def lines(self, event=None):
        out = []
        for line in self.text().splitlines():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if event is None or obj.get("event") == event:
                out.append(obj)
        return out

    # ---- clients ----------------------------------------------------------
    def session(self):
        """requests over the unix socket."""
        return requests_unixsocket.Session()

    def url(self, path):
        return "http+unix://" + urllib.parse.quote(self.socket, safe="") + path

    def tcp_url(self, path):
        return f"http://{self.tcp_addr}{path}"

    def get(self, path, **kw):
        with self.session() as s:
            return s.get(self.url(path), timeout=kw.pop("timeout", 60), **kw)

    def post(self, path, body=None, **kw):
        with self.session() as s:
            return s.post(self.url(path), json=body, timeout=kw.pop("timeout", 60), **kw)

    def run(self, code, **fields):
        r = self.post("/v1/run", {"code": code, **fields})
        assert r.status_code == 200, r.text
        return r.json()

    def raw(self, method, path, body=b"", headers=None):
        """http.client over the unix socket: exact bytes, no client-side help."""
        conn = UnixHTTPConnection(self.socket)
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r, data

    def curl(self, *args, tcp=False):
        base = [] if tcp else ["--unix-socket", self.socket]
        p = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", *base, *args],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        body, _, code = p.stdout.rpartition("\n")
        return int(code), body

    # ---- the end ----------------------------------------------------------
    def send(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=timeout)
        return self.proc.returncode if self.proc else None

    def leftover_groups(self):
        """Its sandbox groups (saferun/sr-*, and saferun/SHARE/sr-* in its
        tenants' groups), per hierarchy; not the tenants' groups themselves."""
        return [g for d in self.cgroups for g in sub_groups(os.path.join(d, "saferun"))
                if os.path.basename(g).startswith("sr-")]

    def share_groups(self):
        """Its tenants' groups (saferun/tenant-*), per hierarchy."""
        return [g for d in self.cgroups for g in sub_groups(os.path.join(d, "saferun"))
                if os.path.basename(g).startswith("tenant-")]

    def only_pools_left(self, timeout=10):
        """Nothing of this daemon's runs and sessions is left: its groups are its warm
        pools' alone (none once it stopped), full again, every language's: Python's a
        zygote and pool_size ready forks, JavaScript's pool_size node sandboxes; an init
        and a python3 or a node in every group. The shipped default policy is warm."""
        def settled():
            pools = [] if self.proc.poll() is not None else \
                [w for w in self.get("/v1/health").json()["warm"] if "cold_reason" not in w]
            groups = 0
            for w in pools:
                if "python" in w["languages"]:
                    if not (w["zygote_up"] and w["ready"] == w["pool_size"]):
                        return False
                    groups += 1 + w["pool_size"]
                js = w.get("javascript", {"up": False})
                if js["up"]:
                    if js["ready"] != js["pool_size"]:
                        return False
                    groups += js["pool_size"]
            names = {os.path.basename(g) for g in self.leftover_groups()}  # per hierarchy
            return len(names) == groups and \
                len(own_sandbox_processes(self.cgroups)) == 2 * groups
        return wait_for(settled, timeout=timeout, step=0.05)

    def mounted_workspaces(self):
        """Workspace tmpfs mounts of this daemon still in the mount table."""
        with open("/proc/self/mountinfo") as f:
            return [l.split()[4] for l in f if l.split()[4].startswith(self.workspaces + "/")]

    def cleanup(self):
        """Stop it as systemd would; a sanitizer report fails the test."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        if getattr(self, "log", None):
            self.log.close()
        self.final_log = self.text() if self.proc else ""
        # What a failed test may have left: kill it, remove the groups.
        remove_cgroups(self.cgroups)
        for m in self.mounted_workspaces():
            subprocess.run(["umount", "-l", m], check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


def sub_groups(parent):
    """The groups below parent, two levels deep (a tenant's group and the
    sandbox groups in it), the deeper first."""
    out = []
    if os.path.isdir(parent):
        for e in sorted(os.listdir(parent), reverse=True):
            g = os.path.join(parent, e)
            if os.path.isdir(g):
                out += [os.path.join(g, s) for s in sorted(os.listdir(g), reverse=True)
                        if s.startswith("sr-") and os.path.isdir(os.path.join(g, s))]
                out.append(g)
    return out


def remove_cgroups(cgroups):
    """Kill what runs in these test cgroups (and their saferun/ANY and
    saferun/TENANT/ANY groups), then remove them all."""
    for c in cgroups:
        parent = os.path.join(c, "saferun")
        for g in sub_groups(parent):
            kill_group(g)
        for path in (parent, c):
            for _ in range(100):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    kill_group(path)
                    time.sleep(0.02)


def own_sandbox_processes(cgroups):
    """sandbox_processes() in these cgroups only (other saferun runs may
    share the machine)."""
    names = {"/" + os.path.basename(c) + "/" for c in cgroups}
    own = []
    for pid in sandbox_processes():
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                text = f.read()
        except OSError:
            continue
        if any(n in text for n in names):
            own.append(pid)
    return own


# Sandbox code that holds its run until the test's go (release_held), 30 s
# at most, not for a fixed time: it makes an empty /tmp/.hold, and the test,
# root on the host, writes a byte into it through /proc/PID/root (writing,
# not creating: host root owns no uid in the sandbox to create a file as).
HOLD = ("import os, time\nopen('/tmp/.hold', 'w').close()\nend = time.time() + 30\n"
        "while not os.path.getsize('/tmp/.hold') and time.time() < end:\n"
        "    time.sleep(0.01)\n")


def held(cgroups):
    """The python of each run in these cgroups waiting in HOLD."""
    out = []
    for pid in own_sandbox_processes(cgroups):
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            if comm == "python3" and os.path.getsize(f"/proc/{pid}/root/tmp/.hold") == 0:
                out.append(pid)
        except OSError:
            continue
    return out


def release_held(cgroups, n=1, timeout=30):
    """Wait until n runs of these cgroups hold (HOLD), and let them go on."""
    end = time.time() + timeout
    while len(held(cgroups)) < n and time.time() < end:
        time.sleep(0.02)
    pids = held(cgroups)
    assert len(pids) >= n, f"{len(pids)} of {n} runs holding"
    for pid in pids:
        with open(f"/proc/{pid}/root/tmp/.hold", "w") as f:
            f.write("go")


def tree(top):
    """Every path below top (dirs and files)."""
    out = set()
    for root, dirs, files in os.walk(top):
        out.update(os.path.join(root, n) for n in dirs + files)
    return out


def kill_group(d):
    try:
        with open(os.path.join(d, "cgroup.procs")) as f:
            for pid in f.read().split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        os.rmdir(d)
    except OSError:
        pass


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


@pytest.fixture
def make_daemon():
    """Start daemons with given flags; all are stopped and cleaned after."""
    made = []

    def make(*args, start=True, **kw):
        d = Daemon(args, **kw)
        made.append(d)
        return d.start() if start else d

    yield make
    reports = []
    for d in made:
        d.cleanup()
        if "Sanitizer" in d.final_log:
            reports.append(d.final_log)
    assert not reports, "\n".join(reports)


@pytest.fixture
def daemon(make_daemon):
    return make_daemon()


def wait_for(pred, timeout=10, step=0.02):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()
