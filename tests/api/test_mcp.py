"""MCP (Model Context Protocol 2025-06-18, Streamable HTTP) at /mcp: the
transport (session ids, Accept and Content-Type, SSE framing, Origin,
DELETE and GET), JSON-RPC 2.0 errors, tools/list, and every tool:
run_python and check_python, and AgentRunPlus's FastMCP tools over the
same sandbox sessions as REST's /sessions and /v1/sessions.

AgentRunPlus's own MCP workflow runs through a client built the way its
AgentRunMCPClient is (Accept both types, the session id from the
mcp-session-id header, the SSE data line, json.loads of content[0].text)."""
import base64
import concurrent.futures as cf
import json
import os
import re
import secrets
import signal
import subprocess
import time

import pytest
import requests

from conftest import HOST_POLICY, SAFERUND, Daemon, own_sandbox_processes, tree, wait_for
from test_agentrun import SessionInfo

TOKEN = "mcp-test-token-" + "7" * 24
LATEST = "2025-11-25"
VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
# What the mcp fixture speaks: before 2025-11-25, arguments a tool refuses
# are JSON-RPC errors (-32602), which many tests here check; from 2025-11-25
# on they are the tool's own error (test_2025_11_25_bad_arguments_are_tool_errors).
FIXTURE_VERSION = "2025-06-18"
BOTH = "application/json, text/event-stream"
UNKNOWN_SID = "0123456789abcdef"  # the shape of a sandbox session id, never issued here

# tool -> (its arguments, the required ones)
TOOLS = {
    "run_python": ({"code", "timeout", "files", "env", "allow", "stdin", "policy", "memory",
                    "cpus", "requirements"}, {"code"}),
    "check_python": ({"code", "allow", "policy"}, {"code"}),
    "run_javascript": ({"code", "timeout", "files", "env", "stdin", "policy", "memory", "cpus"},
                       {"code"}),
    "run_shell": ({"code", "timeout", "files", "env", "stdin", "policy", "memory", "cpus"},
                  {"code"}),
    "create_session": (set(), set()),
    "execute_code": ({"session_id", "code", "ignore_dependencies", "ignore_unsafe_functions"},
                     {"session_id", "code"}),
    "upload_file": ({"session_id", "filename", "content_base64"},
                    {"session_id", "filename", "content_base64"}),
    "download_file": ({"session_id", "src_path"}, {"session_id", "src_path"}),
    "list_sessions": (set(), set()),
    "get_session_info": ({"session_id"}, {"session_id"}),
    "close_session": ({"session_id"}, {"session_id"}),
    "get_packages": (set(), set()),
    "get_health": (set(), set()),
    "list_artifacts": ({"session_id"}, {"session_id"}),
    "list_src": ({"session_id"}, {"session_id"}),
}
SESSION_TOOLS = ("execute_code", "upload_file", "download_file", "get_session_info",
                 "close_session", "list_artifacts", "list_src")
CREATE_KEYS = {"session_id", "workdir", "source_path", "artifact_path", "upload_url",
               "artifacts_url"}


# ---- the wire ----------------------------------------------------------------

def media_type(r):
    return r.headers.get("Content-Type", "").split(";")[0].strip().lower()


def sse_message(r):
    """The one SSE event of an answer, exactly `event: message`, one data
    line of JSON, a blank line."""
    assert media_type(r) == "text/event-stream", r.headers
    text = r.content.decode("utf-8")
    m = re.fullmatch(r"event: message\ndata: ([^\r\n]*)\n\n", text)
    assert m, repr(text[:500])
    return json.loads(m.group(1))


def message(r):
    """The JSON-RPC message of an answer, whichever type it came in."""
    if media_type(r) == "text/event-stream":
        return sse_message(r)
    assert media_type(r) == "application/json", (r.status_code, r.headers, r.text[:300])
    return r.json()


def request(method, params=None, id=1):
    body = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        body["params"] = params
    return body


def initialize_body(version=LATEST, id=1):
    return request("initialize", {"protocolVersion": version, "capabilities": {},
                                  "clientInfo": {"name": "saferun-test_mcp", "version": "1"}}, id)


class Mcp:
    """An MCP client at the level of the protocol: every request is sent as
    asked (headers left out when given None) and the answers are checked
    against JSON-RPC 2.0."""

    def __init__(self, base_url, http):
        self.base = base_url.rstrip("/")
        self.http = http
        self.sid = None
        self.last_id = 0

    def post(self, body, sid=..., accept=BOTH, content_type="application/json", headers=None,
             path="/mcp", stream=False):
        h = {"Accept": accept, "Content-Type": content_type,
             "Mcp-Session-Id": self.sid if sid is ... else sid}
        h.update(headers or {})  # a None value leaves the header out
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self.http.post(self.base + path, data=data, headers=h, timeout=120, stream=stream)

    def delete(self, sid=..., headers=None, path="/mcp"):
        h = {"Mcp-Session-Id": self.sid if sid is ... else sid}
        h.update(headers or {})
        return self.http.delete(self.base + path, headers=h, timeout=60)

    def initialize(self, version=FIXTURE_VERSION, **kw):
        r = self.post(initialize_body(version), sid=None, **kw)
        assert r.status_code == 200, r.text
        self.sid = r.headers["Mcp-Session-Id"]
        return message(r)

    def rpc(self, method, params=None, **kw):
        """One request that must be answered 200 with its own id."""
        self.last_id += 1
        r = self.post(request(method, params, self.last_id), **kw)
        assert r.status_code == 200, (method, r.status_code, r.text)
        msg = message(r)
        assert msg["jsonrpc"] == "2.0" and msg["id"] == self.last_id, msg
        assert ("result" in msg) != ("error" in msg), msg
        return msg

    def result(self, method, params=None, **kw):
        msg = self.rpc(method, params, **kw)
        assert "error" not in msg, msg
        return msg["result"]

    def error(self, method, params=None, **kw):
        msg = self.rpc(method, params, **kw)
        assert "result" not in msg, msg
        assert isinstance(msg["error"]["code"], int) and isinstance(msg["error"]["message"], str)
        return msg["error"]

    def tool(self, name, arguments=None, **kw):
        """A tools/call result: content with text first, isError a bool."""
        params = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        res = self.result("tools/call", params, **kw)
        assert isinstance(res["content"], list) and res["content"], res
        assert res["content"][0]["type"] == "text" and isinstance(res["content"][0]["text"], str)
        assert isinstance(res["isError"], bool), res
        return res

    def arp(self, name, arguments=None):
        """An AgentRunPlus tool: its object is the JSON of content[0].text, the
        same as structuredContent, and isError says success is false."""
        res = self.tool(name, arguments if arguments is not None else {})
        obj = json.loads(res["content"][0]["text"])
        assert isinstance(obj, dict), obj
        assert res["structuredContent"] == obj, res
        assert res["isError"] is (obj.get("success") is False), res
        return obj


@pytest.fixture(scope="module")
def shared_daemon():
    """One daemon for the tests that need nothing of their own (the mcp
    fixture): a test daemon's start and stop cost ~0.3 s, and under ASan
    twice that (LeakSanitizer's scan at exit), for ~200 tests. Each test
    starts with no session open and leaves nothing behind (mcp)."""
    d = Daemon([])
    d.start()
    yield d
    d.cleanup()
    assert "Sanitizer" not in d.final_log, d.final_log


class SinceNow:
    """The shared daemon as one test sees it: its log from the test's start."""

    def __init__(self, d):
        self._d = d
        self._start = os.path.getsize(d.log_path)

    def __getattr__(self, name):
        return getattr(self._d, name)

    def text(self):
        with open(self._d.log_path, "rb") as f:
            f.seek(self._start)
            return f.read().decode(errors="replace")

    lines = Daemon.lines


@pytest.fixture
def mcp(shared_daemon):
    d = SinceNow(shared_daemon)
    assert d.get("/sessions").json()["count"] == 0
    m = Mcp(d.url(""), d.session())
    m.daemon = d
    m.initialize()
    yield m
    # What the test left open closes as a client would close it; then
    # nothing of the test may be left (and the next starts clean).
    if m.sid:
        m.delete()
    m.http.close()
    for sid in d.get("/sessions").json()["active_sessions"]:
        assert delete(d, f"/v1/sessions/{sid}").status_code in (200, 204), sid
    assert_nothing_left(d)


def new_client(d):
    m = Mcp(d.url(""), d.session())
    m.daemon = d
    return m


def delete(d, path):
    with d.session() as s:
        return s.delete(d.url(path), timeout=60)


def assert_nothing_left(d):
    assert wait_for(lambda: d.mounted_workspaces() == [], timeout=5), d.mounted_workspaces()
    assert wait_for(lambda: not os.path.isdir(d.workspaces) or os.listdir(d.workspaces) == [],
                    timeout=5), os.listdir(d.workspaces)
    assert d.only_pools_left(), (d.leftover_groups(), own_sandbox_processes(d.cgroups))


# ---- initialize ----------------------------------------------------------------

def test_initialize_gives_a_session_id_capabilities_and_server_info(daemon):
    m = new_client(daemon)
    r = m.post(initialize_body(LATEST, id=1), sid=None, accept="application/json")
    assert r.status_code == 200, r.text
    assert media_type(r) == "application/json"
    sid = r.headers["Mcp-Session-Id"]
    assert re.fullmatch(r"[0-9a-f]{32}", sid), sid
    msg = r.json()
    assert msg["jsonrpc"] == "2.0" and msg["id"] == 1 and "error" not in msg
    res = msg["result"]
    assert res["protocolVersion"] == LATEST
    assert isinstance(res["capabilities"]["tools"], dict)
    assert res["serverInfo"]["name"] == "saferun"
    assert res["serverInfo"]["version"] == daemon.get("/health").json()["version"]
    assert isinstance(res["instructions"], str) and res["instructions"].strip()
    # every initialize is a new session
    r2 = m.post(initialize_body(LATEST, id="two"), sid=None, accept="application/json")
    assert r2.status_code == 200 and r2.json()["id"] == "two"
    assert re.fullmatch(r"[0-9a-f]{32}", r2.headers["Mcp-Session-Id"])
    assert r2.headers["Mcp-Session-Id"] != sid
    # and both work
    for s in (sid, r2.headers["Mcp-Session-Id"]):
        assert m.result("ping", sid=s) == {}


