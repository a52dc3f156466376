"""TCP needs the bearer token; the unix socket is guarded by its mode."""
import grp
import json
import os
import stat
import subprocess

import requests

from conftest import SAFERUND

TOKEN = "t0ken-" + "5" * 32


def test_tcp_without_a_token_is_401_with_json(make_daemon):
    d = make_daemon(tcp=True, token=TOKEN)
    r = requests.post(d.tcp_url("/v1/run"), json={"code": "print(1)"}, timeout=30)
    assert r.status_code == 401
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    assert "Authorization" in r.json()["detail"]
    assert d.lines("run") == []  # nothing ran


def test_tcp_with_a_wrong_token_is_401(make_daemon):
    d = make_daemon(tcp=True, token=TOKEN)
    for auth in ("Bearer " + TOKEN[:-1], "Bearer " + TOKEN + "x", "Basic " + TOKEN, "Bearer",
                 "Bearer " + TOKEN.upper()):
        r = requests.get(d.tcp_url("/v1/health"), headers={"Authorization": auth}, timeout=30)
        assert r.status_code == 401, auth
        assert r.json()["error"] == "the bearer token is wrong"


def test_tcp_with_the_token_runs(make_daemon):
    d = make_daemon(tcp=True, token=TOKEN)
    h = {"Authorization": "Bearer " + TOKEN}
    r = requests.post(d.tcp_url("/v1/run/"), json={"code": "print('tcp')"}, headers=h, timeout=30)
    assert r.status_code == 200 and r.json()["output"] == "tcp\n"
    code, body = d.curl("-H", "Authorization: Bearer " + TOKEN, d.tcp_url("/health"), tcp=True)
    assert code == 200 and json.loads(body)["status"] == "healthy"
    run = d.lines("run")[-1]
    assert run["peer"]["addr"].startswith("127.0.0.1:")


def test_the_unix_socket_needs_no_token_and_is_0660(make_daemon):
    d = make_daemon(tcp=True, token=TOKEN)
    assert d.run("print(1)")["status"] == "ok"
    st = os.stat(d.socket)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o660
    assert st.st_uid == 0 and st.st_gid == 0


def test_socket_group_is_applied(make_daemon):
    group = grp.getgrgid(max(g.gr_gid for g in grp.getgrall() if g.gr_gid < 65534)).gr_name
    d = make_daemon("--socket-group", group)
    assert os.stat(d.socket).st_gid == grp.getgrnam(group).gr_gid


def test_token_from_the_environment(make_daemon):
    d = make_daemon(tcp=True, env={"SAFERUND_TOKEN": TOKEN})
    assert requests.get(d.tcp_url("/health"), timeout=30).status_code == 401
    r = requests.get(d.tcp_url("/health"), headers={"Authorization": "Bearer " + TOKEN},
                     timeout=30)
    assert r.status_code == 200


def start_fails(d):
    d.start(wait=False)
    d.proc.wait(timeout=30)
    assert d.proc.returncode == 2
    return d.text()


def test_tcp_without_a_token_is_refused_at_start(make_daemon):
    d = make_daemon("--listen", "127.0.0.1:0", start=False)
    assert "needs a bearer token" in start_fails(d)
    assert not os.path.exists(d.socket)


def test_insecure_no_token_is_refused_off_loopback(make_daemon):
    d = make_daemon("--listen", "0.0.0.0:0", "--insecure-no-token", start=False)
    assert "not a loopback address" in start_fails(d)


def test_insecure_no_token_works_on_loopback(make_daemon):
    d = make_daemon("--listen", "127.0.0.1:0", "--insecure-no-token")
    r = requests.post(f"http://{d.tcp_addr}/v1/run", json={"code": "print(2)"}, timeout=30)
    assert r.status_code == 200 and r.json()["output"] == "2\n"


def test_short_token_is_refused(make_daemon):
    d = make_daemon(tcp=True, token="short", start=False)
    assert "16 to 4096 characters" in start_fails(d)


