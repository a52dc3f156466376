"""Streamed runs on the REST API: POST /v1/run and session runs with
"stream": true or Accept: application/x-ndjson (NDJSON) or
text/event-stream (SSE). Output items come while the code still runs,
then the result last; errors before the run keep their status and JSON.
Ordering is asserted against the code's own clock (same host), never with
a timing bound."""
import json
import socket
import subprocess
import time

import pytest

# Prints, sleeps, then takes the time and prints it: the client must have
# the first item before the code took that time.
CODE = """import sys, time
print("first", flush=True)
time.sleep(0.4)
print(repr(time.time()), flush=True)
print("to stderr", file=sys.stderr, flush=True)
"""


def ndjson_items(resp):
    """(receive time, item) for each line, as the client gets it."""
    out = []
    for line in resp.iter_lines(chunk_size=None):
        if line:
            out.append((time.time(), json.loads(line)))
    return out


def check_items(items, result_extra=(), before=""):
    types = [i["type"] for _, i in items]
    assert types[-1] == "result" and "result" not in types[:-1], types
    res = items[-1][1]
    assert res["status"] == "ok", res
    for k in ("id", "stdout", "stderr", "output", "duration_ms", *result_extra):
        assert k in res, k
    out = "".join(i["data"] for _, i in items if i["type"] == "stdout")
    err = "".join(i["data"] for _, i in items if i["type"] == "stderr")
    assert out == res["stdout"] and err == res["stderr"] == "to stderr\n"
    assert out.startswith(before + "first\n"), out
    marker = float(res["stdout"][len(before):].splitlines()[1])
    # the item that completed "first": before the code took its marker
    got = ""
    for t, i in items:
        got += i["data"] if i["type"] == "stdout" else ""
        if got.startswith(before + "first"):
            assert t < marker, (t, marker)
            break
    return res


def test_run_streams_ndjson_with_requests_and_the_errors_stay_json(daemon):
    with daemon.session() as s:
        # "stream": true in the body
        with s.post(daemon.url("/v1/run"), json={"code": CODE, "stream": True}, stream=True,
                    timeout=60) as r:
            assert r.status_code == 200
            assert r.headers["Content-Type"] == "application/x-ndjson"
            assert r.headers["Transfer-Encoding"] == "chunked"
            check_items(ndjson_items(r))
        # or Accept
        with s.post(daemon.url("/v1/run"), json={"code": CODE}, stream=True, timeout=60,
                    headers={"Accept": "application/x-ndjson"}) as r:
            assert r.status_code == 200
            check_items(ndjson_items(r))
        # AgentRun's route is the same handler
        with s.post(daemon.url("/v1/run/"), json={"code": CODE, "stream": True}, stream=True,
                    timeout=60) as r:
            check_items(ndjson_items(r))
        # Errors before the run: their status, a JSON body naming the field.
        for body, field in (({"code": CODE, "stream": "yes"}, "stream"),
                            ({"code": CODE, "stream": True, "timeout": 600}, "timeout"),
                            ({"stream": True}, "code")):
            r = s.post(daemon.url("/v1/run"), json=body, timeout=60,
                       headers={"Accept": "application/x-ndjson"})
            assert r.status_code == 400, r.text
            assert r.headers["Content-Type"] == "application/json"
            assert r.json()["field"] == field, r.json()
        # Without asking, the answer is one JSON object as before.
        r = s.post(daemon.url("/v1/run"), json={"code": "print(1)"}, timeout=60)
        assert r.headers["Content-Type"] == "application/json" and r.json()["stdout"] == "1\n"


def test_sse_with_curl_no_buffer(daemon):
    p = subprocess.Popen(["curl", "-sS", "--no-buffer", "--unix-socket", daemon.socket,
                          "-H", "Accept: text/event-stream", "http://localhost/v1/run",
                          "-d", json.dumps({"code": CODE})],
                         stdout=subprocess.PIPE, text=True)
    events, event = [], {}
    for line in p.stdout:
        line = line.rstrip("\n")
        if not line:
            events.append((event["t"], event))
            event = {}
        elif line.startswith("event: "):
            event = {"event": line[7:], "t": time.time()}
        elif line.startswith("data: "):
            event["data"] = json.loads(line[6:])
    assert p.wait(timeout=60) == 0
    assert all(e["event"] == e["data"]["type"] for _, e in events), events
    check_items([(t, e["data"]) for t, e in events])