@pytest.mark.parametrize("asked,answered", [
    ("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"),
    ("2024-11-05", "2024-11-05"),
    ("2099-01-01", LATEST), ("1.0", LATEST), ("2024-10-07", LATEST),
])
def test_initialize_negotiates_the_protocol_version(mcp, asked, answered):
    assert mcp.initialize(asked)["result"]["protocolVersion"] == answered


def test_initialize_over_sse_as_agentrunplus_asks(daemon):
    m = new_client(daemon)
    r = m.post(initialize_body("2024-11-05", id=1), sid=None, accept=BOTH)
    assert r.status_code == 200, r.text
    assert media_type(r) == "text/event-stream"
    assert re.fullmatch(r"[0-9a-f]{32}", r.headers["mcp-session-id"])
    msg = sse_message(r)
    assert msg["id"] == 1 and msg["result"]["protocolVersion"] == "2024-11-05"


def test_a_client_that_never_sends_initialized_still_works(mcp):
    # no notifications/initialized: straight to work
    assert mcp.result("ping") == {}
    assert len(mcp.result("tools/list")["tools"]) == len(TOOLS)
    res = mcp.tool("run_python", {"code": "print(6 * 7)"})
    assert res["structuredContent"]["stdout"] == "42\n"


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
def test_both_paths_serve_mcp(daemon, path):
    m = new_client(daemon)
    r = m.post(initialize_body(), sid=None, path=path)
    assert r.status_code == 200, r.text
    m.sid = r.headers["Mcp-Session-Id"]
    r = m.post(request("ping", id=5), path=path)
    assert r.status_code == 200 and message(r) == {"jsonrpc": "2.0", "id": 5, "result": {}}
    assert m.delete(path=path).status_code == 200
    r = m.post(request("ping", id=6), path=path, accept="application/json")
    assert r.status_code == 404, r.text


# ---- notifications and client responses ----------------------------------------

@pytest.mark.parametrize("body", [
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "method": "notifications/initialized", "params": {}},
    {"jsonrpc": "2.0", "method": "notifications/cancelled",
     "params": {"requestId": 99, "reason": "test"}},
    {"jsonrpc": "2.0", "method": "notifications/no_such_thing"},
    {"jsonrpc": "2.0", "id": "server-1", "result": {}},
    {"jsonrpc": "2.0", "id": 7, "result": {"roots": []}},
    {"jsonrpc": "2.0", "id": 8, "error": {"code": -32601, "message": "no"}},
])
@pytest.mark.parametrize("accept", [BOTH, "application/json"])
def test_notifications_and_responses_are_202_with_no_body(mcp, body, accept):
    r = mcp.post(body, accept=accept)
    assert r.status_code == 202, r.text
    assert r.content == b""
    assert mcp.result("ping") == {}  # and the session carries on


def test_a_notification_without_a_session_is_400(mcp):
    r = mcp.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid=None,
                 accept="application/json")
    assert r.status_code == 400, r.text
    assert message(r)["error"]["code"] == -32600


# ---- Content-Type and Accept ------------------------------------------------------

@pytest.mark.parametrize("content_type", [
    None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
    "application/xml", "text/json",
])
def test_a_body_that_is_not_application_json_is_415(mcp, content_type):
    for sid, body in ((None, initialize_body()), (..., request("ping"))):
        r = mcp.post(body, sid=sid, content_type=content_type)
        assert r.status_code == 415, (content_type, r.status_code, r.text)
        assert "Mcp-Session-Id" not in r.headers
    assert mcp.result("ping") == {}


def test_application_json_with_a_charset_is_json(mcp):
    r = mcp.post(request("ping", id=3), content_type="application/json; charset=utf-8")
    assert r.status_code == 200, r.text
    assert message(r) == {"jsonrpc": "2.0", "id": 3, "result": {}}


@pytest.mark.parametrize("accept,expect", [
    (BOTH, "text/event-stream"),
    ("text/event-stream", "text/event-stream"),
    ("text/event-stream, application/json", "text/event-stream"),
    ("application/json;q=0.9, text/event-stream;q=0.8", "text/event-stream"),
    ("application/json", "application/json"),
    ("*/*", "application/json"),
    (None, "application/json"),
])
def test_accept_chooses_sse_or_json(mcp, accept, expect):
    r = mcp.post(request("ping", id=11), accept=accept)
    assert r.status_code == 200, r.text
    assert media_type(r) == expect
    assert message(r) == {"jsonrpc": "2.0", "id": 11, "result": {}}
    # initialize too
    r = mcp.post(initialize_body(id=12), sid=None, accept=accept)
    assert r.status_code == 200 and media_type(r) == expect
    assert message(r)["result"]["serverInfo"]["name"] == "saferun"
    # and a tool's answer
    r = mcp.post(request("tools/call", {"name": "run_python",
                                        "arguments": {"code": "print('a')\nprint('b')"}}, id=13),
                 accept=accept)
    assert r.status_code == 200 and media_type(r) == expect
    assert message(r)["result"]["structuredContent"]["stdout"] == "a\nb\n"


def test_no_accept_header_at_all_is_json(mcp):
    """The same without any client library: http.client sends no Accept."""
    r, data = mcp.daemon.raw("POST", "/mcp", json.dumps(request("ping", id=4)).encode(),
                             {"Content-Type": "application/json", "Mcp-Session-Id": mcp.sid})
    assert r.status == 200, data
    assert r.getheader("Content-Type").split(";")[0] == "application/json"
    assert json.loads(data) == {"jsonrpc": "2.0", "id": 4, "result": {}}


@pytest.mark.parametrize("accept", ["text/html", "image/png", "application/xml",
                                    "text/plain, application/xhtml+xml"])
def test_accept_with_neither_type_is_406(mcp, accept):
    r = mcp.post(initialize_body(), sid=None, accept=accept)
    assert r.status_code == 406, r.text
    assert "Mcp-Session-Id" not in r.headers
    r = mcp.post(request("ping"), accept=accept)
    assert r.status_code == 406, r.text
    r = mcp.post(request("tools/call", {"name": "run_python", "arguments": {"code": "1"}}),
                 accept=accept)
    assert r.status_code == 406, r.text
    assert mcp.daemon.lines("run") == []  # nothing ran


def test_sse_data_is_one_line_of_utf8_json(mcp):
    code = ("print('h\\u00e9llo \\u2713')\nprint('two\\tlines')\n"
            "import sys\nprint('err', file=sys.stderr)")
    r = mcp.post(request("tools/call", {"name": "run_python", "arguments": {"code": code}}, id=9))
    assert r.status_code == 200
    msg = sse_message(r)  # the whole body is one event with one data line
    out = msg["result"]["structuredContent"]
    assert out["stdout"] == "h\u00e9llo \u2713\ntwo\tlines\n" and out["stderr"] == "err\n"


# ---- the session header ---------------------------------------------------------

@pytest.mark.parametrize("method,params", [
    ("ping", None), ("tools/list", None),
    ("tools/call", {"name": "run_python", "arguments": {"code": "print(1)"}}),
    ("tools/call", {"name": "create_session", "arguments": {}}),
])
@pytest.mark.parametrize("accept", ["application/json", BOTH])
def test_a_request_without_the_session_header_is_400(mcp, method, params, accept):
    r = mcp.post(request(method, params), sid=None, accept=accept)
    assert r.status_code == 400, r.text
    msg = message(r)
    assert msg["jsonrpc"] == "2.0" and "result" not in msg
    assert msg["error"]["code"] == -32600
    assert "mcp-session-id" in msg["error"]["message"].lower()
    assert mcp.daemon.lines("run") == []
    assert mcp.daemon.get("/sessions").json()["count"] == 0


@pytest.mark.parametrize("sid", ["0" * 32, secrets.token_hex(16), "not-a-session", UNKNOWN_SID])
def test_an_unknown_session_is_404(mcp, sid):
    for body in (request("ping"), request("tools/list"),
                 request("tools/call", {"name": "run_python", "arguments": {"code": "1"}})):
        r = mcp.post(body, sid=sid, accept="application/json")
        assert r.status_code == 404, r.text
        msg = message(r)
        assert msg["error"]["code"] == -32001
        assert "Session not found" in msg["error"]["message"]
    assert mcp.daemon.lines("run") == []


def test_a_deleted_session_is_404(mcp):
    sid = mcp.sid
    assert mcp.delete().status_code == 200
    r = mcp.post(request("ping"), sid=sid, accept="application/json")
    assert r.status_code == 404, r.text
    assert message(r)["error"]["code"] == -32001


@pytest.mark.parametrize("version", VERSIONS)
def test_a_supported_protocol_version_header_is_fine(mcp, version):
    assert mcp.result("ping", headers={"MCP-Protocol-Version": version}) == {}
    res = mcp.tool("run_python", {"code": "print(1)"}, headers={"MCP-Protocol-Version": version})
    assert res["isError"] is False


@pytest.mark.parametrize("version", ["2099-01-01", "2024-10-07", "latest"])
def test_an_unsupported_protocol_version_header_is_400(mcp, version):
    r = mcp.post(request("ping"), accept="application/json",
                 headers={"MCP-Protocol-Version": version})
    assert r.status_code == 400, (version, r.text)
    assert message(r)["error"]["code"] == -32600
    r = mcp.post(request("tools/call", {"name": "run_python", "arguments": {"code": "1"}}),
                 headers={"MCP-Protocol-Version": version})
    assert r.status_code == 400
    assert mcp.daemon.lines("run") == []


# ---- JSON-RPC errors ---------------------------------------------------------------

