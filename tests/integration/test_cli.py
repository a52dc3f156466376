"""The CLI: python3-like output, exit codes, and bad input that runs nothing."""
import json
import os
import re
import subprocess
import time

import pytest

from conftest import SAFERUN, leftover_groups, saferun
from sandbox_host import host_leftovers, leftovers_since

POLICIES = os.path.join(os.path.dirname(__file__), "..", "..", "policies")


def test_output_and_traceback_look_like_python(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("import sys\nprint('out')\nprint('err', file=sys.stderr)\n"
                      "def f():\n    return 1/0\nf()\n")
    p = saferun("run", "--profile", "host", str(script))
    assert p.returncode == 1
    assert p.stdout == b"out\n"
    err = p.stderr.decode()
    assert err.startswith("err\nTraceback (most recent call last):\n")
    assert '  File "main.py", line 6, in <module>\n' in err
    assert '  File "main.py", line 5, in f\n' in err
    assert err.endswith("ZeroDivisionError: division by zero\n")
    assert "saferun:" not in err  # an ordinary error needs no explanation


def test_exit_code_passes_through():
    assert saferun("run", "--profile", "host", "-c", "raise SystemExit(7)").returncode == 7
    assert saferun("run", "--profile", "host", "-c", "pass").returncode == 0


def test_code_from_stdin_and_stdin_file(tmp_path):
    data = tmp_path / "in.txt"
    data.write_text("hello from stdin\n")
    p = saferun("run", "--profile", "host", "--stdin", str(data), "-",
                input=b"import sys; print(sys.stdin.read().upper(), end='')")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"HELLO FROM STDIN\n"


def test_files_and_env_reach_the_code(tmp_path):
    csv = tmp_path / "data.csv"
    csv.write_text("a,b\n1,2\n")
    p = saferun("run", "--profile", "host", "--file", f"data/in.csv={csv}", "--env", "GREETING=hi",
                "-c", "import os; print(open('data/in.csv').read().split()[1], os.environ['GREETING'],"
                " os.getcwd())")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"1,2 hi /work\n"


def test_non_ok_status_is_explained_in_one_line():
    p = saferun("run", "--profile", "host", "--timeout", "0.5", "-c", "while True: pass")
    assert p.returncode == 124
    assert p.stderr.decode().splitlines() == [
        "saferun: timeout: the run passed its wall-clock limit of 0.5 s"]


def test_json_result_has_every_documented_field():
    p = saferun("run", "--json", "--profile", "host", "-c", "print('a')\nimport sys; sys.stderr.write('b\\n')")
    res = json.loads(p.stdout)
    assert set(res) >= {"id", "status", "exit_code", "signal", "stdout", "stderr", "output",
                        "truncated", "duration_ms", "cpu_ms", "peak_memory_bytes", "limits",
                        "limits_hit", "cgroup_mode"}
    assert res["output"] == "a\nb\n"
    assert res["cgroup_mode"] in ("v1", "v2", "hybrid")
    assert res["limits"] == {"wall_time_ms": 20000, "cpus": 1, "memory_bytes": 512 << 20,
                             "swap_bytes": 0, "pids": 64, "tmpfs_bytes": 64 << 20,
                             "output_bytes": 1 << 20, "open_files": 256}


def test_info_reports_the_host():
    p = saferun("info")
    info = json.loads(p.stdout)
    assert info["cgroup_mode"] in ("v1", "v2", "hybrid")
    assert "memory" in info["controllers"] and "pids" in info["controllers"]
    assert info["seccomp"] is True and info["user_namespaces"] is True
    assert "host" in info["profiles"]


BAD = [
    (["run", "/nonexistent/job.py"], "cannot read script /nonexistent/job.py"),
    (["run", "--profile", "nosuch", "-c", "pass"], "rootfs profile \"nosuch\" is not built"),
    (["run", "--memory", "12Q", "-c", "pass"], "--memory: \"12Q\" is not a size"),
    (["run", "--cpus", "0", "-c", "pass"], "--cpus: \"0\" is not a CPU share"),
    (["run", "--profile", "host", "--file", "../x=/etc/hostname", "-c", "pass"],
     "file name \"../x\""),
    (["run", "--bogus", "-c", "pass"], "unknown or incomplete option"),
    (["run"], "give a SCRIPT, -c CODE or -"),
    (["frobnicate"], "unknown command"),
]


def left_behind(groups_before, host_before, grace=5.0):
    """Cgroups and host entries (host_leftovers) that appeared since the
    snapshots and stay. Other saferun runs on the machine (a concurrent test
    run) have groups and mounts of their own for a while: a group with
    processes in it is theirs, and anything else they made goes within the
    grace period. What a refused run left stays: it is reported."""
    deadline = time.monotonic() + grace
    while True:
        groups = sorted(g for g in set(leftover_groups()) - groups_before
                        if os.path.isdir(g) and not open(f"{g}/cgroup.procs").read())
        host = leftovers_since(host_before)
        if (not groups and not host) or time.monotonic() > deadline:
            return groups, host
        time.sleep(0.1)


def refused(run, message):
    """Bad input: exit 2, nothing on stdout, one line on stderr that holds
    message, and nothing left behind (no cgroup, mount, temp dir or file).
    run() starts saferun and returns its CompletedProcess. Returns the line."""
    groups_before, host_before = set(leftover_groups()), host_leftovers()
    p = run()
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert p.stdout == b""
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), err
    assert lines[0].startswith("saferun: ") and message in lines[0], err
    assert left_behind(groups_before, host_before) == ([], {})
    return lines[0]


