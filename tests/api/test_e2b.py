"""E2B's own SDK (npm `e2b` and `@e2b/code-interpreter`, pinned in
tests/e2b/package-lock.json, installed by `scripts/bootstrap --test`)
against saferund's E2B listener (docs/e2b.md): one node script,
tests/e2b/e2b.mjs, makes the calls a user's program would and prints what
each gave; this file asserts on it, then on the raw HTTP answers the SDK
hides and on what the daemon left behind. It also proves an E2B sandbox is
one machine: commands and runCode share /tmp and processes, pause freezes a
running command (its ticks stop, then go on after connect), and runCode runs
JavaScript and bash. Without node or the packages it fails, it never skips."""
import hashlib
import json
import os
import re
import shutil
import subprocess

import pytest
import requests

from conftest import HOST_COLD_POLICY, SAFERUND, own_sandbox_processes, wait_for

SOURCE_DIR = (os.environ.get("SAFERUN_SOURCE_DIR")
              or os.path.join(os.path.dirname(__file__), "..", ".."))
E2B_DIR = os.path.join(SOURCE_DIR, "tests", "e2b")
KEY_A = "e2b-tenant-a-key-0123456789abcdef"
KEY_B = "e2b-tenant-b-key-0123456789abcdef"
BOOTSTRAP = "run `sudo scripts/bootstrap --test` (it installs node and runs npm ci in tests/e2b)"


@pytest.fixture(scope="module", autouse=True)
def node_clients():
    """node and the pinned packages, or a failure that says how to get them."""
    if not shutil.which("node"):
        pytest.fail(f"node is not installed: {BOOTSTRAP}", pytrace=False)
    with open(os.path.join(E2B_DIR, "package.json")) as f:
        pinned = json.load(f)["dependencies"]
    for name, version in pinned.items():
        path = os.path.join(E2B_DIR, "node_modules", name, "package.json")
        if not os.path.exists(path):
            pytest.fail(f"tests/e2b/node_modules has no {name}: {BOOTSTRAP}", pytrace=False)
        with open(path) as f:
            installed = json.load(f)["version"]
        if installed != version:
            pytest.fail(f"tests/e2b/node_modules has {name} {installed}, package.json pins "
                        f"{version}: {BOOTSTRAP}", pytrace=False)


def e2b_daemon(make_daemon):
    """Two tenants by API key; the E2B listener on a port the kernel picks."""
    d = make_daemon("--e2b-listen", "127.0.0.1:0", "--max-runs", "4", start=False,
                    policies={"default": HOST_COLD_POLICY, "host": HOST_COLD_POLICY})
    path = os.path.join(d.dir, "tenants.json")
    digest = hashlib.sha256(KEY_B.encode()).hexdigest()
    with open(path, "w") as f:
        json.dump({"tenants": [{"name": "a", "tokens": [KEY_A], "uids": [0]},
                               {"name": "b", "tokens": ["sha256:" + digest]}]}, f)
    d.args += ["--tenants", path]
    ready = d.start().wait_ready()
    d.e2b_url = "http://" + [l["e2b"] for l in ready["listeners"] if "e2b" in l][0]
    return d


def frozen_states(d):
    """{group: "frozen"|"thawed"} of the daemon's sandbox groups, by the
    freezer of the cgroup version (v1 freezer.state, v2 cgroup.freeze)."""
    states = {}
    for g in d.leftover_groups():
        for knob, frozen in (("freezer.state", "FROZEN"), ("cgroup.freeze", "1")):
            path = os.path.join(g, knob)
            if os.path.exists(path):
                with open(path) as f:
                    states[g] = "frozen" if f.read().strip() == frozen else "thawed"
    return states


