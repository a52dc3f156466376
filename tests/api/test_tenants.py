"""Tenants: the operator's tenants file maps bearer tokens and unix-socket
peers to tenants; each tenant reaches only its own sessions (another's
answer exactly as an id that never existed), lists only its own, and may
relax the checker only within its ceiling."""
import hashlib
import json
import os
import signal
import subprocess
import sys

import pytest
import requests

from conftest import HOLD, release_held, wait_for

TOKEN_A = "tenant-a-token-0123456789abcdef"
TOKEN_B = "tenant-b-token-0123456789abcdef"
NOBODY = 65534
UNKNOWN_ID = "0123456789abcdef"


def tenants_daemon(make_daemon, tenants, *args, start=True, tcp=True, **kw):
    d = make_daemon(*args, start=False, tcp=tcp, **kw)
    path = os.path.join(d.dir, "tenants.json")
    with open(path, "w") as f:
        f.write(tenants if isinstance(tenants, str) else json.dumps({"tenants": tenants}))
    d.args += ["--tenants", path]
    return d.start() if start else d


def two_tenants(make_daemon, *args, **kw):
    """A by its token and by uid 0 (root, this test); B by the digest of
    its token and by uid 65534."""
    digest = hashlib.sha256(TOKEN_B.encode()).hexdigest()
    return tenants_daemon(make_daemon, [
        {"name": "a", "tokens": [TOKEN_A], "uids": [0]},
        {"name": "b", "tokens": ["sha256:" + digest], "uids": [NOBODY]},
    ], *args, **kw)


class Tcp:
    def __init__(self, d, token):
        self.d, self.h = d, {"Authorization": "Bearer " + token}

    def __call__(self, method, path, **kw):
        return requests.request(method, self.d.tcp_url(path), headers=self.h, timeout=60, **kw)


def refuses_start(d):
    d.start(wait=False)
    d.proc.wait(timeout=30)
    assert d.proc.returncode == 2
    return d.lines("start")[-1]["msg"]


@pytest.mark.parametrize("tenants,message", [
    ([{"name": "a", "tokens": [TOKEN_A], "quotas": {"max_sesions": 1}}],
     "tenants[0].quotas.max_sesions: unknown quota"),
    ([{"name": "a", "tokens": [TOKEN_A], "quotas": {"max_sessions": "many"}}],
     "tenants[0].quotas.max_sessions: is not a whole number"),
    ([{"name": "a", "tokens": ["short"]}], "tenants[0].tokens: [0] must be a token of 16"),
    ([{"name": "a", "tokens": ["sha256:abc"]}], "tenants[0].tokens: [0] is not sha256:"),
    ([{"name": "a", "uids": [-1]}], "tenants[0].uids: [0] must be a whole number"),
    ([{"name": "a", "tokens": [TOKEN_A], "colour": "red"}], "tenants[0].colour: unknown key"),
    ([{"name": "a", "tokens": [TOKEN_A]}, {"name": "b", "tokens": [TOKEN_A]}],
     "tenants[1]: tokens[0] is tenants[0]'s too"),
    ([{"name": "a", "uids": [5]}, {"name": "a", "uids": [6]}],
     "tenants[1]: the name \"a\" is tenants[0]'s too"),
    ([{"name": "a"}], "tenants[0]: tenant \"a\" has no tokens, uids or gids"),
    ([{"name": "a", "uids": [5], "policies": ["nope"]}],
     "tenants[0].policies[0]: no policy \"nope\""),
    ([], "tenants: is empty"),
    ([{"name": "a", "uids": [5], "weight": 0}],
     "tenants[0].weight: 0 is not a whole number from 1 to 10000"),
    ([{"name": "a", "uids": [5], "weight": "heavy"}],
     'tenants[0].weight: "heavy" is not a whole number from 1 to 10000'),
    ([{"name": "a", "uids": [5], "weight": 10001}],
     "tenants[0].weight: 10001 is not a whole number from 1 to 10000"),
])
def test_a_bad_tenants_file_stops_the_start_naming_the_path(make_daemon, tenants, message):
    d = tenants_daemon(make_daemon, tenants, start=False, tcp=False)
    msg = refuses_start(d)
    assert message in msg, msg
    assert msg.startswith("saferund: tenants ") or "policies[0]" in msg


