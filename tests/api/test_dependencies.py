"""Requirements through the daemon (docs/dependencies.md): /v1/run and MCP's
run_python install them for one run; a session installs them once, its
runs share the layer, and the layer goes with the session. Under a tenants
file pip's sandbox is made in the requesting tenant's cgroup."""
import os
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import wait_for
from test_mcp import Mcp
from test_tenants import busy_groups, in_threads, tenants_daemon

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
from wheels import build_wheel  # noqa: E402

DEPS_WS = "/run/saferun/deps"
ROOTFS_DIR = os.environ.get("SAFERUN_ROOTFS_DIR", "/var/lib/saferun/rootfs")

pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(ROOTFS_DIR, "minimal", "usr", "bin", "python3")),
    reason="needs the minimal profile (scripts/build-rootfs minimal)")


@pytest.fixture
def place():
    d = tempfile.mkdtemp(prefix="saferun-deps-api-")
    os.chmod(d, 0o755)
    os.mkdir(os.path.join(d, "wheels"), 0o755)
    build_wheel(os.path.join(d, "wheels"), "tinyleaf", "1.0")
    yield d
    shutil.rmtree(d)


def deps_policy(place, cache):
    return {"filesystem": {"profile": "minimal"},
            "dependencies": {"allow": ["tinyleaf"], "wheelhouse": os.path.join(place, "wheels"),
                             "cache": cache}}


@pytest.fixture
def dd(make_daemon, place):
    """A daemon with a tenants file: this test (root, by its uid) is tenant
    "a", with a cgroup of its own."""
    warm = deps_policy(place, os.path.join(place, "cache"))
    warm["warm"] = {"enabled": True, "preload": [], "pool_size": 1, "fallback": "cold"}
    strict = dict(warm, warm=dict(warm["warm"], fallback="error"))
    return tenants_daemon(make_daemon, [{"name": "a", "uids": [0]}], tcp=False,
                          policies={"default": deps_policy(place, os.path.join(place, "cache")),
                                    "private": deps_policy(place, False), "warm": warm,
                                    "strict": strict})


def post_watching_pip(d, path, body):
    """POST body to path; with it the names of the groups below tenant a's
    that held processes of a pip sandbox ("...-pip") meanwhile: pip's CPU
    and memory are charged to and weighted as the tenant's, like its runs."""
    seen, got = set(), {}
    threads = in_threads([lambda: got.setdefault("r", d.post(path, body))])
    while threads[0].is_alive():
        seen.update(g for g in busy_groups(d, "tenant-a") if g.endswith("-pip"))
        threads[0].join(timeout=0.005)
    return got["r"], seen


