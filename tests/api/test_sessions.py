"""Native sessions (/v1/sessions): state kept or not between runs, files
that persist, a files API that never leaves the workspace, limits that
hold for the whole session, and nothing left behind when sessions end,
expire, or the daemon dies."""
import concurrent.futures as cf
import hashlib
import json
import os
import re
import signal
import time

import pytest

from conftest import HOST_POLICY, own_sandbox_processes, tree, wait_for

SESSION_KEYS = {"session_id", "policy", "stateful", "language", "created_s", "idle_s", "runs", "workdir",
                "disk", "limits", "run_url", "files_url"}


def create(d, body=None, status=201):
    r = d.post("/v1/sessions", body if body is not None else {})
    assert r.status_code == status, r.text
    return r.json()


def run(d, sid, code, **fields):
    r = d.post(f"/v1/sessions/{sid}/run", {"code": code, **fields})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["session_id"] == sid
    return body


def put(d, sid, path, data):
    """PUT raw bytes to a path sent exactly as given (no client clean-up)."""
    return d.raw("PUT", f"/v1/sessions/{sid}/files/{path}", data)


def fetch(d, sid, path, method="GET"):
    return d.raw(method, f"/v1/sessions/{sid}/files/{path}")


def listing(d, sid):
    r = d.get(f"/v1/sessions/{sid}/files")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["count"] == len(body["files"]) and body["session_id"] == sid
    return {f["path"]: (f["type"], f["size"]) for f in body["files"]}


def error(resp, data=None):
    """The JSON error body of a requests or http.client answer."""
    body = json.loads(data) if data is not None else resp.json()
    assert set(body) == {"error", "detail", "field"} and body["error"], body
    return body


def delete(d, path):
    with d.session() as s:
        return s.delete(d.url(path), timeout=30)


def test_create_list_get_delete_round_trip(daemon):
    # no body at all is a session with the default policy
    r, data = daemon.raw("POST", "/v1/sessions")
    assert r.status == 201, data
    first = json.loads(data)
    assert set(first) == SESSION_KEYS
    sid = first["session_id"]
    assert re.fullmatch(r"[0-9a-f]{16}", sid)
    assert first["policy"] == "default" and first["stateful"] is False and first["runs"] == 0
    assert first["workdir"] == "/work"
    assert first["run_url"] == f"/v1/sessions/{sid}/run"
    assert first["files_url"] == f"/v1/sessions/{sid}/files"
    assert first["disk"]["used_bytes"] == 0
    second = create(daemon, {"stateful": True, "policy": "host"})
    assert second["stateful"] is True and second["policy"] == "host"
    assert second["session_id"] != sid

    body = daemon.get("/v1/sessions").json()
    assert body["count"] == 2
    assert [s["session_id"] for s in body["sessions"]] == [sid, second["session_id"]]
    assert daemon.get("/health").json()["active_sessions"] == 2
    assert len(daemon.mounted_workspaces()) == 2

    tmpfs = run(daemon, sid, "print(1)")["limits"]["tmpfs_bytes"]
    assert first["disk"]["limit_bytes"] == tmpfs  # the policy's tmpfs is the workspace
    got = daemon.get(f"/v1/sessions/{sid}")
    assert got.status_code == 200 and got.json()["session_id"] == sid
    assert got.json()["runs"] == 1 and set(got.json()) == SESSION_KEYS

    r = delete(daemon, f"/v1/sessions/{sid}")
    assert r.status_code == 200 and r.json() == {"session_id": sid, "closed": True}
    assert daemon.get(f"/v1/sessions/{sid}").status_code == 404
    r = delete(daemon, f"/v1/sessions/{sid}")
    assert r.status_code == 404
    assert daemon.post(f"/v1/sessions/{sid}/run", {"code": "1"}).status_code == 404
    body = daemon.get("/v1/sessions").json()
    assert body["count"] == 1 and body["sessions"][0]["session_id"] == second["session_id"]
    # its workspace is unmounted and removed at once
    assert [os.path.basename(m) for m in daemon.mounted_workspaces()] == [second["session_id"]]
    assert sorted(os.listdir(daemon.workspaces)) == [second["session_id"]]


