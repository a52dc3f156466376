"""A saferund as one node of a fleet (docs/cluster.md): --node-id puts the
node in every session id (REST, AgentRunPlus, MCP) and in a Saferun-Node
header, another node's ids answer 404 naming that node, GET /v1/ready
gives the load or 503 when draining or full, and SIGUSR1 / SIGTERM drain."""
import concurrent.futures as cf
import re
import signal
import subprocess

import requests

from conftest import HOLD, SAFERUND, release_held, wait_for
from test_mcp import Mcp, initialize_body

READY_KEYS = {"status", "node", "runs_in_flight", "queued", "free_slots", "max_concurrent_runs",
              "queue_capacity", "sessions", "max_sessions", "warm_ready",
              "warm_ready_by_language"}


def test_session_ids_carry_the_node_and_answers_name_it(make_daemon):
    d = make_daemon("--node-id", "n-7")
    rest = d.post("/v1/sessions", {})
    arp = d.post("/sessions", {})
    assert rest.status_code == 201 and arp.status_code == 200, (rest.text, arp.text)
    assert re.fullmatch(r"n-7-[0-9a-f]{16}", rest.json()["session_id"])
    assert re.fullmatch(r"n-7-[0-9a-f]{16}", arp.json()["session_id"])
    assert rest.headers["Saferun-Node"] == "n-7"
    sid = rest.json()["session_id"]
    assert d.post(f"/v1/sessions/{sid}/run", {"code": "print(6*7)"}).json()["output"] == "42\n"
    m = Mcp(d.url(""), d.session())
    m.initialize()
    assert re.fullmatch(r"n-7-[0-9a-f]{32}", m.sid)
    assert m.arp("list_sessions")["active_sessions"] == [sid, arp.json()["session_id"]]


def test_another_nodes_session_answers_404_naming_that_node(make_daemon):
    d = make_daemon("--node-id", "a1")
    for path in ("/v1/sessions/b2-00112233aabbccdd", "/sessions/b2-00112233aabbccdd"):
        r = d.get(path)
        assert r.status_code == 404, r.text
        assert "held by node b2, not this node (a1)" in r.json()["error"], r.text
    # our own prefix, unknown: the plain 404
    r = d.get("/v1/sessions/a1-00112233aabbccdd")
    assert r.status_code == 404 and "not found" in r.json()["error"]
    m = Mcp(d.url(""), d.session())
    r = m.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid="zz-" + "0" * 32)
    assert r.status_code == 404 and "held by node zz" in r.text, r.text


def test_without_a_node_id_ids_are_bare_hex_and_ready_says_null(daemon):
    sid = daemon.post("/v1/sessions", {}).json()["session_id"]
    assert re.fullmatch(r"[0-9a-f]{16}", sid)
    r = daemon.get("/v1/ready")
    assert r.status_code == 200 and r.json()["node"] is None
    assert "Saferun-Node" not in r.headers


def test_bad_node_ids_are_refused_by_name():
    for bad, why in (("Node1", "has 'N'"), ("a_b", "has '_'"), ("-a", "start and end"),
                     ("a" * 17, "1 to 16 characters")):
        p = subprocess.run([SAFERUND, "--node-id", bad, "--socket", ""], capture_output=True,
                           text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert p.returncode == 2, p.stderr
        assert "--node-id: " in p.stderr and why in p.stderr, p.stderr


def test_ready_reports_the_load_and_503_when_full(make_daemon):
    d = make_daemon("--node-id", "full", "--max-runs", "1", "--queue-depth", "1")
    r = d.get("/v1/ready")
    assert r.status_code == 200 and set(r.json()) == READY_KEYS, r.text
    assert r.json()["status"] == "ready" and r.json()["free_slots"] == 1
    hold = {"code": HOLD}
    with cf.ThreadPoolExecutor(2) as pool:
        first = pool.submit(d.post, "/v1/run", hold)
        assert wait_for(lambda: d.get("/v1/ready").json()["runs_in_flight"] == 1, timeout=30)
        r = d.get("/v1/ready")
        assert r.status_code == 200 and r.json()["free_slots"] == 0
        second = pool.submit(d.post, "/v1/run", hold)
        assert wait_for(lambda: d.get("/v1/ready").json()["queued"] == 1, timeout=30)
        r = d.get("/v1/ready")
        assert r.status_code == 503 and r.json()["status"] == "full", r.text
        assert r.headers["Retry-After"] == "1"
        release_held(d.cgroups)
        assert first.result(timeout=60).json()["status"] == "ok"
        release_held(d.cgroups)
        assert second.result(timeout=60).json()["status"] == "ok"
    assert d.get("/v1/ready").status_code == 200


def test_sigusr1_drains_new_work_away_and_open_sessions_go_on(make_daemon):
    d = make_daemon("--node-id", "dr")
    sid = d.post("/v1/sessions", {"stateful": True}).json()["session_id"]
    assert d.post(f"/v1/sessions/{sid}/run", {"code": "x = 1"}).status_code == 200
    d.send(signal.SIGUSR1)
    assert wait_for(lambda: d.get("/v1/ready").status_code == 503)
    assert d.get("/v1/ready").json()["status"] == "draining"
    for path, body in (("/v1/run", {"code": "1"}), ("/v1/sessions", {}), ("/sessions", {})):
        r = d.post(path, body)
        assert r.status_code == 503, (path, r.text)
        assert r.headers["Retry-After"] == "5"
        assert "node dr is draining" in r.json()["error"], r.text
    r = Mcp(d.url(""), d.session()).post(initialize_body(), sid=None)
    assert r.status_code == 503 and "node dr is draining" in r.text, r.text
    # the open session still runs, with its state
    r = d.post(f"/v1/sessions/{sid}/run", {"code": "print(x + 1)"})
    assert r.status_code == 200 and r.json()["output"] == "2\n", r.text
    assert d.proc.poll() is None
    assert d.stop() == 0


def test_sigterm_keeps_tcp_answering_draining_until_the_run_ends(make_daemon):
    d = make_daemon("--node-id", "t1", tcp=True, token="t" * 32)
    auth = {"Authorization": "Bearer " + "t" * 32}
    with cf.ThreadPoolExecutor(1) as pool:
        run = pool.submit(d.post, "/v1/run", {"code": HOLD + "print('done')"})
        assert wait_for(lambda: d.get("/v1/ready").json()["runs_in_flight"] == 1, timeout=30)
        d.send(signal.SIGTERM)
        # the router's check: /v1/ready over TCP says draining while the run goes on
        r = None
        def draining():
            nonlocal r
            r = requests.get(d.tcp_url("/v1/ready"), headers=auth, timeout=10)
            return r.status_code == 503
        assert wait_for(draining, timeout=10)
        assert r.json()["status"] == "draining" and r.json()["runs_in_flight"] == 1, r.text
        r = requests.post(d.tcp_url("/v1/run"), json={"code": "1"}, headers=auth, timeout=30)
        assert r.status_code == 503 and "node t1 is draining" in r.json()["error"], r.text
        release_held(d.cgroups)
        assert run.result(timeout=60).json()["output"] == "done\n"
    assert d.proc.wait(timeout=60) == 0
