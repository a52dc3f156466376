"""MCP through real clients from npm, not hand-made requests: the official
TypeScript SDK's Client over Streamable HTTP (loopback TCP with the bearer
token) and over stdio (`saferun mcp`, spawned by the SDK's
StdioClientTransport), and the MCP conformance suite's server scenarios.

The clients are the node scripts in tests/mcp; their packages are pinned in
tests/mcp/package-lock.json and installed by `scripts/bootstrap --test`
(npm ci). Without them these tests fail, they never skip."""
import glob
import json
import os
import secrets
import shutil
import subprocess
import tempfile

import pytest

from conftest import (HOST_POLICY, SAFERUND, cgroup_dirs, own_sandbox_processes,
                      remove_cgroups, wait_for)

SOURCE_DIR = (os.environ.get("SAFERUN_SOURCE_DIR")
              or os.path.join(os.path.dirname(__file__), "..", ".."))
MCP_DIR = os.path.join(SOURCE_DIR, "tests", "mcp")
SAFERUN = os.environ.get("SAFERUN") or os.path.join(os.path.dirname(SAFERUND), "saferun")
CONFORMANCE = os.path.join(MCP_DIR, "node_modules", ".bin", "conformance")
TOKEN = "mcp-clients-token-" + "7" * 24
TOOLS = {"run_python", "check_python", "run_javascript", "run_shell", "create_session", "execute_code", "upload_file",
         "download_file", "list_sessions", "get_session_info", "close_session", "get_packages",
         "get_health", "list_artifacts", "list_src"}
BOOTSTRAP = "run `sudo scripts/bootstrap --test` (it installs node and runs npm ci in tests/mcp)"


@pytest.fixture(scope="module", autouse=True)
def node_clients():
    """node and the pinned packages, or a failure that says how to get them."""
    if not shutil.which("node"):
        pytest.fail(f"node is not installed: {BOOTSTRAP}", pytrace=False)
    with open(os.path.join(MCP_DIR, "package.json")) as f:
        pinned = json.load(f)["dependencies"]
    for name, version in pinned.items():
        path = os.path.join(MCP_DIR, "node_modules", name, "package.json")
        if not os.path.exists(path):
            pytest.fail(f"tests/mcp/node_modules has no {name}: {BOOTSTRAP}", pytrace=False)
        with open(path) as f:
            installed = json.load(f)["version"]
        if installed != version:
            pytest.fail(f"tests/mcp/node_modules has {name} {installed}, package.json pins "
                        f"{version}: {BOOTSTRAP}", pytrace=False)