@pytest.mark.parametrize("method,path", [
    ("GET", ""), ("DELETE", ""), ("POST", "/run"), ("GET", "/files"),
    ("GET", "/files/a.txt"), ("PUT", "/files/a.txt"), ("DELETE", "/files/a.txt"),
])
def test_unknown_session_is_404_on_every_route(daemon, method, path):
    create(daemon)  # one that exists, so the 404 is about the id
    body = b'{"code": "print(1)"}' if method == "POST" else b"x" if method == "PUT" else b""
    r, data = daemon.raw(method, f"/v1/sessions/00000000deadbeef{path}", body)
    assert r.status == 404, data
    assert "00000000deadbeef" in error(r, data)["error"]


def test_stateful_session_keeps_variables_functions_and_imports(daemon):
    sid = create(daemon, {"stateful": True})["session_id"]
    threads = len(os.listdir(f"/proc/{daemon.proc.pid}/task"))
    assert run(daemon, sid, "x = 41")["status"] == "ok"
    # each request came on its own connection, served by its own thread:
    # the interpreter must outlive the one that started it
    wait_for(lambda: len(os.listdir(f"/proc/{daemon.proc.pid}/task")) <= threads, timeout=5)
    time.sleep(0.2)
    assert run(daemon, sid, "print(x + 1)")["stdout"] == "42\n"
    assert run(daemon, sid, "import json\ndef twice(v):\n    return 2 * v\n")["status"] == "ok"
    body = run(daemon, sid, "print(json.dumps({'t': twice(x)}))")
    assert body["status"] == "ok" and body["stdout"] == '{"t": 82}\n'
    assert daemon.get(f"/v1/sessions/{sid}").json()["runs"] == 4


def test_a_syntax_error_in_a_stateful_session_is_pythons_own(daemon):
    sid = create(daemon, {"stateful": True})["session_id"]
    assert run(daemon, sid, "x = 41")["status"] == "ok"
    body = run(daemon, sid, "print('abc\n")  # the checker's SR001: Python reports it
    assert (body["status"], body["exit_code"], body["stdout"], body["findings"]) == (
        "error", 1, "", [])
    assert body["stderr"] == ('  File "main.py", line 1\n    print(\'abc\n          ^\n'
                              "SyntaxError: unterminated string literal (detected at line 1)\n")
    assert run(daemon, sid, "print(x + 1)")["stdout"] == "42\n"  # nothing of it ran


def test_stateless_session_starts_fresh_but_keeps_files(daemon):
    sid = create(daemon, {"stateful": False})["session_id"]
    body = run(daemon, sid, "y = 7\nopen('note.txt', 'w').write('from run 1')\nprint(y)")
    assert body["status"] == "ok" and body["stdout"] == "7\n"
    body = run(daemon, sid, "print(y)")
    assert body["status"] == "error" and "NameError" in body["stderr"]
    body = run(daemon, sid, "print(open('note.txt').read())")
    assert body["status"] == "ok" and body["stdout"] == "from run 1\n"


def test_stateful_timeout_ends_the_interpreter_but_not_the_files(daemon):
    sid = create(daemon, {"stateful": True})["session_id"]
    assert run(daemon, sid, "x = 1\nopen('kept.txt', 'w').write('still here')")["status"] == "ok"
    t = time.monotonic()
    body = run(daemon, sid, "while True: pass", timeout=0.5)
    assert time.monotonic() - t < 10
    assert body["status"] == "timeout" and body["limits_hit"] == ["wall_time"]
    assert "variables are gone" in body["message"]
    body = run(daemon, sid, "print('x' in globals(), open('kept.txt').read())")
    assert body["status"] == "ok" and body["stdout"] == "False still here\n"
    # and the fresh interpreter keeps state again
    run(daemon, sid, "z = 5")
    assert run(daemon, sid, "print(z)")["stdout"] == "5\n"


def test_run_timeout_over_the_sessions_is_400(daemon):
    s = create(daemon, {"timeout": 2, "stateful": True})
    assert s["limits"]["wall_time_ms"] == 2000
    r = daemon.post(f"/v1/sessions/{s['session_id']}/run", {"code": "print(1)", "timeout": 5})
    assert r.status_code == 400
    body = error(r)
    assert body["field"] == "timeout" and "wall-time limit" in body["error"]
    # lower is fine, and nothing ran for the refused one
    assert run(daemon, s["session_id"], "print(2)", timeout=1)["stdout"] == "2\n"
    assert daemon.get(f"/v1/sessions/{s['session_id']}").json()["runs"] == 1


