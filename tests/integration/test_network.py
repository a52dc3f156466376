"""4. Network: only lo, up; the host's loopback is another network."""
import socket
import threading

from conftest import run


def test_only_lo_and_it_is_up():
    code = """
import socket
print(socket.if_nameindex())
s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()
c = socket.create_connection(s.getsockname(), timeout=2)
print('loopback ok')
"""
    res = run(code)
    assert res["status"] == "ok", res
    assert res["stdout"].splitlines() == ["[(1, 'lo')]", "loopback ok"]


def test_host_loopback_server_is_unreachable():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    accepted = []
    threading.Thread(target=lambda: accepted.append(srv.accept()), daemon=True).start()
    code = f"""
import errno, socket
try:
    socket.create_connection(('127.0.0.1', {port}), timeout=3)
    print('connected')
except OSError as e:
    print(errno.errorcode.get(e.errno, e))
"""
    try:
        res = run(code)
        assert res["status"] == "ok", res
        assert res["stdout"].strip() == "ECONNREFUSED"
        assert not accepted
    finally:
        srv.close()


def test_no_route_outside():
    code = """
import errno, socket
try:
    socket.create_connection(('192.0.2.1', 80), timeout=2)
except OSError as e:
    print(errno.errorcode.get(e.errno, e))
"""
    res = run(code)
    assert res["status"] == "ok", res
    assert res["stdout"].strip() == "ENETUNREACH"
