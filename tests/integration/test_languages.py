"""JavaScript and bash on the same kernel layers (docs/languages.md).

Neither language has a checker or a guard: these runs are bounded by the
namespaces, cgroup, seccomp filter and read-only root alone, so each
language gets the containment set in one program where it can: identity,
filesystem, processes, network, limits. JavaScript runs on the host
profile (node comes from CI's bootstrap; the node rootfs is built on
demand, docs/testing.md), bash on minimal (Debian's essential set)."""
import json
import os
import socket
import tempfile

import pytest

from conftest import ROOTFS_DIR, SAFERUN, WARM, profiles, saferun

BASH_PROFILE = "minimal" if "minimal" in profiles() else "host"

pytestmark = pytest.mark.skipif(WARM, reason="the warm path is Python's: other languages "
                                "run cold (runtime/lib/run/warm.c unfit)")
# JavaScript runs on the host profile, whose node the VM guest does not have
# (tests/vm/guest.txt); bash's tests run there too and prove the same layers
# on cgroup v2.
HOST_NODE = pytest.mark.host_only(reason="node runs on the host profile; the VM guest has no "
                                  "node (the bash tests cover the kernel layers there)")


def script(name, text, *args, stdin=None):
    """saferun run --json on a file whose extension picks the language."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(text)
        extra = []
        if stdin is not None:
            extra = ["--stdin", os.path.join(d, "stdin")]
            with open(extra[1], "w") as f:
                f.write(stdin)
        p = saferun("run", "--json", *extra, *args, path)
    assert p.stdout, f"no JSON (exit {p.returncode}): {p.stderr.decode()}"
    res = json.loads(p.stdout)
    res["_exit"] = p.returncode
    return res


@pytest.fixture
def listener():
    """A host TCP listener on 127.0.0.1: the sandbox's own lo must not reach it."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    yield s.getsockname()[1]
    s.close()


JS_CONTAINMENT = r"""
const fs = require('fs'), cp = require('child_process'), net = require('net');
const out = {};
const status = fs.readFileSync('/proc/self/status', 'utf8');
out.uid = process.getuid();
out.capeff = /CapEff:\s*(\w+)/.exec(status)[1];
out.nnp = /NoNewPrivs:\s*(\d)/.exec(status)[1];
out.hostname = require('os').hostname();
try { fs.writeFileSync('/usr/x', '1'); out.rootfs = 'written'; } catch (e) { out.rootfs = e.code; }
try { fs.readFileSync('/etc/shadow'); out.shadow = 'read'; } catch (e) { out.shadow = e.code; }
fs.writeFileSync('out.txt', 'w');
out.stdin = fs.readFileSync(0, 'utf8');
out.file = fs.readFileSync('data/in.txt', 'utf8');
try { cp.execFileSync(process.env.HOST_BIN, ['info']); out.host_bin = 'ran'; }
catch (e) { out.host_bin = e.code; }
out.child = cp.execSync('id -u; cat /proc/1/comm /proc/self/comm').toString().trim();
const c = net.connect(Number(process.env.PORT), '127.0.0.1');
c.on('connect', () => { out.tcp = 'connected'; done(); });
c.on('error', (e) => { out.tcp = e.code; done(); });
function done() { console.log(JSON.stringify(out)); process.exitCode = 7; }
"""


@HOST_NODE
def test_javascript_is_contained_by_the_kernel_layers(listener):
    res = script("main.js", JS_CONTAINMENT, "--profile", "host", "--env", f"PORT={listener}",
                 "--env", f"HOST_BIN={os.path.abspath(SAFERUN)}",
                 "--file", f"data/in.txt={__file__}", stdin="from stdin")
    assert res["status"] == "error" and res["exit_code"] == 7 and res["_exit"] == 7, res
    got = json.loads(res["stdout"])
    assert got["uid"] == 1000 and got["capeff"] == "0000000000000000" and got["nnp"] == "1"
    assert got["hostname"] == "sandbox"
    assert got["rootfs"] == "EROFS"
    assert got["shadow"] in ("ENOENT", "EACCES")
    assert got["stdin"] == "from stdin"
    assert got["file"].startswith('"""JavaScript and bash')
    # what exists only on the host cannot be run; what runs is the sandbox's
    assert got["host_bin"] == "ENOENT"
    assert got["child"].split() == ["1000", "saferun-init", "cat"]
    assert got["tcp"] == "ECONNREFUSED"  # the sandbox's own lo, not the host's


@HOST_NODE
def test_javascript_errors_are_nodes_own():
    res = script("main.js", "function f() {\n  undefinedThing();\n}\nf();\n", "--profile", "host")
    assert res["status"] == "error" and res["exit_code"] == 1
    assert "ReferenceError: undefinedThing is not defined" in res["stderr"]
    assert "at f (/work/main.js:2:3)" in res["stderr"]