def test_a_session_field_not_allowed_on_a_run_is_400(daemon):
    sid = create(daemon)["session_id"]
    for field, value in (("memory", "1G"), ("policy", "host"), ("stateful", True)):
        r = daemon.post(f"/v1/sessions/{sid}/run", {"code": "print(1)", field: value})
        assert r.status_code == 400 and error(r)["field"] == field, r.text


def test_memory_limit_holds_for_the_whole_stateful_session(daemon):
    sid = create(daemon, {"stateful": True, "memory": "128M"})["session_id"]
    # bytes * n writes every byte: the pages are really in use
    body = run(daemon, sid, "a = b'x' * (80 << 20)")
    assert body["status"] == "ok", body
    assert body["peak_memory_bytes"] >= 80 << 20
    body = run(daemon, sid, "b = b'y' * (80 << 20)")
    assert body["status"] == "oom" and body["limits_hit"] == ["memory"], body
    assert "variables are gone" in body["message"]
    body = run(daemon, sid, "print('a' in globals())")
    assert body["status"] == "ok" and body["stdout"] == "False\n"


def test_two_sessions_are_isolated(daemon):
    a = create(daemon, {"stateful": True})["session_id"]
    b = create(daemon)["session_id"]
    for sid in (a, b):
        run(daemon, sid, f"open('test.txt', 'w').write('I am {sid}')")
    for sid in (a, b):
        assert run(daemon, sid, "print(open('test.txt').read())")["stdout"] == f"I am {sid}\n"
        r, data = fetch(daemon, sid, "test.txt")
        assert r.status == 200 and data == f"I am {sid}".encode()
    # not through the files API of the other
    for path in (f"../{b}/test.txt", f"%2e%2e/{b}/test.txt", f"src/../../{b}/test.txt"):
        r, data = fetch(daemon, a, path)
        assert r.status == 400, (path, data)
        assert error(r, data)["field"] == "path"
    # nor from inside: the other's workspace has no path in a's sandbox
    code = (f"import os\nprint(os.path.exists({os.path.join(daemon.workspaces, b)!r}), "
            f"sorted(os.listdir('.')))")
    assert run(daemon, a, code)["stdout"] == "False ['artifacts', 'src', 'test.txt']\n"


def test_files_round_trip_binary_and_nested(daemon):
    sid = create(daemon)["session_id"]
    blob = bytes(range(256)) * 16 + b"\x00\x00\xff end"
    r, data = put(daemon, sid, "data/nested/deep/blob.bin", blob)
    assert r.status == 201, data
    assert json.loads(data) == {"path": "data/nested/deep/blob.bin", "size": len(blob)}
    r, data = fetch(daemon, sid, "data/nested/deep/blob.bin")
    assert r.status == 200 and data == blob
    assert r.getheader("Content-Type") == "application/octet-stream"
    assert r.getheader("Content-Disposition").startswith("attachment")
    assert put(daemon, sid, "empty.txt", b"")[0].status == 201
    assert fetch(daemon, sid, "empty.txt")[1] == b""
    # a PUT replaces
    assert put(daemon, sid, "empty.txt", b"now full")[0].status == 201
    assert fetch(daemon, sid, "empty.txt")[1] == b"now full"
    assert listing(daemon, sid) == {
        "artifacts": ("dir", 0), "src": ("dir", 0), "empty.txt": ("file", 8),
        "data": ("dir", 0), "data/nested": ("dir", 0), "data/nested/deep": ("dir", 0),
        "data/nested/deep/blob.bin": ("file", len(blob)),
    }
    disk = daemon.get(f"/v1/sessions/{sid}").json()["disk"]
    assert disk["used_bytes"] >= len(blob)
    # the code sees the same bytes
    body = run(daemon, sid, "import hashlib\n"
                            "print(hashlib.sha256(open('data/nested/deep/blob.bin', 'rb')"
                            ".read()).hexdigest())")
    assert body["stdout"] == hashlib.sha256(blob).hexdigest() + "\n"