def node(script, *args, env=None, cwd=None, preexec_fn=None, expect_ok=True, timeout=180):
    """Run one of the node scripts; its summary is the last line of stdout."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_")}
    full_env.update(env or {})
    p = subprocess.run(["node", os.path.join(MCP_DIR, script), *args], capture_output=True,
                       text=True, env=full_env, cwd=cwd or MCP_DIR, preexec_fn=preexec_fn,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    lines = p.stdout.strip().splitlines()
    assert lines, f"{script} printed nothing (exit {p.returncode}); stderr:\n{p.stderr}"
    summary = json.loads(lines[-1])
    if expect_ok:
        assert p.returncode == 0 and summary["ok"] is True, \
            f"{script} failed (exit {p.returncode}):\n{p.stderr}"
    return summary


def mcp_requests(d):
    return [r for r in d.lines("request") if r["path"] in ("/mcp", "/mcp/")]


def daemon_sessions(d):
    r = d.get("/sessions")
    assert r.status_code == 200, r.text
    return r.json()


def RUNS(sid):
    """What roundtrip.mjs runs: (session, status) of each run in order."""
    return [(None, "ok"), (None, "error"), (sid, "ok"), (sid, "error")]


def assert_session_logged(lines, sid):
    """The session's start and its close_session, in the server's log."""
    assert [l["session"] for l in lines if "session" in l] == [sid]
    assert [l["msg"] for l in lines if "msg" in l] == \
        [f"{sid} closed (closed by request) after 2 runs"]


def assert_daemon_left_nothing(d):
    assert daemon_sessions(d) == {"active_sessions": [], "count": 0}
    assert d.mounted_workspaces() == []
    if os.path.isdir(d.workspaces):
        assert os.listdir(d.workspaces) == []
    # the shipped default policy is warm: its pool's groups stay
    assert d.only_pools_left(), (d.leftover_groups(), own_sandbox_processes(d.cgroups))


# ---- Streamable HTTP on loopback TCP, with the token -------------------------

def test_sdk_client_over_tcp_with_the_token(make_daemon):
    d = make_daemon(tcp=True, token=TOKEN)
    s = node("roundtrip.mjs", env={"MCP_URL": d.tcp_url("/mcp"), "MCP_TOKEN": TOKEN})
    assert s["transport"] == "http"
    assert s["server"]["name"] == "saferun" and s["protocol_version"] == "2025-11-25"
    assert set(s["tools"]) == TOOLS and len(s["tools"]) == len(TOOLS)
    assert s["after_delete"] == 404
    # (a request's log line may come just after its answer)
    assert wait_for(lambda: [r["status"] for r in mcp_requests(d)][-1:] == [404], timeout=5)
    reqs = mcp_requests(d)
    assert reqs and all(r["peer"]["addr"].startswith("127.0.0.1:") for r in reqs)
    assert not [r for r in reqs if r["status"] >= 500 or r["status"] == 401]
    # the SDK ended its MCP session with DELETE; the request after it was 404
    deletes = [r for r in reqs if r["method"] == "DELETE"]
    assert [r["status"] for r in deletes] == [200]
    assert reqs[-1]["method"] == "POST" and reqs[-1]["status"] == 404
    # the runs were the daemon's: run_python's two, then the session's two
    # (execute_code after close_session ran nothing)
    assert [(r.get("session"), r["status"]) for r in d.lines("run")] == RUNS(s["session_id"])
    assert_session_logged(d.lines("session"), s["session_id"])
    assert_daemon_left_nothing(d)


def test_sdk_client_at_mcp_with_a_trailing_slash(make_daemon):
    d = make_daemon(tcp=True, token=TOKEN)
    s = node("call.mjs", "--url", d.tcp_url("/mcp/"), "--token", TOKEN,
             "run_python", json.dumps({"code": "print(6 * 7)"}))
    r = s["results"][0]
    assert r["isError"] is False and r["structuredContent"]["stdout"] == "42\n"
    assert r["content"][0]["text"].startswith("42\n[status: ok, exit code 0, ")
    assert {r["path"] for r in mcp_requests(d)} == {"/mcp/"}
    assert_daemon_left_nothing(d)


@pytest.mark.parametrize("token,detail", [
    (None, "Authorization: Bearer TOKEN"),
    ("wrong-" + TOKEN, "the bearer token is wrong"),
    (TOKEN[:-1], "the bearer token is wrong"),
], ids=["missing", "wrong", "one-character-short"])
def test_sdk_client_without_the_right_token_cannot_connect(make_daemon, token, detail):
    d = make_daemon(tcp=True, token=TOKEN)
    args = ["--url", d.tcp_url("/mcp")] + (["--token", token] if token else [])
    s = node("unauthorized.mjs", *args)
    assert s["refused"] == 401 and detail in s["message"]
    assert wait_for(lambda: mcp_requests(d), timeout=5)
    reqs = mcp_requests(d)
    assert {(r["method"], r["status"]) for r in reqs} == {("POST", 401)}
    assert d.lines("run") == []
    # the same client with the token gets in (the 401 was about the token)
    s = node("call.mjs", "--url", d.tcp_url("/mcp"), "--token", TOKEN, "get_health", "{}")
    assert s["results"][0]["structuredContent"]["status"] == "healthy"
    assert_daemon_left_nothing(d)


def test_sessions_are_shared_with_the_rest_api(make_daemon):
    d = make_daemon(tcp=True, token=TOKEN)
    r = d.post("/v1/sessions", {"stateful": True})
    assert r.status_code == 201, r.text
    rest_sid = r.json()["session_id"]
    s = node("call.mjs", "--url", d.tcp_url("/mcp"), "--token", TOKEN,
             "list_sessions", "{}",
             "execute_code", json.dumps({"session_id": rest_sid, "code": "x = 41"}),
             "execute_code", json.dumps({"session_id": rest_sid, "code": "print(x + 1)"}),
             "create_session", "{}")
    listed, first, second, created = [r["structuredContent"] for r in s["results"]]
    assert listed == {"active_sessions": [rest_sid], "count": 1}
    assert first == {"success": True, "output": ""}
    assert second == {"success": True, "output": "42\n"}  # a stateful REST session keeps x
    mcp_sid = created["session_id"]
    # ending the MCP session (call.mjs sent DELETE /mcp) closed no sandbox session
    assert wait_for(lambda: [r["status"] for r in mcp_requests(d)
                             if r["method"] == "DELETE"] == [200], timeout=5)
    assert daemon_sessions(d) == {"active_sessions": [rest_sid, mcp_sid], "count": 2}
    assert d.get(f"/v1/sessions/{mcp_sid}").status_code == 200
    for sid in (rest_sid, mcp_sid):
        with d.session() as http:
            assert http.delete(d.url(f"/sessions/{sid}"), timeout=30).status_code == 200
    assert_daemon_left_nothing(d)


# ---- the MCP conformance suite ------------------------------------------------

@pytest.fixture
def scratch():
    d = tempfile.mkdtemp(prefix="mcp-conformance-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("scenario", ["server-initialize", "tools-list"])
def test_conformance_scenario(make_daemon, scratch, scenario):
    # The suite's client sends no token: loopback TCP without one.
    d = make_daemon("--listen", "127.0.0.1:0", "--insecure-no-token")
    url = f"http://{d.tcp_addr}/mcp"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_")}
    # It writes results/ into its cwd: a temp dir, never the repo.
    p = subprocess.run([CONFORMANCE, "server", "--url", url, "--scenario", scenario],
                       cwd=scratch, capture_output=True, text=True, env=env, timeout=180,
                       stdin=subprocess.DEVNULL)
    out = p.stdout + p.stderr
    dirs = glob.glob(os.path.join(scratch, "results", f"server-{scenario}-*"))
    assert len(dirs) == 1, out
    with open(os.path.join(dirs[0], "checks.json")) as f:
        checks = json.load(f)
    # exit 1 only when a check FAILED; so read the checks themselves too
    assert [(c["id"], c["status"]) for c in checks] == [(scenario, "SUCCESS")], out
    assert "Passed: 1/1, 0 failed, 0 warnings" in p.stdout, out
    assert p.returncode == 0, out
    if scenario == "tools-list":
        assert set(checks[0]["details"]["tools"]) == TOOLS
        assert checks[0]["details"]["toolCount"] == len(TOOLS)
    else:
        assert checks[0]["details"]["connected"] is True
    assert not os.path.exists(os.path.join(MCP_DIR, "results"))
    assert wait_for(lambda: mcp_requests(d), timeout=5)
    reqs = mcp_requests(d)
    assert not [r for r in reqs if r["status"] >= 500]
    assert_daemon_left_nothing(d)


# ---- stdio: saferun mcp, spawned by the SDK -----------------------------------

class StdioSetup:
    """Policies, a workspaces dir and cgroups of its own for the node client
    and the `saferun mcp` it spawns (so the leftover checks are its own)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="mcp-stdio-")
        os.chmod(self.dir, 0o755)  # the sandbox's user walks this path to its workspace
        self.policies = os.path.join(self.dir, "policies")
        self.workspaces = os.path.join(self.dir, "workspaces")
        os.mkdir(self.policies)
        os.mkdir(self.workspaces)
        for name in ("default", "host"):
            with open(os.path.join(self.policies, name + ".json"), "w") as f:
                json.dump(HOST_POLICY, f)
        self.cgroups = cgroup_dirs("mcp-stdio-test-" + secrets.token_hex(4))
        for c in self.cgroups:
            os.makedirs(c, exist_ok=True)

    def command(self):
        return ["--stdio", "--", SAFERUN, "mcp", "--policies-dir", self.policies,
                "--workspaces-dir", self.workspaces]

    def enter(self):
        for c in self.cgroups:
            with open(os.path.join(c, "cgroup.procs"), "w") as f:
                f.write("0")

    def leftover_groups(self):
        left = []
        for c in self.cgroups:
            parent = os.path.join(c, "saferun")
            if os.path.isdir(parent):
                left += [e for e in os.listdir(parent) if os.path.isdir(os.path.join(parent, e))]
        return left

    def mounts(self):
        with open("/proc/self/mountinfo") as f:
            return [l.split()[4] for l in f if l.split()[4].startswith(self.workspaces + "/")]

    def check_server(self, summary):
        """The server that ran: its ready line, a clean exit, nothing left."""
        log = [json.loads(l) for l in summary["server_stderr"].splitlines() if l.startswith("{")]
        assert "Sanitizer" not in summary["server_stderr"], summary["server_stderr"]
        ready = [l for l in log if l.get("event") == "ready"]
        assert len(ready) == 1 and ready[0]["transport"] == "stdio", summary["server_stderr"]
        assert ready[0]["pid"] == summary["server_pid"]
        assert ready[0]["workspaces"] == os.path.join(self.workspaces, str(summary["server_pid"]))
        assert summary["server_exit"]["code"] == 0 and summary["server_exit"]["signal"] is None
        assert os.listdir(self.workspaces) == []
        assert self.mounts() == []
        assert wait_for(lambda: self.leftover_groups() == [], timeout=5), self.leftover_groups()
        assert wait_for(lambda: own_sandbox_processes(self.cgroups) == [], timeout=5)
        return log

    def cleanup(self):
        for m in self.mounts():
            subprocess.run(["umount", "-l", m], check=False)
        remove_cgroups(self.cgroups)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def stdio():
    s = StdioSetup()
    yield s
    s.cleanup()


