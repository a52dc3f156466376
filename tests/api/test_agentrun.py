"""AgentRunPlus's session API (/sessions ...), driven over loopback TCP by
a client built the way AgentRunPlus's own AgentRunAPIClient is: one
requests.Session, raise_for_status on every call, a dataclass built from
the create answer with SessionInfo(**data) (so an extra or a missing key
fails), pydantic models for the other answers."""
import json
import os
from dataclasses import dataclass
from typing import List, Optional

import pytest
import requests
from pydantic import BaseModel, StrictBool, StrictStr

TOKEN = "agentrun-test-token-0123456789abcdef"


@dataclass
class SessionInfo:
    session_id: str
    workdir: str
    source_path: str
    artifact_path: str
    upload_url: str
    artifacts_url: str


class SessionInfoResponse(BaseModel):
    session_id: StrictStr
    source_path: StrictStr
    artifact_path: StrictStr


class ExecuteResponse(BaseModel):
    output: StrictStr
    success: StrictBool


class Client:
    """What an agent framework's client does, call for call."""

    def __init__(self, base_url, timeout=60):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()

    def _call(self, method, path, **kw):
        r = self.session.request(method, self.base_url + path, timeout=self.timeout, **kw)
        r.raise_for_status()
        return r

    def root(self):
        return self._call("GET", "/").json()

    def health(self):
        return self._call("GET", "/health").json()

    def create_session(self) -> SessionInfo:
        return SessionInfo(**self._call("POST", "/sessions").json())

    def get_session(self, session_id) -> SessionInfoResponse:
        return SessionInfoResponse(**self._call("GET", f"/sessions/{session_id}").json())

    def list_sessions(self):
        return self._call("GET", "/sessions").json()

    def close_session(self, session_id):
        return self._call("DELETE", f"/sessions/{session_id}").json()

    def execute(self, session_id, python_code, ignore_dependencies: Optional[List[str]] = None,
                ignore_unsafe_functions: Optional[List[str]] = None) -> ExecuteResponse:
        body = {"python_code": python_code, "ignore_dependencies": ignore_dependencies,
                "ignore_unsafe_functions": ignore_unsafe_functions}
        r = self._call("POST", f"/sessions/{session_id}/execute", json=body)
        return ExecuteResponse(**r.json())

    def upload(self, session_id, filename, data):
        r = self._call("POST", f"/sessions/{session_id}/copy-to", files={"file": (filename, data)})
        return r.json()

    def download(self, session_id, src_path, filename):
        r = self._call("POST", f"/sessions/{session_id}/copy-from",
                       json={"src_path": src_path, "filename": filename})
        return r

    def artifacts(self, session_id):
        return self._call("GET", f"/sessions/{session_id}/artifacts").json()

    def src_files(self, session_id):
        return self._call("GET", f"/sessions/{session_id}/src").json()

    def get(self, url):
        """A URL the server handed out (download_url, artifacts_url): absolute,
        as AgentRunPlus's are, so it is fetched as it is."""
        r = self.session.get(url, timeout=self.timeout)
        r.raise_for_status()
        return r


@pytest.fixture
def arp(make_daemon):
    d = make_daemon(tcp=True, token=TOKEN)
    client = Client(d.tcp_url(""))
    client.session.headers["Authorization"] = f"Bearer {TOKEN}"
    client.daemon = d
    yield client
    client.session.close()


def tree(top):
    out = set()
    for root, dirs, files in os.walk(top):
        out.update(os.path.join(root, n) for n in dirs + files)
    return out


def refused(call, status):
    """The HTTPError a call raises: its status, and the body's detail."""
    with pytest.raises(requests.HTTPError) as e:
        call()
    r = e.value.response
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"] == "application/json"
    return r.json()["detail"]


def test_root_names_the_service_and_its_endpoints(arp):
    root = arp.root()
    assert root["service"] == "saferund"
    for ep in ("POST /sessions", "GET /sessions", "GET /sessions/{id}", "DELETE /sessions/{id}",
               "POST /sessions/{id}/execute", "POST /sessions/{id}/copy-to",
               "POST /sessions/{id}/copy-from", "GET /sessions/{id}/artifacts",
               "GET /sessions/{id}/src", "GET /health"):
        assert ep in root["endpoints"], ep