def test_files_delete_a_file_and_a_tree_without_following_links(daemon):
    sid = create(daemon)["session_id"]
    # a dir of ours on the host that a link in the tree points at
    canary = os.path.join(daemon.dir, "canary")
    os.mkdir(canary)
    with open(os.path.join(canary, "keep.txt"), "w") as f:
        f.write("keep")
    for path in ("tree/a.txt", "tree/sub/b.txt", "tree/sub/deeper/c.txt", "single.txt"):
        assert put(daemon, sid, path, b"x")[0].status == 201
    body = run(daemon, sid, f"import os\nos.symlink({canary!r}, 'tree/sub/link')",
               allow=["os.symlink"])
    assert body["status"] == "ok", body

    r, data = fetch(daemon, sid, "single.txt", "DELETE")
    assert r.status == 200
    assert json.loads(data) == {"path": "single.txt", "deleted": True}
    assert fetch(daemon, sid, "single.txt")[0].status == 404
    r, data = fetch(daemon, sid, "tree", "DELETE")
    assert r.status == 200, data
    assert listing(daemon, sid) == {"artifacts": ("dir", 0), "src": ("dir", 0)}
    assert os.listdir(canary) == ["keep.txt"]
    r, data = fetch(daemon, sid, "tree", "DELETE")
    assert r.status == 404, data


def test_get_of_a_dir_is_400(daemon):
    sid = create(daemon)["session_id"]
    r, data = fetch(daemon, sid, "src")
    assert r.status == 400 and "directory" in error(r, data)["error"]


@pytest.mark.parametrize("path", [
    "%2e%2e/escape.txt", "%2e%2e%2fescape.txt", "..%2F..%2Fescape.txt", "src/%2e%2e/%2e%2e/escape.txt",
    "../escape.txt", "src/../../escape.txt", "./escape.txt", "src/./escape.txt",
    "a//escape.txt", "a/escape.txt/", "/ESCAPE_ABS", "%2FESCAPE_ABS", "bad%0aname.txt",
])
def test_bad_paths_are_400_and_touch_nothing(daemon, path):
    sid = create(daemon)["session_id"]
    path = path.replace("ESCAPE_ABS", daemon.dir.lstrip("/") + "/escape.txt")
    before = tree(daemon.dir)
    for method, body in (("PUT", b"escaped"), ("GET", b""), ("DELETE", b"")):
        r, data = daemon.raw(method, f"/v1/sessions/{sid}/files/{path}", body)
        assert r.status == 400, (method, path, data)
        assert error(r, data)["field"] == "path"
    assert tree(daemon.dir) == before
    assert listing(daemon, sid) == {"artifacts": ("dir", 0), "src": ("dir", 0)}


def test_an_absolute_path_reads_nothing_of_the_host(daemon):
    sid = create(daemon)["session_id"]
    for path in ("/etc/passwd", "%2Fetc%2Fpasswd"):
        r, data = fetch(daemon, sid, path)
        assert r.status == 400 and b"root:" not in data, data


def test_symlinks_made_by_the_code_are_never_followed(daemon):
    sid = create(daemon, {"stateful": True})["session_id"]
    evil = f"/etc/saferun-evil-{sid}"
    body = run(daemon, sid, "import os\nos.symlink('/etc/shadow', 'leak')\n"
                            "os.symlink('/etc', 'etcdir')\nprint(sorted(os.listdir('.')))",
               allow=["os.symlink"])
    assert body["status"] == "ok", body
    assert body["stdout"] == "['artifacts', 'etcdir', 'leak', 'src']\n"
    try:
        for method, path, data in (("GET", "leak", b""), ("GET", "etcdir/shadow", b""),
                                   ("GET", "etcdir/passwd", b""), ("GET", "etcdir", b""),
                                   ("PUT", f"etcdir/{os.path.basename(evil)}", b"pwned")):
            r, out = daemon.raw(method, f"/v1/sessions/{sid}/files/{path}", data)
            assert r.status == 403, (method, path, out)
            assert "symlink" in error(r, out)["error"]
            assert b"root:" not in out
        assert not os.path.exists(evil)
    finally:
        if os.path.lexists(evil):
            os.unlink(evil)
    files = listing(daemon, sid)
    assert files["leak"][0] == "symlink" and files["etcdir"][0] == "symlink"