@pytest.mark.parametrize("body", [
    b"{", b"", b"not json", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"',
    b'{"jsonrpc": "2.0", "id": 1, "method": "ping"} trailing', b"{'jsonrpc': '2.0'}",
])
@pytest.mark.parametrize("accept", ["application/json", BOTH])
def test_malformed_json_is_400_parse_error(mcp, body, accept):
    r = mcp.post(body, accept=accept)
    assert r.status_code == 400, (body, r.text)
    msg = message(r)
    assert set(msg) == {"jsonrpc", "id", "error"}, msg
    assert msg["jsonrpc"] == "2.0" and msg["id"] is None
    assert msg["error"]["code"] == -32700 and isinstance(msg["error"]["message"], str)
    assert mcp.daemon.lines("run") == []


@pytest.mark.parametrize("body", [
    b'{"jsonrpc": "2.0", "id": 1, "method": "p\xffing"}',
    b'{"jsonrpc": "2.0", "id": "\xff", "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
    b'"params": {"name": "run_python", "arguments": {"code": "print(\'\xff\')"}}}',
])
def test_a_body_that_is_not_utf8_is_a_parse_error(mcp, body):
    """JSON text is UTF-8 (RFC 8259 8.1): bytes that are not are malformed
    JSON, and the answer never carries them back."""
    r = mcp.post(body, accept="application/json")
    r.content.decode("utf-8")  # whatever the answer, it is UTF-8
    assert r.status_code == 400, (body, r.content)
    msg = message(r)
    assert msg["id"] is None and msg["error"]["code"] == -32700, msg
    assert mcp.daemon.lines("run") == []