def test_health_counts_the_sessions(arp):
    h = arp.health()
    assert h["status"] == "healthy" and h["active_sessions"] == 0
    assert isinstance(h["protocols"], list) and h["protocols"]
    arp.create_session()
    assert arp.health()["active_sessions"] == 1


def test_create_get_list_close(arp):
    info = arp.create_session()
    sid = info.session_id
    assert info.workdir == sid
    assert info.source_path == "/work/src" and info.artifact_path == "/work/artifacts"
    assert info.upload_url == f"{arp.base_url}/sessions/{sid}/copy-to"
    assert info.artifacts_url == f"{arp.base_url}/sessions/{sid}/artifacts"
    got = arp.get_session(sid)
    assert (got.session_id, got.source_path, got.artifact_path) == \
        (sid, info.source_path, info.artifact_path)
    assert set(arp._call("GET", f"/sessions/{sid}").json()) == {"session_id", "source_path",
                                                                 "artifact_path"}
    other = arp.create_session().session_id
    assert arp.list_sessions() == {"active_sessions": [sid, other], "count": 2}
    assert arp.close_session(sid) == {"message": f"Session {sid} closed successfully"}
    assert arp.list_sessions() == {"active_sessions": [other], "count": 1}
    assert "not found" in refused(lambda: arp.get_session(sid), 404)
    assert [os.path.basename(m) for m in arp.daemon.mounted_workspaces()] == [other]


def test_an_unmodified_client_without_a_token(make_daemon):
    d = make_daemon("--insecure-no-token", tcp=True)
    client = Client(d.tcp_url(""))
    info = client.create_session()
    out = client.execute(info.session_id, "print('Hello, World!')")
    assert out.success is True and out.output == "Hello, World!\n"
    client.close_session(info.session_id)


def test_execute_hello(arp):
    sid = arp.create_session().session_id
    out = arp.execute(sid, "print('Hello, World!')")
    assert out.success is True and out.output == "Hello, World!\n"


def test_each_execute_is_a_fresh_interpreter_but_files_persist(arp):
    # As in AgentRunPlus, where each execute is a new python process in the
    # session's container: the session's state is its files.
    sid = arp.create_session().session_id
    assert arp.execute(sid, "r = 2\nopen('r.txt', 'w').write(str(r))").success
    out = arp.execute(sid, "print(r)")
    assert out.success is False and "NameError" in out.output
    out = arp.execute(sid, "import math\nr = int(open('r.txt').read())\n"
                           "print(round(math.pi * r * r, 2))")
    assert out.success and out.output == "12.57\n"


def test_a_python_error_is_success_false_with_the_traceback(arp):
    sid = arp.create_session().session_id
    out = arp.execute(sid, "1/0")
    assert out.success is False
    assert "Traceback (most recent call last)" in out.output
    assert "ZeroDivisionError: division by zero" in out.output
    # the session carries on
    assert arp.execute(sid, "print('next')").output == "next\n"


def test_ignore_unsafe_functions_lets_the_checker_pass_a_call(arp):
    sid = arp.create_session().session_id
    out = arp.execute(sid, "print(eval('6 * 7'))")
    assert out.success is False
    assert "eval" in out.output and "42" not in out.output
    assert out.output.count("line 1: SR201") == 1  # said once, not once per place
    out = arp.execute(sid, "x = eval('1')\ny = 2\nexec('z = 3')\n")
    assert out.success is False
    assert out.output.startswith("rejected: 2 problems found before running; line 1: SR201")
    assert out.output.count("line 1: SR201") == 1 and out.output.count("line 3: SR201") == 1
    out = arp.execute(sid, "print(eval('6 * 7'))", ignore_unsafe_functions=["eval"])
    assert out.success is True and out.output == "42\n"
    out = arp.execute(sid, "print(1)", ignore_dependencies=["numpy"], ignore_unsafe_functions=[])
    assert out.success is True