@HOST_NODE
def test_node_memory_bomb_is_oom_and_loop_is_timeout():
    res = script("main.js", "const a = []; for (;;) a.push('x'.repeat(1 << 20) + Math.random());",
                 "--profile", "host", "--memory", "48M")
    assert res["status"] == "oom" and "memory" in res["limits_hit"], res
    res = script("main.js", "for (;;) {}", "--profile", "host", "--timeout", "1")
    assert res["status"] == "timeout", res


@HOST_NODE
def test_node_child_process_bomb_hits_pids():
    code = ("const cp = require('child_process');\n"
            "for (let i = 0; i < 64; i++)\n"
            "  cp.spawn('sleep', ['30']).on('error', (e) => {\n"
            "    console.log(e.code); process.exit(1); });\n")
    res = script("main.js", code, "--profile", "host", "--pids", "16")
    assert res["status"] == "pids" and res["stdout"].startswith("EAGAIN"), res


def test_bash_is_contained_by_the_kernel_layers(listener):
    code = f"""
id -u; grep CapEff /proc/self/status | tr -d '\\t'
touch /usr/x 2>&1 | sed 's/.*: //'
cat /etc/shadow 2>&1 | sed 's/.*: //'
( exec 3<>/dev/tcp/127.0.0.1/{listener} ) 2>&1 | tail -n 1 | sed 's/.*: //'
read line; echo "stdin: $line"
cat data/in.txt | head -c 4; echo
exit 5
"""
    res = script("main.sh", code, "--profile", BASH_PROFILE,
                 "--file", f"data/in.txt={__file__}", stdin="typed\n")
    assert res["status"] == "error" and res["exit_code"] == 5 and res["_exit"] == 5, res
    assert res["stdout"].splitlines() == [
        "1000", "CapEff:0000000000000000", "Read-only file system",
        "No such file or directory", "Connection refused", "stdin: typed", '"""J']


def test_bash_fork_bomb_is_held_by_the_pids_limit():
    # bash retries a fork that fails with EAGAIN for ~15 s before it gives
    # up, so its bomb ends by the wall clock; the pids limit held it.
    res = script("main.sh", "bomb() { bomb & bomb; }\nbomb\n", "--profile", BASH_PROFILE,
                 "--pids", "24", "--timeout", "2")
    assert res["status"] == "timeout" and "pids" in res["limits_hit"], res
    assert "fork: retry: Resource temporarily unavailable" in res["stderr"]


def test_a_language_the_profile_lacks_is_exit_2_naming_both():
    if "minimal" not in profiles():
        pytest.skip("needs the minimal rootfs (it has no node)")
    p = saferun("run", "--profile", "minimal", "--language", "javascript", "-c", "1")
    assert p.returncode == 2 and p.stdout == b""
    msg = p.stderr.decode()
    assert 'profile "minimal" has no javascript' in msg and "/usr/bin/node" in msg
    p = saferun("run", "--language", "ruby", "-c", "1")
    assert p.returncode == 2 and b'--language: "ruby"' in p.stderr
    # --language wins over the extension; the checker is Python's only
    res = script("main.js", "echo $((6 * 7))", "--profile", BASH_PROFILE, "--language", "bash")
    assert res["status"] == "ok" and res["stdout"] == "42\n"


@HOST_NODE
def test_warm_takes_the_languages_own_warm_path():
    """`--warm` with JavaScript: a node sandbox started for the run and
    handed the code as a pooled one is (docs/languages.md), node's own main
    module, exit code and uid; bash has no warm path: exit 2 naming it,
    nothing ran."""
    res = script("main.js", "console.log(process.argv.slice(1).join(), require.main === module,\n"
                 "  process.getuid(), process.execArgv.length); process.exitCode = 3",
                 "--warm", "--profile", "host")
    assert (res["status"], res["exit_code"], res["_exit"], res["path"], res["stdout"]) == \
        ("error", 3, 3, "warm", "/work/main.js true 1000 0\n"), res
    p = saferun("run", "--warm", "--profile", BASH_PROFILE, "--language", "bash", "-c",
                "echo ran")
    assert p.returncode == 2 and p.stdout == b"", p
    assert p.stderr.startswith(b"saferun: --warm: the code is bash, which has no warm path"), p


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOTFS_DIR, "node", "usr", "bin", "node")),
                    reason="the node rootfs is built on demand (scripts/build-rootfs node)")
def test_node_profile_runs_javascript():
    res = script("main.js", "console.log(process.version.startsWith('v'))", "--profile", "node")
    assert res["status"] == "ok" and res["stdout"] == "true\n", res
