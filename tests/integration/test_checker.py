"""The pre-execution checker from the CLI: saferun check, and saferun run
refusing code before anything is built."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import SAFERUN, leftover_groups, saferun

pytestmark = pytest.mark.host_only(
    reason="the checker (the confined static pass and the runner's audit hook) does not "
    "depend on the cgroup version")

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


def test_rejected_run_never_runs_and_leaves_nothing():
    # The checker vets the code while the sandbox is built; the sandbox
    # never goes on to the code, and nothing of it is left.
    assert leftover_groups() == []
    p = saferun("run", "--json", "--profile", "host", "-c", UNSAFE)
    res = json.loads(p.stdout)
    assert res["status"] == "rejected"
    assert p.returncode == 3
    assert res["stdout"] == "" and res["duration_ms"] == 0 and res["cgroup_mode"] == ""
    assert [(f["rule"], f["line"]) for f in res["findings"]] == [("SR101", 3), ("SR201", 4)]
    assert res["message"].startswith("rejected: 2 problems found before running; line 3: SR101")
    assert leftover_groups() == []


def children(pid):
    out = []
    for e in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{e}/stat") as f:
                st = f.read()
            if int(st[st.rindex(")") + 2:].split()[1]) == pid:
                out.append((int(e), st[st.index("(") + 1:st.rindex(")")],
                            os.readlink(f"/proc/{e}/ns/pid")))
        except OSError:
            pass
    return out


def test_the_sandbox_waits_for_the_checkers_verdict(tmp_path):
    """The checker's child vets the code while the sandbox is built; the
    sandbox goes on only when it has passed. The test stops the checker
    (code that takes it a few hundred ms) and sees the sandbox's first
    process waiting: no init, no python, until the checker goes on."""
    code = "while True:\n    pass\n" + "x = 1\n" * 20000
    policy = write(tmp_path, "slow.json", '{"checker": {"timeout": "30s"}}')
    p = subprocess.Popen([SAFERUN, "run", "--json", "--profile", "host", "--policy", policy,
                          "--timeout", "2", "-c", code], stdout=subprocess.PIPE)
    try:
        ours = os.readlink(f"/proc/{p.pid}/ns/pid")
        checker = None
        deadline = time.monotonic() + 10
        while checker is None and time.monotonic() < deadline and p.poll() is None:
            kids = children(p.pid)
            # the checker shares saferun's pid namespace; the sandbox does not
            checker = next((k for k, _, ns in kids if ns == ours), None)
        assert checker, "the checker's process was not seen (did the check get faster?)"
        os.kill(checker, signal.SIGSTOP)
        try:
            time.sleep(0.5)
            sandbox = [k for k in children(p.pid) if k[2] != ours]
            assert len(sandbox) == 1 and sandbox[0][1] == "saferun", sandbox
            assert children(sandbox[0][0]) == []  # no python yet
        finally:
            os.kill(checker, signal.SIGCONT)
    finally:
        # The run ends by itself (--timeout 2): a killed saferun would
        # leave its groups.
        out = p.communicate(timeout=120)[0]
    res = json.loads(out)
    assert res["status"] == "timeout", res["message"]
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
                              "time (10 ms of CPU) and was killed")
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


# Run-time guard events beyond the container evasions above: each snippet
# passes the static pass (checked below), then the guard ends the run at
# the event, before the line after it prints.
GUARD_EVENTS = [
    # os.posix_spawn / posix_spawnp (one audit event, os.posix_spawn)
    ([], "import os\ntools = {'run': os}\nprint('before')\n"
         "tools['run'].posix_spawn('/bin/true', ['true'], {})\nprint('after')\n",
     "blocked os.posix_spawn('/bin/true', ['true']) at main.py line 4 (SR101 process)", "SR101", 4),
    ([], "import os\ntools = {'run': os}\nprint('before')\n"
         "tools['run'].posix_spawnp('true', ['true'], {})\nprint('after')\n",
     "blocked os.posix_spawn('true', ['true']) at main.py line 4 (SR101 process)", "SR101", 4),
    # subprocess.Popen, reached through a module that imports subprocess
    # itself (imaplib, allowed by name: allowing a module does not allow
    # what it re-exports)
    (["--allow", "imaplib"], "import imaplib\nmods = {'m': imaplib}\nprint('before')\n"
                             "mods['m'].subprocess.Popen(['true']).wait()\nprint('after')\n",
     "blocked subprocess.Popen('true', ['true']) at main.py line 4 (SR101 process)", "SR101", 4),
    # importing a denied module at run time (__import__ by a computed name)
    ([], "import builtins\nb = {'b': builtins}\nload = getattr(b['b'], ''.join(['__imp', 'ort__']))\n"
         "print('before')\nload('subprocess')\nprint('after')\n",
     "blocked import subprocess at main.py line 5 (SR101 process)", "SR101", 5),
    ([], "import builtins\nb = {'b': builtins}\nload = getattr(b['b'], ''.join(['__imp', 'ort__']))\n"
         "print('before')\nload('ctypes')\nprint('after')\n",
     "blocked import ctypes at main.py line 5 (SR102 native)", "SR102", 5),
    # a computed getattr: the guard has no getattr event (Python raises
    # none for ordinary attributes); it stops what the lookup reaches
    ([], "import os\nm = {'o': os}\nname = ''.join(['sys', 'tem'])\nprint('before')\n"
         "getattr(m['o'], name)('true')\nprint('after')\n",
     "blocked os.system(b'true') at main.py line 5 (SR101 process)", "SR101", 5),
]


def test_runtime_guard_blocks_spawn_popen_and_denied_imports():
    for args, code, event, rule, line in GUARD_EVENTS:
        p = saferun("check", *args, "-", input=code.encode())
        assert p.returncode == 0, (code, p.stdout)  # the static pass misses it
        res = run_json(*args, code=code)
        assert res["status"] == "rejected", (code, res)
        assert res["message"] == f"rejected: {event}: this sandbox forbids it", (code, res["message"])
        assert res["_exit"] == 3 and res["exit_code"] == 121
        assert [(f["rule"], f["line"]) for f in res["findings"]] == [(rule, line)]
        assert res["stdout"] == "before\n", (code, res["stdout"])
        assert leftover_groups() == []


def sandbox_has(module):
    p = saferun("run", "--json", "--no-check", "--profile", "host", "-c", f"import {module}")
    return json.loads(p.stdout)["status"] == "ok"


def test_runtime_guard_blocks_ctypes_dlopen_and_dlsym():
    # ctypes imported by a library (numpy does, for numpy.ctypeslib) is
    # allowed; loading a library or looking up a symbol from main.py is not.
    if not sandbox_has("numpy"):
        pytest.skip("numpy is not installed in the host profile")
    head = "import numpy\nn = {'np': numpy}\nc = n['np'].ctypeslib.ctypes\nprint('before')\n"
    cases = [
        ("c.CDLL(None)\n", "blocked ctypes.dlopen(None) at main.py line 5 (SR102 native)"),
        ("c.pythonapi.Py_GetVersion\n", "blocked ctypes.dlsym(<PyDLL 'None', handle "),
    ]
    for tail, event in cases:
        code = head + tail + "print('after')\n"
        assert saferun("check", "-", input=code.encode()).returncode == 0, code
        res = run_json(code=code)
        assert res["status"] == "rejected", (code, res)
        assert res["message"].startswith(f"rejected: {event}"), res["message"]
        assert res["message"].endswith("at main.py line 5 (SR102 native): this sandbox forbids it")
        assert [(f["rule"], f["line"]) for f in res["findings"]] == [("SR102", 5)]
        assert res["stdout"] == "before\n"
    # the same with the rule allowed runs to the end
    res = run_json("--allow", "SR102", code=head + "c.CDLL(None)\nprint('after')\n")
    assert res["status"] == "ok" and res["stdout"] == "before\nafter\n", res


def test_runtime_guard_lets_asyncio_and_webbrowser_be_imported():
    # Their own `import subprocess` is a library's import, not the code's
    # (the walk to the importer stops at the first frame outside importlib).
    code = ("import asyncio, webbrowser\nasync def main():\n    return 1\n"
            "print(asyncio.run(main()), webbrowser.__name__)\n")
    assert saferun("check", "-", input=code.encode()).returncode == 0
    res = run_json(code=code)
    assert res["status"] == "ok", res["message"]
    assert res["stdout"] == "1 webbrowser\n"
    # what asyncio does for the code is still the code's: a process
    code = ("import asyncio\nA = {'a': asyncio}\nasync def main():\n"
            "    await A['a'].create_subprocess_exec('true')\nprint('before')\n"
            "asyncio.run(main())\nprint('after')\n")
    assert saferun("check", "-", input=code.encode()).returncode == 0
    res = run_json(code=code)
    assert res["status"] == "rejected", res
    assert res["message"] == ("rejected: blocked subprocess.Popen('true', ['true']) at main.py line 4 "
                              "(SR101 process): this sandbox forbids it")
    assert res["stdout"] == "before\n"


def test_runtime_guard_covers_modules_the_code_writes():
    code = ("with open('helper.py', 'w') as f:\n"
            "    f.write('import os\\nos.system(\"true\")\\n')\n"
            "import helper\nprint('after')\n")
    assert saferun("check", "-", input=code.encode()).returncode == 0
    res = run_json(code=code)
    assert res["status"] == "rejected", res
    assert res["message"] == ("rejected: blocked os.system(b'true') at main.py line 3 (SR101 process) "
                              "in helper.py line 2: this sandbox forbids it")
    assert [(f["rule"], f["line"]) for f in res["findings"]] == [("SR101", 3)]
    assert res["stdout"] == ""
    # and what a function of that module does when main.py calls it, in /tmp too
    code = ("with open('/tmp/h2.py', 'w') as f:\n"
            "    f.write('def peek(p):\\n    return open(p).read()\\n')\n"
            "import sys\nsys.path.append('/tmp')\nimport h2\nprint('before')\n"
            "h2.peek('/etc/hostname')\nprint('after')\n")
    assert saferun("check", "-", input=code.encode()).returncode == 0
    res = run_json(code=code)
    assert res["status"] == "rejected", res
    assert res["message"] == ("rejected: blocked open('/etc/hostname') at main.py line 7 (SR401 path) "
                              "in /tmp/h2.py line 2: this sandbox forbids it")
    assert res["stdout"] == "before\n"


# importlib raises no `import` event: a finder first on sys.meta_path
# refuses denied modules, and the file of a denied standard module read
# during an import the code asked for is refused even when the code took
# that finder out.
IMPORT_MODULE = [
    "",
    "S['s'].meta_path.clear()\n",
    "S['s'].meta_path.pop(0)\n",
    "S['s'].meta_path = S['s'].meta_path[1:]\n",
    "list.__delitem__(S['s'].meta_path, 0)\n",
]


def test_runtime_guard_denies_import_module_of_a_denied_module():
    for tamper in IMPORT_MODULE:
        code = ("import importlib, sys\nL = {'i': importlib}\nS = {'s': sys}\n" + tamper +
                "print('before')\nL['i'].import_module('pty')\nprint('after')\n")
        line = 5 if tamper else 4
        assert saferun("check", "-", input=code.encode()).returncode == 0, code
        res = run_json(code=code)
        assert res["status"] == "rejected", (tamper, res)
        assert res["message"] == (f"rejected: blocked import pty at main.py line {line + 1} "
                                  "(SR101 process): this sandbox forbids it"), (tamper, res["message"])
        assert res["stdout"] == "before\n"
    # an extension module (no source file to read) is refused by the finder
    code = ("import importlib\nL = {'i': importlib}\nprint('before')\n"
            "L['i'].import_module('_posixsubprocess')\nprint('after')\n")
    res = run_json(code=code)
    assert res["status"] == "rejected", res
    assert res["message"].startswith("rejected: blocked import _posixsubprocess at main.py line 4 "
                                     "(SR101 process)")
    # allowed by name, it is imported
    res = run_json("--allow", "pty", code=code.replace("_posixsubprocess", "pty"))
    assert res["status"] == "ok" and res["stdout"] == "before\nafter\n", res


def test_runtime_guard_watches_directory_listings():
    code = ("import os, pathlib\nm = {'o': os, 'p': pathlib.Path}\nprint(len(os.listdir()) > 0, "
            "len(os.listdir('/tmp')) >= 0, len(list(os.scandir('.'))) > 0)\n")
    res = run_json(code=code)
    assert res["status"] == "ok" and res["stdout"] == "True True True\n", res
    for call, event in [("m['o'].listdir('/etc')", "os.listdir('/etc')"),
                        ("m['o'].scandir('/usr/lib')", "os.scandir('/usr/lib')"),
                        ("list(m['p']('/proc').iterdir())", "os.listdir('/proc')"),
                        ("m['o'].listdir(b'/')", "os.listdir('/')")]:
        c = code + f"print('before')\n{call}\nprint('after')\n"
        assert saferun("check", "-", input=c.encode()).returncode == 0, c
        res = run_json(code=c)
        assert res["status"] == "rejected", (call, res)
        assert res["message"] == (f"rejected: blocked {event} at main.py line 5 (SR401 path): "
                                  "this sandbox forbids it"), res["message"]
        assert res["stdout"] == "True True True\nbefore\n"
    for allow in ("listdir", "os", "SR401"):
        res = run_json("--allow", allow, code=code + "print(len(m['o'].listdir('/etc')) > 0)\n")
        assert res["status"] == "ok" and res["stdout"].endswith("True\n"), (allow, res)


def test_runtime_guard_blocks_code_objects_made_by_the_code():
    # A code object with another file's name would pass the code's frames
    # off as the standard library's.
    code = ("import os\ndef f():\n    os.system('true')\nattr = ''.join(['__co', 'de__'])\n"
            "print('before')\nc = getattr(f, attr).replace(co_filename=os.__file__)\n"
            "print('after')\n")
    assert saferun("check", "-", input=code.encode()).returncode == 1  # os.system in f
    res = run_json("--allow", "os.system", code=code)
    assert res["status"] == "rejected", res
    assert res["message"] == ("rejected: blocked code.__new__() at main.py line 6 (SR201 eval): "
                              "this sandbox forbids it")
    assert res["stdout"] == "before\n"


# Code run for the code (issue 15, item 9): what the standard library
# compiles, executes or calls on the code's behalf is the code's. Each
# passes the static pass (with the allow list given) and would print
# "pwned" without the guard.
SYSTEM = "os.system('echo pwned')"
RUN_FOR_THE_CODE = [
    # allowing exec allows the call, never what the exec'd string does
    (["--allow", "exec"], "print('before')\nexec(\"import os\\nos.system('echo pwned')\")\n",
     "blocked os.system(b'echo pwned') at main.py line 2 (SR101 process) in <string> line 2"),
    (["--allow", "exec"], "print('before')\nexec(\"import subprocess\")\n",
     "blocked import subprocess at main.py line 2 (SR101 process) in <string> line 1"),
    (["--allow", "exec"], "print('before')\nexec(\"def f():\\n    return open('/etc/passwd')\\n\")\nf()\n",
     "blocked open('/etc/passwd') at main.py line 3 (SR401 path) in <string> line 2"),
    # the standard library's helpers that run a string they are given
    ([], f"import timeit\nprint('before')\ntimeit.timeit(\"import os; {SYSTEM}\", number=1)\n",
     "blocked os.system(b'echo pwned') at main.py line 3 (SR101 process) in <timeit-src> line 6"),
    ([], f"import cProfile\nprint('before')\ncProfile.run(\"import os; {SYSTEM}\")\n",
     "blocked os.system(b'echo pwned') at main.py line 3 (SR101 process) in <string> line 1"),
    ([], f"import profile\nprint('before')\nprofile.run(\"import os; {SYSTEM}\")\n",
     "blocked os.system(b'echo pwned') at main.py line 3 (SR101 process) in <string> line 1"),
    ([], f"import trace\nprint('before')\ntrace.Trace(count=0, trace=0).run(\"import os; {SYSTEM}\")\n",
     "blocked os.system(b'echo pwned') at main.py line 3 (SR101 process) in <string> line 1"),
    ([], f"import bdb\nprint('before')\nbdb.Bdb().run(\"import os; {SYSTEM}\")\n",
     "blocked os.system(b'echo pwned') at main.py line 3 (SR101 process) in <string> line 1"),
    ([], "import doctest\ndef f():\n    '''\n    >>> import os; " + SYSTEM + "\n    0\n    '''\n"
         "print('before')\ndoctest.run_docstring_examples(f, {})\n",
     "blocked os.system(b'echo pwned') at main.py line 8 (SR101 process) in <doctest NoName[0]> line 1"),
    (["--allow", "code", "--allow", "exec"],
     f"import code\nprint('before')\ncode.InteractiveInterpreter().runsource(\"import os; {SYSTEM}\")\n",
     "blocked os.system(b'echo pwned') at main.py line 3 (SR101 process) in <input> line 1"),
    ([], "import typing\ndef f(x: \"__import__('os').system('echo pwned')\"):\n    pass\n"
         "print('before')\ntyping.get_type_hints(f)\n",
     "blocked os.system(b'echo pwned') at main.py line 5 (SR101 process) in <string> line 1"),
    # pickle's Python unpickler and copy's __reduce__ call what the data names
    ([], "import pickle\nprint('before')\npickle._loads(b\"cos\\nsystem\\n(S'echo pwned'\\ntR.\")\n",
     "blocked os.system(b'echo pwned') at main.py line 3 (SR101 process)"),
    ([], "import copy, os\nT = {'o': os}\nclass X:\n    def __reduce__(self):\n"
         "        return (T['o'].system, ('echo pwned',))\nprint('before')\ncopy.copy(X())\n",
     "blocked os.system(b'echo pwned') at main.py line 7 (SR101 process)"),
    # a denied builtin handed to a library as a callback, through operator
    ([], "import heapq, operator, os\nprint('before')\n"
         "heapq.nsmallest(1, [os], key=operator.methodcaller('system', 'echo pwned'))\n",
     "blocked os.system(b'echo pwned') at main.py line 3 (SR101 process)"),
    ([], "import heapq, operator, os\nm = {'o': os}\nprint('before')\n"
         "heapq.nsmallest(1, ['echo pwned'], key=operator.attrgetter('system')(m['o']))\n",
     "blocked os.system(b'echo pwned') at main.py line 4 (SR101 process)"),
    # an exit function the code registered runs after main.py, from the runner
    ([], "import atexit, os\nT = {'o': os}\natexit.register(T['o'].system, 'echo pwned')\nprint('before')\n",
     "blocked os.system(b'echo pwned') at main.py line 0 (SR101 process) in an exit callback"),
    # a callable found by scanning sys.modules: _posixsubprocess.fork_exec
    # (loaded by asyncio) raises no audit event of its own
    ([], "import asyncio, os, sys\nm = [m for m in list(sys.modules.values()) if hasattr(m, 'fork_exec')][0]\n"
         "r, w = os.pipe()\nprint('before')\n"
         "m.fork_exec([b'/bin/echo', b'pwned'], [b'/bin/echo'], True, (w,), None, None, -1, -1, -1, -1, "
         "-1, -1, r, w, True, False, -1, None, None, None, -1, None, False)\n",
     "blocked _posixsubprocess.fork_exec([b'/bin/echo', b'pwned'], [b'/bin/echo']) at main.py line 5 "
     "(SR101 process)"),
    # a thread's target: the thread the code started is the code's (its
    # stack starts in threading, and Python 3.11 raises no event for it)
    ([], "import threading, os\nT = {'o': os}\nprint('before')\n"
         "t = threading.Thread(target=T['o'].system, args=('echo pwned',))\nt.start(); t.join()\n",
     "blocked os.system(b'echo pwned') at main.py line 5 (SR101 process)"),
    ([], "import threading\nprint('before')\n"
         "t = threading.Thread(target=open, args=('/etc/passwd',))\nt.start(); t.join()\n",
     "blocked open('/etc/passwd') at main.py line 4 (SR401 path)"),
    ([], "import concurrent.futures as cf, os\nT = {'o': os}\nprint('before')\n"
         "with cf.ThreadPoolExecutor(1) as ex: ex.submit(T['o'].popen, 'echo pwned').result()\n",
     "blocked import subprocess at main.py line 4 (SR101 process)"),
    ([], "from multiprocessing.pool import ThreadPool\nimport os\nT = {'o': os}\nprint('before')\n"
         "ThreadPool(1).apply(T['o'].system, ('echo pwned',))\n",
     "blocked os.system(b'echo pwned') at main.py line 5 (SR101 process)"),
    ([], "import _thread, os, time\nT = {'o': os}\nprint('before')\n"
         "_thread.start_new_thread(T['o'].system, ('echo pwned',)); time.sleep(5)\n",
     "blocked os.system(b'echo pwned') at main.py line 4 (SR101 process)"),
    # a fresh _thread (not the wrapped one): a thread with no frame at all
    ([], "import sys, os, time\nT = {'o': os}\ndel sys.modules['_thread']\nimport _thread\n"
         "print('before')\n_thread.start_new_thread(T['o'].system, ('echo pwned',)); time.sleep(5)\n",
     "blocked os.system(b'echo pwned') at main.py line 0 (SR101 process) in a thread started with no "
     "frame of its own"),
]


def run_all(cases, check=False):
    # One process each (the guard ends the sandbox's), started together.
    argv = [SAFERUN, "check"] if check else [SAFERUN, "run", "--json", "--profile", "host"]
    procs = [subprocess.Popen([*argv, *args, *(["-"] if check else ["-c", code])],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for args, code, *_ in cases]
    outs = [p.communicate(code.encode() if check else b"")[0] for p, (_, code, *_) in zip(procs, cases)]
    if check:
        return [(p.returncode, out) for p, out in zip(procs, outs)]
    return [json.loads(out) | {"_exit": p.returncode} for p, out in zip(procs, outs)]


def test_runtime_guard_covers_code_run_for_the_code():
    for (_, code, _), (rc, out) in zip(RUN_FOR_THE_CODE, run_all(RUN_FOR_THE_CODE, check=True)):
        assert rc == 0, (code, out)  # the static pass misses it
    for (args, code, event), res in zip(RUN_FOR_THE_CODE, run_all(RUN_FOR_THE_CODE)):
        assert "pwned" not in res["stdout"], (code, res)
        assert res["status"] == "rejected", (code, res)
        assert res["message"] == f"rejected: {event}: this sandbox forbids it", (code, res["message"])
        assert res["_exit"] == 3 and res["stdout"] == "before\n", (code, res)
    assert leftover_groups() == []


def test_runtime_guard_leaves_the_helpers_ordinary_uses_alone():
    code = ("import copy, doctest, heapq, operator, pickle, timeit, typing\n"
            "def f(x: 'int') -> 'str':\n    return str(x)\n"
            "t = timeit.timeit(lambda: sum(range(10)), number=10) + timeit.timeit('1 + 1', number=10)\n"
            "print(typing.get_type_hints(f), pickle._loads(pickle.dumps({'a': [1, 2]})), "
            "copy.deepcopy({'b': (3,)}), heapq.nsmallest(1, ['bb', 'a'], key=len), "
            "operator.attrgetter('real')(5), t > 0)\n"
            "exec('print(sum(range(4)))')\n"
            # the code's threads may do what its main thread may
            "import threading, concurrent.futures as cf, json\nr = []\n"
            "def work(i):\n    with open(f'/tmp/f{i}', 'w') as f: f.write(json.dumps(i))\n"
            "    with open(f'/tmp/f{i}') as f: r.append(json.load(f))\n"
            "ts = [threading.Thread(target=work, args=(i,)) for i in range(3)]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\n"
            "with cf.ThreadPoolExecutor(2) as ex: print(sorted(r), list(ex.map(abs, [-1, 2])))\n")
    res = run_json("--allow", "exec", code=code)
    assert res["status"] == "ok", res
    assert res["stdout"] == ("{'x': <class 'int'>, 'return': <class 'str'>} {'a': [1, 2]} {'b': (3,)} "
                             "['a'] 5 True\n6\n[0, 1, 2] [1, 2]\n")


def test_the_workspace_runs_nothing_at_start_up(tmp_path):
    # python starts with -s: a user site (HOME is the working dir) in the
    # uploaded files is not read, its .pth and usercustomize never run.
    site = ".local/lib/python3.11/site-packages"
    files = {f"{site}/usercustomize.py": "import os; os.system('echo pwned-user')\n",
             f"{site}/x.pth": "import os; os.system('echo pwned-pth')\n",
             "sitecustomize.py": "import os; os.system('echo pwned-site')\n"}
    args = []
    for i, (name, text) in enumerate(files.items()):
        args += ["--file", f"{name}={write(tmp_path, f'f{i}', text)}"]
    for check in ([], ["--no-check"]):
        res = run_json(*args, *check, code="import sys\nprint('main', sys.flags.no_user_site)\n")
        assert res["status"] == "ok" and res["stdout"] == "main 1\n", res
    # nor can a request's environment make python load anything
    for var in ("PYTHONPATH=/work", "PYTHONSTARTUP=/work/x.py", "LD_PRELOAD=/work/x.so",
                "LD_LIBRARY_PATH=/work", "PYTHONUSERBASE=/work/.local"):
        p = saferun("run", "--profile", "host", *args, "--env", var, "-c", "print('main')")
        name = var.split("=")[0]
        assert p.returncode == 2, (var, p.stdout, p.stderr)
        assert f"environment variable {name}" in p.stderr.decode(), p.stderr
    # the policy's own value may be repeated
    p = saferun("run", "--profile", "host", "--env", "PYTHONUNBUFFERED=1", "-c", "print('main')")
    assert p.returncode == 0 and p.stdout == b"main\n", p.stderr


# Code the checker's tokenizer cannot read (SR001): Python rejects it too,
# and the run shows Python's own SyntaxError, as `python3 main.py` does.
SYNTAX_ERRORS = {
    "unterminated string": "print('abc\n",
    "unterminated triple-quoted string": 'x = 1\n"""never closed\n',
    "bad dedent": "def f():\n    return 1\n  x = 2\n",
    "never closed": "print('ran')\nx = (1,\n",
}