@pytest.mark.parametrize("body,field", [
    ({}, "python_code"),
    ({"ignore_unsafe_functions": ["eval"]}, "python_code"),
    ({"python_code": 5}, "python_code"),
    ({"python_code": None}, "python_code"),
    ({"python_code": "1", "ignore_unsafe_functions": "x"}, "ignore_unsafe_functions"),
    ({"python_code": "1", "ignore_unsafe_functions": [1]}, "ignore_unsafe_functions"),
    ({"python_code": "1", "ignore_dependencies": "numpy"}, "ignore_dependencies"),
])
def test_a_malformed_execute_body_is_422(arp, body, field):
    sid = arp.create_session().session_id
    with pytest.raises(requests.HTTPError) as e:
        arp._call("POST", f"/sessions/{sid}/execute", json=body)
    r = e.value.response
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field


def test_an_execute_body_that_is_not_json_is_422(arp):
    sid = arp.create_session().session_id
    for data in (b"", b"print(1)", b"[]"):
        with pytest.raises(requests.HTTPError) as e:
            arp._call("POST", f"/sessions/{sid}/execute", data=data,
                      headers={"Content-Type": "application/json"})
        assert e.value.response.status_code == 422, data


def test_upload_then_the_code_reads_it(arp):
    info = arp.create_session()
    answer = arp.upload(info.session_id, "data.txt", b"uploaded content\x00!")
    assert answer == {"message": "File data.txt uploaded successfully",
                      "destination_path": f"{info.source_path}/data.txt"}
    out = arp.execute(info.session_id,
                      f"print(repr(open(f'{info.source_path}/data.txt', 'rb').read()))")
    assert out.success and out.output == "b'uploaded content\\x00!'\n"
    listing = arp.src_files(info.session_id)
    assert listing == {"files": [{"name": "data.txt", "size_bytes": 18}], "count": 1}


@pytest.mark.parametrize("name", [
    "../../../etc/passwd", "..\\..\\x", "subdir/../../x", "/etc/passwd", "\\windows\\x",
    "..", "a/b.txt", "src/../x",
])
def test_upload_traversal_names_are_403(arp, name):
    info = arp.create_session()
    with open("/etc/passwd", "rb") as f:
        passwd = f.read()
    before = tree(arp.daemon.dir)
    detail = refused(lambda: arp.upload(info.session_id, name, b"pwned"), 403)
    assert "Path traversal attempts are not allowed" in detail
    assert arp.src_files(info.session_id)["count"] == 0
    assert tree(arp.daemon.dir) == before
    with open("/etc/passwd", "rb") as f:
        assert f.read() == passwd


def test_upload_hidden_name_is_400(arp):
    info = arp.create_session()
    assert "Invalid filename" in refused(lambda: arp.upload(info.session_id, ".hidden", b"x"), 400)
    assert arp.src_files(info.session_id)["count"] == 0


def test_upload_empty_name_is_400(arp):
    # requests sends filename="" for an empty name (it omits the parameter
    # only for None), so the daemon sees a file part with an empty name:
    # AgentRunPlus's "Invalid filename", 400.
    sid = arp.create_session().session_id
    prepared = requests.Request("POST", "http://x/", files={"file": ("", b"x")}).prepare()
    assert b'name="file"; filename=""' in prepared.body
    assert "Invalid filename" in refused(lambda: arp.upload(sid, "", b"x"), 400)


def test_upload_without_a_file_part_is_422(arp):
    sid = arp.create_session().session_id
    url = f"/sessions/{sid}/copy-to"
    for kw in ({}, {"files": {"other": ("a.txt", b"x")}}, {"data": {"file": "not a file"}},
               {"data": b"--nope\r\n", "headers": {
                   "Content-Type": "multipart/form-data; boundary=nope"}}):
        with pytest.raises(requests.HTTPError) as e:
            arp._call("POST", url, **kw)
        assert e.value.response.status_code == 422, (kw, e.value.response.text)
        assert e.value.response.json()["field"] == "file"


def test_upload_over_max_file_size_is_413(make_daemon):
    d = make_daemon("--max-file-size", "1K", tcp=True, token=TOKEN)
    client = Client(d.tcp_url(""))
    client.session.headers["Authorization"] = f"Bearer {TOKEN}"
    sid = client.create_session().session_id
    client.upload(sid, "fits.bin", b"a" * 1024)
    assert "max_file_size" in refused(lambda: client.upload(sid, "big.bin", b"a" * 2048), 413)
    assert client.src_files(sid) == {"files": [{"name": "fits.bin", "size_bytes": 1024}],
                                     "count": 1}


