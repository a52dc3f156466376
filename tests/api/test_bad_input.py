"""Bad input gets a 4xx JSON body naming the field, nothing runs, and the
daemon carries on."""
import json

import pytest

from conftest import wait_for


def error(r, status, field):
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error", "detail", "field"}
    assert body["error"] == body["detail"] and body["error"]
    assert body["field"] == field, body
    return body["error"]


def test_malformed_json_is_400(daemon):
    for raw in (b'{"code": "print(1)"', b"{code: 1}", b'{"code": "x"} trailing', b"\xff\xfe"):
        r, data = daemon.raw("POST", "/v1/run", raw, {"Content-Type": "application/json"})
        assert r.status == 400, (raw, data)
        body = json.loads(data)
        assert "not valid JSON" in body["detail"] and body["field"] is None


@pytest.mark.parametrize("body,what", [
    (b"", "empty"), (b"[]", "an array"), (b'"code"', "a string"), (b"null", "null"),
])
def test_body_that_is_not_an_object_is_400(daemon, body, what):
    r, data = daemon.raw("POST", "/v1/run", body)
    assert r.status == 400, data
    assert what in json.loads(data)["detail"]


def test_missing_code_is_400_naming_code(daemon):
    msg = error(daemon.post("/v1/run", {"policy": "host"}), 400, "code")
    assert "missing" in msg


def test_unknown_field_is_400_naming_it(daemon):
    msg = error(daemon.post("/v1/run", {"code": "1", "lang": "python"}), 400, "lang")
    assert "unknown field" in msg and "code" in msg


def test_a_field_given_twice_is_400(daemon):
    r, data = daemon.raw("POST", "/v1/run", b'{"code": "print(1)", "code": "print(2)"}')
    assert r.status == 400 and json.loads(data)["field"] == "code"


@pytest.mark.parametrize("field,value", [
    ("code", 1), ("code", ["print(1)"]), ("policy", 3), ("timeout", True), ("timeout", [1]),
    ("memory", {}), ("cpus", "1"), ("env", ["A=1"]), ("files", "x"), ("stdin", 5),
    ("allow", "eval"),
])
def test_wrong_type_is_400_naming_the_field(daemon, field, value):
    body = {"code": "print(1)", field: value}
    msg = error(daemon.post("/v1/run", body), 400, field)
    assert field in msg


@pytest.mark.parametrize("body,field", [
    ({"env": {"A": 1}}, "env.A"),
    ({"env": {"BAD-NAME": "x"}}, "env.BAD-NAME"),
    # what the loader and python act on before the runner's guard
    ({"env": {"LD_PRELOAD": "/work/x.so"}}, "env.LD_PRELOAD"),
    ({"env": {"PYTHONPATH": "/work"}}, "env.PYTHONPATH"),
    ({"files": {"../escape.txt": "x"}}, "files.../escape.txt"),
    ({"files": {"/etc/passwd": "x"}}, "files./etc/passwd"),
    ({"files": {"main.py": "x"}}, "files.main.py"),
    ({"files": {"a.txt": 1}}, "files.a.txt"),
    ({"allow": ["ok", 2]}, "allow[1]"),
    ({"timeout": 0}, "timeout"),
    ({"timeout": "soon"}, "timeout"),
    ({"memory": "lots"}, "memory"),
    ({"memory": "1M"}, "memory"),
    ({"cpus": 0}, "cpus"),
    ({"policy": "nosuch"}, "policy"),
    ({"policy": "../etc/x"}, "policy"),
])
def test_bad_value_is_400_naming_the_field(daemon, body, field):
    error(daemon.post("/v1/run", {"code": "print(1)", **body}), 400, field)


@pytest.mark.parametrize("field,value,unit", [
    ("timeout", 60, "s"), ("memory", "2G", "MiB"), ("cpus", 4, "CPUs"),
])
def test_limits_above_the_policy_are_refused(daemon, field, value, unit):
    """The operator's policy is the ceiling: a request may only ask for less."""
    msg = error(daemon.post("/v1/run", {"code": "print(1)", field: value}), 400, field)
    assert "over the" in msg and 'policy "default"' in msg


def test_nul_in_a_string_is_400(daemon):
    r, data = daemon.raw("POST", "/v1/run", b'{"code": "print(1)\\u0000import os"}')
    assert r.status == 400 and "\\u0000" in json.loads(data)["detail"]
    # an escaped backslash before "u0000" is not a NUL
    r, data = daemon.raw("POST", "/v1/run", b'{"code": "print(r\'\\\\u0000\')"}')
    assert r.status == 200, data
    assert json.loads(data)["output"] == "\\u0000\n"


def test_code_that_is_not_utf8_is_400_naming_code(daemon):
    r, data = daemon.raw("POST", "/v1/run", b'{"code": "print(\'\xff\')"}')
    assert r.status == 400, data
    assert json.loads(data)["field"] == "code"


def test_huge_body_is_413_before_it_is_read(make_daemon):
    d = make_daemon("--max-body", "64K")
    big = json.dumps({"code": "x = '" + "a" * 100000 + "'"})
    code, body = d.curl("http://localhost/v1/run", "-H", "Content-Type: application/json",
                        "--data-binary", big)
    assert code == 413, body
    assert "65536 byte cap" in json.loads(body)["detail"]
    assert wait_for(lambda: [l for l in d.lines("request") if l["status"] == 413])
    req = [l for l in d.lines("request") if l["status"] == 413]
    assert req[0]["bytes_in"] == 0  # refused on Content-Length


def test_huge_chunked_body_is_413_while_streaming(make_daemon):
    d = make_daemon("--max-body", "64K")
    big = json.dumps({"code": "x = '" + "a" * 100000 + "'"})
    code, body = d.curl("http://localhost/v1/run", "-H", "Transfer-Encoding: chunked",
                        "--data-binary", big)
    assert code == 413, body
    # Far past the cap the connection is closed instead of read to its end.
    try:
        r, _ = d.raw("POST", "/v1/run", iter([b"x" * 65536] * 64),
                     {"Transfer-Encoding": "chunked"})
        assert r.status == 413
    except (ConnectionError, OSError):
        pass
    assert d.get("/health").status_code == 200


def test_the_daemon_survives_all_of_it(daemon):
    for raw in (b"{", b"[]", b'{"code": 1}', b'{"code": "x", "x": 1}'):
        daemon.raw("POST", "/v1/run", raw)
    assert daemon.get("/health").json()["status"] == "healthy"
    assert daemon.run("print('still here')")["output"] == "still here\n"
    assert daemon.lines("run")[-1]["status"] == "ok"
    assert len(daemon.lines("run")) == 1  # nothing ran for the bad ones


@pytest.mark.parametrize("raw,field", [
    (b'{"code": "1", "policy": "p\xff"}', "policy"),
    (b'{"code": "1", "env": {"A\xff": "b"}}', "env.A?"),
    (b'{"code": "1", "allow": ["open", "\xc0\xaf"]}', "allow"),
])
def test_a_string_that_is_not_utf8_is_400_and_the_answer_stays_json(daemon, raw, field):
    # echoed as they came, such bytes would make the error itself invalid JSON
    r, data = daemon.raw("POST", "/v1/run", raw, {"Content-Type": "application/json"})
    assert r.status == 400, data
    body = json.loads(data.decode("utf-8"))
    assert body["field"] == field and "not valid UTF-8" in body["detail"]