@pytest.mark.parametrize("body", [
    [], [request("ping")], [request("ping", id=1), request("ping", id=2)],
    {"id": 1, "method": "ping"},
    {"jsonrpc": "1.0", "id": 1, "method": "ping"},
    {"jsonrpc": 2.0, "id": 1, "method": "ping"},
    {"jsonrpc": "2.0", "id": 1, "method": 5},
    {"jsonrpc": "2.0", "id": 1, "method": None},
    {"jsonrpc": "2.0", "id": 1, "method": ["ping"]},
    {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"},
    42, "ping", None, True,
])
def test_not_a_json_rpc_request_is_400_invalid_request(mcp, body):
    r = mcp.post(body, accept="application/json")
    assert r.status_code == 400, (body, r.text)
    msg = message(r)
    assert msg["jsonrpc"] == "2.0" and "result" not in msg
    assert msg["error"]["code"] == -32600, msg


def test_a_batch_is_refused_and_runs_nothing(mcp):
    batch = [request("tools/call", {"name": "run_python", "arguments": {"code": "print(1)"}}, i)
             for i in (1, 2)]
    r = mcp.post(batch)
    assert r.status_code == 400 and message(r)["error"]["code"] == -32600
    assert mcp.daemon.lines("run") == []


@pytest.mark.parametrize("id", [7, "abc", 0, "7", -3, 2 ** 40])
@pytest.mark.parametrize("method", ["no/such/method", "tools/unknown", "Ping"])
def test_an_unknown_method_is_32601_with_the_id_echoed(mcp, id, method):
    r = mcp.post(request(method, {}, id=id))
    assert r.status_code == 200, r.text
    msg = message(r)
    assert msg["jsonrpc"] == "2.0" and msg["id"] == id and type(msg["id"]) is type(id)
    assert "result" not in msg and msg["error"]["code"] == -32601


@pytest.mark.parametrize("params,field", [
    ({"name": "no_such_tool", "arguments": {}}, "no_such_tool"),
    ({"name": "Run_Python", "arguments": {"code": "1"}}, "Run_Python"),
    ({"arguments": {}}, "name"),
    ({"name": 5, "arguments": {}}, "name"),
    ({"name": "run_python", "arguments": ["print(1)"]}, "arguments"),
    ({"name": "run_python", "arguments": "print(1)"}, "arguments"),
    ({"name": "run_python", "arguments": {}}, "code"),
    ({"name": "run_python", "arguments": {"code": 5}}, "code"),
    ({"name": "run_python", "arguments": {"code": None}}, "code"),
    ({"name": "run_python", "arguments": {"code": "1", "bogus_arg": 1}}, "bogus_arg"),
    ({"name": "run_python", "arguments": {"code": "1", "python_code": "1"}}, "python_code"),
    ({"name": "run_python", "arguments": {"code": "1", "timeout": [1]}}, "timeout"),
    ({"name": "run_python", "arguments": {"code": "1", "env": "A=1"}}, "env"),
    ({"name": "run_python", "arguments": {"code": "1", "files": ["a.txt"]}}, "files"),
    ({"name": "run_python", "arguments": {"code": "1", "allow": "eval"}}, "allow"),
    ({"name": "run_python", "arguments": {"code": "1", "stdin": 5}}, "stdin"),
    ({"name": "run_python", "arguments": {"code": "1", "cpus": "many"}}, "cpus"),
    ({"name": "check_python", "arguments": {}}, "code"),
    ({"name": "check_python", "arguments": {"code": ["x"]}}, "code"),
    ({"name": "check_python", "arguments": {"code": "1", "allow": "eval"}}, "allow"),
    ({"name": "check_python", "arguments": {"code": "1", "policy": "nope"}}, "policy"),
    ({"name": "create_session", "arguments": {"policy": "host"}}, "policy"),
    ({"name": "execute_code", "arguments": {"code": "print(1)"}}, "session_id"),
    ({"name": "execute_code", "arguments": {"session_id": 5, "code": "1"}}, "session_id"),
    ({"name": "execute_code", "arguments": {"session_id": UNKNOWN_SID}}, "code"),
    ({"name": "execute_code", "arguments": {"session_id": UNKNOWN_SID, "code": "1",
                                            "ignore_unsafe_functions": "eval"}},
     "ignore_unsafe_functions"),
    ({"name": "execute_code", "arguments": {"session_id": UNKNOWN_SID, "code": "1",
                                            "ignore_dependencies": [1]}}, "ignore_dependencies"),
    ({"name": "execute_code", "arguments": {"session_id": UNKNOWN_SID, "code": "1",
                                            "timeout": 5}}, "timeout"),
    ({"name": "upload_file", "arguments": {"session_id": UNKNOWN_SID, "filename": "a"}},
     "content_base64"),
    ({"name": "upload_file", "arguments": {"session_id": UNKNOWN_SID, "filename": "a",
                                           "content_base64": 5}}, "content_base64"),
    ({"name": "upload_file", "arguments": {"session_id": UNKNOWN_SID, "filename": None,
                                           "content_base64": ""}}, "filename"),
    ({"name": "download_file", "arguments": {"session_id": UNKNOWN_SID}}, "src_path"),
    ({"name": "download_file", "arguments": {"session_id": UNKNOWN_SID, "src_path": 1}},
     "src_path"),
    ({"name": "list_sessions", "arguments": {"verbose": True}}, "verbose"),
    ({"name": "get_session_info", "arguments": {}}, "session_id"),
    ({"name": "close_session", "arguments": {"session_id": ["x"]}}, "session_id"),
    ({"name": "list_artifacts", "arguments": {}}, "session_id"),
    ({"name": "list_src", "arguments": {"session_id": UNKNOWN_SID, "path": "src"}}, "path"),
])
def test_bad_tool_params_are_32602_naming_the_field(mcp, params, field):
    mcp.daemon.post("/sessions")  # a session that exists, untouched by any of these
    err = mcp.error("tools/call", params)
    assert err["code"] == -32602, err
    assert field in err["message"], err
    assert mcp.daemon.lines("run") == []
    assert mcp.daemon.get("/sessions").json()["count"] == 1


def test_tools_call_without_params_is_32602(mcp):
    err = mcp.error("tools/call")
    assert err["code"] == -32602, err
    err = mcp.error("tools/call", {})
    assert err["code"] == -32602 and "name" in err["message"], err


def test_a_tool_without_arguments_may_leave_them_out(mcp):
    res = mcp.tool("get_health")  # no "arguments" key at all
    assert res["isError"] is False
    assert json.loads(res["content"][0]["text"])["status"] == "healthy"


def test_a_body_over_max_body_is_413(make_daemon):
    d = make_daemon("--max-body", "64K")
    m = new_client(d)
    m.initialize()
    big = json.dumps(request("tools/call", {"name": "run_python",
                                            "arguments": {"code": "x = '" + "a" * 100000 + "'"}}))
    code, body = d.curl("http://localhost/mcp", "-H", "Content-Type: application/json",
                        "-H", "Accept: " + BOTH, "-H", "Mcp-Session-Id: " + m.sid,
                        "--data-binary", big)
    assert code == 413, body
    init = initialize_body()
    init["params"]["clientInfo"]["name"] = "n" * 100000
    code, body = d.curl("http://localhost/mcp", "-H", "Content-Type: application/json",
                        "-H", "Accept: application/json", "--data-binary", json.dumps(init))
    assert code == 413, body
    assert d.lines("run") == []
    # under the cap all is well
    res = m.tool("run_python", {"code": "x = '" + "a" * 50000 + "'\nprint(len(x))"})
    assert res["structuredContent"]["stdout"] == "50000\n"


# ---- ping and tools/list ----------------------------------------------------------

def test_ping_is_an_empty_result(mcp):
    assert mcp.rpc("ping") == {"jsonrpc": "2.0", "id": mcp.last_id, "result": {}}
    assert mcp.result("ping", {}) == {}


def test_tools_list_describes_every_tool(mcp):
    tools = mcp.result("tools/list")["tools"]
    names = [t["name"] for t in tools]
    assert len(names) == len(set(names))
    assert set(names) == set(TOOLS)
    for t in tools:
        name, schema = t["name"], t["inputSchema"]
        assert isinstance(t["description"], str) and len(t["description"]) > 10, name
        assert schema["type"] == "object", name
        assert schema["additionalProperties"] is False, name
        props, required = TOOLS[name]
        assert set(schema["properties"]) == props, name
        # "required" lists the required arguments; a tool without any may
        # leave it out (draft-04 validators refuse an empty list)
        if required or "required" in schema:
            assert isinstance(schema["required"], list), name
            assert set(schema["required"]) == required, name
        for p, s in schema["properties"].items():
            assert isinstance(s.get("description"), str) and s["description"].strip(), (name, p)
    by = {t["name"]: t["inputSchema"]["properties"] for t in tools}
    assert by["run_python"]["code"]["type"] == "string"
    assert by["check_python"]["code"]["type"] == "string"
    assert by["execute_code"]["session_id"]["type"] == "string"
    assert by["upload_file"]["content_base64"]["type"] == "string"


# ---- DELETE and GET ------------------------------------------------------------------

def test_delete_ends_the_mcp_session_and_only_it(daemon):
    a, b = new_client(daemon), new_client(daemon)
    a.initialize()
    b.initialize()
    r = a.delete()
    assert r.status_code == 200, r.text
    r = a.post(request("ping"), accept="application/json")
    assert r.status_code == 404 and message(r)["error"]["code"] == -32001
    r = a.delete()
    assert r.status_code == 404, r.text
    assert b.result("ping") == {}


def test_delete_without_the_header_is_400_and_unknown_is_404(mcp):
    r = mcp.delete(sid=None)
    assert r.status_code == 400, r.text
    for sid in ("f" * 32, "nope"):
        r = mcp.delete(sid=sid)
        assert r.status_code == 404, r.text
    assert mcp.result("ping") == {}  # ours is untouched


def test_deleting_an_mcp_session_keeps_its_sandbox_sessions(daemon):
    m = new_client(daemon)
    m.initialize()
    info = m.arp("create_session")
    sid = info["session_id"]
    code = "open('artifacts/kept.txt', 'w').write('kept')"
    assert m.arp("execute_code", {"session_id": sid, "code": code})["success"]
    assert m.delete().status_code == 200
    assert daemon.get(f"/sessions/{sid}").status_code == 200
    assert len(daemon.mounted_workspaces()) == 1
    m2 = new_client(daemon)
    m2.initialize()
    assert sid in m2.arp("list_sessions")["active_sessions"]
    out = m2.arp("execute_code", {"session_id": sid,
                                  "code": "print(open('artifacts/kept.txt').read())"})
    assert out == {"success": True, "output": "kept\n"}
    assert m2.arp("close_session", {"session_id": sid})["success"] is True
    assert_nothing_left(daemon)


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
def test_get_is_405_with_allow(mcp, path):
    for headers in ({"Accept": "text/event-stream"}, {"Accept": "text/event-stream",
                                                      "Mcp-Session-Id": mcp.sid}, {}):
        r = mcp.http.get(mcp.base + path, headers=headers, timeout=30)
        assert r.status_code == 405, r.text
        allow = {m.strip().upper() for m in r.headers["Allow"].split(",")}
        assert {"POST", "DELETE"} <= allow and "GET" not in allow, r.headers["Allow"]


# ---- Origin ------------------------------------------------------------------------

@pytest.mark.parametrize("origin", [
    "http://evil.example", "https://evil.example", "http://evil.example:80", "null",
    "http://localhost.evil.example", "http://127.0.0.1.evil.example", "http://evil-localhost",
    "http://localhost@evil.example", "http://[::1].evil.example", "http://10.0.0.1:8000",
])
def test_a_foreign_origin_is_403(mcp, origin):
    h = {"Origin": origin}
    r = mcp.post(initialize_body(), sid=None, headers=h)
    assert r.status_code == 403, (origin, r.text)
    assert "Mcp-Session-Id" not in r.headers
    r = mcp.post(request("ping"), headers=h)
    assert r.status_code == 403, (origin, r.text)
    r = mcp.post(request("tools/call", {"name": "create_session", "arguments": {}}), headers=h)
    assert r.status_code == 403, (origin, r.text)
    r = mcp.post(request("tools/call", {"name": "run_python", "arguments": {"code": "1"}}),
                 headers=h)
    assert r.status_code == 403, (origin, r.text)
    r = mcp.delete(headers=h)
    assert r.status_code == 403, (origin, r.text)
    # nothing happened: the session lives, nothing ran, no sandbox session
    assert mcp.result("ping") == {}
    assert mcp.daemon.lines("run") == []
    assert mcp.daemon.get("/sessions").json()["count"] == 0


@pytest.mark.parametrize("origin", [
    "http://localhost", "http://localhost:3000", "http://127.0.0.1", "http://127.0.0.1:8000",
    "http://[::1]", "http://[::1]:6274",
])
def test_a_loopback_origin_is_fine(mcp, origin):
    h = {"Origin": origin}
    r = mcp.post(initialize_body(), sid=None, headers=h)
    assert r.status_code == 200, (origin, r.text)
    mcp.sid = r.headers["Mcp-Session-Id"]
    assert mcp.result("ping", headers=h) == {}
    assert mcp.tool("run_python", {"code": "print(1)"}, headers=h)["isError"] is False
    assert mcp.delete(headers=h).status_code == 200


# ---- TCP ----------------------------------------------------------------------------

def test_tcp_needs_the_bearer_token(make_daemon):
    d = make_daemon(tcp=True, token=TOKEN)
    url = d.tcp_url("/mcp")
    h = {"Content-Type": "application/json", "Accept": BOTH}
    for auth in (None, "Bearer wrong", "Bearer " + TOKEN[:-1], "Basic " + TOKEN):
        hh = dict(h, Authorization=auth) if auth else h
        r = requests.post(url, data=json.dumps(initialize_body()), headers=hh, timeout=30)
        assert r.status_code == 401, (auth, r.text)
        assert "Mcp-Session-Id" not in r.headers
        assert requests.delete(url, headers=dict(hh, **{"Mcp-Session-Id": "a" * 32}),
                               timeout=30).status_code == 401
        assert requests.get(url, headers=hh, timeout=30).status_code == 401
    s = requests.Session()
    s.headers["Authorization"] = "Bearer " + TOKEN
    m = Mcp(d.tcp_url(""), s)
    m.initialize()
    # a session id without the token is still 401
    r = requests.post(url, data=json.dumps(request("ping")),
                      headers=dict(h, **{"Mcp-Session-Id": m.sid}), timeout=30)
    assert r.status_code == 401
    res = m.tool("run_python", {"code": "print('over tcp')"})
    assert res["structuredContent"]["stdout"] == "over tcp\n"
    # Origin is checked on TCP as well
    r = m.post(request("ping"), headers={"Origin": "http://evil.example"})
    assert r.status_code == 403
    port = d.tcp_addr.rsplit(":", 1)[1]
    assert m.result("ping", headers={"Origin": f"http://127.0.0.1:{port}"}) == {}
    assert m.delete().status_code == 200
    s.close()


# ---- run_python ---------------------------------------------------------------------

def test_run_python_returns_the_v1_run_result(mcp):
    res = mcp.tool("run_python", {"code": "print(6 * 7)"})
    out = res["structuredContent"]
    rest = mcp.daemon.run("print(6 * 7)")
    assert set(out) == set(rest)
    assert out["status"] == "ok" and out["stdout"] == "42\n" and out["stderr"] == ""
    assert out["exit_code"] == 0 and out["output"] == "42\n"
    assert out["id"] != rest["id"]
    assert res["isError"] is False
    text = res["content"][0]["text"]
    assert "42" in text and re.search(r"\bok\b", text.lower()), text
    assert [l["status"] for l in mcp.daemon.lines("run")] == ["ok", "ok"]


def test_run_javascript_and_run_shell_run_their_language(mcp):
    res = mcp.tool("run_javascript", {"code": "console.log(6 * 7); throw new Error('late')"})
    out = res["structuredContent"]
    assert out["status"] == "error" and out["exit_code"] == 1 and out["stdout"] == "42\n"
    assert "Error: late" in out["stderr"] and "main.js:1" in out["stderr"]
    assert res["isError"] is True and "42" in res["content"][0]["text"]
    res = mcp.tool("run_shell", {"code": "read x; echo \"$x $0\"; exit 4", "stdin": "in\n"})
    out = res["structuredContent"]
    assert out["stdout"] == "in main.sh\n" and out["exit_code"] == 4
    # the checker's arguments are Python's: not in these tools' schemas
    err = mcp.error("tools/call", {"name": "run_shell", "arguments": {"code": "true",
                                                                     "allow": ["eval"]}})
    assert err["code"] == -32602 and "run_shell has no argument" in err["message"], err


def test_run_python_an_exception_is_iserror_with_the_traceback(mcp):
    res = mcp.tool("run_python", {"code": "print('before')\n1/0"})
    out = res["structuredContent"]
    assert out["status"] == "error" and out["exit_code"] == 1 and out["stdout"] == "before\n"
    assert "ZeroDivisionError: division by zero" in out["stderr"]
    assert res["isError"] is True
    text = res["content"][0]["text"]
    assert "before" in text and "ZeroDivisionError" in text


def test_run_python_a_nonzero_exit_says_so(mcp):
    res = mcp.tool("run_python", {"code": "import sys\nsys.exit(3)"})
    out = res["structuredContent"]
    assert out["status"] == "error" and out["exit_code"] == 3
    assert res["isError"] is True
    text = res["content"][0]["text"]
    assert re.search(r"\berror\b", text.lower()) and "3" in text, text


def test_run_python_a_timeout_says_so(mcp):
    res = mcp.tool("run_python", {"code": "while True: pass", "timeout": 0.5})
    out = res["structuredContent"]
    assert out["status"] == "timeout" and out["limits_hit"] == ["wall_time"]
    assert out["limits"]["wall_time_ms"] == 500
    assert res["isError"] is True
    assert "timeout" in res["content"][0]["text"].lower()


def test_run_python_a_rejection_says_why_and_allow_lets_it_pass(mcp):
    res = mcp.tool("run_python", {"code": "print(eval('6 * 7'))"})
    out = res["structuredContent"]
    assert out["status"] == "rejected" and res["isError"] is True
    assert [f["rule"] for f in out["findings"]] == ["SR201"]
    text = res["content"][0]["text"]
    assert "rejected" in text.lower() and "SR201" in text and "42" not in text
    res = mcp.tool("run_python", {"code": "print(eval('6 * 7'))", "allow": ["eval"]})
    assert res["isError"] is False and res["structuredContent"]["stdout"] == "42\n"


def test_run_python_takes_the_fields_of_v1_run(mcp):
    code = ("import os, sys\n"
            "print(open('data/in.csv').read().splitlines()[1], os.environ['MODE'],\n"
            "      sys.stdin.read())")
    res = mcp.tool("run_python", {"code": code, "files": {"data/in.csv": "a,b\n1,2\n"},
                                  "env": {"MODE": "count"}, "stdin": "from stdin",
                                  "timeout": 5, "memory": "256M", "cpus": 0.5,
                                  "policy": "host", "allow": ["open"]})
    out = res["structuredContent"]
    assert out["status"] == "ok", out
    assert out["stdout"] == "1,2 count from stdin\n"
    assert out["limits"]["memory_bytes"] == 256 << 20
    assert out["limits"]["cpus"] == 0.5 and out["limits"]["wall_time_ms"] == 5000
    # null means absent, as on POST /v1/run
    res = mcp.tool("run_python", {"code": "print(1)", "timeout": None, "files": None,
                                  "env": None, "allow": None, "stdin": None, "policy": None,
                                  "memory": None, "cpus": None})
    assert res["isError"] is False and res["structuredContent"]["stdout"] == "1\n"


def test_run_python_each_run_is_a_fresh_sandbox(mcp):
    assert not mcp.tool("run_python", {"code": "open('left.txt', 'w').write('x')"})["isError"]
    res = mcp.tool("run_python", {"code": "import os\nprint(sorted(os.listdir('.')))"})
    assert "left.txt" not in res["structuredContent"]["stdout"]
    assert mcp.daemon.get("/sessions").json()["count"] == 0
    assert_nothing_left(mcp.daemon)


def test_run_python_on_a_busy_daemon_is_a_tool_error_not_a_protocol_error(make_daemon):
    d = make_daemon("--max-runs", "1", "--queue-depth", "1")
    m = new_client(d)
    m.initialize()
    sleeper = {"code": "import time; time.sleep(1.5)"}
    with cf.ThreadPoolExecutor(2) as pool:
        running = pool.submit(d.post, "/v1/run", sleeper)
        assert wait_for(lambda: d.get("/health").json()["runs_in_flight"] == 1)
        queued = pool.submit(d.post, "/v1/run", sleeper)
        assert wait_for(lambda: d.get("/health").json()["queue_depth"] == 1)
        msg = m.rpc("tools/call", {"name": "run_python", "arguments": {"code": "print('no')"}})
        assert "error" not in msg, msg
        res = msg["result"]
        assert res["isError"] is True
        text = res["content"][0]["text"].lower()
        assert "busy" in text or "queue" in text, text
        assert running.result().status_code == 200 and queued.result().status_code == 200
    assert 'saferund_runs_refused_total{reason="queue_full"} 1' in d.get("/metrics").text
    assert m.tool("run_python", {"code": "print('now')"})["structuredContent"]["stdout"] == "now\n"


# ---- check_python -------------------------------------------------------------------

def saferun_check(d, code):
    cli = os.environ.get("SAFERUN") or os.path.join(os.path.dirname(SAFERUND), "saferun")
    p = subprocess.run([cli, "check", "--json", "--policy",
                        os.path.join(d.policies, "default.json"), "-"],
                       input=code, capture_output=True, text=True, timeout=60)
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


def test_check_python_clean(mcp):
    res = mcp.tool("check_python", {"code": "import math\nprint(math.pi)"})
    assert res["isError"] is False
    out = res["structuredContent"]
    assert out["verdict"] == "clean" and out["findings"] == []
    assert "clean" in res["content"][0]["text"].lower()
    assert mcp.daemon.lines("run") == []  # nothing ran


def test_check_python_lists_the_findings_like_saferun_check(mcp):
    code = "import os\n\n\n\n\nx = 1\nos.system('ls')\ny = eval('2')\n"
    res = mcp.tool("check_python", {"code": code})
    assert res["isError"] is False  # a verdict, not a failure of the tool
    out = res["structuredContent"]
    assert out["verdict"] == "rejected"
    assert [(f["rule"], f["line"]) for f in out["findings"]] == [("SR101", 7), ("SR201", 8)]
    cli = saferun_check(mcp.daemon, code)
    assert {"verdict", "findings"} <= set(out)
    assert out["verdict"] == cli["verdict"] and out["findings"] == cli["findings"]
    for f in out["findings"]:
        assert set(f) == set(cli["findings"][0])
    text = res["content"][0]["text"]
    assert "SR101" in text and "SR201" in text
    assert re.search(r"\b7\b", text) and re.search(r"\b8\b", text), text
    assert "os.system" in text and "eval" in text


def test_check_python_takes_run_pythons_allow_list(mcp):
    code = "import os\nos.system('ls')\ny = eval('2')\n"
    res = mcp.tool("check_python", {"code": code, "allow": ["eval"]})
    out = res["structuredContent"]
    assert [f["rule"] for f in out["findings"]] == ["SR101"] and out["allowed"] == 1
    assert mcp.daemon.lines("run") == []


# ---- AgentRunPlus's tools -----------------------------------------------------------

def test_create_session_is_agentrunplus_shaped_and_rest_sees_it(mcp):
    info = mcp.arp("create_session")
    assert set(info) == CREATE_KEYS
    sid = info["session_id"]
    assert re.fullmatch(r"[0-9a-f]{16}", sid)
    assert info["workdir"] == sid
    assert info["source_path"] == "/work/src" and info["artifact_path"] == "/work/artifacts"
    assert info["upload_url"] == f"/sessions/{sid}/copy-to"
    assert info["artifacts_url"] == f"/sessions/{sid}/artifacts"
    d = mcp.daemon
    assert d.get("/sessions").json() == {"active_sessions": [sid], "count": 1}
    assert d.get(f"/v1/sessions/{sid}").status_code == 200
    assert [os.path.basename(p) for p in d.mounted_workspaces()] == [sid]


def test_execute_code_success_failure_and_rejection(mcp):
    sid = mcp.arp("create_session")["session_id"]
    out = mcp.arp("execute_code", {"session_id": sid, "code": "print('Hello from MCP!')"})
    assert out == {"success": True, "output": "Hello from MCP!\n"}
    out = mcp.arp("execute_code", {"session_id": sid, "code": "1/0"})
    assert out["success"] is False and set(out) == {"success", "output"}
    assert "ZeroDivisionError" in out["output"]
    out = mcp.arp("execute_code", {"session_id": sid, "code": "print(eval('6 * 7'))"})
    assert out["success"] is False and "SR201" in out["output"] and "42" not in out["output"]
    out = mcp.arp("execute_code", {"session_id": sid, "code": "print(eval('6 * 7'))",
                                   "ignore_unsafe_functions": ["eval"]})
    assert out == {"success": True, "output": "42\n"}
    # AgentRunPlus's client sends null for the lists it was not given
    out = mcp.arp("execute_code", {"session_id": sid, "code": "print('nulls')",
                                   "ignore_dependencies": None, "ignore_unsafe_functions": None})
    assert out == {"success": True, "output": "nulls\n"}
    out = mcp.arp("execute_code", {"session_id": sid, "code": "print('lists')",
                                   "ignore_dependencies": ["numpy"], "ignore_unsafe_functions": []})
    assert out == {"success": True, "output": "lists\n"}
    # not stateful, like AgentRunPlus: files persist, variables do not
    assert mcp.arp("execute_code", {"session_id": sid,
                                    "code": "v = 5\nopen('v.txt', 'w').write('5')"})["success"]
    out = mcp.arp("execute_code", {"session_id": sid, "code": "print(v)"})
    assert out["success"] is False and "NameError" in out["output"]
    out = mcp.arp("execute_code", {"session_id": sid, "code": "print(open('v.txt').read())"})
    assert out == {"success": True, "output": "5\n"}


def test_execute_code_a_timeout_is_success_false(make_daemon):
    d = make_daemon(policies={"default": {"filesystem": {"profile": "host"},
                                          "limits": {"wall_time": "1s"}}})
    m = new_client(d)
    m.initialize()
    sid = m.arp("create_session")["session_id"]
    out = m.arp("execute_code", {"session_id": sid, "code": "while True: pass"})
    assert out["success"] is False and "time" in out["output"].lower()


def test_upload_file_then_the_code_reads_it(mcp):
    info = mcp.arp("create_session")
    sid = info["session_id"]
    data = b"uploaded content\x00\xff!"
    out = mcp.arp("upload_file", {"session_id": sid, "filename": "data.bin",
                                  "content_base64": base64.b64encode(data).decode()})
    assert out["success"] is True
    assert "successfully" in out["message"].lower()
    assert isinstance(out["destination"], str) and out["destination"].endswith("/data.bin")
    code = f"print(open('{info['source_path']}/data.bin', 'rb').read())"
    run = mcp.arp("execute_code", {"session_id": sid, "code": code})
    assert run == {"success": True, "output": repr(data) + "\n"}
    listing = mcp.arp("list_src", {"session_id": sid})
    assert listing == {"files": [{"name": "data.bin", "size_bytes": len(data)}], "count": 1}
    assert listing == mcp.daemon.get(f"/sessions/{sid}/src").json()
    # the REST files API sees the same bytes
    r, got = mcp.daemon.raw("GET", f"/v1/sessions/{sid}/files/src/data.bin")
    assert r.status == 200 and got == data
    # an upload replaces
    mcp.arp("upload_file", {"session_id": sid, "filename": "data.bin",
                            "content_base64": base64.b64encode(b"v2").decode()})
    assert mcp.daemon.raw("GET", f"/v1/sessions/{sid}/files/src/data.bin")[1] == b"v2"


@pytest.mark.parametrize("name", [
    "../../../etc/passwd", "subdir/../../../file.txt", "/etc/passwd", ".hidden", "",
    "..", "a/b.txt", "..\\..\\x", ".", "src/../x",
])
def test_upload_file_invalid_names_write_nothing(mcp, name):
    sid = mcp.arp("create_session")["session_id"]
    with open("/etc/passwd", "rb") as f:
        passwd = f.read()
    before = tree(mcp.daemon.dir)
    out = mcp.arp("upload_file", {"session_id": sid, "filename": name,
                                  "content_base64": base64.b64encode(b"pwned").decode()})
    assert out["success"] is False, out
    assert "invalid" in out["error"].lower(), out
    assert tree(mcp.daemon.dir) == before
    assert mcp.arp("list_src", {"session_id": sid}) == {"files": [], "count": 0}
    with open("/etc/passwd", "rb") as f:
        assert f.read() == passwd


@pytest.mark.parametrize("content", ["not-valid-base64!!!", "abcde", "a"])
def test_upload_file_bad_base64(mcp, content):
    sid = mcp.arp("create_session")["session_id"]
    out = mcp.arp("upload_file", {"session_id": sid, "filename": "test.txt",
                                  "content_base64": content})
    assert out["success"] is False and "base64" in out["error"].lower(), out
    assert mcp.arp("list_src", {"session_id": sid})["count"] == 0


def test_download_file_from_the_artifacts(mcp):
    info = mcp.arp("create_session")
    sid, ap = info["session_id"], info["artifact_path"]
    blob = bytes(range(256))
    code = (f"open('{ap}/output.txt', 'w').write('Generated content')\n"
            f"open('artifacts/blob.bin', 'wb').write(bytes(range(256)))\n"
            f"import os\nos.makedirs('artifacts/sub', exist_ok=True)\n"
            f"open('artifacts/sub/deep.txt', 'w').write('deep')\n")
    assert mcp.arp("execute_code", {"session_id": sid, "code": code})["success"]
    for src in (f"{ap}/output.txt", "artifacts/output.txt"):
        out = mcp.arp("download_file", {"session_id": sid, "src_path": src})
        assert out["success"] is True, out
        assert out["filename"] == "output.txt"
        assert base64.b64decode(out["content_base64"]) == b"Generated content"
        assert out["size_bytes"] == len(b"Generated content")
    out = mcp.arp("download_file", {"session_id": sid, "src_path": "artifacts/blob.bin"})
    assert base64.b64decode(out["content_base64"], validate=True) == blob
    assert out["size_bytes"] == 256 and out["filename"] == "blob.bin"
    out = mcp.arp("download_file", {"session_id": sid, "src_path": f"{ap}/sub/deep.txt"})
    assert base64.b64decode(out["content_base64"]) == b"deep" and out["filename"] == "deep.txt"
    out = mcp.arp("download_file", {"session_id": sid, "src_path": "artifacts/none.txt"})
    assert out["success"] is False and "content_base64" not in out


@pytest.mark.parametrize("src", [
    "{ap}/../../../etc/passwd", "{ap}/../src/secret.txt", "artifacts/../src/secret.txt",
    "../etc/passwd", "artifacts/sub/../../src/secret.txt", "artifacts/..",
])
def test_download_file_path_traversal(mcp, src):
    info = mcp.arp("create_session")
    sid = info["session_id"]
    mcp.arp("upload_file", {"session_id": sid, "filename": "secret.txt",
                            "content_base64": base64.b64encode(b"secret").decode()})
    out = mcp.arp("download_file", {"session_id": sid,
                                    "src_path": src.format(ap=info["artifact_path"])})
    assert out["success"] is False and "path traversal" in out["error"].lower(), out
    assert "content_base64" not in out


@pytest.mark.parametrize("src", [
    "src/secret.txt", "/work/src/secret.txt", "/etc/passwd", "/work/artifactsX/secret.txt",
    "artifactsX/secret.txt",
])
def test_download_file_outside_the_artifacts_is_denied(mcp, src):
    sid = mcp.arp("create_session")["session_id"]
    mcp.arp("upload_file", {"session_id": sid, "filename": "secret.txt",
                            "content_base64": base64.b64encode(b"secret").decode()})
    out = mcp.arp("download_file", {"session_id": sid, "src_path": src})
    assert out["success"] is False and out["error"].startswith("Access denied"), out
    assert "content_base64" not in out


def test_download_file_never_follows_a_link_the_code_made(mcp):
    sid = mcp.arp("create_session")["session_id"]
    code = ("import os\nos.symlink('/etc/passwd', 'artifacts/passwd')\n"
            "os.symlink('/etc', 'artifacts/etc')")
    out = mcp.arp("execute_code", {"session_id": sid, "code": code,
                                   "ignore_unsafe_functions": ["os.symlink"]})
    assert out["success"], out
    for src in ("artifacts/passwd", "/work/artifacts/passwd", "artifacts/etc/passwd"):
        out = mcp.arp("download_file", {"session_id": sid, "src_path": src})
        assert out["success"] is False, out
        assert "root:" not in json.dumps(out) and "content_base64" not in out


def test_list_artifacts_is_the_rest_listing(mcp):
    info = mcp.arp("create_session")
    sid = info["session_id"]
    empty = mcp.arp("list_artifacts", {"session_id": sid})
    assert empty == {"artifacts": [], "count": 0, "artifacts_url": info["artifacts_url"]}
    code = ("import os\nopen('artifacts/out.txt', 'w').write('result: 42')\n"
            "os.makedirs('artifacts/plots')\n"
            "open('artifacts/plots/p.bin', 'wb').write(b'12345678')")
    assert mcp.arp("execute_code", {"session_id": sid, "code": code})["success"]
    listing = mcp.arp("list_artifacts", {"session_id": sid})
    assert listing == mcp.daemon.get(f"/sessions/{sid}/artifacts").json()
    assert listing["count"] == 2 and listing["artifacts_url"] == info["artifacts_url"]
    by = {a["name"]: a for a in listing["artifacts"]}
    assert by["out.txt"] == {"name": "out.txt", "size_bytes": 10,
                             "download_url": f"/sessions/{sid}/artifacts/out.txt"}
    assert by["plots/p.bin"]["size_bytes"] == 8
    assert mcp.daemon.get(by["out.txt"]["download_url"]).content == b"result: 42"


def test_list_get_info_and_close_sessions(mcp):
    d = mcp.daemon
    assert mcp.arp("list_sessions") == {"active_sessions": [], "count": 0}
    a = mcp.arp("create_session")["session_id"]
    b = d.post("/sessions").json()["session_id"]
    c = d.post("/v1/sessions", {"stateful": True}).json()["session_id"]
    listing = mcp.arp("list_sessions")
    assert listing == {"active_sessions": [a, b, c], "count": 3}
    assert listing == d.get("/sessions").json()
    for sid in (a, b, c):
        info = mcp.arp("get_session_info", {"session_id": sid})
        assert info == {"session_id": sid, "source_path": "/work/src",
                        "artifact_path": "/work/artifacts"}
        assert info == d.get(f"/sessions/{sid}").json()
    health = mcp.arp("get_health")
    assert health["status"] == "healthy" and health["active_sessions"] == 3
    out = mcp.arp("close_session", {"session_id": a})
    assert out == {"success": True, "message": f"Session {a} closed successfully"}
    assert mcp.arp("get_session_info", {"session_id": a}) == \
        {"success": False, "error": f"Session {a} not found"}
    assert d.get(f"/sessions/{a}").status_code == 404
    assert mcp.arp("close_session", {"session_id": a}) == \
        {"success": False, "error": f"Session {a} not found"}
    assert mcp.arp("list_sessions") == {"active_sessions": [b, c], "count": 2}
    assert mcp.arp("get_health")["active_sessions"] == 2
    for sid in (b, c):
        assert mcp.arp("close_session", {"session_id": sid})["success"] is True
    assert mcp.arp("list_sessions") == {"active_sessions": [], "count": 0}
    assert_nothing_left(d)


def test_get_packages_is_the_rest_list(mcp):
    out = mcp.arp("get_packages")
    assert set(out) == {"packages", "count"}
    assert out == mcp.daemon.get("/packages").json()
    assert out["count"] == len(out["packages"]) and all(isinstance(p, str) for p in out["packages"])


def test_get_health(mcp):
    out = mcp.arp("get_health")
    assert out["status"] == "healthy" and out["active_sessions"] == 0
    mcp.daemon.post("/v1/sessions", {})
    assert mcp.arp("get_health")["active_sessions"] == 1


@pytest.mark.parametrize("tool", SESSION_TOOLS)
@pytest.mark.parametrize("sid", [UNKNOWN_SID, "nonexistent"])
def test_an_unknown_session_is_success_false(mcp, tool, sid):
    live = mcp.arp("create_session")["session_id"]
    args = {"session_id": sid}
    if tool == "execute_code":
        args["code"] = "print('test')"
    elif tool == "upload_file":
        args.update(filename="a.txt", content_base64=base64.b64encode(b"x").decode())
    elif tool == "download_file":
        args["src_path"] = "artifacts/a.txt"
    res = mcp.tool(tool, args)
    assert res["isError"] is True
    obj = json.loads(res["content"][0]["text"])
    assert obj == {"success": False, "error": f"Session {sid} not found"}
    assert res["structuredContent"] == obj
    assert mcp.daemon.lines("run") == []
    assert mcp.arp("list_sessions")["active_sessions"] == [live]


def test_an_mcp_session_id_is_not_a_sandbox_session(mcp):
    out = mcp.arp("execute_code", {"session_id": mcp.sid, "code": "print(1)"})
    assert out == {"success": False, "error": f"Session {mcp.sid} not found"}


# ---- sessions shared with REST ---------------------------------------------------------

def test_sessions_are_shared_with_rest_both_ways(mcp):
    d = mcp.daemon
    # MCP creates, REST works in it
    sid = mcp.arp("create_session")["session_id"]
    r = d.post(f"/sessions/{sid}/execute",
               {"python_code": "open('artifacts/a.txt', 'w').write('A')\nprint('rest')"})
    assert r.status_code == 200 and r.json() == {"output": "rest\n", "success": True}
    r = d.post(f"/v1/sessions/{sid}/run", {"code": "print(open('artifacts/a.txt').read())"})
    assert r.status_code == 200 and r.json()["stdout"] == "A\n"
    with d.session() as s:
        r = s.post(d.url(f"/sessions/{sid}/copy-to"), files={"file": ("in.txt", b"from rest")},
                   timeout=30)
    assert r.status_code == 200, r.text
    out = mcp.arp("execute_code", {"session_id": sid, "code": "print(open('src/in.txt').read())"})
    assert out == {"success": True, "output": "from rest\n"}
    out = mcp.arp("download_file", {"session_id": sid, "src_path": "artifacts/a.txt"})
    assert base64.b64decode(out["content_base64"]) == b"A"
    # REST creates (both APIs), MCP works in it
    b = d.post("/sessions").json()["session_id"]
    c = d.post("/v1/sessions", {"stateful": True}).json()["session_id"]
    for other in (b, c):
        mcp.arp("upload_file", {"session_id": other, "filename": "m.txt",
                                "content_base64": base64.b64encode(b"from mcp").decode()})
        out = mcp.arp("execute_code", {"session_id": other,
                                       "code": "print(open('/work/src/m.txt').read())"})
        assert out == {"success": True, "output": "from mcp\n"}
    r, data = d.raw("GET", f"/v1/sessions/{c}/files/src/m.txt")
    assert r.status == 200 and data == b"from mcp"
    # closing on one side is closing on the other
    assert delete(d, f"/sessions/{b}").status_code == 200
    assert mcp.arp("get_session_info", {"session_id": b})["success"] is False
    assert delete(d, f"/v1/sessions/{c}").status_code == 200
    assert mcp.arp("execute_code", {"session_id": c, "code": "1"}) == \
        {"success": False, "error": f"Session {c} not found"}
    assert mcp.arp("close_session", {"session_id": sid})["success"] is True
    assert d.get(f"/v1/sessions/{sid}").status_code == 404
    assert d.post(f"/sessions/{sid}/execute", {"python_code": "1"}).status_code == 404
    assert_nothing_left(d)


def test_many_mcp_clients_at_once(daemon):
    def work(n):
        m = new_client(daemon)
        m.initialize()
        res = m.tool("run_python", {"code": f"print({n} * 2)"})
        sid = m.arp("create_session")["session_id"]
        code = f"open('artifacts/n.txt', 'w').write('{n}')\nprint({n})"
        out = m.arp("execute_code", {"session_id": sid, "code": code})
        got = m.arp("download_file", {"session_id": sid, "src_path": "artifacts/n.txt"})
        closed = m.arp("close_session", {"session_id": sid})
        assert m.delete().status_code == 200
        return (m.sid, res["structuredContent"]["stdout"], out["output"],
                base64.b64decode(got["content_base64"]).decode(), closed["success"])

    with cf.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(work, range(6)))
    assert len({r[0] for r in results}) == 6
    for n, (_, doubled, printed, content, closed) in enumerate(results):
        assert (doubled, printed, content, closed) == (f"{n * 2}\n", f"{n}\n", str(n), True)
    assert daemon.get("/sessions").json()["count"] == 0
    assert_nothing_left(daemon)