def test_not_root_is_refused():
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", SAFERUND,
                        "--socket", "/tmp/nope.sock"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert "must run as root" in json.loads(p.stderr.splitlines()[-1])["msg"]


def test_native_routes_over_tcp_with_the_token(make_daemon):
    """The /v1 session, file and info routes work over loopback TCP with the
    token exactly as over the unix socket, and refuse a request without it."""
    d = make_daemon(tcp=True, token=TOKEN)
    h = {"Authorization": "Bearer " + TOKEN}

    def call(method, path, expect, **kw):
        r = requests.request(method, d.tcp_url(path), headers=h, timeout=60, **kw)
        assert r.status_code == expect, (method, path, r.status_code, r.text)
        return r

    created = call("POST", "/v1/sessions", 201, json={"stateful": True}).json()
    sid = created["session_id"]
    assert created["run_url"] == f"/v1/sessions/{sid}/run"
    for method, path in (("GET", "/v1/sessions"), ("GET", f"/v1/sessions/{sid}"),
                         ("PUT", f"/v1/sessions/{sid}/files/src/a.txt"),
                         ("GET", f"/v1/sessions/{sid}/files/src/a.txt"),
                         ("POST", f"/v1/sessions/{sid}/run"), ("DELETE", f"/v1/sessions/{sid}")):
        r = requests.request(method, d.tcp_url(path), data=b"{}", timeout=30)
        assert r.status_code == 401, (method, path)
    assert call("PUT", f"/v1/sessions/{sid}/files/src/a.txt", 201, data=b"41") \
        .json() == {"path": "src/a.txt", "size": 2}
    out = call("POST", f"/v1/sessions/{sid}/run", 200,
               json={"code": "x = int(open('src/a.txt').read())", "allow": ["open"]}).json()
    assert out["status"] == "ok" and out["session_id"] == sid, out
    out = call("POST", f"/v1/sessions/{sid}/run", 200,
               json={"code": "open('artifacts/b.txt', 'w').write(str(x + 1))", "allow": ["open"]})
    assert [a["name"] for a in out.json()["artifacts"]] == ["b.txt"]
    assert call("GET", f"/v1/sessions/{sid}/files/artifacts/b.txt", 200).content == b"42"
    files = call("GET", f"/v1/sessions/{sid}/files", 200).json()
    assert {f["path"] for f in files["files"]} >= {"src/a.txt", "artifacts/b.txt"}
    assert call("DELETE", f"/v1/sessions/{sid}/files/src/a.txt", 200).json() == \
        {"path": "src/a.txt", "deleted": True}
    call("GET", f"/v1/sessions/{sid}/files/src/a.txt", 404)
    listed = call("GET", "/v1/sessions", 200).json()
    assert listed["count"] == 1 and listed["sessions"][0]["runs"] == 2
    assert call("GET", f"/v1/sessions/{sid}", 200).json()["runs"] == 2
    assert call("DELETE", f"/v1/sessions/{sid}", 200).json() == {"session_id": sid, "closed": True}
    call("GET", f"/v1/sessions/{sid}", 404)
    assert call("GET", "/v1/sessions", 200).json() == {"count": 0, "sessions": []}
    assert d.mounted_workspaces() == []
    # the info routes, with curl as well
    assert call("GET", "/v1/packages", 200).json()["count"] > 0
    assert call("GET", "/v1/openapi.json", 200).json()["openapi"].startswith("3.")
    assert "saferund_sessions 0" in call("GET", "/metrics", 200).text
    code, body = d.curl("-H", "Authorization: Bearer " + TOKEN, d.tcp_url("/v1/sessions"),
                        "-d", "{}", tcp=True)
    assert code == 201 and json.loads(body)["stateful"] is False
    assert all(l["peer"]["addr"].startswith("127.0.0.1:") for l in d.lines("request"))
