"""Languages through the daemon (docs/languages.md): `language` on
/v1/run, a stateful JavaScript session that keeps its variables, a
profile without the language refused with a 400 naming it, and what
/v1/packages says each profile carries, and JavaScript's warm pool
(warm.languages: single-use sandboxes with node started ahead). The host
profile has node (CI's bootstrap installs it); the minimal profile has
python and bash only."""
import concurrent.futures as cf
import json
import os
import threading

from conftest import HOST_POLICY, own_sandbox_processes, wait_for

MINIMAL = {"filesystem": {"profile": "minimal"}}


def error(r, field):
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["field"] == field, body
    return body["error"]


def test_language_on_v1_run_and_its_refusals(make_daemon):
    warm = {**HOST_POLICY, "warm": {"enabled": True, "pool_size": 1}}
    d = make_daemon(policies={"default": HOST_POLICY, "minimal": MINIMAL, "warm": warm})
    r = d.post("/v1/run", {"language": "javascript", "stdin": "in",
                           "code": "const fs = require('fs');\n"
                                   "console.log(fs.readFileSync(0, 'utf8'), process.getuid());\n"
                                   "throw new TypeError('boom');\n"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "error" and body["exit_code"] == 1
    assert body["stdout"] == "in 1000\n"
    assert "TypeError: boom\n    at " in body["stderr"] and "main.js:3" in body["stderr"]
    r = d.post("/v1/run", {"language": "bash", "code": "echo $0 $BASH_VERSION >/dev/null\n"
                                                       "echo sh; exit 5"})
    assert r.status_code == 200 and r.json()["stdout"] == "sh\n" and r.json()["exit_code"] == 5
    # Python is the default; the checker is Python's alone: JS's eval runs
    assert d.post("/v1/run", {"code": "print(6 * 7)"}).json()["stdout"] == "42\n"
    r = d.post("/v1/run", {"language": "js", "code": "console.log(eval('6 * 7'))"})
    assert r.json()["status"] == "ok" and r.json()["stdout"] == "42\n"

    msg = error(d.post("/v1/run", {"language": "ruby", "code": "puts 1"}), "language")
    assert '"ruby"' in msg
    error(d.post("/v1/run", {"language": 3, "code": "1"}), "language")
    msg = error(d.post("/v1/run", {"language": "javascript", "policy": "minimal",
                                   "code": "console.log(1)"}), "language")
    assert 'profile "minimal"' in msg and "javascript" in msg
    msg = error(d.post("/v1/run", {"language": "bash", "code": "true",
                                   "requirements": ["attrs"]}), "requirements")
    assert "Python packages" in msg

    # a warm policy without javascript in warm.languages runs JavaScript cold
    r = d.post("/v1/run", {"language": "javascript", "policy": "warm", "code": "console.log(1)"})
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text
    assert r.json()["path"] == "cold" and r.json()["stdout"] == "1\n"
    assert d.post("/v1/run", {"policy": "warm", "code": "print(2)"}).json()["stdout"] == "2\n"

    body = d.get("/v1/packages").json()
    assert body["profile"] == "host" and body["languages"] == ["python", "javascript", "bash"]


def test_a_javascript_session_keeps_its_variables(make_daemon):
    d = make_daemon(policies={"default": HOST_POLICY, "minimal": MINIMAL})
    r = d.post("/v1/sessions", {"stateful": True, "language": "javascript"})
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    assert r.json()["language"] == "javascript"

    def run(code, **kw):
        r = d.post(f"/v1/sessions/{sid}/run", {"code": code, **kw})
        assert r.status_code == 200, r.text
        return r.json()

    first = run("var a = 40; let b = 2; const fs = require('fs');\n"
                "function sum() { return a + b; }\nfs.writeFileSync('kept.txt', 'k');\n"
                "console.log('first')")
    assert first["status"] == "ok" and first["stdout"] == "first\n", first
    second = run("console.log(sum(), fs.readFileSync('kept.txt', 'utf8'))")
    assert second["stdout"] == "42 k\n", second
    # an uncaught error is the run's, not the session's end
    third = run("null.x")
    assert third["status"] == "error" and third["exit_code"] == 1
    assert "TypeError" in third["stderr"] and "main.js:1" in third["stderr"]
    assert run("process.exit(3)")["exit_code"] == 3
    assert run("(async () => { await null; console.log(a + 1); })()")["stdout"] == "41\n"
    # code goes down in 32 KiB messages: 600 KB of two-byte characters arrive whole
    assert run("var big = '" + "\u00e9" * 300000 + "';\nconsole.log(big.length)")["stdout"] == \
        "300000\n"

    msg = error(d.post(f"/v1/sessions/{sid}/run", {"code": "print(1)", "language": "python"}),
                "language")
    assert "runs javascript" in msg
    error(d.post("/v1/sessions", {"language": "bash"}), "language")
    msg = error(d.post("/v1/sessions", {"language": "javascript", "policy": "minimal"}),
                "language")
    assert 'profile "minimal"' in msg


def test_a_busy_javascript_kernel_ends_with_its_supervisor(make_daemon):
    # runner.js reads its control socket in a worker thread: the socket
    # closing ends the kernel even while a run never yields.
    d = make_daemon()
    sid = d.post("/v1/sessions", {"stateful": True, "language": "javascript"}).json()["session_id"]
    # the kernel up first: the CPU time below is the loop's, not Node's start-up
    assert d.post(f"/v1/sessions/{sid}/run", {"code": "1"}).json()["status"] == "ok"

    def spin():
        try:
            d.post(f"/v1/sessions/{sid}/run", {"code": "for (;;) {}"}, timeout=30)
        except Exception:
            pass  # the daemon is killed under it

    def cpu_ticks():
        total = 0
        for pid in own_sandbox_processes(d.cgroups):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    total += int(f.read().rsplit(")", 1)[1].split()[11])  # utime
            except OSError:
                pass
        return total

    # the idle kernel spends no CPU: 100 ms of it since the loop was sent
    # (however loaded the machine) is the loop running
    before = cpu_ticks()
    t = threading.Thread(target=spin, daemon=True)
    t.start()
    assert wait_for(lambda: cpu_ticks() >= before + 10, timeout=15)
    d.proc.kill()
    d.proc.wait(timeout=10)
    assert wait_for(lambda: own_sandbox_processes(d.cgroups) == [], timeout=5)
    t.join(timeout=10)


# ---- the warm path for JavaScript (runtime/lib/run/warm_node.c) ----------------

JS_WARM = {**HOST_POLICY, "limits": {"memory": "256M", "pids": 16, "wall_time": "10s"},
           "warm": {"enabled": True, "languages": ["python", "javascript"], "preload": [],
                    "pool_size": 2}}

WARM_JS_FIRST = r"""
const fs = require('fs'), os = require('os');
fs.writeFileSync('/tmp/mark', 'run 1');
fs.mkdirSync('artifacts');
fs.writeFileSync('artifacts/out.txt', 'art');
console.log(JSON.stringify({
  stdin: fs.readFileSync(0, 'utf8'), file: fs.readFileSync('data/in.txt', 'utf8'),
  env: process.env.GREETING, path: process.env.PATH !== undefined, argv: process.argv.slice(1),
  execArgv: process.execArgv, main: require.main === module, work: fs.readdirSync('.').sort(),
  uid: process.getuid(), host: os.hostname(),
  capeff: /CapEff:\s*(\w+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1],
}));
function f() {
  undefinedThing();
}
f();
"""


def js_pool(d):
    return d.get("/v1/health").json()["warm"][0]["javascript"]


def test_javascript_runs_on_pooled_node_sandboxes(make_daemon):
    """Each JavaScript run takes a sandbox whose node started ahead (not
    on the request's path), used once: the same result as `node main.js`
    cold, the same containment, a fresh sandbox per run, the pool refilled
    in the background and nothing left when the daemon stops. Next to
    Python's pool of the same policy, both counted wherever the daemon
    reports its pools (/v1/ready, the leftover checks)."""
    d = make_daemon(policies={"default": JS_WARM})

    def full():
        return js_pool(d)["ready"] == 2

    assert wait_for(full, timeout=60), d.get("/v1/health").json()["warm"]
    assert d.only_pools_left(timeout=60), d.get("/v1/health").json()["warm"]
    w = d.get("/v1/health").json()["warm"][0]
    assert (w["languages"], w["zygote_up"], w["pool_size"], w["javascript"]["up"],
            w["javascript"]["pool_size"]) == (["python", "javascript"], True, 2, True, 2), w
    ready = d.get("/v1/ready").json()
    assert (ready["warm_ready"], ready["warm_ready_by_language"]) == \
        (4, {"python": 2, "javascript": 2}), ready

    r = d.run(WARM_JS_FIRST, language="javascript", stdin="from stdin",
              env={"GREETING": "hi"},
              files={"data/in.txt": "a file"})
    assert (r["status"], r["exit_code"], r["path"]) == ("error", 1, "warm"), r
    got = json.loads(r["stdout"].splitlines()[0])
    assert got == {"stdin": "from stdin", "file": "a file", "env": "hi", "path": True,
                   "argv": ["/work/main.js"], "execArgv": [], "main": True,
                   "work": ["artifacts", "data", "main.js"], "uid": 1000, "host": "sandbox",
                   "capeff": "0000000000000000"}, got
    # Node's own report, as `node main.js` prints it
    assert r["stderr"].startswith("/work/main.js:14\n  undefinedThing();\n  ^\n"), r["stderr"]
    assert "at f (/work/main.js:14:3)" in r["stderr"]
    assert "node:internal/main/run_main_module" in r["stderr"], r["stderr"]
    assert [a["name"] for a in r["artifacts"]] == ["out.txt"], r["artifacts"]
    first = r["id"]

    # a fresh sandbox (nothing of run 1's /tmp, another group), whose
    # child_process reaches only the sandbox's programs and its pids limit
    assert wait_for(full, timeout=30)
    r = d.run("const fs = require('fs'), cp = require('child_process');\n"
              "console.log(fs.existsSync('/tmp/mark'), fs.readdirSync('/tmp').length);\n"
              "try { cp.execFileSync(process.env.HOST_BIN); }\n"
              "catch (e) { console.log(e.code); }\n"
              "for (let i = 0; i < 64; i++)\n"
              "  cp.spawn('sleep', ['30']).on('error', (e) => {\n"
              "    console.log(e.code); process.exit(1); });\n",
              language="javascript", env={"HOST_BIN": os.path.abspath(os.environ["SAFERUND"])})
    assert (r["status"], r["path"]) == ("pids", "warm"), r
    assert r["stdout"].startswith("false 0\nENOENT\nEAGAIN\n"), r
    assert r["id"] != first

    # the limits hold on a pooled sandbox (its cgroup is rewritten per run)
    assert wait_for(full, timeout=30)
    with cf.ThreadPoolExecutor(2) as ex:
        bomb = ex.submit(d.run, "const a = [];\n"
                                "for (;;) a.push('x'.repeat(1 << 20) + Math.random());",
                         language="javascript", memory="96M")
        loop = ex.submit(d.run, "for (;;) {}", language="javascript", timeout=1)
        bomb, loop = bomb.result(timeout=60), loop.result(timeout=60)
    assert (bomb["status"], bomb["path"], loop["status"], loop["path"]) == \
        ("oom", "warm", "timeout", "warm"), (bomb, loop)

    # refilled: every run took one, the pool started one for each
    assert wait_for(full, timeout=30)
    js = js_pool(d)
    assert (js["warm_runs"], js["spawned"], js["spawn_failures"]) == (4, 6, 0), js
    assert d.only_pools_left(), d.get("/v1/health").json()["warm"]
    # an init and a node in each of 2, an init and a python3 in the zygote's and its 2 forks'
    assert len(own_sandbox_processes(d.cgroups)) == 10

    assert d.stop() == 0
    assert d.leftover_groups() == []
    assert own_sandbox_processes(d.cgroups) == []