def test_sigterm_with_mcp_sessions_open_leaves_nothing(make_daemon):
    d = make_daemon()
    m = new_client(d)
    m.initialize()
    for _ in range(2):
        sid = m.arp("create_session")["session_id"]
        assert m.arp("execute_code", {"session_id": sid,
                                      "code": "open('artifacts/x', 'w').write('x')"})["success"]
    assert len(d.mounted_workspaces()) == 2
    d.send(signal.SIGTERM)
    assert d.proc.wait(timeout=30) == 0
    assert d.mounted_workspaces() == []
    assert os.listdir(d.workspaces) == []
    assert d.leftover_groups() == []
    assert wait_for(lambda: own_sandbox_processes(d.cgroups) == [], timeout=5)


# ---- AgentRunPlus's MCP client and workflow ---------------------------------------------



class AgentRunMCPClient:
    """Call for call what AgentRunPlus's AgentRunMCPClient does: one
    requests.Session, initialize once (protocol 2024-11-05) and keep the
    mcp-session-id header, every call a tools/call with Accept for both
    types, the answer read from the SSE `data: ` line, the tool's object
    json.loads of the first text content. (AgentRunPlus's falls back to
    {"output": text} when the text is not JSON; this one fails instead.)"""

    def __init__(self, base_url, http=None, timeout=120):
        self.base_url = base_url.rstrip("/")
        self.mcp_url = f"{self.base_url}/mcp"
        self.session = http or requests.Session()
        self.timeout = timeout
        self.mcp_session_id = None
        self.request_id = 0
        self._initialize()

    def _next_id(self):
        self.request_id += 1
        return self.request_id

    def _headers(self):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.mcp_session_id:
            h["Mcp-Session-Id"] = self.mcp_session_id
        return h

    @staticmethod
    def _parse_sse_response(text):
        for line in text.strip().split("\n"):
            if line.startswith("data: "):
                return json.loads(line[len("data: "):])
        raise AssertionError(f"no data in the SSE answer: {text[:200]!r}")

    def _post(self, payload):
        r = self.session.post(self.mcp_url, json=payload, headers=self._headers(),
                              timeout=self.timeout)
        if r.status_code >= 400:
            raise AssertionError(f"MCP {payload['method']}: {r.status_code} - {r.text}")
        return r

    def _initialize(self):
        r = self._post({"jsonrpc": "2.0", "id": self._next_id(), "method": "initialize",
                        "params": {"protocolVersion": "2024-11-05", "capabilities": {},
                                   "clientInfo": {"name": "agentrun-mcp-client",
                                                  "version": "0.4.0"}}})
        self.mcp_session_id = r.headers.get("mcp-session-id")
        self.init_result = self._parse_sse_response(r.text)

    def _call_tool(self, name, arguments=None):
        payload = {"jsonrpc": "2.0", "id": self._next_id(), "method": "tools/call",
                   "params": {"name": name, "arguments": arguments or {}}}
        msg = self._parse_sse_response(self._post(payload).text)
        if "error" in msg:
            raise AssertionError(f"MCP tool error: {msg['error']}")
        for item in msg["result"]["content"]:
            if item.get("type") == "text":
                return json.loads(item["text"])
        return msg["result"]

    def get_health(self):
        return self._call_tool("get_health")

    def create_session(self) -> SessionInfo:
        r = self._call_tool("create_session")
        return SessionInfo(session_id=r["session_id"], workdir=r["workdir"],
                           source_path=r["source_path"], artifact_path=r["artifact_path"],
                           upload_url=r.get("upload_url", ""),
                           artifacts_url=r.get("artifacts_url", ""))

    def get_session_info(self, session_id):
        return self._call_tool("get_session_info", {"session_id": session_id})

    def close_session(self, session_id):
        return self._call_tool("close_session", {"session_id": session_id})

    def list_sessions(self):
        return self._call_tool("list_sessions")

    def get_packages(self):
        return self._call_tool("get_packages")

    def execute_code(self, session_id, python_code, ignore_dependencies=None,
                     ignore_unsafe_functions=None):
        return self._call_tool("execute_code", {
            "session_id": session_id, "code": python_code,
            "ignore_dependencies": ignore_dependencies,
            "ignore_unsafe_functions": ignore_unsafe_functions})

    def upload_file_content(self, session_id, content, filename):
        return self._call_tool("upload_file", {
            "session_id": session_id, "filename": filename,
            "content_base64": base64.b64encode(content).decode("utf-8")})

    def upload_file(self, session_id, file_path, filename=None):
        with open(file_path, "rb") as f:
            return self.upload_file_content(session_id, f.read(),
                                            filename or os.path.basename(file_path))

    def list_artifacts(self, session_id):
        return self._call_tool("list_artifacts", {"session_id": session_id})

    def list_src(self, session_id):
        return self._call_tool("list_src", {"session_id": session_id})

    def download_file(self, session_id, src_path, dest_path, filename=None):
        r = self._call_tool("download_file", {"session_id": session_id, "src_path": src_path})
        full = os.path.join(dest_path, filename or os.path.basename(src_path))
        with open(full, "wb") as f:
            f.write(base64.b64decode(r["content_base64"]))
        return full