def test_artifacts_list_download_and_copy_from(arp):
    info = arp.create_session()
    sid = info.session_id
    code = (f"open(f'{info.artifact_path}/out.txt', 'w').write('result: 42')\n"
            f"import os\nos.makedirs('{info.artifact_path}/plots', exist_ok=True)\n"
            f"open('{info.artifact_path}/plots/p.bin', 'wb').write(bytes(range(8)))\n")
    assert arp.execute(sid, code).success
    listing = arp.artifacts(sid)
    assert listing["count"] == 2 and listing["artifacts_url"] == info.artifacts_url
    by_name = {a["name"]: a for a in listing["artifacts"]}
    assert by_name["out.txt"] == {"name": "out.txt", "size_bytes": 10,
                                  "download_url": f"{info.artifacts_url}/out.txt"}
    assert by_name["plots/p.bin"]["size_bytes"] == 8
    r = arp.get(by_name["out.txt"]["download_url"])
    assert r.content == b"result: 42"
    assert arp.get(by_name["plots/p.bin"]["download_url"]).content == bytes(range(8))

    for src in (f"{info.artifact_path}/out.txt", "artifacts/out.txt"):
        r = arp.download(sid, src, "saved.txt")
        assert r.content == b"result: 42"
        assert r.headers["Content-Disposition"].startswith("attachment")
        assert 'filename="saved.txt"' in r.headers["Content-Disposition"]


@pytest.mark.parametrize("src", [
    "{artifact_path}/../../../etc/passwd", "{artifact_path}/../src/secret.txt",
    "{source_path}/secret.txt", "/etc/passwd", "{artifact_path}", "{artifact_path}/",
    "src/secret.txt", "artifacts/../src/secret.txt", "/work/artifactsX/secret.txt",
])
def test_copy_from_outside_the_artifact_dir_is_403(arp, src):
    info = arp.create_session()
    arp.upload(info.session_id, "secret.txt", b"secret")
    src = src.format(artifact_path=info.artifact_path, source_path=info.source_path)
    detail = refused(lambda: arp.download(info.session_id, src, "x.txt"), 403)
    assert "within the session's artifact directory" in detail


def test_copy_from_missing_fields_is_422_and_missing_file_404(arp):
    info = arp.create_session()
    for body in ({"src_path": f"{info.artifact_path}/out.txt"}, {"filename": "x"}, {},
                 {"src_path": 1, "filename": "x"}):
        with pytest.raises(requests.HTTPError) as e:
            arp._call("POST", f"/sessions/{info.session_id}/copy-from", json=body)
        assert e.value.response.status_code == 422, body
    refused(lambda: arp.download(info.session_id, f"{info.artifact_path}/none.txt", "x"), 404)


def test_the_code_cannot_turn_the_artifact_dir_into_a_way_out(arp):
    """The code owns its workspace: a symlink it puts where the artifacts
    were must not make the host (root) read /etc for it."""
    info = arp.create_session()
    sid = info.session_id
    code = ("import os, shutil\nshutil.rmtree('artifacts')\nos.symlink('/etc', 'artifacts')\n"
            "os.symlink('/etc/passwd', 'src/passwd')")
    out = arp.execute(sid, code, ignore_unsafe_functions=["os.symlink", "shutil.rmtree"])
    assert out.success, out.output
    for call in (lambda: arp.artifacts(sid), lambda: arp.get(f"{info.artifacts_url}/passwd"),
                 lambda: arp.download(sid, f"{info.artifact_path}/passwd", "p"),
                 lambda: arp.download(sid, "artifacts/passwd", "p")):
        assert "symlink" in refused(call, 403)
    # a link inside src is listed as nothing (it is not a regular file)
    assert arp.src_files(sid) == {"files": [], "count": 0}


def test_artifact_download_url_traversal_is_refused(arp):
    sid = arp.create_session().session_id
    arp.upload(sid, "secret.txt", b"secret")
    d = arp.daemon
    for path in ("..%2Fsrc%2Fsecret.txt", "%2e%2e/src/secret.txt", "..\\src\\secret.txt",
                 "x/../../src/secret.txt"):
        r, data = d.raw("GET", f"/sessions/{sid}/artifacts/{path}")
        assert r.status == 403, (path, data)
        assert "Path traversal attempts are not allowed" in json.loads(data)["detail"]