def test_the_e2b_sdk_end_to_end(make_daemon):
    d = e2b_daemon(make_daemon)
    env = {k: v for k, v in os.environ.items() if not k.startswith("E2B_")}
    env.update(E2B_API_URL=d.e2b_url, E2B_SANDBOX_URL=d.e2b_url, E2B_API_KEY=KEY_A,
               E2B_OTHER_KEY=KEY_B)
    env["E2B_PAUSE_HANDSHAKE"] = "1"
    p = subprocess.Popen(["node", os.path.join(E2B_DIR, "e2b.mjs")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         cwd=E2B_DIR)
    try:
        # While the sandbox is paused: every interpreter's cgroup is frozen
        # (only kernels of the two sandboxes exist now).
        line = p.stdout.readline()
        assert json.loads(line or "{}").get("paused"), (line, p.stderr.read())
        states = frozen_states(d)
        p.stdin.write("go\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=240)
    finally:
        p.kill()
    lines = out.strip().splitlines()
    assert p.returncode == 0 and lines, f"e2b.mjs failed (exit {p.returncode}):\n{err}"
    assert states and set(states.values()) == {"frozen"}, states
    o = json.loads(lines[-1])
    failed = {k: v for k, v in o.items() if isinstance(v, dict) and "error" in v
              and isinstance(v["error"], str) and k not in ("run_timeout",)}
    assert not failed, failed

    # runCode: the last expression's value, printed output, the count
    assert o["first"]["text"] == "42" and o["first"]["stdout"] == "hi\n"
    assert o["first"]["results"] == [{"main": True, "text": "42", "png_len": 0, "formats": []}]
    assert o["first"]["count"] == 1 and o["first"]["error"] is None
    assert o["state"]["text"] == "41" and o["state"]["count"] == 2  # state kept
    err = o["error"]["error"]
    assert (err["name"], err["value"]) == ("ZeroDivisionError", "division by zero")
    assert 'File "main.py", line 2, in f' in err["traceback"]
    assert o["error"]["results"] == [] and o["error"]["stderr"] == ""
    # display data: a DataFrame's HTML and text, a figure's PNG
    df = o["dataframe"]["results"]
    assert len(df) == 1 and df[0]["main"] and df[0]["formats"] == ["html"]
    assert "<table" in df[0]["html"] and df[0]["text"].split() == "a b 0 1 x 1 2 y".split()
    fig = o["figure"]["results"]
    assert len(fig) == 1 and fig[0]["formats"] == ["png"] and not fig[0]["main"]
    assert fig[0]["png"] == "iVBORw0K" and fig[0]["png_len"] > 1000  # base64 of \x89PNG
    # the checker still stands in front of the code
    rej = o["rejected"]["error"]
    assert rej["name"] == "SaferunRejected" and "SR101" in rej["traceback"]
    assert o["callbacks"]["seen"] == [["stdout", "one\n"], ["stderr", "two\n"], ["result", "7"]]

    # contexts: own variables, the same files; restart forgets; remove
    c = o["contexts"]
    assert (c["language"], c["cwd"]) == ("python", "/work")
    assert c["there"]["text"] == "'from default'" and c["there"]["count"] == 1
    assert c["xMissing"]["error"]["name"] == "NameError"
    assert c["list"] == ["default", c["id"]] and c["listAfter"] == ["default"]
    assert c["afterRestart"]["error"]["name"] == "NameError"
    assert c["afterRestart"]["count"] == 1
    assert c["removedRun"] == "NotFoundError"

    # output streams: the run saw the file that a second context wrote once
    # the first line had reached the client
    # (the poke's own answer may come before or after the released line)
    order = o["streaming"]["order"]
    assert [x for x in order if x != "poked"] == ["waiting", "released True"], order
    assert "poked" in order
    # timeoutMs ended that run; the sandbox goes on (a fresh interpreter)
    rt = o["run_timeout"]
    assert rt["error"] == "TimeoutError" and rt["next"]["text"] == "'alive'" and rt["running"]
    assert "started again: its variables are gone" in rt["next"]["stderr"]

    # control API
    info = o["info"]
    assert info["sandboxId"] == o["id"] and info["state"] == "running"
    assert info["metadata"] == {"suite": "e2b", "who": "a"}
    assert info["templateId"] == "code-interpreter-v1" and info["envdVersion"] == "0.5.4"
    assert abs(info["endAt"] - info["startedAt"] - 120_000) < 2000
    st = o["set_timeout"]
    assert 590_000 < st["endAt"] - st["now"] <= 601_000
    iso = o["isolated"]
    assert (iso["a"], iso["b"], iso["bfile"], iso["crossStatus"]) == ("'a'", "'b'", "False", 401)
    ls = o["list"]
    assert len(ls["all"]) == 2 and o["id"] in ls["all"] and len(ls["onlyB"]) == 1
    assert ls["metadata"] == {"suite": "e2b", "who": "b"} and ls["state"] == "running"
    assert ls["hasNext"] and not ls["hasNextAfter"]
    assert sorted(ls["page1"] + ls["page2"]) == ls["all"]
    assert o["other_tenant"] == {"seen": [], "info": "SandboxNotFoundError", "killed": False}
    assert o["wrong_key"] == "AuthenticationError"
    pz = o["pause"]
    assert (pz["paused"], pz["again"], pz["state"], pz["running"]) == (True, False, "paused", False)
    assert pz["listed"] == [o["id"]] and pz["run"] == "TimeoutError"  # E2B's 502 words
    assert pz["after"] == "6" and pz["state2"] == "running"  # memory kept
    # the ticking command made no progress while paused, and went on after
    ticks, paused_at, resumed_at = pz["ticks"], pz["pausedAt"], pz["resumedAt"]
    assert resumed_at - paused_at >= 600, pz
    assert [t for t in ticks if t < paused_at], ticks
    assert not [t for t in ticks if paused_at < t < resumed_at], (paused_at, resumed_at, ticks)
    assert [t for t in ticks if t > resumed_at], (resumed_at, ticks)

    # one sandbox: commands and runCode share /tmp and the processes
    sh = o["shared"]
    assert (sh["seenByCmd"], sh["seenByPy"]) == ("py wrote", "'cmd wrote\\n'"), sh
    assert sh["listed"] is True and sh["pgid"] == str(sh["pid"]), sh  # Python sees it
    assert "python" in sh["pyCmdline"], sh  # and a command sees Python's interpreter
    # runCode's language: JavaScript keeps its state, bash is a command
    lg = o["languages"]
    assert lg["js"]["stdout"] == "js 21\n" and lg["js"]["text"] == "40", lg["js"]
    assert lg["js2"]["text"] == "21" and lg["js2"]["count"] == 2, lg["js2"]
    assert lg["jsErr"]["error"]["name"] == "TypeError", lg["jsErr"]
    assert "Cannot read properties of null" in lg["jsErr"]["error"]["value"], lg["jsErr"]
    assert lg["bash"]["stdout"] == "bash 42\npy wrote" and lg["bash"]["error"] is None, lg["bash"]
    assert lg["bashErr"]["stderr"] == "no\n" and lg["bashErr"]["error"]["value"] == "3", lg
    # a 400 (the SDK shows only its status; the raw answer below names it)
    assert lg["unknown"] == {"error": "SandboxError", "message": "400 Bad Request"}, lg
    assert lg["ctxLanguage"] == "bash" and lg["inCtx"] == "ctx\n", lg
    assert ["default-javascript", "javascript"] in lg["contexts"], lg["contexts"]
    assert ["default-bash", "bash"] in lg["contexts"], lg["contexts"]
    assert o["kill"] == {"k": True, "again": False, "info": "SandboxNotFoundError",
                         "running": False}
    assert o["expires"] == {"running": False, "killAfter": False}

    # the raw answers: E2B's error shape, 401s, 502 for a sandbox that is not
    h = {"X-API-Key": KEY_A}
    r = requests.post(d.e2b_url + "/v2/sandboxes", json={}, headers={"X-API-Key": "x" * 20})
    assert r.status_code == 401 and r.json() == {
        "code": 401, "message": "the API key (X-API-Key) is wrong"}
    r = requests.get(d.e2b_url + "/v2/sandboxes")
    assert r.status_code == 401 and "X-API-Key" in r.json()["message"]
    r = requests.post(d.e2b_url + "/v2/sandboxes", json={"templateID": "nope"}, headers=h)
    assert r.status_code in (400, 404) and "nope" in r.json()["message"], r.text
    r = requests.post(d.e2b_url + "/v2/sandboxes", json={"timeout": "x"}, headers=h)
    assert r.status_code == 400 and r.json()["message"].startswith('"timeout"')
    r = requests.post(d.e2b_url + "/v2/sandboxes", json={"templateID": "host",
                                                          "envVars": {"GREETING": "hej"}},
                      headers=h)
    assert r.status_code == 201, r.text
    sb = r.json()
    assert sb["templateID"] == "host" and len(sb["envdAccessToken"]) == 64
    sh = {"E2b-Sandbox-Id": sb["sandboxID"], "E2b-Sandbox-Port": "49999"}
    r = requests.post(d.e2b_url + "/execute", json={"code": "1"}, headers=sh)
    assert r.status_code == 401 and "X-Access-Token" in r.json()["message"]
    sh["X-Access-Token"] = sb["envdAccessToken"]
    r = requests.post(d.e2b_url + "/execute", headers=sh,
                      json={"code": "import os\nprint(os.environ['GREETING'])\n"
                                    "'SAFERUN_NOTEBOOK' in os.environ"})
    items = [json.loads(l) for l in r.text.splitlines()]
    assert r.headers["Content-Type"] == "application/x-ndjson"
    # (the Python SDK reads a stdout item's timestamp)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", items[0].pop("timestamp"))
    assert items == [{"type": "stdout", "text": "hej\n"},
                     {"type": "result", "text": "False", "is_main_result": True},
                     {"type": "number_of_executions", "execution_count": 1},
                     {"type": "end_of_execution"}]
    r = requests.post(d.e2b_url + "/execute", json={"code": "1", "language": "r"}, headers=sh)
    assert r.status_code == 400 and '"r" is not supported' in r.json()["message"]
    r = requests.get(d.e2b_url + "/health", headers={**sh, "E2b-Sandbox-Port": "8080"})
    assert r.status_code == 502 and "port 8080" in r.json()["message"]
    r = requests.get(d.e2b_url + "/health",
                     headers={**sh, "E2b-Sandbox-Id": "0123456789abcdef"})
    assert r.status_code == 502
    assert requests.delete(d.e2b_url + "/sandboxes/" + sb["sandboxID"],
                           headers=h).status_code == 204

    # bash runs and commands in the metrics and the log, by tenant (b ran none)
    m = d.get("/metrics").text
    for series, n in (('saferund_tenant_runs_total{tenant="a",language="bash",status="ok"}', 2),
                      ('saferund_tenant_runs_total{tenant="a",language="bash",status="error"}', 1),
                      ('saferund_tenant_commands_total{tenant="a"}', 5),
                      ('saferund_tenant_commands_total{tenant="b"}', 0)):
        assert f"\n{series} {n}\n" in m, (series, m)
    bash = [(l["peer"]["tenant"], l["status"], l["exit_code"]) for l in d.lines("run")
            if l["language"] == "bash"]
    assert bash == [("a", "ok", 0), ("a", "error", 3), ("a", "ok", 0)], bash

    # nothing left: sessions, workspaces, cgroups, processes
    assert wait_for(lambda: d.mounted_workspaces() == [], timeout=5), d.mounted_workspaces()
    assert wait_for(lambda: d.leftover_groups() == [], timeout=5), d.leftover_groups()
    assert wait_for(lambda: own_sandbox_processes(d.cgroups) == [], timeout=5)
    assert not [l for l in d.lines("request") if l["status"] >= 500 and l["status"] != 502]