def test_a_token_file_besides_tenants_stops_the_start(make_daemon):
    d = tenants_daemon(make_daemon, [{"name": "a", "uids": [0]}], start=False, tcp=False)
    d.env["SAFERUND_TOKEN"] = TOKEN_A
    assert "with a tenants file" in refuses_start(d)


def test_tokens_map_to_tenants_and_others_are_401(make_daemon):
    d = two_tenants(make_daemon)
    assert Tcp(d, TOKEN_A)("GET", "/v1/health").status_code == 200
    assert Tcp(d, TOKEN_B)("GET", "/v1/health").status_code == 200  # by its digest
    r = Tcp(d, "not-a-tenant-token-0123456789")("GET", "/v1/health")
    assert r.status_code == 401 and r.json()["error"] == "the bearer token is wrong"
    Tcp(d, TOKEN_B)("POST", "/v1/run", json={"code": "print(1)"})
    assert d.lines("run")[-1]["peer"]["tenant"] == "b"


def not_found_alike(got, never):
    """Another tenant's id answers as an id that never existed: same status,
    same body but for the id."""
    sid = got.url.split("/sessions/")[1].split("/")[0]
    assert got.status_code == never.status_code == 404, (got.text, never.text)
    assert got.text.replace(sid, UNKNOWN_ID) == never.text


def test_b_cannot_reach_a_s_sessions_on_any_route(make_daemon):
    d = two_tenants(make_daemon)
    a, b = Tcp(d, TOKEN_A), Tcp(d, TOKEN_B)
    native = a("POST", "/v1/sessions", json={}).json()["session_id"]
    arp = a("POST", "/sessions").json()["session_id"]
    assert a("PUT", f"/v1/sessions/{native}/files/src/x.txt", data=b"secret").status_code == 201
    assert b("GET", "/v1/sessions").json() == {"count": 0, "sessions": []}
    assert b("GET", "/sessions").json() == {"count": 0, "active_sessions": []}
    assert a("GET", "/v1/sessions").json()["count"] == 2
    assert sorted(a("GET", "/sessions").json()["active_sessions"]) == sorted([native, arp])
    for sid in (native, arp):
        for method, path, kw in (
                ("GET", "/v1/sessions/{}", {}),
                ("POST", "/v1/sessions/{}/run", {"json": {"code": "print(1)"}}),
                ("GET", "/v1/sessions/{}/files", {}),
                ("GET", "/v1/sessions/{}/files/src/x.txt", {}),
                ("PUT", "/v1/sessions/{}/files/src/y.txt", {"data": b"y"}),
                ("DELETE", "/v1/sessions/{}/files/src/x.txt", {}),
                ("GET", "/sessions/{}", {}),
                ("POST", "/sessions/{}/execute", {"json": {"python_code": "print(1)"}}),
                ("POST", "/sessions/{}/copy-to", {"files": {"file": ("z.txt", b"z")}}),
                ("POST", "/sessions/{}/copy-from",
                 {"json": {"src_path": "artifacts/x", "filename": "x"}}),
                ("GET", "/sessions/{}/artifacts", {}),
                ("GET", "/sessions/{}/artifacts/x", {}),
                ("GET", "/sessions/{}/src", {}),
                ("DELETE", "/v1/sessions/{}", {}),
                ("DELETE", "/sessions/{}", {})):
            not_found_alike(b(method, path.format(sid), **kw),
                            b(method, path.format(UNKNOWN_ID), **kw))
    # all still there, the file untouched
    assert a("GET", f"/v1/sessions/{native}/files/src/x.txt").content == b"secret"
    assert a("GET", "/v1/sessions").json()["count"] == 2
    assert d.lines("run") == []