def test_symlinks_are_never_written_or_removed_through(daemon):
    """Writes and removals through links, aimed at host files of our own
    (never at /etc: a failure must not damage the host)."""
    sid = create(daemon)["session_id"]
    canary = os.path.join(daemon.dir, "canary")
    os.mkdir(canary)
    with open(os.path.join(canary, "keep.txt"), "w") as f:
        f.write("keep")
    code = (f"import os\nos.symlink({canary!r}, 'linkdir')\n"
            f"os.symlink({os.path.join(canary, 'keep.txt')!r}, 'linkfile')\n"
            f"os.makedirs('deep/er')\nos.symlink({canary!r}, 'deep/er/linkdir')")
    assert run(daemon, sid, code, allow=["os.symlink"])["status"] == "ok"
    for method, path, data in (("PUT", "linkdir/new.txt", b"x"),
                               ("PUT", "linkdir/keep.txt", b"overwritten"),
                               ("DELETE", "linkdir/keep.txt", b""),
                               ("PUT", "deep/er/linkdir/new.txt", b"x"),
                               ("DELETE", "deep/er/linkdir/keep.txt", b""),
                               ("GET", "deep/er/linkdir/keep.txt", b""),
                               ("GET", "linkfile", b"")):
        r, out = daemon.raw(method, f"/v1/sessions/{sid}/files/{path}", data)
        assert r.status == 403, (method, path, out)
        assert "symlink" in error(r, out)["error"]
    assert os.listdir(canary) == ["keep.txt"]
    with open(os.path.join(canary, "keep.txt")) as f:
        assert f.read() == "keep"
    # removing a link removes the link, not what it points at
    for path in ("linkfile", "linkdir", "deep"):
        r, out = fetch(daemon, sid, path, "DELETE")
        assert r.status == 200, (path, out)
    assert listing(daemon, sid) == {"artifacts": ("dir", 0), "src": ("dir", 0)}
    with open(os.path.join(canary, "keep.txt")) as f:
        assert f.read() == "keep"


def test_a_fifo_is_refused_without_hanging(daemon):
    sid = create(daemon)["session_id"]
    assert run(daemon, sid, "import os\nos.mkfifo('pipe')")["status"] == "ok"
    assert listing(daemon, sid)["pipe"][0] == "other"
    t = time.monotonic()
    r = daemon.get(f"/v1/sessions/{sid}/files/pipe", timeout=10)
    assert r.status_code == 400 and "not a regular file" in error(r)["error"]
    assert time.monotonic() - t < 5
    # and the daemon carries on
    assert daemon.get("/health").status_code == 200


def test_uploaded_files_are_the_codes_and_its_files_are_downloadable(daemon):
    sid = create(daemon)["session_id"]
    r, data = put(daemon, sid, "src/data.csv", b"name,qty\napple,3\npear,4\n")
    assert r.status == 201, data
    code = ("import csv\n"
            "rows = list(csv.DictReader(open('/work/src/data.csv')))\n"
            "print(sum(int(r['qty']) for r in rows))\n"
            "open('src/data.csv', 'a').write('plum,5\\n')\n"
            "open('artifacts/total.txt', 'w').write(str(len(rows)))\n")
    body = run(daemon, sid, code)
    assert body["status"] == "ok" and body["stdout"] == "7\n", body
    assert fetch(daemon, sid, "artifacts/total.txt")[1] == b"2"
    assert fetch(daemon, sid, "src/data.csv")[1] == b"name,qty\napple,3\npear,4\nplum,5\n"


def test_max_file_size_caps_put_and_get(make_daemon):
    d = make_daemon("--max-file-size", "1K")
    sid = create(d)["session_id"]
    assert put(d, sid, "ok.bin", b"a" * 1024)[0].status == 201
    r, data = put(d, sid, "big.bin", b"a" * 2048)
    assert r.status == 413, data
    assert error(r, data)["field"] == "path" and "max_file_size" in error(r, data)["error"]
    assert "big.bin" not in listing(d, sid)
    # a bigger file the code made is not sent either
    assert run(d, sid, "open('made.bin', 'wb').write(b'z' * 2048)")["status"] == "ok"
    r, data = fetch(d, sid, "made.bin")
    assert r.status == 413, data