def test_sdk_client_over_stdio(stdio):
    s = node("roundtrip.mjs", *stdio.command(), preexec_fn=stdio.enter)
    assert s["transport"] == "stdio"
    assert s["server"]["name"] == "saferun"
    assert set(s["tools"]) == TOOLS and len(s["tools"]) == len(TOOLS)
    log = stdio.check_server(s)
    runs = [l for l in log if l.get("event") == "run"]
    assert [(r.get("session"), r["status"]) for r in runs] == RUNS(s["session_id"])
    assert all(r["peer"] == {"addr": "stdio"} for r in runs)
    assert_session_logged([l for l in log if l.get("event") == "session"], s["session_id"])


def test_stdio_server_at_eof_finishes_its_run_and_closes_its_sessions(stdio):
    """A session left open and a run still going when the client closes
    stdin: the run's answer still comes, then the sessions' files go."""
    s = node("call.mjs", "--inflight", "import time\ntime.sleep(0.5)\nprint('late')",
             *stdio.command(), "--",
             "create_session", "{}",
             "upload_file", json.dumps({"session_id": "{{session_id}}", "filename": "in.txt",
                                        "content_base64": "aGVsbG8="}),
             "execute_code", json.dumps({"session_id": "{{session_id}}",
                                         "code": "open('artifacts/out.txt', 'w').write("
                                                 "open('src/in.txt').read().upper())"}),
             "list_artifacts", json.dumps({"session_id": "{{session_id}}"}),
             preexec_fn=stdio.enter)
    created, uploaded, executed, artifacts = [r["structuredContent"] for r in s["results"]]
    assert uploaded["success"] is True and executed == {"success": True, "output": ""}
    assert [(a["name"], a["size_bytes"]) for a in artifacts["artifacts"]] == [("out.txt", 5)]
    assert s["inflight"]["answered"] is True, s["inflight"]
    late = s["inflight"]["result"]
    assert late["isError"] is False and late["structuredContent"]["stdout"] == "late\n"
    log = stdio.check_server(s)
    # the run in flight ended first, then the open session was closed
    events = [(l["event"], l.get("session"), l.get("msg")) for l in log
              if l.get("event") in ("run", "session")]
    sid = created["session_id"]
    assert events == [("session", sid, None), ("run", sid, None), ("run", None, None),
                      ("session", None, f"{sid} closed (shutdown) after 1 run")]