class McpClient:
    def __init__(self, d, token):
        self.call = Tcp(d, token)
        self.h = {"Accept": "application/json",
                  "Content-Type": "application/json"}
        r = self.post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "t", "version": "1"}}})
        assert r.status_code == 200, r.text
        self.sid = r.headers["Mcp-Session-Id"]

    def post(self, msg, sid=None):
        h = dict(self.h, **({"Mcp-Session-Id": sid} if sid else {}))
        self.call.h.update(h)
        return self.call("POST", "/mcp", data=json.dumps(msg))

    def tool(self, name, args, sid=None):
        r = self.post({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": name, "arguments": args}}, sid or self.sid)
        assert r.status_code == 200, r.text
        return r.json()["result"]


def test_mcp_sessions_and_tools_belong_to_their_tenant(make_daemon):
    d = two_tenants(make_daemon)
    a, b = McpClient(d, TOKEN_A), McpClient(d, TOKEN_B)
    sid = a.tool("create_session", {})["structuredContent"]["session_id"]
    assert a.tool("list_sessions", {})["structuredContent"]["active_sessions"] == [sid]
    assert b.tool("list_sessions", {})["structuredContent"] == {"active_sessions": [], "count": 0}
    for name, args in (("get_session_info", {}), ("execute_code", {"code": "print(1)"}),
                       ("list_artifacts", {}), ("close_session", {})):
        theirs = b.tool(name, {"session_id": sid, **args})
        never = b.tool(name, {"session_id": UNKNOWN_ID, **args})
        assert theirs["isError"] and json.dumps(theirs).replace(sid, UNKNOWN_ID) == \
            json.dumps(never), (theirs, never)
    assert a.tool("get_session_info", {"session_id": sid})["isError"] is False
    # A's MCP session id is no use to B: 404 as an unknown one
    r = b.post({"jsonrpc": "2.0", "id": 3, "method": "ping"}, sid=a.sid)
    assert r.status_code == 404
    assert b.post({"jsonrpc": "2.0", "id": 3, "method": "ping"}, sid=b.sid).status_code == 200


def as_uid(uid, socket_path, method, path, body=None):
    """One request over the unix socket from a process running as uid."""
    code = ("import http.client, json, socket, sys\n"
            "class C(http.client.HTTPConnection):\n"
            "    def connect(self):\n"
            "        self.sock = socket.socket(socket.AF_UNIX)\n"
            "        self.sock.connect(sys.argv[1])\n"
            "c = C('localhost', timeout=60)\n"
            "c.request(sys.argv[2], sys.argv[3], body=sys.argv[4] or None,\n"
            "          headers={'Content-Type': 'application/json'})\n"
            "r = c.getresponse()\n"
            "print(json.dumps({'status': r.status, 'body': r.read().decode()}))\n")

    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    p = subprocess.run(["/usr/bin/python3", "-c", code, socket_path, method, path,
                        json.dumps(body) if body is not None else ""],
                       preexec_fn=drop, capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    return out["status"], out["body"]


def test_unix_socket_peers_are_their_uid_s_tenant(make_daemon):
    d = two_tenants(make_daemon, tcp=False)
    os.chmod(d.socket, 0o666)  # the test's own socket: let uid 65534 connect
    mine = d.post("/v1/sessions", {}).json()["session_id"]
    status, body = as_uid(NOBODY, d.socket, "GET", "/v1/sessions")
    assert status == 200 and json.loads(body) == {"count": 0, "sessions": []}
    theirs = as_uid(NOBODY, d.socket, "GET", f"/v1/sessions/{mine}")
    never = as_uid(NOBODY, d.socket, "GET", f"/v1/sessions/{UNKNOWN_ID}")
    assert theirs[0] == never[0] == 404 and theirs[1].replace(mine, UNKNOWN_ID) == never[1]
    status, body = as_uid(NOBODY, d.socket, "POST", "/v1/sessions", {})
    assert status == 201
    own = json.loads(body)["session_id"]
    assert d.get(f"/v1/sessions/{own}").status_code == 404  # root is tenant a
    assert [s["session_id"] for s in d.get("/v1/sessions").json()["sessions"]] == [mine]
    # a uid in no tenant is refused before anything is routed
    status, body = as_uid(NOBODY - 1, d.socket, "GET", "/v1/health")
    assert status == 403 and "no tenant" in json.loads(body)["error"]


def test_a_tenant_s_session_quota_is_429_naming_it(make_daemon):
    d = tenants_daemon(make_daemon, [{"name": "a", "uids": [0], "quotas": {"max_sessions": 1}},
                                     {"name": "b", "uids": [NOBODY]}], tcp=False)
    assert d.post("/v1/sessions", {}).status_code == 201
    r = d.post("/v1/sessions", {})
    assert r.status_code == 429 and r.headers["Retry-After"] == "10"
    assert r.json()["error"].startswith('tenant "a" has 1 sessions open (its max_sessions quota)')


def metrics(d, token=TOKEN_A):
    """{series: value} of GET /metrics."""
    r = Tcp(d, token)("GET", "/metrics") if d.tcp_addr else d.get("/metrics")
    assert r.status_code == 200
    return {name: float(value) for name, _, value in
            (line.rpartition(" ") for line in r.text.splitlines() if line and line[0] != "#")}


NOT_REFUSED = {f'runs_refused_total{{reason="{r}"}}': 0
               for r in ("bad_request", "queue_full", "draining", "client_gone")}


def tenant_series(m, tenant):
    """The series of one tenant, its label taken out: {"runs_total{...}": n}."""
    label = f'tenant="{tenant}"'
    out = {}
    for name, value in m.items():
        if name.startswith("saferund_tenant_") and label in name:
            short = name[len("saferund_tenant_"):].replace(label + ",", "").replace(label, "")
            out[short.replace("{}", "")] = value
    return out


def test_without_a_tenants_file_everyone_is_one_tenant(make_daemon):
    """...and the metrics by tenant have the one tenant "default", whose
    counts are the daemon's; its log lines name no tenant, as before."""
    d = make_daemon()
    sid = d.post("/v1/sessions", {}).json()["session_id"]
    assert [s["session_id"] for s in d.get("/v1/sessions").json()["sessions"]] == [sid]
    r = d.post("/v1/run", {"code": "print(eval('6*7'))", "allow": ["eval"]})
    assert r.status_code == 200 and r.json()["output"] == "42\n"  # no ceiling
    m = metrics(d)
    assert tenant_series(m, "default") == {
        'runs_total{language="python",status="ok"}': 1, "commands_total": 0,
        "runs_in_flight": 0, "queue_depth": 0, "sessions": 1, **NOT_REFUSED}
    assert m['saferund_runs_total{status="ok"}'] == 1 and m["saferund_sessions"] == 1
    assert [k for k in m if "tenant=" in k and 'tenant="default"' not in k] == []
    assert "tenant" not in d.lines("run")[-1]["peer"]


SUBPROCESS = {"code": "import subprocess; print(subprocess.run(['/bin/echo', 'escaped'], "
                      "capture_output=True, text=True).stdout)",
              "allow": ["SR101", "SR102", "SR201", "SR401", "subprocess", "subprocess.run"]}


def test_a_request_cannot_relax_the_checker_beyond_the_ceiling(make_daemon):
    d = two_tenants(make_daemon)
    a = Tcp(d, TOKEN_A)
    r = a("POST", "/v1/run", json=SUBPROCESS)
    assert r.status_code == 400, r.text
    assert r.json()["field"] == "allow[0]"
    assert r.json()["error"].startswith(
        'allow[0]: "SR101" is beyond tenant "a"\'s checker ceiling')
    sid = a("POST", "/v1/sessions", json={}).json()["session_id"]
    r = a("POST", f"/v1/sessions/{sid}/run", json=SUBPROCESS)
    assert r.status_code == 400 and r.json()["field"] == "allow[0]"
    arp = a("POST", "/sessions").json()["session_id"]
    r = a("POST", f"/sessions/{arp}/execute",
          json={"python_code": SUBPROCESS["code"], "ignore_unsafe_functions": ["subprocess.run"]})
    assert r.status_code == 400
    assert r.json()["detail"].startswith('ignore_unsafe_functions[0]: "subprocess.run" is beyond')
    # within the default ceiling: a name that flags data-science code
    r = a("POST", "/v1/run", json={"code": "g = globals()['__name__']; print(g)",
                                   "allow": ["SR202"]})
    assert r.status_code == 200 and r.json()["output"] == "__main__\n", r.text
    assert not any("escaped" in json.dumps(l) for l in d.lines("run"))


def test_the_mcp_tool_error_names_the_entry(make_daemon):
    d = two_tenants(make_daemon)
    m = McpClient(d, TOKEN_B)
    res = m.tool("run_python", SUBPROCESS)
    assert res["isError"] is True
    assert res["content"][0]["text"].startswith(
        'allow[0]: "SR101" is beyond tenant "b"\'s checker ceiling')
    sid = m.tool("create_session", {})["structuredContent"]["session_id"]
    res = m.tool("execute_code", {"session_id": sid, "code": SUBPROCESS["code"],
                                  "ignore_unsafe_functions": ["subprocess"]})
    assert res["structuredContent"]["success"] is False
    assert res["structuredContent"]["error"].startswith(
        'ignore_unsafe_functions[0]: "subprocess" is beyond')


def test_a_tenant_s_own_ceiling_and_the_policy_s_allow_pass(make_daemon):
    policy = {"filesystem": {"profile": "host"}, "checker": {"allow": ["exec"]}}
    d = tenants_daemon(make_daemon, [{"name": "a", "uids": [0], "checker_ceiling": ["eval"]}],
                       policies={"default": policy}, tcp=False)
    assert d.run("print(eval('6*7'))", allow=["eval"])["output"] == "42\n"
    assert d.run("exec('print(5)')", allow=["exec"])["output"] == "5\n"  # the policy's own
    r = d.post("/v1/run", {"code": "print(1)", "allow": ["eval", "SR201"]})
    assert r.status_code == 400 and r.json()["field"] == "allow[1]"


def test_a_tenant_may_use_only_its_policies(make_daemon):
    d = tenants_daemon(make_daemon, [{"name": "a", "uids": [0], "policies": ["host"]}], tcp=False)
    assert d.run("print(1)", policy="host")["status"] == "ok"
    r = d.post("/v1/run", {"code": "print(1)"})  # the default policy is not among its
    assert r.status_code == 403 and r.json()["field"] == "policy"
    assert r.json()["error"] == 'tenant "a" may not use policy "default"'
    assert d.post("/v1/sessions", {"policy": "default"}).status_code == 403


def in_threads(calls):
    """Start each call in a thread; join() waits for them all."""
    import threading
    threads = [threading.Thread(target=c, daemon=True) for c in calls]
    for t in threads:
        t.start()
    return threads


def health(d):
    return Tcp(d, TOKEN_A)("GET", "/v1/health").json()


def test_a_tenant_s_run_quota_is_429_and_the_other_tenant_still_runs(make_daemon):
    d = tenants_daemon(make_daemon, [
        {"name": "a", "tokens": [TOKEN_A], "quotas": {"max_concurrent_runs": 1, "queue_depth": 0}},
        {"name": "b", "tokens": [TOKEN_B]}], "--max-runs", "2")
    a, b = Tcp(d, TOKEN_A), Tcp(d, TOKEN_B)
    threads = in_threads([lambda: a("POST", "/v1/run", json={"code": HOLD})])
    assert wait_for(lambda: health(d)["runs_in_flight"] == 1, timeout=60)
    r = a("POST", "/v1/run", json={"code": "print(1)"})
    assert r.status_code == 429 and r.headers["Retry-After"] == "1"
    assert r.json()["error"].startswith(
        'tenant "a" has 1 runs running and 0 waiting (its max_concurrent_runs and queue_depth')
    r = b("POST", "/v1/run", json={"code": "print(2)"})  # the daemon's other slot is b's
    assert r.status_code == 200 and r.json()["output"] == "2\n"
    m = metrics(d)
    assert (m['saferund_tenant_runs_refused_total{tenant="a",reason="queue_full"}'],
            m['saferund_tenant_runs_refused_total{tenant="b",reason="queue_full"}']) == (1, 0)
    release_held(d.cgroups)
    for t in threads:
        t.join(timeout=120)


def test_run_slots_go_to_the_tenants_in_turn(make_daemon):
    """One slot: a's first run holds it while four more of a's wait; b's run,
    queued after them, gets the slot next instead of last."""
    d = two_tenants(make_daemon, "--max-runs", "1")
    a, b = Tcp(d, TOKEN_A), Tcp(d, TOKEN_B)
    threads = in_threads([lambda: a("POST", "/v1/run", json={"code": HOLD})])
    assert wait_for(lambda: health(d)["runs_in_flight"] == 1, timeout=60)
    threads += in_threads([lambda: a("POST", "/v1/run", json={"code": "print('a')"})
                           for _ in range(4)])
    assert wait_for(lambda: health(d)["queue_depth"] == 4, timeout=60)
    assert health(d)["runs_in_flight"] == 1  # the first still runs: the queue is set
    # by tenant in the metrics: a's one run and four waiting, none of b's
    m = metrics(d)
    assert (m['saferund_tenant_runs_in_flight{tenant="a"}'],
            m['saferund_tenant_queue_depth{tenant="a"}'],
            m['saferund_tenant_runs_in_flight{tenant="b"}'],
            m['saferund_tenant_queue_depth{tenant="b"}']) == (1, 4, 0, 0)
    rb = []
    threads += in_threads([lambda: rb.append(b("POST", "/v1/run", json={"code": "print('b')"}))])
    assert wait_for(lambda: health(d)["queue_depth"] == 5, timeout=60)
    release_held(d.cgroups)
    for t in threads:
        t.join(timeout=120)
    assert rb[0].status_code == 200
    order = [l["peer"]["tenant"] for l in d.lines("run")]
    assert order == ["a", "b", "a", "a", "a", "a"], order
    m = metrics(d)
    assert (m['saferund_tenant_runs_total{tenant="a",language="python",status="ok"}'],
            m['saferund_tenant_runs_total{tenant="b",language="python",status="ok"}']) == (5, 1)


def test_metrics_and_logs_carry_the_tenant(make_daemon):
    """Runs by tenant, language and status; sessions by tenant; the log
    lines of runs, sessions opened and closed name their tenant."""
    d = two_tenants(make_daemon)
    a, b = Tcp(d, TOKEN_A), Tcp(d, TOKEN_B)
    assert a("POST", "/v1/run", json={"code": "echo hi", "language": "bash",
                                     "policy": "host"}).json()["status"] == "ok"
    assert a("POST", "/v1/run", json={"code": "1/0"}).json()["status"] == "error"
    assert a("POST", "/v1/run", json={"code": "1", "policy": "nope"}).status_code == 400
    sid = b("POST", "/v1/sessions", json={"stateful": True}).json()["session_id"]
    assert b("POST", f"/v1/sessions/{sid}/run", json={"code": "x = 1"}).json()["status"] == "ok"
    m = metrics(d)
    assert tenant_series(m, "a") == {
        'runs_total{language="bash",status="ok"}': 1,
        'runs_total{language="python",status="error"}': 1,
        "commands_total": 0, "runs_in_flight": 0, "queue_depth": 0, "sessions": 0,
        **NOT_REFUSED, 'runs_refused_total{reason="bad_request"}': 1}
    assert tenant_series(m, "b") == {
        'runs_total{language="python",status="ok"}': 1,
        "commands_total": 0, "runs_in_flight": 0, "queue_depth": 0, "sessions": 1, **NOT_REFUSED}
    assert m['saferund_runs_total{status="ok"}'] == 2 and m["saferund_sessions"] == 1
    assert b("DELETE", f"/v1/sessions/{sid}").status_code in (200, 204)
    assert metrics(d)['saferund_tenant_sessions{tenant="b"}'] == 0
    runs = [(l["peer"]["tenant"], l["language"], l["status"]) for l in d.lines("run")]
    assert runs == [("a", "bash", "ok"), ("a", "python", "error"), ("b", "python", "ok")], runs
    opened, closed = d.lines("session")
    assert (opened["session"], opened["peer"]["tenant"]) == (sid, "b")
    assert closed["msg"].startswith(f"{sid} closed") and closed["tenant"] == "b", closed


def test_by_default_a_tenant_leaves_one_slot_to_the_others(make_daemon):
    """Two slots, two tenants: a's runs at once default to one, so its
    second long run waits and b's run takes the other slot at once."""
    d = two_tenants(make_daemon, "--max-runs", "2")
    a, b = Tcp(d, TOKEN_A), Tcp(d, TOKEN_B)
    threads = in_threads([lambda: a("POST", "/v1/run", json={"code": HOLD})
                          for _ in range(2)])
    assert wait_for(lambda: health(d)["queue_depth"] == 1, timeout=60)
    assert health(d)["runs_in_flight"] == 1
    r = b("POST", "/v1/run", json={"code": "print('b')"})
    assert r.status_code == 200 and r.json()["output"] == "b\n"
    release_held(d.cgroups)  # a's first, then its second
    release_held(d.cgroups)
    for t in threads:
        t.join(timeout=120)
    assert [l["peer"]["tenant"] for l in d.lines("run")] == ["b", "a", "a"]


def test_digest_tokens_of_every_padding_length_authenticate(make_daemon):
    """SHA-256 pads to 64-byte blocks: tokens on each side of the 55/56-byte
    edge and past one block, given by digest, are their tenant's."""
    tokens = ["t" * n for n in (16, 55, 56, 63, 64, 119, 120, 300)]
    d = tenants_daemon(make_daemon, [
        {"name": f"n{len(t)}", "tokens": ["sha256:" + hashlib.sha256(t.encode()).hexdigest()]}
        for t in tokens])
    for t in tokens:
        assert Tcp(d, t)("POST", "/v1/run", json={"code": "print(1)"}).status_code == 200
        assert d.lines("run")[-1]["peer"]["tenant"] == f"n{len(t)}"
    assert Tcp(d, "t" * 57)("GET", "/v1/health").status_code == 401


def cpu_weight(d, share):
    """The tenant group's CPU weight knob and value, from the hierarchy that
    has it: v2's cpu.weight as it is, v1's cpu.shares as a weight."""
    for c in d.cgroups:
        for knob in ("cpu.weight", "cpu.shares"):
            path = os.path.join(c, "saferun", share, knob)
            if os.path.exists(path):
                with open(path) as f:
                    return knob, int(f.read())
    return None


def busy_groups(d, share):
    """Names of the groups below a tenant's group that hold processes."""
    out = set()
    for c in d.cgroups:
        g = os.path.join(c, "saferun", share)
        for e in os.listdir(g) if os.path.isdir(g) else []:
            try:
                with open(os.path.join(g, e, "cgroup.procs")) as f:
                    if f.read().split():
                        out.add(e)
            except OSError:
                pass
    return out


def test_each_tenant_s_sandboxes_sit_in_its_weighted_cgroup(make_daemon):
    """a (weight 300) and b (default 100) each get a cgroup with that CPU
    weight; a's cold run and b's warm run, at the same time, are each in
    their tenant's group; a session's kernel is in its tenant's; after a
    crash the next daemon keeps the groups (and ends what was in them), and
    a stopped daemon leaves none."""
    d = tenants_daemon(make_daemon, [
        {"name": "a", "tokens": [TOKEN_A], "uids": [0], "weight": 300},
        {"name": "b", "tokens": [TOKEN_B]}], "--max-runs", "2")
    knob, _ = cpu_weight(d, "tenant-a")
    want = {"cpu.weight": (300, 100), "cpu.shares": (3072, 1024)}[knob]
    assert (cpu_weight(d, "tenant-a")[1], cpu_weight(d, "tenant-b")[1]) == want
    a, b = Tcp(d, TOKEN_A), Tcp(d, TOKEN_B)
    assert wait_for(lambda: health(d)["warm"][0]["zygote_up"], timeout=30)
    sleep = {"code": "import time; time.sleep(1.5); print('done')"}
    got = {}
    threads = in_threads([
        lambda: got.setdefault("a", a("POST", "/v1/run", json=dict(sleep, policy="host"))),
        lambda: got.setdefault("b", b("POST", "/v1/run", json=sleep))])
    assert wait_for(lambda: busy_groups(d, "tenant-a") and busy_groups(d, "tenant-b"),
                    timeout=30)
    seen = busy_groups(d, "tenant-a"), busy_groups(d, "tenant-b")
    for t in threads:
        t.join(timeout=60)
    ra, rb = got["a"].json(), got["b"].json()
    assert (ra["output"], ra["path"], rb["output"], rb["path"]) == ("done\n", "cold", "done\n", "warm"), \
        json.dumps(d.get("/v1/health").json()["warm"])
    assert seen == ({ra["id"]}, {rb["id"]}), seen
    sid = a("POST", "/v1/sessions", json={"policy": "host", "stateful": True}).json()["session_id"]
    assert a("POST", f"/v1/sessions/{sid}/run", json={"code": "x = 1"}).json()["status"] == "ok"
    assert len(busy_groups(d, "tenant-a")) == 1 and busy_groups(d, "tenant-b") == set()
    d.stop(signal.SIGKILL)  # a crash: the kernel and the groups stay behind
    assert len(busy_groups(d, "tenant-a")) == 1
    d.start()
    assert busy_groups(d, "tenant-a") == set() and cpu_weight(d, "tenant-a")[1] == want[0]
    assert d.stop() == 0
    assert d.share_groups() == [] and d.leftover_groups() == []
