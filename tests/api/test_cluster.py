"""A saferund fleet on this machine (scripts/cluster-up): three nodes, each in
a network namespace and cgroups of its own, behind HAProxy from Debian on
loopback, used with real clients (requests, the MCP SDK client). Stateless
runs spread by load, a session stays on the node in its id, a drained node
finishes its runs and gets no new work while its sessions go on, a node whose
health fails leaves the rotation within 5 s, and from that instant its
sessions answer 503 naming it while the others' go on. The fleet and all it
made go at the end, pass or fail."""
import concurrent.futures as cf
import importlib.machinery
import importlib.util
import json
import os
import re
import signal
import subprocess
import tempfile
import time

import pytest
import requests

from conftest import HOST_POLICY, SAFERUND, wait_for
from test_mcp_clients import node as node_client

SOURCE_DIR = (os.environ.get("SAFERUN_SOURCE_DIR")
              or os.path.join(os.path.dirname(__file__), "..", ".."))
NODES = 3
# the 300 spread runs go warm: a cold run costs ~10x the CPU, and the nodes
# share this machine's cores with whatever else runs
WARM_POLICY = {**HOST_POLICY, "warm": {"enabled": True, "pool_size": 2}}


def load_cluster_script():
    path = os.path.join(SOURCE_DIR, "scripts", "cluster-up")
    loader = importlib.machinery.SourceFileLoader("cluster_up", path)
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader("cluster_up", loader))
    loader.exec_module(mod)
    return mod


cluster_up = load_cluster_script()


class Fleet:
    def __init__(self, state):
        self.state = state
        self.http = requests.Session()
        self.http.headers["Authorization"] = "Bearer " + state["token"]

    def node(self, node_id):
        return next(n for n in self.state["nodes"] if n["id"] == node_id)

    def post(self, path, body=None, **kw):
        return self.http.post(self.state["url"] + path, json=body, timeout=120, **kw)

    def get(self, path, **kw):
        return self.http.get(self.state["url"] + path, timeout=120, **kw)

    def ready_of(self, node_id):
        """GET /v1/ready of the node itself, past the router."""
        url = f"http://{self.node(node_id)['addr']}/v1/ready"
        return self.http.get(url, timeout=30).json()

    def pool_status(self, node_id):
        return cluster_up.haproxy_stat(self.state).get(("pool", node_id))

    def statuses(self, node_id):
        """(pool's server, the session backend's server) for node_id, read
        at one instant."""
        st = cluster_up.haproxy_stat(self.state)
        return st.get(("pool", node_id)), st.get((f"node_{node_id}", node_id))

    def requests_logged(self, node_id, path_prefix):
        lines = []
        for line in cluster_up.node_log(self.node(node_id)).splitlines():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if obj.get("event") == "request" and obj["path"].startswith(path_prefix):
                lines.append(obj)
        return lines

    def session_on(self, node_id, path="/v1/sessions", body=None):
        """Create sessions through the router until one lands on node_id
        (least-connections takes turns: a few tries); the others are closed."""
        for _ in range(4 * NODES):
            r = self.post(path, body or {})
            assert r.status_code in (200, 201), r.text
            sid = r.json()["session_id"]
            if r.headers["Saferun-Node"] == node_id:
                return sid
            assert self.http.delete(self.state["url"] + f"{path}/{sid}", timeout=60).ok
        raise AssertionError(f"no session landed on {node_id}")


@pytest.fixture(scope="module")
def fleet():
    top = tempfile.mkdtemp(prefix="srcl-test-")
    os.chmod(top, 0o755)
    policies = os.path.join(top, "policies")
    os.mkdir(policies)
    for name, doc in (("default", HOST_POLICY), ("host", HOST_POLICY), ("warm", WARM_POLICY)):
        with open(os.path.join(policies, name + ".json"), "w") as f:
            json.dump(doc, f)
    state = None
    try:
        state = cluster_up.up(NODES, os.path.join(top, "fleet"), policies_dir=policies,
                              node_args=["--max-runs", "2", "--shutdown-grace", "20s"],
                              saferund=SAFERUND)
        yield Fleet(state)
    finally:
        # SIGTERM (they drain) and SIGKILL what stays, then read their logs
        if state:
            for n in state["nodes"]:
                cluster_up.stop(n["pid"], state["saferund"], 40)
            logs = [cluster_up.node_log(n) for n in state["nodes"]]
        cluster_up.down(os.path.join(top, "fleet"))
        subprocess.run(["rm", "-rf", top], check=False)
        if state:
            reports = [log for log in logs if "Sanitizer" in log]
            assert not reports, "\n".join(reports)
            netns = subprocess.run(["ip", "netns"], capture_output=True, text=True).stdout
            assert f"srcl-{state['tag']}-" not in netns, netns
            for n in state["nodes"]:
                assert not any(os.path.exists(d) for d in n["cgroups"]), n["cgroups"]
                assert not cluster_up.alive(n["pid"], state["saferund"]), n


