"""Every route answers with the documented shape, over the unix socket."""
import json
import os
import re
import shlex
import urllib.parse

from conftest import wait_for

SOURCE_DIR = (os.environ.get("SAFERUN_SOURCE_DIR")
              or os.path.join(os.path.dirname(__file__), "..", ".."))
OPENAPI_SOURCE = "runtime/daemon/openapi.json"
HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


def source(rel):
    with open(os.path.join(SOURCE_DIR, rel), "rb") as f:
        return f.read()


def route_table():
    """The daemon's routes as [(METHOD, pattern)], parsed from the table the
    router walks (runtime/daemon/routes.c), in its order."""
    text = source("runtime/daemon/routes.c").decode()
    body = re.search(r"\bsrd_route_def routes\[\] = \{(.*?)\n\};", text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    rows = re.findall(r'\{\s*"([A-Z]+)",\s*"(/[^"]*)",\s*\w+\s*\}', body)
    assert rows and len(rows) == len(re.findall(r'\{\s*"', body)), "a row the parser missed"
    return rows


def openapi_path(pattern):
    """A route pattern as OpenAPI names it: "{path*}" (the rest of the path) is "{path}"."""
    return re.sub(r"\{(\w+)\*\}", r"{\1}", pattern)


def route_match(pattern, path):
    """srd_route_match: "{x}" is one non-empty segment, a trailing "{x*}" the
    rest (at least one byte), one trailing slash allowed."""
    rx = "".join("[^/]+" if part.startswith("{") and not part.endswith("*}")
                 else ".+" if part.startswith("{") else re.escape(part)
                 for part in re.split(r"(\{\w+\*?\})", pattern))
    return re.fullmatch(rx + "/?", path) is not None


def test_health_answers_on_every_path(daemon):
    for path in ("/health", "/v1/health", "/v1/health/"):
        r = daemon.get(path)
        assert r.status_code == 200, (path, r.text)
        body = r.json()
        assert body["status"] == "healthy"
        assert body["runs_in_flight"] == 0 and body["queue_depth"] == 0
        assert body["active_sessions"] == 0 and "rest" in body["protocols"]
        assert body["policies"] == ["default", "host"]


def test_agentrun_shape_code_alone_gives_output(daemon):
    """AgentRun clients POST /v1/run/ with only {"code"} and read "output"."""
    r = daemon.post("/v1/run/", {"code": "print('hi')\nimport sys; print('err', file=sys.stderr)"})
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "application/json"
    body = r.json()
    assert body["output"] == "hi\nerr\n"
    assert body["stdout"] == "hi\n" and body["stderr"] == "err\n"
    assert body["status"] == "ok" and body["exit_code"] == 0


def test_run_with_curl_on_both_paths(daemon):
    for path in ("/v1/run", "/v1/run/"):
        code, body = daemon.curl(f"http://localhost{path}", "-H", "Content-Type: application/json",
                                 "-d", json.dumps({"code": "print(6 * 7)"}))
        assert code == 200, body
        assert json.loads(body)["output"] == "42\n"


def test_traceback_is_status_error_with_200(daemon):
    body = daemon.run("def f():\n    raise ValueError('boom')\nf()\n")
    assert body["status"] == "error" and body["exit_code"] == 1
    assert 'File "main.py", line 3' in body["output"]
    assert "ValueError: boom" in body["output"]


def test_every_request_field_takes_effect(daemon):
    code = ("import os, sys\n"
            "print(os.environ['GREETING'])\n"
            "print(open('data/in.txt').read())\n"
            "print(sys.stdin.read())\n")
    body = daemon.run(code, policy="host", timeout=5, memory="128M", cpus=0.5,
                      env={"GREETING": "hello"}, files={"data/in.txt": "file text"},
                      stdin="from stdin", allow=["open"])
    assert body["status"] == "ok", body
    assert body["stdout"] == "hello\nfile text\nfrom stdin\n"
    assert body["limits"]["wall_time_ms"] == 5000
    assert body["limits"]["memory_bytes"] == 128 << 20
    assert body["limits"]["cpus"] == 0.5


def test_nulls_mean_absent(daemon):
    body = daemon.run("print('x')", policy=None, timeout=None, memory=None, cpus=None,
                      env=None, files=None, stdin=None, allow=None)
    assert body["status"] == "ok" and body["limits"]["wall_time_ms"] == 20000


def test_timeout_is_a_result_not_an_http_error(daemon):
    body = daemon.run("while True: pass", timeout="300ms")
    assert body["status"] == "timeout"
    assert body["limits_hit"] == ["wall_time"]


def test_checker_rejection_is_a_result_with_findings(daemon):
    body = daemon.run("import os\nos.system('id')\n")
    assert body["status"] == "rejected"
    assert body["findings"] and body["findings"][0]["line"] == 2
    assert body["stdout"] == ""


def test_metrics_count_runs_by_status(daemon):
    daemon.run("print(1)")
    daemon.run("raise SystemExit(3)")
    r = daemon.get("/metrics")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    m = {}
    for line in r.text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            m[name] = float(value)
    assert m['saferund_runs_total{status="ok"}'] == 1
    assert m['saferund_runs_total{status="error"}'] == 1
    assert m["saferund_run_duration_seconds_count"] == 2
    assert m['saferund_run_duration_seconds_bucket{le="+Inf"}'] == 2
    assert m["saferund_queue_depth"] == 0 and m["saferund_runs_in_flight"] == 0
    assert "# TYPE saferund_run_duration_seconds histogram" in r.text


def test_openapi_documents_every_route(daemon):
    """openapi.json names exactly the routes the daemon serves: those of its
    route table (routes.c), which GET / lists from the running binary, and
    each one answers (no "no route" 404, no 405)."""
    r = daemon.get("/v1/openapi.json")
    assert r.status_code == 200
    assert r.content == source(OPENAPI_SOURCE)  # the file, embedded as it is
    doc = r.json()
    assert doc["openapi"].startswith("3.")
    table = route_table()
    assert [tuple(e.split(" ", 1)) for e in daemon.get("/").json()["endpoints"]] == table
    served = {(method, openapi_path(pattern)) for method, pattern in table}
    documented = {(m.upper(), path) for path, item in doc["paths"].items()
                  for m in item if m in HTTP_METHODS}
    assert sorted(served - documented) == [], "served but not in openapi.json"
    assert sorted(documented - served) == [], "in openapi.json but not served"
    for path, item in doc["paths"].items():  # every {param} of a path is declared
        names = {p["name"] for op in [item, *item.values()] if isinstance(op, dict)
                 for p in op.get("parameters", []) if p.get("in") == "path"}
        assert names == set(re.findall(r"\{(\w+)\}", path)), path
    # probe each documented route: the router must take it (a handler's own
    # 404, e.g. an unknown session, says "not found", never "no route")
    r, data = daemon.raw("GET", "/v1/nothing")
    assert r.status == 404 and b"no route" in data
    for method, path in sorted(documented):
        url = path.replace("{id}", "0123456789abcdef")
        url = re.sub(r"\{\w+\}", "x.txt", url)
        body = b"{}" if method in ("POST", "PUT") else b""
        r, data = daemon.raw(method, url, body, {"Content-Type": "application/json"})
        assert r.status != 405 and b"no route" not in data, (method, path, r.status, data)
    run = doc["paths"]["/v1/run"]["post"]
    props = run["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = doc["components"]["schemas"][props.rsplit("/", 1)[1]]
    assert set(schema["properties"]) == {"code", "policy", "timeout", "memory", "cpus", "env",
                                         "files", "stdin", "allow", "requirements", "stream"}


def curl_examples(markdown):
    """(METHOD, path) of every curl command in the sh blocks of a page."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", markdown, re.S):
        pending = ""
        for line in block.replace("\\\n", " ").splitlines():
            pending += line + "\n"
            try:
                words = shlex.split(pending)
            except ValueError:  # a quote spans lines: read on
                continue
            pending = ""
            if not words or words[0] != "curl":
                continue
            urls = [w for w in words if re.match(r"https?://(localhost|127\.0\.0\.1)\b", w)]
            assert len(urls) == 1, words
            if "-X" in words:
                method = words[words.index("-X") + 1]
            elif {"-d", "--data", "--data-binary", "--data-raw", "-F", "--json"} & set(words):
                method = "POST"
            else:
                method = "GET"
            path = re.sub(r"\$\{?\w+\}?", "x", urllib.parse.urlsplit(urls[0]).path or "/")
            out.append((method, path))
        assert pending == "", pending
    return out


def test_docs_have_a_curl_example_for_every_route():
    """docs/api.md shows each route of the table with curl, and every curl
    there names a route that exists."""
    examples = curl_examples(source("docs/api.md").decode())
    table = route_table()
    missing = [f"{m} {p}" for m, p in table
               if not any(em == m and route_match(p, ep) for em, ep in examples)]
    assert missing == [], "routes without a curl example in docs/api.md"
    unknown = [f"{em} {ep}" for em, ep in examples
               if not any(em == m and route_match(p, ep) for m, p in table)]
    assert unknown == [], "curl examples of routes the daemon does not serve"


def test_docs_point_to_the_openapi_document():
    """docs/api.md names the route that serves the OpenAPI document and links
    to its source, the file the build embeds (no copy in docs/ to go stale)."""
    text = source("docs/api.md").decode()
    assert "GET /v1/openapi.json" in text
    links = re.findall(r"\]\(([^)\s]*openapi\.json)\)", text)
    assert links, "no link to openapi.json"
    docs_dir = os.path.join(SOURCE_DIR, "docs")
    for link in links:
        target = os.path.normpath(os.path.join(docs_dir, link))
        assert target == os.path.normpath(os.path.join(SOURCE_DIR, OPENAPI_SOURCE)), link
        assert os.path.isfile(target), link
    cmake = source("CMakeLists.txt").decode()
    assert "srd_embedded_openapi=${CMAKE_SOURCE_DIR}/" + OPENAPI_SOURCE in cmake


def test_unknown_route_is_404_and_wrong_method_405(daemon):
    r = daemon.get("/v1/nothing")
    assert r.status_code == 404 and "detail" in r.json()
    r = daemon.get("/v1/run")
    assert r.status_code == 405
    assert r.headers["Allow"] == "POST"
    r = daemon.post("/health", {})
    assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD"


def test_one_log_line_per_request_and_per_run_with_the_peer(daemon):
    import os
    daemon.run("print(1)")

    def run_requests():
        return [l for l in daemon.lines("request") if l["path"] == "/v1/run"]

    # the request line is written when the answer has gone out
    assert wait_for(lambda: len(run_requests()) == 1)
    runs, requests_ = daemon.lines("run"), run_requests()
    assert len(runs) == 1
    run, req = runs[0], requests_[0]
    assert run["peer"]["uid"] == 0 and run["peer"]["pid"] == os.getpid()
    assert run["policy"] == "default" and run["status"] == "ok"
    assert run["limits_hit"] == [] and run["duration_ms"] >= 0 and run["queue_ms"] >= 0
    assert req["status"] == 200 and req["peer"]["pid"] == os.getpid() and req["ms"] >= 0


def test_head_is_get_without_a_body(daemon):
    r, data = daemon.raw("HEAD", "/health")
    assert r.status == 200 and data == b""
    assert r.getheader("Content-Type") == "application/json"


def test_odd_bytes_in_the_path_are_logged_as_valid_json(daemon):
    r, _ = daemon.raw("GET", "/v1/%ff%0a%00x")
    assert r.status == 400  # for the %00: test_strict_input.py
    assert wait_for(lambda: daemon.lines("request"))
    last = daemon.lines("request")[-1]
    assert last["status"] == 400 and last["path"].startswith("/v1/")