@pytest.mark.parametrize("args,message", BAD)
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(args, message):
    refused(lambda: saferun(*args), message)


def test_bad_policy_names_the_field(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"limits": {"memory": "512X"}}')
    line = refused(lambda: saferun("run", "--policy", str(bad), "-c", "pass"),
                   "policy.limits.memory")
    assert line == (f'saferun: {bad}: policy.limits.memory: "512X" is not a size '
                    "(use 512M, 1G, or bytes)")


def test_code_that_is_not_utf8_is_refused(tmp_path):
    script = tmp_path / "latin1.py"
    script.write_bytes(b"print('caf\xe9')\n")
    refused(lambda: saferun("run", "--profile", "host", str(script)), "not valid UTF-8")


def test_script_over_the_size_cap_is_refused(tmp_path):
    script = tmp_path / "huge.py"
    script.write_bytes(b"#" * (5 << 20))
    line = refused(lambda: saferun("run", "--profile", "host", str(script)), "cap")
    assert line.startswith(f"saferun: script {script} is over the ") and \
        line.endswith(" byte cap"), line


def test_unreadable_rootfs_is_refused(tmp_path):
    (tmp_path / "broken").mkdir()
    refused(lambda: saferun("run", "--rootfs-dir", str(tmp_path), "--profile", "broken",
                            "-c", "pass"),
            "has no usable /usr/bin/python3")


def test_without_root_it_refuses():
    refused(lambda: subprocess.run(
        ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
         SAFERUN, "run", "--profile", "host", "-c", "pass"], capture_output=True),
        "must run as root")


def test_without_user_namespaces_it_refuses():
    knob = "/proc/sys/user/max_user_namespaces"
    old = open(knob).read()
    if not os.access(knob, os.W_OK) or subprocess.run(
            ["sh", "-c", f"echo {old.strip()} > {knob}"]).returncode != 0:
        pytest.skip(f"{knob} is read-only here (the machine's own sandbox), so user "
                    "namespaces cannot be switched off for the test")

    def without_userns():
        try:
            open(knob, "w").write("0")
            return saferun("run", "--profile", "host", "-c", "pass")
        finally:
            open(knob, "w").write(old)
    refused(without_userns, "user namespaces are disabled")


def test_policy_check_accepts_a_valid_file_and_prints_the_effective_policy():
    path = os.path.join(os.path.dirname(__file__), "policies", "swap256m.json")
    p = saferun("policy", "check", path)
    assert p.returncode == 0, p.stderr
    assert p.stderr == b""
    first, rest = p.stdout.decode().split("\n", 1)
    assert first == f"ok: {path}"
    effective = json.loads(rest)
    assert effective["limits"]["swap"] == 256 << 20  # from the file
    assert effective["limits"]["memory"] == 512 << 20  # the default, filled in
    shipped = os.path.join(POLICIES, "default.json")
    p = saferun("policy", "check", shipped)
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode().startswith(f"ok: {shipped}\n")


@pytest.mark.parametrize("doc,line", [
    # unknown key: the list of known keys goes on (it grows with the policy)
    ('{"limits": {"foo": 1}}',
     "policy.limits.foo: unknown key (known: wall_time, cpus, memory, swap, pids, tmpfs, ..."),
    # wrong type
    ('{"limits": []}', "policy.limits: expected an object, got []"),
    ('{"environment": {"A": 1}}', "policy.environment.A: expected a string, got 1"),
    ('{"limits": {"pids": "many"}}', 'policy.limits.pids: "many" is not a whole number'),
])
def test_policy_check_names_the_json_path_of_a_bad_value(tmp_path, doc, line):
    path = tmp_path / "p.json"
    path.write_text(doc)
    expected = f"saferun: {path}: {line}"
    got = refused(lambda: saferun("policy", "check", str(path)), line.removesuffix("..."))
    if expected.endswith("..."):
        assert got.startswith(expected[:-3]) and got.endswith(")"), got
    else:
        assert got == expected