def test_stateless_runs_spread_over_the_nodes(fleet):
    def run(i):
        r = fleet.post("/v1/run", {"code": f"print({i})", "policy": "warm"})
        assert r.status_code == 200 and r.json()["output"] == f"{i}\n", r.text
        return r.headers["Saferun-Node"]

    with cf.ThreadPoolExecutor(6) as pool:
        where = list(pool.map(run, range(300)))
    counts = {n: where.count(n) for n in ("n1", "n2", "n3")}
    assert sum(counts.values()) == 300 and min(counts.values()) >= 60, counts


def test_rest_sessions_land_on_one_node_and_stay(fleet):
    for _ in range(NODES):
        r = fleet.post("/v1/sessions", {"stateful": True})
        assert r.status_code == 201, r.text
        sid, node = r.json()["session_id"], r.headers["Saferun-Node"]
        assert re.fullmatch(rf"{node}-[0-9a-f]{{16}}", sid)
        for i in range(4):
            r = fleet.post(f"/v1/sessions/{sid}/run",
                           {"code": "x = 0" if i == 0 else "x += 1; print(x)"})
            assert r.status_code == 200 and r.headers["Saferun-Node"] == node, r.text
        assert r.json()["output"] == "3\n"
        r = fleet.http.put(fleet.state["url"] + f"/v1/sessions/{sid}/files/a.txt", data=b"hi",
                           timeout=60)
        assert r.status_code in (200, 201) and r.headers["Saferun-Node"] == node, r.text
        r = fleet.get(f"/v1/sessions/{sid}/files/a.txt")
        assert r.content == b"hi" and r.headers["Saferun-Node"] == node
        r = fleet.http.delete(fleet.state["url"] + f"/v1/sessions/{sid}", timeout=60)
        assert r.ok and r.headers["Saferun-Node"] == node


def test_agentrunplus_sessions_stay_on_their_node(fleet):
    r = fleet.post("/sessions", {})
    assert r.status_code == 200, r.text
    sid, node = r.json()["session_id"], r.headers["Saferun-Node"]
    # the second run reads what the first left in the session's workspace
    for code in ("open('n.txt', 'w').write('42')", "print(open('n.txt').read())"):
        r = fleet.post(f"/sessions/{sid}/execute", {"python_code": code})
        assert r.status_code == 200 and r.headers["Saferun-Node"] == node, r.text
    assert "42" in json.dumps(r.json())
    for path in (f"/sessions/{sid}", f"/sessions/{sid}/artifacts"):
        r = fleet.get(path)
        assert r.status_code == 200 and r.headers["Saferun-Node"] == node, r.text
    assert fleet.http.delete(fleet.state["url"] + f"/sessions/{sid}", timeout=60).ok


def test_mcp_sdk_client_session_stays_on_its_node(fleet):
    before = {n["id"]: len(fleet.requests_logged(n["id"], "/mcp")) for n in fleet.state["nodes"]}
    s = node_client("call.mjs", "--url", fleet.state["url"] + "/mcp", "--token",
                    fleet.state["token"], "create_session", "{}",
                    "execute_code", json.dumps({"session_id": "{{session_id}}",
                                                "code": "open('z', 'w').write('42')"}),
                    "execute_code", json.dumps({"session_id": "{{session_id}}",
                                                "code": "print(open('z').read())"}))
    node = s["mcp_session_id"].rsplit("-", 1)[0]
    assert re.fullmatch(r"n[1-3]", node) and s["session_id"].startswith(node + "-"), s
    assert "42" in json.dumps(s["results"][-1]), s["results"][-1]
    after = {n["id"]: len(fleet.requests_logged(n["id"], "/mcp")) for n in fleet.state["nodes"]}
    moved = {n: after[n] - before[n] for n in after if after[n] != before[n]}
    # initialize, notifications, three tool calls, the DELETE: all on one node
    assert list(moved) == [node] and moved[node] >= 5, moved