def test_stdio_sessions_are_not_the_daemons(make_daemon, stdio):
    """A stdio server next to a daemon: neither sees the other's sessions."""
    d = make_daemon()
    r = d.post("/v1/sessions", {})
    assert r.status_code == 201, r.text
    daemon_sid = r.json()["session_id"]
    s = node("call.mjs", *stdio.command(), "--",
             "list_sessions", "{}",
             "get_session_info", json.dumps({"session_id": daemon_sid}),
             preexec_fn=stdio.enter)
    listed, info = s["results"]
    assert listed["structuredContent"] == {"active_sessions": [], "count": 0}
    assert info["isError"] is True
    assert info["structuredContent"] == {"success": False,
                                         "error": f"Session {daemon_sid} not found"}
    stdio.check_server(s)
    assert daemon_sessions(d) == {"active_sessions": [daemon_sid], "count": 1}
    assert [os.path.basename(m) for m in d.mounted_workspaces()] == [daemon_sid]


# ---- output as progress notifications (the SDK's onprogress) ------------------

# Prints, sleeps, then takes the time and prints it: the first notification
# must have reached the client before the code took that time.
PROGRESS_CODE = """import sys, time
print("first", flush=True)
time.sleep(0.4)
print(repr(time.time()), flush=True)
print("to stderr", file=sys.stderr, flush=True)
"""


def check_progress(s):
    res = s["result"]
    assert res["isError"] is False, res
    out = res["structuredContent"]
    progress = s["progress"]
    # the output, stdout and stderr in the order they came, as it was printed
    assert "".join(p["message"] for p in progress) == out["output"], progress
    values = [p["progress"] for p in progress]
    assert values == sorted(values) and len(set(values)) == len(values), values
    marker = float(out["stdout"].splitlines()[1])
    assert progress[0]["message"].startswith("first"), progress
    assert progress[0]["t"] < marker < s["answered_t"], (progress[0]["t"], marker)


def test_sdk_onprogress_gets_the_output_while_run_python_runs(make_daemon):
    d = make_daemon(tcp=True, token=TOKEN)
    s = node("progress.mjs", "--url", d.tcp_url("/mcp"), "--token", TOKEN, PROGRESS_CODE)
    assert s["transport"] == "http" and s["protocol_version"] == "2025-11-25"
    check_progress(s)


def test_sdk_onprogress_over_stdio(stdio):
    s = node("progress.mjs", *stdio.command(), "--", PROGRESS_CODE, preexec_fn=stdio.enter)
    assert s["transport"] == "stdio"
    check_progress(s)
    stdio.check_server(s)