@pytest.mark.parametrize("args", [["policy", "check"], ["policy", "lint", "x.json"],
                                  ["policy", "check", "a.json", "b.json"]])
def test_policy_check_usage(args):
    assert refused(lambda: saferun(*args), "usage") == \
        "saferun: usage: saferun policy check FILE"


def test_policy_check_of_a_missing_file(tmp_path):
    path = tmp_path / "nope.json"
    assert refused(lambda: saferun("policy", "check", str(path)), "nope.json") == \
        f"saferun: open policy {path}: No such file or directory"


def test_output_that_is_not_utf8_stays_valid_json():
    p = saferun("run", "--json", "--profile", "host", "-c",
                "import os; os.write(1, b'ok \\xff\\xfe end\\n'); os.write(2, b'\\x00bin')")
    res = json.loads(p.stdout)  # would raise on invalid UTF-8 or a raw NUL
    assert res["stdout"] == "ok \ufffd\ufffd end\n"
    assert res["stderr"] == "\ufffdbin"


def test_plain_output_passes_bytes_through_unchanged():
    p = saferun("run", "--profile", "host", "-c", "import os; os.write(1, bytes(range(256)))")
    assert p.returncode == 0
    assert p.stdout == bytes(range(256))


def test_a_policy_that_refuses_execveat_still_runs_cold(tmp_path):
    """Pid 1 of a cold sandbox execs the small static init with execveat;
    a policy whose seccomp filter refuses it keeps pid 1 as it was (a copy
    of saferun that waits for python) and the run is unaffected."""
    with open(os.path.join(POLICIES, "default.json")) as f:
        policy = json.load(f)
    rules = policy["seccomp"]["syscalls"]
    for r in rules:
        if "execveat" in r["names"]:
            r["names"].remove("execveat")
    path = tmp_path / "no-execveat.json"
    path.write_text(json.dumps(policy))
    p = saferun("run", "--json", "--no-check", "--profile", "host", "--policy", str(path), "-c",
                "import os\nprint(os.readlink('/proc/self/exe'), open('/proc/1/comm').read())")
    res = json.loads(p.stdout)
    assert (res["status"], res["path"]) == ("ok", "cold"), res
    assert res["stdout"].split() == [os.path.realpath("/usr/bin/python3"), "saferun-init"]
    assert leftover_groups() == []


DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "cli.md")
OPTION = r"(?<![\w-])(--?[a-zA-Z][\w-]*)"


def documented_options():
    """{section heading: options} from docs/cli.md's code: what a user reads
    there is what --help has to say (the result's section documents JSON,
    and its `-u` is Python's)."""
    sections = re.split(r"^## ", open(DOC).read(), flags=re.M)
    found = {}
    for i, sec in enumerate(sections):
        head = sec.splitlines()[0] if i else "synopsis"
        if head.startswith("The result"):
            continue
        spans = re.findall(r"```.*?```|`[^`\n]+`", sec, re.S)
        found[head] = {o for s in spans for o in re.findall(OPTION, s)}
    return found


def helps(*args):
    p = subprocess.run([*args, "--help"], capture_output=True, timeout=30)
    assert (p.returncode, p.stderr) == (0, b""), (args, p)
    return p.stdout.decode()


@pytest.mark.host_only(reason="--help does not depend on the cgroup version")
def test_every_documented_option_is_in_help():
    saferund = os.path.join(os.path.dirname(SAFERUN), "saferund")
    text = {"saferun": helps(SAFERUN), "saferund": helps(saferund)}
    assert text["saferun"].startswith("usage: saferun run ")
    assert text["saferund"].startswith("usage: saferund ")
    missing = []
    for head, opts in documented_options().items():
        # `saferun mcp` passes saferund's options on: they are in saferund --help
        prog = "saferund" if head.startswith("`saferun mcp") else "saferun"
        missing += [(head, o) for o in sorted(opts)
                    if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", text[prog])]
    assert not missing, "documented in docs/cli.md, not in --help: " + repr(missing)


@pytest.mark.host_only(reason="--help does not depend on the cgroup version")
def test_every_command_answers_help():
    synopsis = re.search(r"```\n(.*?)```", open(DOC).read(), re.S).group(1)
    commands = {m for m in re.findall(r"^saferun ([a-z]+)", synopsis, re.M)}
    assert commands >= {"run", "check", "policy", "info", "rootfs", "mcp"}, commands
    for cmd in sorted(commands):
        out = helps(SAFERUN, cmd)
        assert out.startswith(f"usage: saferun {cmd}"), (cmd, out)
    # an option before it does not hide it; nothing runs
    assert helps(SAFERUN, "run", "--json").startswith("usage: saferun run ")
    assert helps(SAFERUN, "policy", "check").startswith("usage: saferun policy ")