def test_a_drained_node_finishes_its_run_and_gets_no_new_work(fleet):
    n3 = fleet.node("n3")
    sid = fleet.session_on("n3", body={"stateful": True})
    assert fleet.post(f"/v1/sessions/{sid}/run", {"code": "k = 1"}).status_code == 200
    os.kill(n3["pid"], signal.SIGUSR1)
    # /v1/ready says 503 draining: NOLB (no new work), in the pool and in
    # the session backend that tracks it
    assert wait_for(lambda: fleet.pool_status("n3") == "NOLB", timeout=5), fleet.pool_status("n3")
    assert fleet.statuses("n3") == ("NOLB", "NOLB")
    # new work goes elsewhere; n3's session goes on
    with cf.ThreadPoolExecutor(4) as pool:
        where = list(pool.map(lambda i: fleet.post("/v1/run", {"code": "1"}), range(12)))
    assert all(r.status_code == 200 for r in where)
    assert {r.headers["Saferun-Node"] for r in where} <= {"n1", "n2"}
    for _ in range(4):
        r = fleet.post("/v1/sessions", {})
        assert r.status_code == 201 and r.headers["Saferun-Node"] != "n3", r.text
    r = fleet.post(f"/v1/sessions/{sid}/run", {"code": "print(k + 1)"})
    assert r.status_code == 200 and r.json()["output"] == "2\n", r.text
    # SIGTERM with a run in flight: it finishes, then the node exits
    with cf.ThreadPoolExecutor(1) as pool:
        run = pool.submit(fleet.post, f"/v1/sessions/{sid}/run",
                          {"code": "import time; time.sleep(3); print(k + 2)"})
        # n3 itself (out of the pool, so not through the router) says it runs
        assert wait_for(lambda: fleet.ready_of("n3")["runs_in_flight"] == 1, timeout=30)
        os.kill(n3["pid"], signal.SIGTERM)
        r = run.result(timeout=60)
    assert r.status_code == 200 and r.json()["output"] == "3\n", r.text
    assert wait_for(lambda: not cluster_up.alive(n3["pid"], fleet.state["saferund"]), timeout=40)
    r = fleet.get(f"/v1/sessions/{sid}")
    assert r.status_code == 503 and r.json()["node"] == "n3", r.text
    assert "node n3 does not answer" in r.json()["error"]


def test_a_failing_node_leaves_within_5s_and_a_dead_nodes_sessions_name_it(fleet):
    n2 = fleet.node("n2")
    on1, on2 = fleet.session_on("n1"), fleet.session_on("n2")
    os.kill(n2["pid"], signal.SIGSTOP)  # alive, but its checks time out
    try:
        t = time.monotonic()
        # "DOWN": out of the rotation ("UP 1/2" after one failed check is still in)
        seen = []

        def pool_down():
            seen.append(fleet.statuses("n2"))
            return seen[-1][0] == "DOWN"

        assert wait_for(pool_down, timeout=10, step=0.05)
        left = time.monotonic() - t
        assert left < 5, left
        # The session backend tracks the pool's server: the same state at
        # every instant (UP, "UP 1/2", DOWN), not a check of its own that
        # gets there earlier or later. So a session request now is answered
        # by the router; sent to the stopped node it would hang (its kernel
        # still accepts connections), and get a 502 when it dies.
        assert seen[-1] == ("DOWN", "DOWN") and all(p == n for p, n in seen), seen
        r = fleet.http.post(fleet.state["url"] + f"/v1/sessions/{on2}/run", json={"code": "1"},
                            timeout=5)
        assert r.status_code == 503 and r.json()["node"] == "n2", r.text
    finally:
        os.kill(n2["pid"], signal.SIGKILL)
    r = fleet.get(f"/sessions/{on2}")
    assert r.status_code == 503 and "node n2 does not answer" in r.json()["error"], r.text
    # n1's session does not notice, and new work finds n1
    r = fleet.post(f"/v1/sessions/{on1}/run", {"code": "print('still here')"})
    assert r.status_code == 200 and r.json()["output"] == "still here\n", r.text
    for _ in range(5):
        r = fleet.post("/v1/run", {"code": "1"})
        assert r.status_code == 200 and r.headers["Saferun-Node"] == "n1", r.text
    # an id of a node the router never knew
    r = fleet.get("/v1/sessions/n9-0011223344556677")
    assert r.status_code == 404 and r.json()["node"] == "n9", r.text
