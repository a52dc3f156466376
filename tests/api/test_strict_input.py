"""Strict input on every path (issue 15, item 10): a NUL hidden in a path,
raw control characters in JSON, a PUT onto the code's symlink, over-long
paths and a chunked body over the cap are each refused with a status and
a JSON body that say what was wrong, and nothing is served, written or
left behind."""
import json
import os
import subprocess

from conftest import wait_for


def create(d, body=None):
    r = d.post("/v1/sessions", body if body is not None else {})
    assert r.status_code == 201, r.text
    return r.json()["session_id"]


def run(d, sid, code, **fields):
    r = d.post(f"/v1/sessions/{sid}/run", {"code": code, **fields})
    assert r.status_code == 200, r.text
    return r.json()


def error(r, data, status, field):
    assert r.status == status, data
    body = json.loads(data)
    assert set(body) == {"error", "detail", "field"} and body["error"] == body["detail"], body
    assert body["field"] == field, body
    return body["error"]


def listing(d, sid):
    r = d.get(f"/v1/sessions/{sid}/files")
    assert r.status_code == 200, r.text
    return {f["path"]: (f["type"], f["size"]) for f in r.json()["files"]}


def test_an_encoded_nul_in_a_path_is_400_naming_the_path(daemon):
    sid = create(daemon)
    base = f"/v1/sessions/{sid}/files"
    r, data = daemon.raw("PUT", f"{base}/src/ok.txt", b"secret-ok")
    assert r.status == 201, data
    before = listing(daemon, sid)
    for method, path, body in (("GET", "src/ok.txt%00.png", b""),  # was 200 with ok.txt
                               ("GET", "%00", b""),                 # was the listing
                               ("GET", "src/ok.txt%00", b""),
                               ("PUT", "src/new.txt%00.sh", b"x"),
                               ("PUT", "src/ok.txt%00", b"overwritten"),
                               ("DELETE", "src/ok.txt%00.bak", b"")):
        r, data = daemon.raw(method, f"{base}/{path}", body)
        msg = error(r, data, 400, "path")
        assert f"{base}/{path}" in msg and "NUL" in msg, msg
        assert b"secret-ok" not in data
    r, data = daemon.raw("GET", "/v1/health%00")
    assert "NUL" in error(r, data, 400, "path")
    assert listing(daemon, sid) == before
    r, data = daemon.raw("GET", f"{base}/src/ok.txt")
    assert r.status == 200 and data == b"secret-ok"
    assert daemon.get("/health").status_code == 200


def test_a_raw_control_character_in_a_json_string_is_400(daemon):
    for raw, byte in ((b'{"code": "print(1)\x01"}', 0x01),
                      (b'{"code": "print(1)\nprint(2)"}', 0x0a),  # a newline left unescaped
                      (b'{"code": "print(1)", "env": {"A": "x\x1b[2J"}}', 0x1b),
                      (b'{\x0b"code": "print(1)"}', 0x0b)):       # cJSON takes it as a blank
        r, data = daemon.raw("POST", "/v1/run", raw, {"Content-Type": "application/json"})
        msg = error(r, data, 400, None)
        assert f"raw control character (0x{byte:02x}) at byte {raw.index(bytes([byte]))}" in msg
        r, data = daemon.raw("POST", "/v1/sessions", raw.replace(b'"code": "print(1)', b'"x": "'))
        assert r.status == 400 and "raw control character" in json.loads(data)["detail"], data
    assert not daemon.lines("run")  # nothing ran
    # escaped, the same characters are fine; blanks between values too
    r, data = daemon.raw("POST", "/v1/run",
                         b'{\n\t"code": "print(1)\\nprint(ord(\'\\u0001\'))"\r\n}')
    assert r.status == 200, data
    assert json.loads(data)["stdout"] == "1\n1\n"


def test_a_put_onto_a_symlink_the_code_made_is_403_and_the_link_stays(daemon):
    sid = create(daemon, {"stateful": True})
    canary = os.path.join(daemon.dir, "canary.txt")
    with open(canary, "w") as f:
        f.write("keep")
    code = ("import os\nopen('src/target.txt', 'w').write('orig')\n"
            "os.symlink('target.txt', 'src/inside')\n"
            f"os.symlink({canary!r}, 'src/outside')")
    assert run(daemon, sid, code, allow=["os.symlink"])["status"] == "ok"
    for path in ("src/inside", "src/outside"):
        r, data = daemon.raw("PUT", f"/v1/sessions/{sid}/files/{path}", b"replaced")
        msg = error(r, data, 403, "path")
        assert path in msg and "symlink" in msg
    files = listing(daemon, sid)
    assert files["src/inside"][0] == "symlink" and files["src/outside"][0] == "symlink"
    assert not any(p.startswith("src/.sr-write-") for p in files), files
    r, data = daemon.raw("GET", f"/v1/sessions/{sid}/files/src/target.txt")
    assert r.status == 200 and data == b"orig"
    with open(canary) as f:
        assert f.read() == "keep"
    out = run(daemon, sid, "import os\nprint(os.readlink('src/inside'), open('src/inside').read())")
    assert out["stdout"] == "target.txt orig\n", out


def test_a_path_over_1024_bytes_is_refused_with_its_reason(daemon):
    sid = create(daemon)
    long_file = "/".join(["d" * 100] * 15)  # 1514 bytes: more than a route's capture held
    r, data = daemon.raw("GET", f"/v1/sessions/{sid}/files/{long_file}")
    assert "longer than 1024 bytes" in error(r, data, 400, "path")
    r, data = daemon.raw("PUT", f"/v1/sessions/{sid}/files/{long_file}", b"x")
    assert "longer than 1024 bytes" in error(r, data, 400, "path")
    for path in ("/v1/" + "x" * 1500, f"/v1/sessions/{'a' * 1100}/files"):
        r, data = daemon.raw("GET", path)
        msg = error(r, data, 414, "path")
        assert f"is {len(path)} bytes" in msg and "1024" in msg, msg
    assert listing(daemon, sid) == {"artifacts": ("dir", 0), "src": ("dir", 0)}


def test_a_chunked_body_over_the_cap_is_413_while_it_streams_in(make_daemon):
    d = make_daemon("--max-body", "64K")
    big = os.path.join(d.dir, "big.json")
    with open(big, "wb") as f:
        f.write(b'{"code": "x = \'' + b"a" * (8 << 20) + b"'\"}")
    # curl reads an early answer while it still sends, and stops sending
    p = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", "--unix-socket", d.socket,
                        "-H", "Transfer-Encoding: chunked", "-H", "Content-Type: application/json",
                        "--data-binary", "@" + big, "http://localhost/v1/run"],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    body, _, code = p.stdout.rpartition("\n")
    assert code == "413", (p.returncode, p.stdout, p.stderr)
    assert "over the 65536 byte cap" in json.loads(body)["detail"]
    assert wait_for(lambda: [l for l in d.lines("request") if l["status"] == 413], timeout=30)
    line = [l for l in d.lines("request") if l["status"] == 413][0]
    # refused near the cap, not after reading the 8 MiB
    assert line["bytes_in"] < 1 << 20, line
    assert not d.lines("run")
    assert d.get("/health").status_code == 200