@pytest.mark.parametrize("src", SYNTAX_ERRORS.values(), ids=SYNTAX_ERRORS.keys())
def test_syntax_error_is_pythons_own_with_its_caret(tmp_path, src):
    script = write(tmp_path, "main.py", src)
    p = saferun("check", "--json", script)
    assert p.returncode == 1
    assert [f["rule"] for f in json.loads(p.stdout)["findings"]] == ["SR001"]
    # python3 main.py with the python of the same rootfs (the host profile
    # is the host's root), its path as the runner shows it
    exe = saferun("run", "--profile", "host", "-c", "import sys; print(sys.executable)")
    assert exe.returncode == 0, exe.stderr
    py = subprocess.run([exe.stdout.decode().strip(), "main.py"], cwd=tmp_path,
                        capture_output=True, timeout=60)
    want = py.stderr.decode().replace(f'File "{script}"', 'File "main.py"')
    assert py.returncode == 1 and "^" in want and "Error: " in want.splitlines()[-1], want
    p = saferun("run", "--profile", "host", script)
    assert (p.returncode, p.stdout, p.stderr.decode()) == (1, b"", want)
    p = saferun("run", "--json", "--profile", "host", script)
    res = json.loads(p.stdout)
    assert p.returncode == 1
    assert (res["status"], res["exit_code"], res["stdout"], res["stderr"], res["findings"]) == (
        "error", 1, "", want, [])
    assert res["message"] == "error: the code exited with status 1"


def test_syntax_error_on_the_warm_path_too(tmp_path):
    script = write(tmp_path, "main.py", SYNTAX_ERRORS["unterminated string"])
    cold = saferun("run", "--profile", "host", script)
    warm = saferun("run", "--warm", "--json", "--profile", "host", script)
    res = json.loads(warm.stdout)
    assert warm.returncode == 1 and cold.returncode == 1
    assert (res["status"], res["stderr"], res["findings"]) == ("error", cold.stderr.decode(), [])
    assert res["stderr"].endswith("SyntaxError: unterminated string literal (detected at line 1)\n")