def test_a_run_killed_mid_stream_still_ends_with_its_result(daemon):
    with daemon.session() as s:
        code = "import time\nprint('going', flush=True)\nwhile True: pass\n"
        with s.post(daemon.url("/v1/run"), json={"code": code, "stream": True,
                                                 "timeout": "700ms"},
                    stream=True, timeout=60) as r:
            items = ndjson_items(r)
        assert items[0][1]["type"] == "stdout" and items[0][1]["data"].startswith("going")
        assert items[-1][1]["type"] == "result" and items[-1][1]["status"] == "timeout"
        code = "import sys\nfor i in range(30):\n    print('x' * 99999, flush=True)\n"
        with s.post(daemon.url("/v1/run"), json={"code": code, "stream": True},
                    stream=True, timeout=60) as r:
            items = ndjson_items(r)
        res = items[-1][1]
        assert res["type"] == "result" and res["status"] == "output_limit", res["status"]
        out = "".join(i["data"] for _, i in items if i["type"] == "stdout")
        assert out == res["stdout"] and len(out) == res["limits"]["output_bytes"]


def test_utf8_split_across_chunks_streams_whole(daemon):
    # A character split over two writes, and a byte that is not UTF-8.
    code = ("import sys, time\nb = 'é€'.encode()\nsys.stdout.buffer.write(b[:1]); "
            "sys.stdout.flush()\ntime.sleep(0.1)\nsys.stdout.buffer.write(b[1:] + b'\\xff!')\n")
    with daemon.session() as s:
        with s.post(daemon.url("/v1/run"), json={"code": code, "stream": True},
                    stream=True, timeout=60) as r:
            items = [i for _, i in ndjson_items(r)]
    out = "".join(i["data"] for i in items if i["type"] == "stdout")
    assert out == items[-1]["stdout"] == "é€\ufffd!"


def test_session_runs_stream_and_a_client_that_leaves_frees_the_slot(make_daemon):
    d = make_daemon("--max-runs", "1")
    r = d.post("/v1/sessions", {"stateful": True})
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    with d.session() as s:
        d.post(f"/v1/sessions/{sid}/run", {"code": "x = 41"})
        with s.post(d.url(f"/v1/sessions/{sid}/run"), json={"code": "print(x + 1)\n" + CODE},
                    stream=True, timeout=60, headers={"Accept": "application/x-ndjson"}) as r:
            assert r.status_code == 200
            items = ndjson_items(r)
        res = check_items(items, result_extra=("session_id",), before="42\n")
        assert res["session_id"] == sid
        # The client reads the first item and goes; the run ends on its own
        # (its log line), and the one slot is free for the next run.
        code = "import time\nprint('a', flush=True)\ntime.sleep(0.5)\nprint('b' * 100000)\n"
        body = json.dumps({"code": code, "stream": True}).encode()
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(d.socket)
        c.sendall(b"POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        got = b""
        while b'"type":"stdout"' not in got:
            got += c.recv(4096)
        c.close()
        from conftest import wait_for
        assert wait_for(lambda: any(l.get("path") == "/v1/run" and l.get("streamed")
                                    for l in d.lines("request")), timeout=30)
        runs = d.lines("run")
        assert runs[-1]["status"] == "ok", runs[-1]
        res = s.post(d.url("/v1/run"), json={"code": "print(2)"}, timeout=60).json()
        assert res["stdout"] == "2\n"


def test_agentrunplus_execute_streams_when_accept_asks(daemon):
    sid = daemon.post("/sessions").json()["session_id"]
    with daemon.session() as s:
        with s.post(daemon.url(f"/sessions/{sid}/execute"), json={"python_code": CODE},
                    headers={"Accept": "application/x-ndjson"}, stream=True, timeout=60) as r:
            assert r.status_code == 200
            items = ndjson_items(r)
        res = items[-1][1]
        assert set(res) == {"type", "success", "output"} and res["success"] is True, res
        streamed = "".join(i["data"] for _, i in items[:-1])
        assert streamed == res["output"] and streamed.startswith("first\n")
        marker = float(res["output"].splitlines()[1])
        got = ""
        for t, i in items:
            got += i.get("data", "")
            if got.startswith("first"):
                assert t < marker
                break
        # its shape without Accept, and its 422 before the run
        r = s.post(daemon.url(f"/sessions/{sid}/execute"), json={"python_code": "print(1)"})
        assert r.json() == {"success": True, "output": "1\n"}
        r = s.post(daemon.url(f"/sessions/{sid}/execute"), json={"code": "print(1)"},
                   headers={"Accept": "application/x-ndjson"})
        assert r.status_code == 422 and r.headers["Content-Type"] == "application/json"
