"""Many clients at once: a bounded queue, 429 past it, /health never
waits, and nothing is left behind."""
import concurrent.futures as cf
import time

from conftest import HOLD, release_held, wait_for


def test_queue_full_is_429_with_retry_after(make_daemon):
    d = make_daemon("--max-runs", "1", "--queue-depth", "1")
    sleeper = {"code": HOLD}
    with cf.ThreadPoolExecutor(4) as pool:
        running = pool.submit(d.post, "/v1/run", sleeper)
        assert wait_for(lambda: d.get("/health").json()["runs_in_flight"] == 1)
        queued = pool.submit(d.post, "/v1/run", sleeper)
        assert wait_for(lambda: d.get("/health").json()["queue_depth"] == 1)
        r = d.post("/v1/run", sleeper)
        assert r.status_code == 429, r.text
        assert r.headers["Retry-After"] == "1"
        assert "busy" in r.json()["detail"]
        release_held(d.cgroups)
        assert running.result().json()["status"] == "ok"
        release_held(d.cgroups)
        assert queued.result().json()["status"] == "ok"
    assert d.run("print('after')")["status"] == "ok"
    metrics = d.get("/metrics").text
    assert 'saferund_runs_refused_total{reason="queue_full"} 1' in metrics


def test_health_answers_while_every_slot_is_busy(make_daemon):
    d = make_daemon("--max-runs", "1", "--queue-depth", "4")
    with cf.ThreadPoolExecutor(4) as pool:
        runs = [pool.submit(d.post, "/v1/run", {"code": HOLD}) for _ in range(3)]
        assert wait_for(lambda: d.get("/health").json()["queue_depth"] == 2)
        for path in ("/health", "/v1/health", "/metrics", "/v1/openapi.json"):
            t = time.monotonic()
            assert d.get(path).status_code == 200
            assert time.monotonic() - t < 0.5, path
        for _ in runs:
            release_held(d.cgroups)
        assert all(f.result().json()["status"] == "ok" for f in runs)


def test_50_concurrent_runs_are_all_correct_and_leave_nothing(make_daemon):
    d = make_daemon("--queue-depth", "64")

    def one(i):
        r = d.post("/v1/run", {"code": f"import sys\nprint({i} * 3)\nprint('e{i}', file=sys.stderr)",
                               "env": {"N": str(i)}})
        return i, r.status_code, r.json()

    with cf.ThreadPoolExecutor(50) as pool:
        results = list(pool.map(one, range(50)))
    for i, status, body in results:
        assert status == 200, body
        assert body["status"] == "ok", body
        assert body["stdout"] == f"{i * 3}\n" and body["stderr"] == f"e{i}\n"
    assert len({body["id"] for _, _, body in results}) == 50
    assert len(d.lines("run")) == 50
    assert d.only_pools_left(), (d.leftover_groups(), d.get("/v1/health").json()["warm"])
    h = d.get("/health").json()
    assert h["runs_in_flight"] == 0 and h["queue_depth"] == 0
    assert 'saferund_runs_total{status="ok"} 50' in d.get("/metrics").text


def test_a_queued_run_whose_client_left_never_runs(make_daemon):
    """The client of a queued run disconnects: its place goes to the next
    client at once and its code never runs (no run line, no marker file)."""
    import json
    import socket
    d = make_daemon("--max-runs", "1", "--queue-depth", "4")
    body = json.dumps({"code": "print('ghost')"}).encode()
    with cf.ThreadPoolExecutor(4) as pool:
        running = pool.submit(d.post, "/v1/run", {"code": HOLD})
        assert wait_for(lambda: d.get("/health").json()["runs_in_flight"] == 1)
        s = socket.socket(socket.AF_UNIX)
        s.connect(d.socket)
        s.sendall(b"POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        assert wait_for(lambda: d.get("/health").json()["queue_depth"] == 1)
        queued = pool.submit(d.post, "/v1/run", {"code": "print('next')"})
        assert wait_for(lambda: d.get("/health").json()["queue_depth"] == 2)
        s.close()
        assert wait_for(lambda: d.get("/health").json()["queue_depth"] == 1)
        release_held(d.cgroups)
        assert running.result().json()["status"] == "ok"
        assert queued.result().json()["stdout"] == "next\n"
    metrics = d.get("/metrics").text
    assert 'saferund_runs_refused_total{reason="client_gone"} 1' in metrics
    runs = [l for l in d.lines("run") if "status" in l]
    assert [r["code_bytes"] for r in runs] == [len(HOLD), 13], runs  # the held run, then 'next'
    assert any("client disconnected" in l.get("msg", "") for l in d.lines("run"))