@pytest.fixture
def arp_mcp(make_daemon):
    """AgentRunPlus's setup: saferund on loopback TCP, the token on the
    client's requests.Session."""
    d = make_daemon(tcp=True, token=TOKEN)
    http = requests.Session()
    http.headers["Authorization"] = f"Bearer {TOKEN}"
    client = AgentRunMCPClient(d.tcp_url(""), http)
    client.daemon = d
    yield client
    http.close()


def test_agentrunplus_client_initializes(arp_mcp):
    assert re.fullmatch(r"[0-9a-f]{32}", arp_mcp.mcp_session_id)
    assert arp_mcp.init_result["result"]["protocolVersion"] == "2024-11-05"
    assert arp_mcp.get_health()["status"] == "healthy"
    packages = arp_mcp.get_packages()
    assert packages["count"] == len(packages["packages"])


def test_agentrunplus_full_mcp_workflow(arp_mcp, tmp_path):
    client, d = arp_mcp, arp_mcp.daemon
    h = {"Authorization": f"Bearer {TOKEN}"}
    info = client.create_session()
    sid, src, art = info.session_id, info.source_path, info.artifact_path
    assert info.workdir == sid
    assert client.get_session_info(sid) == {"session_id": sid, "source_path": src,
                                            "artifact_path": art}
    assert sid in client.list_sessions()["active_sessions"]
    # the REST side sees it
    r = requests.get(d.tcp_url("/sessions"), headers=h, timeout=30)
    assert r.json() == {"active_sessions": [sid], "count": 1}

    # upload a script and its data (one from a file on disk, as the client allows)
    script = (b"import csv, json\n"
              b"rows = list(csv.reader(open('/work/src/data.csv')))[1:]\n"
              b"total = sum(int(q) for _, q in rows)\n"
              b"json.dump({'result': 'success', 'value': total}, open('output.json', 'w'))\n"
              b"print('Script executed successfully', total)\n")
    up = client.upload_file_content(sid, script, "process.py")
    assert up["success"] is True and "successfully" in up["message"].lower()
    data_file = tmp_path / "data.csv"
    data_file.write_bytes(b"item,qty\na,1\nb,2\nc,39\n")
    assert client.upload_file(sid, str(data_file))["success"] is True
    assert {f["name"] for f in client.list_src(sid)["files"]} == {"process.py", "data.csv"}

    # run the uploaded script the way AgentRunPlus's workflow does
    out = client.execute_code(sid, f"with open('{src}/process.py', 'r') as f:\n"
                                   f"    code = f.read()\nexec(code)\n",
                              ignore_unsafe_functions=["open", "exec"])
    assert out == {"success": True, "output": "Script executed successfully 42\n"}, out
    # then write the artifact
    out = client.execute_code(sid, "import json, shutil\n"
                                   "data = json.load(open('output.json'))\n"
                                   f"shutil.copy('output.json', '{art}/output.json')\n"
                                   "print('Artifact created', data['value'])",
                              ignore_unsafe_functions=["open"])
    assert out == {"success": True, "output": "Artifact created 42\n"}, out
    listing = client.list_artifacts(sid)
    assert [a["name"] for a in listing["artifacts"]] == ["output.json"]
    assert listing["artifacts_url"] == info.artifacts_url

    # download it, by both kinds of path
    path = client.download_file(sid, f"{art}/output.json", str(tmp_path))
    with open(path) as f:
        assert json.load(f) == {"result": "success", "value": 42}
    path = client.download_file(sid, "artifacts/output.json", str(tmp_path), "again.json")
    assert path.endswith("again.json")
    with open(path) as f:
        assert json.load(f)["value"] == 42
    # REST serves the same artifact
    r = requests.get(d.tcp_url(listing["artifacts"][0]["download_url"]), headers=h, timeout=30)
    assert r.status_code == 200 and json.loads(r.content)["value"] == 42

    # an error, then the session carries on
    out = client.execute_code(sid, "1/0")
    assert out["success"] is False and "ZeroDivisionError" in out["output"]

    # interop: REST runs in the MCP session, MCP in a REST session
    r = requests.post(d.tcp_url(f"/sessions/{sid}/execute"), headers=h, timeout=60,
                      json={"python_code": "print(open('/work/artifacts/output.json').read())"})
    assert r.status_code == 200 and r.json()["success"] is True
    assert json.loads(r.json()["output"])["value"] == 42
    rest_sid = requests.post(d.tcp_url("/sessions"), headers=h, timeout=30).json()["session_id"]
    out = client.execute_code(rest_sid, "print('Executed via MCP on REST session')")
    assert out == {"success": True, "output": "Executed via MCP on REST session\n"}
    assert sorted(client.list_sessions()["active_sessions"]) == sorted([sid, rest_sid])
    assert requests.delete(d.tcp_url(f"/sessions/{rest_sid}"), headers=h,
                           timeout=30).status_code == 200

    # close, and it is gone everywhere
    assert client.close_session(sid) == {"success": True,
                                         "message": f"Session {sid} closed successfully"}
    assert client.get_session_info(sid) == {"success": False, "error": f"Session {sid} not found"}
    assert client.list_sessions() == {"active_sessions": [], "count": 0}
    assert client.get_health()["active_sessions"] == 0
    assert requests.get(d.tcp_url(f"/sessions/{sid}"), headers=h, timeout=30).status_code == 404
    assert_nothing_left(d)


