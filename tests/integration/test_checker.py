"""The pre-execution checker from the CLI: saferun check, and saferun run
refusing code before anything is built."""
import json

from conftest import leftover_groups, saferun

UNSAFE = "import os\nprint('ran')\nos.system('id')\nx = eval('1 + 1')\n"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


def test_check_clean_code_exits_0(tmp_path):
    script = write(tmp_path, "ok.py", "import pandas as pd\nprint(pd.__name__)\n")
    p = saferun("check", script)
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode() == f"{script}: clean\n"


def test_check_reports_rule_line_and_advice(tmp_path):
    script = write(tmp_path, "bad.py", UNSAFE)
    p = saferun("check", script)
    assert p.returncode == 1
    lines = p.stdout.decode().splitlines()
    assert lines[0].startswith(f"{script}:3:1: SR101 process: `os.system` starts another program")
    assert lines[1].startswith(f"{script}:4:5: SR201 eval: `eval` runs code built at run time")
    assert len(lines) == 2


def test_check_json_and_stdin():
    p = saferun("check", "--json", "-", input=UNSAFE.encode())
    assert p.returncode == 1
    res = json.loads(p.stdout)
    assert res["verdict"] == "rejected"
    assert [(f["rule"], f["rule_name"], f["name"], f["line"], f["col"]) for f in res["findings"]] == [
        ("SR101", "process", "os.system", 3, 1), ("SR201", "eval", "eval", 4, 5)]
    assert all(f["message"] for f in res["findings"])


def test_check_allow_by_name_rule_id_and_agentrun_names(tmp_path):
    script = write(tmp_path, "bad.py", UNSAFE)
    p = saferun("check", "--json", "--allow", "eval", "--allow", "SR101", script)
    assert p.returncode == 0, p.stdout
    assert json.loads(p.stdout)["allowed"] == 2
    # AgentRun's ignore_unsafe_functions names, unchanged
    p = saferun("check", "--allow", "os", "--allow", "exec", "--allow", "eval", "--allow", "hasattr",
                "--allow", "input", script)
    assert p.returncode == 0, p.stdout


def test_check_policy_turns_rules_off(tmp_path):
    policy = write(tmp_path, "p.json", json.dumps({"checker": {"rules": {"process": False, "SR201": False}}}))
    p = saferun("check", "--policy", policy, write(tmp_path, "bad.py", UNSAFE))
    assert p.returncode == 0, p.stdout


