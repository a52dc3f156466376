"""Languages through the daemon (docs/languages.md): `language` on
/v1/run, a stateful JavaScript session that keeps its variables, a
profile without the language refused with a 400 naming it, and what
/v1/packages says each profile carries. The host profile has node (CI's
bootstrap installs it); the minimal profile has python and bash only."""
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

    # the warm path is Python's: a JavaScript run on a warm policy runs cold
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