# ---- artifacts: plots as image content -----------------------------------

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_run_python_returns_plots_as_image_content(mcp):
    code = ("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\n"
            "plt.figure(); plt.bar(['a'], [1])\n"
            "open('artifacts/table.csv', 'w').write('a,b\\n')\nprint('plotted')")
    res = mcp.tool("run_python", {"code": code, "allow": ["open"]})
    assert res["isError"] is False, res["content"][0]["text"]
    images = res["content"][1:]
    assert [(c["type"], c["mimeType"]) for c in images] == [("image", "image/png")] * 2
    assert all(base64.b64decode(c["data"]).startswith(PNG_MAGIC) for c in images)
    arts = {a["name"]: a for a in res["structuredContent"]["artifacts"]}
    assert sorted(arts) == ["figure-1.png", "figure-2.png", "table.csv"]
    # a plot's bytes are sent once: in the image, not in structuredContent too
    for name in ("figure-1.png", "figure-2.png"):
        assert arts[name]["in_content"] is True and "data_base64" not in arts[name]
    assert base64.b64decode(arts["table.csv"]["data_base64"]) == b"a,b\n"
    assert "in_content" not in arts["table.csv"]


def test_a_run_without_artifacts_has_only_the_text(mcp):
    res = mcp.tool("run_python", {"code": "print(1)"})
    assert len(res["content"]) == 1 and res["structuredContent"]["artifacts"] == []