def test_a_full_workspace_is_507_and_the_session_carries_on(make_daemon):
    d = make_daemon("--max-file-size", "4M",
                    policies={"default": HOST_POLICY,
                              "small": {**HOST_POLICY, "limits": {"tmpfs": "1M"}}})
    s = create(d, {"policy": "small"})
    sid = s["session_id"]
    assert s["disk"]["limit_bytes"] == 1 << 20
    r, data = put(d, sid, "big.bin", b"z" * (2 << 20))
    assert r.status == 507, data
    assert "full" in error(r, data)["error"]
    # nothing half-written is left taking the space
    assert "big.bin" not in listing(d, sid)
    assert d.get(f"/v1/sessions/{sid}").json()["disk"]["used_bytes"] < 64 << 10
    assert put(d, sid, "small.txt", b"fits")[0].status == 201
    body = run(d, sid, "print(open('small.txt').read())")
    assert body["status"] == "ok" and body["stdout"] == "fits\n"
    # the code hits the same cap
    body = run(d, sid, "open('big.bin', 'wb').write(b'z' * (2 << 20))")
    assert body["status"] == "error" and "No space left" in body["stderr"]
    assert body["limits_hit"] == ["disk"]


def test_past_max_sessions_is_429_with_retry_after(make_daemon):
    d = make_daemon("--max-sessions", "2")
    a = create(d)["session_id"]
    create(d, {"stateful": True})
    r = d.post("/v1/sessions", {})
    assert r.status_code == 429, r.text
    assert int(r.headers["Retry-After"]) > 0
    assert "max_sessions" in error(r)["error"]
    assert d.get("/v1/sessions").json()["count"] == 2 and len(d.mounted_workspaces()) == 2
    assert delete(d, f"/v1/sessions/{a}").status_code == 200
    create(d)


def test_idle_sessions_expire_after_session_ttl(make_daemon):
    d = make_daemon("--session-ttl", "2s")
    idle = create(d, {"stateful": True})["session_id"]
    run(d, idle, "x = 1")
    t = time.monotonic()  # idle from about now
    busy = create(d, {"stateful": True})["session_id"]
    while d.get(f"/v1/sessions/{idle}").status_code == 200:
        assert time.monotonic() - t < 6, "the idle session outlived session_ttl"
        assert run(d, busy, "print(1)")["status"] == "ok"
        time.sleep(0.5)
    assert time.monotonic() - t >= 1.5
    assert d.post(f"/v1/sessions/{idle}/run", {"code": "1"}).status_code == 404
    # the busy one is there, with only its workspace mounted
    for _ in range(4):
        assert run(d, busy, "print(2)")["stdout"] == "2\n"
        time.sleep(0.5)
    assert [os.path.basename(m) for m in d.mounted_workspaces()] == [busy]
    # left alone, it goes too, and so does its mount
    assert wait_for(lambda: d.get(f"/v1/sessions/{busy}").status_code == 404, timeout=6)
    # (the reaper takes it out of the table first, then unmounts, then
    # removes the mount point)
    assert wait_for(
        lambda: d.mounted_workspaces() == [] and os.listdir(d.workspaces) == [], timeout=5
    )
    assert d.only_pools_left(), (d.leftover_groups(), own_sandbox_processes(d.cgroups))
    closed = [l["msg"] for l in d.lines("session") if "closed" in l.get("msg", "")]
    assert len(closed) == 2 and all("idle past session_ttl" in m for m in closed)


def test_session_max_age_ends_even_a_busy_session(make_daemon):
    d = make_daemon("--session-max-age", "2s")
    sid = create(d, {"stateful": True})["session_id"]
    t = time.monotonic()
    while time.monotonic() - t < 6:
        r = d.post(f"/v1/sessions/{sid}/run", {"code": "print(1)"})
        if r.status_code == 404:
            break
        time.sleep(0.3)
    assert r.status_code == 404, "the session outlived session_max_age"
    assert wait_for(lambda: d.mounted_workspaces() == [], timeout=5)