@pytest.mark.parametrize("method,path,kw", [
    ("GET", "", {}), ("DELETE", "", {}),
    ("POST", "/execute", {"json": {"python_code": "print(1)"}}),
    ("POST", "/copy-to", {"files": {"file": ("a.txt", b"x")}}),
    ("POST", "/copy-from", {"json": {"src_path": "artifacts/a", "filename": "a"}}),
    ("GET", "/artifacts", {}), ("GET", "/artifacts/a.txt", {}), ("GET", "/src", {}),
])
def test_unknown_session_is_404(arp, method, path, kw):
    arp.create_session()
    with pytest.raises(requests.HTTPError) as e:
        arp._call(method, f"/sessions/0123456789abcdef{path}", **kw)
    assert e.value.response.status_code == 404, e.value.response.text
    assert "0123456789abcdef" in e.value.response.json()["detail"]


def test_two_sessions_are_isolated(arp):
    a, b = arp.create_session(), arp.create_session()
    for s in (a, b):
        arp.upload(s.session_id, "who.txt", s.session_id.encode())
        assert arp.execute(s.session_id, f"open('{s.artifact_path}/r.txt', 'w')"
                                         f".write(open('{s.source_path}/who.txt').read())").success
    for s in (a, b):
        out = arp.execute(s.session_id, "import os\nprint(sorted(os.listdir('src')), "
                                        "open('src/who.txt').read())")
        assert out.output == f"['who.txt'] {s.session_id}\n"
        assert arp.download(s.session_id, "artifacts/r.txt", "r").content == \
            s.session_id.encode()
        assert arp.src_files(s.session_id)["count"] == 1
    # the other's workspace has no path in this one's sandbox
    host = os.path.join(arp.daemon.workspaces, b.session_id)
    out = arp.execute(a.session_id, f"import os\nprint(os.path.exists({host!r}))")
    assert out.output == "False\n"
    arp.close_session(a.session_id)
    out = arp.execute(b.session_id, "print(open('src/who.txt').read())")
    assert out.output == b.session_id + "\n"


def test_full_workflow_upload_a_script_run_it_collect_the_artifact(arp):
    info = arp.create_session()
    sid = info.session_id
    script = (b"import csv, json\n"
              b"rows = list(csv.reader(open('/work/src/data.csv')))[1:]\n"
              b"total = sum(int(q) for _, q in rows)\n"
              b"json.dump({'total': total, 'n': len(rows)}, open('/work/artifacts/summary.json', 'w'))\n"
              b"print('total', total)\n")
    arp.upload(sid, "analyze.py", script)
    arp.upload(sid, "data.csv", b"item,qty\na,1\nb,2\nc,39\n")
    assert {f["name"] for f in arp.src_files(sid)["files"]} == {"analyze.py", "data.csv"}
    code = f"exec(open('{info.source_path}/analyze.py').read())"
    out = arp.execute(sid, code)
    assert out.success is False and "SR201" in out.output  # the checker refuses exec
    # exec of a string compiles it first: the run-time guard needs both
    # (see test_ignoring_exec_lets_exec_of_a_string_run)
    out = arp.execute(sid, code, ignore_unsafe_functions=["exec", "compile"])
    assert out.success is True, out.output
    assert out.output == "total 42\n"
    names = [a["name"] for a in arp.artifacts(sid)["artifacts"]]
    assert names == ["summary.json"]
    r = arp.download(sid, f"{info.artifact_path}/summary.json", "summary.json")
    assert r.json() == {"total": 42, "n": 3}
    assert arp.close_session(sid)["message"] == f"Session {sid} closed successfully"
    assert arp.list_sessions() == {"active_sessions": [], "count": 0}
    assert arp.daemon.mounted_workspaces() == []


def test_ignoring_exec_lets_exec_of_a_string_run(arp):
    sid = arp.create_session().session_id
    out = arp.execute(sid, "exec('print(6 * 7)')", ignore_unsafe_functions=["exec"])
    assert out.success is True and out.output == "42\n", out.output