def test_run_installs_requirements_and_says_so(dd):
    r, pip = post_watching_pip(dd, "/v1/run", {"code": "import tinyleaf; print(tinyleaf.VERSION)",
                                               "requirements": ["tinyleaf"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ok" and body["stdout"] == "1.0\n", body
    assert body["dependencies"]["installed"] == ["tinyleaf==1.0"]
    assert pip == {body["id"] + "-pip"}, pip  # in the tenant's group
    again = dd.post("/v1/run", {"code": "import tinyleaf", "requirements": ["tinyleaf"]}).json()
    assert again["dependencies"]["cached"] is True


def test_run_refuses_bad_requirements_naming_the_field(dd):
    r = dd.post("/v1/run", {"code": "pass", "requirements": "tinyleaf"})
    assert r.status_code == 400
    assert r.json()["field"] == "requirements"
    r = dd.post("/v1/run", {"code": "pass", "requirements": ["tinyleaf", 3]})
    assert r.status_code == 400 and r.json()["field"] == "requirements[1]", r.text
    r = dd.post("/v1/run", {"code": "pass", "requirements": ["x @ https://evil/x.whl"]})
    assert r.status_code == 400, r.text
    assert r.json()["field"] == "requirements"
    assert r.json()["error"].startswith('requirements[0]: "x @ https://evil/x.whl" is not a '
                                        "requirement"), r.text
    r = dd.post("/v1/run", {"code": "pass", "requirements": ["numpy"]})
    assert r.status_code == 200
    assert r.json()["status"] == "error"
    assert r.json()["message"] == ('error: dependencies: "numpy" is not allowed by '
                                   'policy.dependencies.allow (nothing was installed)')


@pytest.mark.parametrize("policy", ["default", "private"])
def test_session_layer_lives_and_goes_with_the_session(dd, policy):
    # pip's workspaces are named ID-PID-pip by the process that made them:
    # only this daemon's count (other daemons on the machine install too).
    def mine():
        ents = os.listdir(DEPS_WS) if os.path.isdir(DEPS_WS) else []
        return {e for e in ents if e.endswith(f"-{dd.proc.pid}-pip")}

    assert mine() == set()
    r, pip = post_watching_pip(dd, "/v1/sessions", {"policy": policy, "requirements": ["tinyleaf"],
                                                    "stateful": False})
    assert r.status_code == 201, r.text
    s = r.json()
    assert s["dependencies"]["installed"] == ["tinyleaf==1.0"]
    sid = s["session_id"]
    assert pip == {f"ss-{sid}-pip"}, pip  # in the tenant's group
    for _ in range(2):
        out = dd.post(f"/v1/sessions/{sid}/run",
                      {"code": "import tinyleaf; print(tinyleaf.VERSION)"}).json()
        assert out["status"] == "ok" and out["stdout"] == "1.0\n", out
    layers = mine()
    assert len(layers) == (1 if policy == "private" else 0), layers
    with dd.session() as http:
        assert http.delete(dd.url(f"/v1/sessions/{sid}"), timeout=30).status_code == 200
    assert wait_for(lambda: not mine())


def test_session_requirements_that_fail_are_refused(dd):
    r = dd.post("/v1/sessions", {"requirements": ["nosuch"]})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "requirements"
    assert r.json()["error"] == ('error: dependencies: "nosuch" is not allowed by '
                                 'policy.dependencies.allow (nothing was installed)')
    assert dd.get("/v1/sessions").json()["sessions"] == []


def test_mcp_run_python_takes_requirements(dd):
    m = Mcp(dd.url(""), dd.session())
    m.initialize()
    res = m.tool("run_python", {"code": "import tinyleaf; print(tinyleaf.VERSION)",
                                "requirements": ["tinyleaf"]})
    assert res["isError"] is False, res
    assert res["structuredContent"]["dependencies"]["installed"] == ["tinyleaf==1.0"]
    assert res["content"][0]["text"].startswith("1.0\n")
    tools = m.result("tools/list")["tools"]
    schema = next(t for t in tools if t["name"] == "run_python")["inputSchema"]
    assert schema["properties"]["requirements"]["type"] == "array"
    m.http.close()


def test_a_warm_policy_runs_requirements_cold(dd):
    body = dd.post("/v1/run", {"code": "import tinyleaf; print(tinyleaf.VERSION)",
                               "requirements": ["tinyleaf"], "policy": "warm"}).json()
    assert body["status"] == "ok" and body["path"] == "cold", body
    assert dd.post("/v1/run", {"code": "print(1)", "policy": "warm"}).json()["path"] in (
        "warm", "cold")
    # fallback "error": refused, saying why
    r = dd.post("/v1/run", {"code": "import tinyleaf", "requirements": ["tinyleaf"],
                            "policy": "strict"})
    assert r.status_code == 503, r.text
    assert "requirements (a dependency layer is mounted at set-up)" in r.json()["error"]


@pytest.fixture(scope="module")
def index():
    from simple_index import SimpleIndex, tools_missing
    why = tools_missing()
    if why:
        pytest.skip(why)
    t = SimpleIndex()
    yield t
    t.close()


def test_runs_and_sessions_install_from_an_index(make_daemon, place, index):
    # pip's sandboxes reach the index through egress (its host:port only);
    # the runs keep the policy's network (none), in parallel too
    pol = {"filesystem": {"profile": "minimal"},
           "dependencies": {"allow": ["*"], "index_url": index.url, "cache": False}}
    d = make_daemon(policies={"default": pol})
    code = "import tinytop; print(tinytop.VERSION)"
    with ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(lambda _: d.post("/v1/run", {"code": code,
                                                        "requirements": ["tinytop"]}).json(),
                           range(4)))
    for out in outs:
        assert out["status"] == "ok" and out["stdout"] == "2.0\n", out
        assert out["dependencies"]["installed"] == ["tinyleaf==1.0", "tinytop==2.0"]
        assert out["dependencies"]["cached"] is False
    r = d.post("/v1/sessions", {"requirements": ["tinytop"], "stateful": False})
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    out = d.post(f"/v1/sessions/{sid}/run", {"code": code}).json()
    assert out["status"] == "ok" and out["stdout"] == "2.0\n", out
    with d.session() as http:
        assert http.delete(d.url(f"/v1/sessions/{sid}"), timeout=30).status_code == 200
    r = d.post("/v1/run", {"code": "pass", "requirements": ["nosuchpkg"]}).json()
    assert r["status"] == "error"
    assert r["message"] == ("error: dependencies: pip install failed: No matching "
                            "distribution found for nosuchpkg")