def test_check_bad_input_exits_2(tmp_path):
    cases = [
        (["check", write(tmp_path, "latin1.py", b"x = '\xe9'\n")], "not valid UTF-8"),
        (["check", str(tmp_path / "missing.py")], "cannot read script"),
        (["check"], "give one FILE"),
        (["check", "--bogus", "x.py"], "unknown or incomplete option"),
        (["check", "--policy", write(tmp_path, "bad.json", '{"checker": {"rules": {"SR999": false}}}'),
          "x.py"], "policy.checker.rules.SR999: unknown rule"),
    ]
    for args, want in cases:
        p = saferun(*args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert want in p.stderr.decode(), (args, p.stderr)


def test_rejected_run_never_runs_and_creates_nothing():
    assert leftover_groups() == []
    p = saferun("run", "--json", "--profile", "host", "-c", UNSAFE)
    res = json.loads(p.stdout)
    assert res["status"] == "rejected"
    assert p.returncode == 3
    assert res["stdout"] == "" and res["duration_ms"] == 0 and res["cgroup_mode"] == ""
    assert [(f["rule"], f["line"]) for f in res["findings"]] == [("SR101", 3), ("SR201", 4)]
    assert res["message"].startswith("rejected: 2 problems found before running; line 3: SR101")
    assert leftover_groups() == []


def test_rejected_run_explains_itself_without_json():
    p = saferun("run", "--profile", "host", "-c", "exec('print(1)')")
    assert p.returncode == 3
    assert p.stdout == b""
    assert p.stderr.decode().startswith("saferun: rejected: 1 problem found before running; line 1: SR201")


def test_no_check_allow_and_policy_let_code_run(tmp_path):
    code = "print(eval('1 + 1'))"
    for args in (["--no-check"], ["--allow", "eval"], ["--allow", "SR201"],
                 ["--policy", write(tmp_path, "off.json", '{"checker": {"enabled": false}}')]):
        p = saferun("run", "--profile", "host", *args, "-c", code)
        assert (p.returncode, p.stdout) == (0, b"2\n"), (args, p.stderr)


def test_checker_failure_is_internal_error_and_runs_nothing(tmp_path):
    # A 3 MiB script cannot be checked in 10 ms: the checker is killed.
    policy = write(tmp_path, "fast.json", '{"checker": {"timeout": "10ms"}}')
    code = "x = [" + "1, " * (1 << 20) + "]\nprint('ran')\n"
    p = saferun("run", "--json", "--profile", "host", "--policy", policy, "-", input=code.encode())
    res = json.loads(p.stdout)
    assert res["status"] == "internal_error"
    assert res["message"] == ("internal_error: the code could not be checked: the checker ran out of "
                              "time (10 ms) and was killed")
    assert res["stdout"] == "" and p.returncode == 3
    assert leftover_groups() == []


# ---- the run-time guard: the runner's PEP 578 audit hook ----

def run_json(*args, code, input=None):
    p = saferun("run", "--json", "--profile", "host", *args, "-c", code, input=input)
    res = json.loads(p.stdout)
    res["_exit"] = p.returncode
    return res


# Each hides its call from the static pass in a container (a known evasion).
EVASIONS = [
    ("import os\ntools = {'run': os}\nprint('before')\ntools['run'].system('true')\nprint('after')\n",
     "blocked os.system(b'true') at main.py line 4 (SR101 process)", "SR101", 4),
    ("import builtins\nb = {'x': builtins}\nb['x'].exec('print(1)')\n",
     "blocked compile() at main.py line 3 (SR201 eval)", "SR201", 3),
    ("fs = {'o': open}\nfs['o']('/etc/passwd').read()\n",
     "blocked open('/etc/passwd') at main.py line 2 (SR401 path)", "SR401", 2),
    ("import os\nm = {'o': os}\nm['o'].execv('/bin/true', ['true'])\n",
     "blocked os.exec('/bin/true', ['true']) at main.py line 3 (SR101 process)", "SR101", 3),
]


def test_runtime_guard_blocks_what_the_static_pass_missed():
    for code, event, rule, line in EVASIONS:
        p = saferun("check", "-", input=code.encode())
        assert p.returncode == 0, (code, p.stdout)  # the static pass misses it
        res = run_json(code=code)
        assert res["status"] == "rejected", (code, res)
        assert res["message"] == f"rejected: {event}: this sandbox forbids it"
        assert res["_exit"] == 3 and res["exit_code"] == 121
        assert [(f["rule"], f["line"]) for f in res["findings"]] == [(rule, line)]
        assert "after" not in res["stdout"]
        assert leftover_groups() == []


def test_runtime_guard_blocks_connect_when_network_is_off():
    code = "import socket\ns = socket.socket()\ns.connect(('127.0.0.1', 9))\n"
    res = run_json("--allow", "socket.socket", code=code)
    assert res["status"] == "rejected"
    assert res["message"].startswith("rejected: blocked socket.connect(('127.0.0.1', 9)) at main.py line 3 "
                                     "(SR103 network)")


def test_runtime_guard_follows_the_allow_list_and_no_check():
    code = EVASIONS[0][0]
    for args in (["--allow", "os.system"], ["--allow", "SR101"], ["--no-check"]):
        res = run_json(*args, code=code)
        assert res["status"] == "ok", (args, res)
        assert res["stdout"] == "before\nafter\n"


def test_runtime_guard_leaves_ordinary_code_alone():
    code = ("import json, pathlib, platform, traceback\n"
            "from dataclasses import dataclass\n"
            "from collections import namedtuple\n"
            "@dataclass\nclass P:\n    x: int\n"
            "Pt = namedtuple('Pt', 'a b')\n"
            "pathlib.Path('out.json').write_text(json.dumps({'a': 1}))\n"
            "open('/tmp/t.txt', 'w').write('x')\n"
            "print(json.loads(open('out.json').read()), P(1), Pt(1, 2), platform.system())\n"
            "try:\n    1 / 0\nexcept ZeroDivisionError:\n    traceback.print_exc()\n")
    res = run_json(code=code)
    assert res["status"] == "ok", res
    assert res["stdout"] == "{'a': 1} P(x=1) Pt(a=1, b=2) Linux\n"
    assert 'File "main.py", line 12, in <module>' in res["stderr"]