def test_sigkill_with_open_sessions_then_restart_leaves_nothing(make_daemon):
    d = make_daemon()
    live = create(d, {"stateful": True})["session_id"]
    assert run(d, live, "x = 1")["status"] == "ok"
    files = create(d)["session_id"]
    assert put(d, files, "src/a.txt", b"a")[0].status == 201
    assert len(d.mounted_workspaces()) == 2
    assert own_sandbox_processes(d.cgroups), "the stateful session's interpreter is not up"
    d.proc.kill()
    d.proc.wait(timeout=10)
    d.log.close()
    d.start()
    msgs = [l["msg"] for l in d.lines("cleanup")]
    assert "removed 2 session workspaces left behind" in msgs, d.text()
    assert d.mounted_workspaces() == [] and os.listdir(d.workspaces) == []
    assert d.only_pools_left(), (d.leftover_groups(), own_sandbox_processes(d.cgroups))
    for sid in (live, files):
        assert d.get(f"/v1/sessions/{sid}").status_code == 404
    sid = create(d, {"stateful": True})["session_id"]
    assert run(d, sid, "print('fresh')")["stdout"] == "fresh\n"


def test_sigterm_closes_every_session(make_daemon):
    d = make_daemon()
    live = create(d, {"stateful": True})["session_id"]
    assert run(d, live, "x = 1")["status"] == "ok"
    create(d)
    assert len(d.mounted_workspaces()) == 2
    d.send(signal.SIGTERM)
    assert d.proc.wait(timeout=30) == 0
    assert d.mounted_workspaces() == [] and os.listdir(d.workspaces) == []
    assert d.leftover_groups() == []
    assert wait_for(lambda: own_sandbox_processes(d.cgroups) == [], timeout=5)
    closed = [l["msg"] for l in d.lines("session") if "closed (shutdown)" in l.get("msg", "")]
    assert len(closed) == 2


def test_concurrent_runs_on_one_stateful_session_take_turns(daemon):
    sid = create(daemon, {"stateful": True})["session_id"]
    run(daemon, sid, "items = []")
    code = "import time\nitems.append({n})\ntime.sleep(0.2)\nprint(len(items))"
    with cf.ThreadPoolExecutor(4) as pool:
        bodies = list(pool.map(lambda n: run(daemon, sid, code.format(n=n)), range(4)))
    assert [b["status"] for b in bodies] == ["ok"] * 4
    # one at a time: each saw its own append and no other's half-done run
    assert sorted(b["stdout"] for b in bodies) == ["1\n", "2\n", "3\n", "4\n"]
    assert run(daemon, sid, "print(sorted(items))")["stdout"] == "[0, 1, 2, 3]\n"
    assert daemon.get(f"/v1/sessions/{sid}").json()["runs"] == 6


@pytest.mark.parametrize("stateful", [True, False])
def test_delete_ends_a_run_in_progress(daemon, stateful):
    sid = create(daemon, {"stateful": stateful})["session_id"]
    with cf.ThreadPoolExecutor(1) as pool:
        t = time.monotonic()
        busy = pool.submit(run, daemon, sid, "import time\ntime.sleep(60)")
        assert wait_for(lambda: daemon.get("/health").json()["runs_in_flight"] == 1)
        time.sleep(0.3)  # python is up and sleeping
        assert delete(daemon, f"/v1/sessions/{sid}").status_code == 200
        body = busy.result(timeout=30)
    assert body["status"] == "killed" and time.monotonic() - t < 20, body
    assert wait_for(lambda: daemon.mounted_workspaces() == [], timeout=5)
    assert daemon.only_pools_left(), daemon.leftover_groups()


def test_metrics_count_the_open_sessions(make_daemon):
    d = make_daemon()
    assert "saferund_sessions 0\n" in d.get("/metrics").text
    a = create(d)["session_id"]
    create(d, {"stateful": True})
    assert "saferund_sessions 2\n" in d.get("/metrics").text
    assert d.session().delete(d.url(f"/v1/sessions/{a}")).status_code == 200
    assert "saferund_sessions 1\n" in d.get("/metrics").text
