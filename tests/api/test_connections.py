"""Connections before authentication: idle TCP connections (no token
needed to open one) cannot fill max_connections and lock token holders
out."""
import socket

import requests

from conftest import wait_for

TOKEN = "conn-test-token-0123456789abcdef"


def test_idle_unauthenticated_connections_do_not_lock_out_a_token_holder(make_daemon):
    d = make_daemon("--max-connections", "100", "--max-pending-connections", "16",
                    tcp=True, token=TOKEN)
    host, port = d.tcp_addr.rsplit(":", 1)
    idle = []
    try:
        for _ in range(300):  # three times max_connections, none sends a byte
            idle.append(socket.create_connection((host, int(port)), timeout=30))

        def authed_ok():
            try:
                r = requests.get(d.tcp_url("/v1/health"), timeout=10,
                                 headers={"Authorization": "Bearer " + TOKEN})
                return r.status_code == 200
            except requests.ConnectionError:
                return False
        # before the idle ones time out (10 s): pushed out, not waited out
        assert wait_for(authed_ok, timeout=6, step=0.2)
        # the oldest idle ones were pushed out: the daemon closed them
        closed = 0
        for s in idle[:200]:
            s.settimeout(10)
            try:
                closed += s.recv(1) == b""
            except (ConnectionResetError, socket.timeout):
                closed += 1
        assert closed == 200
        # and an authenticated connection stays while new idle ones come
        with requests.Session() as s:
            s.headers["Authorization"] = "Bearer " + TOKEN
            assert s.get(d.tcp_url("/v1/health"), timeout=10).status_code == 200
            for _ in range(50):
                idle.append(socket.create_connection((host, int(port)), timeout=30))
            r = s.post(d.tcp_url("/v1/run"), json={"code": "print(1)"}, timeout=60)
            assert r.status_code == 200 and r.json()["output"] == "1\n"
    finally:
        for s in idle:
            s.close()


def test_a_bad_max_pending_connections_stops_the_start(make_daemon):
    d = make_daemon("--max-pending-connections", "0", start=False)
    d.start(wait=False)
    d.proc.wait(timeout=30)
    assert d.proc.returncode == 2
    assert "--max-pending-connections: 0 is not a whole number between 1 and 65536" in \
        d.lines("start")[-1]["msg"]