# ---- stdio (saferun mcp) --------------------------------------------------

SAFERUN = os.environ.get("SAFERUN") or os.path.join(os.path.dirname(SAFERUND), "saferun")


def stdio_server(d, *args):
    ws = os.path.join(d.dir, "stdio-ws")
    return subprocess.Popen([SAFERUN, "mcp", "--policies-dir", d.policies, "--workspaces-dir", ws,
                             *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def test_stdio_sighup_reloads_policies_and_keeps_serving(make_daemon):
    d = make_daemon(start=False)
    p = stdio_server(d)
    try:
        def call(msg):
            p.stdin.write((json.dumps(msg) + "\n").encode())
            p.stdin.flush()
            return json.loads(p.stdout.readline())

        assert call(request("ping", id=1)) == {"jsonrpc": "2.0", "id": 1, "result": {}}
        d.write_policy("later", HOST_POLICY)
        p.send_signal(signal.SIGHUP)
        time.sleep(0.5)  # the signal is handled within the server's next poll
        res = call(request("tools/call", {"name": "run_python",
                                           "arguments": {"code": "print(7)", "policy": "later"}},
                           id=2))
        assert res["result"]["structuredContent"]["stdout"] == "7\n", res
        p.stdin.close()
        assert p.wait(timeout=30) == 0
    finally:
        p.kill()
        p.wait()
    assert b'"reload"' in p.stderr.read()


def test_stdio_refuses_a_line_over_max_body_even_in_one_read(make_daemon):
    d = make_daemon(start=False)
    p = stdio_server(d, "--max-body", "2K")
    line = json.dumps(request("tools/call", {"name": "run_python",
                                              "arguments": {"code": "#" + "x" * 3000}}, id=1))
    out, _ = p.communicate((line + "\n" + json.dumps(request("ping", id=2)) + "\n").encode(),
                           timeout=60)
    answers = [json.loads(l) for l in out.decode().splitlines()]
    assert answers[0]["error"]["code"] == -32600 and "2048 bytes" in answers[0]["error"]["message"]
    assert answers[1] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert p.returncode == 0


# ---- 2025-11-25, and output as progress notifications ------------------------

def test_2025_11_25_bad_arguments_are_tool_errors(daemon):
    m = Mcp(daemon.url(""), daemon.session())
    assert m.initialize(LATEST)["result"]["protocolVersion"] == LATEST
    res = m.result("tools/call", {"name": "run_python", "arguments": {"code": 1}})
    assert res["isError"] is True and "code" in res["content"][0]["text"], res
    res = m.result("tools/call", {"name": "run_python", "arguments": {"code": "1", "x": 1}})
    assert res["isError"] is True and '"x"' in res["content"][0]["text"], res
    # an unknown tool stays a protocol error
    err = m.error("tools/call", {"name": "no_such_tool", "arguments": {}})
    assert err["code"] == -32602 and "Unknown tool" in err["message"], err
    assert daemon.lines("run") == []
    m.http.close()


def sse_events(r):
    """(receive time, message) of each event of a streamed answer, as it comes."""
    out, data = [], None
    for line in r.iter_lines(chunk_size=None, decode_unicode=True):
        if line.startswith("data: "):
            data = line[6:]
        elif line == "" and data is not None:
            out.append((time.time(), json.loads(data)))
            data = None
    return out


PROGRESS_CODE = """import sys, time
print("first", flush=True)
time.sleep(0.4)
print(repr(time.time()), flush=True)
print("to stderr", file=sys.stderr, flush=True)
"""


def test_progress_token_streams_the_output_as_notifications_then_the_answer(mcp):
    params = {"name": "run_python", "arguments": {"code": PROGRESS_CODE},
              "_meta": {"progressToken": "tok-1"}}
    r = mcp.post(request("tools/call", params, id=7), stream=True)
    assert r.status_code == 200 and media_type(r) == "text/event-stream"
    assert r.headers["Transfer-Encoding"] == "chunked"
    events = sse_events(r)
    *notes, (_, answer) = events
    assert answer["id"] == 7 and answer["result"]["isError"] is False, answer
    out = answer["result"]["structuredContent"]
    assert notes and all(n["method"] == "notifications/progress" and "id" not in n
                         for _, n in notes), notes
    assert all(n["params"]["progressToken"] == "tok-1" for _, n in notes)
    assert "".join(n["params"]["message"] for _, n in notes) == out["output"]
    values = [n["params"]["progress"] for _, n in notes]
    assert values == sorted(set(values)), values
    # the first one came while the code still slept before its marker
    marker = float(out["stdout"].splitlines()[1])
    assert notes[0][1]["params"]["message"].startswith("first") and notes[0][0] < marker
    # an integer token; a client that takes only JSON gets the one answer
    params["_meta"]["progressToken"] = 5
    r = mcp.post(request("tools/call", params, id=8), accept="application/json")
    assert media_type(r) == "application/json" and r.json()["id"] == 8
    # no token: one SSE event, as before
    del params["_meta"]
    assert message(mcp.post(request("tools/call", params, id=9)))["id"] == 9
