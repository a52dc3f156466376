"""Per-run requirements from a package index (docs/dependencies.md): pip's
sandbox reaches policy.dependencies.index_url through the egress network
mode, with the index's host and port as its only destination. The index is
a PEP 503 "simple" tree the test builds and serves with http.server from a
network namespace of its own (198.18.0.0/15, never a real address)."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import pytest

from conftest import ROOTFS_DIR, saferun
from egress_host import shared_problems
from simple_index import INDEX_PORT, OTHER_PORT, SimpleIndex, tools_missing
from wheels import build_wheel

DEPS_WS = "/run/saferun/deps"
SITE = "/usr/local/lib/python3.11/dist-packages"

pytestmark = [
    pytest.mark.skipif(
        not os.path.exists(os.path.join(ROOTFS_DIR, "minimal", "usr", "bin", "python3")),
        reason="needs the minimal profile (scripts/build-rootfs minimal)"),
    pytest.mark.host_only(reason="pip from an index over the egress network (the guest "
                          "has no nf_tables or veth); test_dependencies.py installs a layer "
                          "there"),
]


@pytest.fixture(scope="module")
def index():
    why = tools_missing()
    if why:
        pytest.skip(why)
    try:
        t = SimpleIndex(https=shutil.which("openssl") is not None)
    except subprocess.CalledProcessError as e:
        pytest.skip(f"cannot build the test network ({' '.join(e.cmd)}): {e.stderr}")
    yield t
    t.close()


@pytest.fixture
def place():
    d = tempfile.mkdtemp(prefix="saferun-index-test-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d)


def policy(place, **deps):
    spec = {"allow": ["*"], "cache": os.path.join(place, "cache")}
    spec.update(deps)
    path = os.path.join(place, f"policy-{len(os.listdir(place))}.json")
    with open(path, "w") as f:
        json.dump({"filesystem": {"profile": "minimal"}, "dependencies": spec}, f)
    return path


def run(pol, code, *reqs):
    args = ["run", "--json", "--no-check", "--policy", pol]
    for r in reqs:
        args += ["-r", r]
    p = saferun(*args, "-c", code, timeout=300)
    assert p.stdout, p.stderr.decode()
    return json.loads(p.stdout)


def leftovers(res):
    """What an install from the index may leave: its workspace, and the
    egress state pip's sandbox shared with every other (the host table,
    the forwarding record), read against its invariant under saferun's
    lock (egress_host.shared_problems: none of it while no sandbox link is
    on the host; another job's egress sandboxes may share the machine)."""
    left = [e for e in os.listdir(DEPS_WS) if e.startswith(res["id"])] \
        if os.path.isdir(DEPS_WS) else []
    return left + shared_problems()


def assert_nothing_left(res):
    for _ in range(50):
        left = leftovers(res)
        if not left:
            return
        time.sleep(0.2)
    assert left == []


# The run's own code, with network mode none: the index is out of reach.
PROBE = """
import errno, socket
s = socket.socket(); s.settimeout(3)
try:
    s.connect(({addr!r}, {port})); print('index reached')
except OSError as e:
    print('index:', errno.errorcode[e.errno])
"""


def test_installs_from_the_index_then_hits_the_cache(index, place):
    pol = policy(place, index_url=index.url)
    code = ("import tinytop, tinyleaf\nprint(tinytop.VERSION, tinyleaf.__file__)\n"
            + PROBE.format(addr=index.server, port=INDEX_PORT))
    res = run(pol, code, "tinytop")
    assert res["status"] == "ok", res["message"]
    assert res["stdout"] == f"2.0 {SITE}/tinyleaf/__init__.py\nindex: ENETUNREACH\n"
    d = res["dependencies"]
    assert d["installed"] == ["tinyleaf==1.0", "tinytop==2.0"]
    assert d["cached"] is False and d["install_ms"] > 0
    # the run kept its own network (none): the install's egress was pip's
    assert res.get("network", {}).get("mode", "none") == "none", res.get("network")
    assert_nothing_left(res)
    again = run(pol, code, "tinytop")
    assert again["status"] == "ok", again
    assert again["stdout"] == res["stdout"]
    assert again["dependencies"]["cached"] is True
    assert again["dependencies"]["install_ms"] == 0
    # the key holds the index URL: another index is another entry
    other = policy(place, index_url=index.url + "/")
    third = run(other, "import tinytop", "tinytop")
    assert third["status"] == "ok", third
    assert third["dependencies"]["cached"] is False
    assert len([e for e in os.listdir(os.path.join(place, "cache"))
                if not e.startswith(".")]) == 2


def test_a_package_the_index_lacks_is_pips_error(index, place):
    res = run(policy(place, index_url=index.url), "pass", "nosuchpkg")
    assert res["status"] == "error"
    assert res["message"] == ("error: dependencies: pip install failed: No matching "
                              "distribution found for nosuchpkg")
    assert_nothing_left(res)


def test_pips_sandbox_reaches_the_index_and_nothing_else(index, place):
    # farpkg's page links to the same server on another port; the file is
    # there (the host fetches it), but pip's sandbox may only reach the
    # index's host and port
    far = f"http://{index.server}:{OTHER_PORT}/files/farpkg-1.0-py3-none-any.whl"
    assert urllib.request.urlopen(far, timeout=5).status == 200
    res = run(policy(place, index_url=index.url), "pass", "farpkg")
    assert res["status"] == "error", res
    assert res["message"].startswith("error: dependencies: pip install failed: "), res
    assert res["message"].endswith(
        f"(its network refused: {index.server}:{OTHER_PORT}/tcp)"), res["message"]
    assert res["dependencies"]["installed"] == []
    assert_nothing_left(res)


def test_wheelhouse_and_index_together(index, place):
    # both sources: pip sees the wheelhouse's wheels next to the index's
    wh = os.path.join(place, "wheels")
    os.mkdir(wh, 0o755)
    build_wheel(wh, "onlyhere", "0.5")
    res = run(policy(place, index_url=index.url, wheelhouse=wh),
              "import onlyhere, tinyleaf\nprint(onlyhere.VERSION, tinyleaf.VERSION)",
              "onlyhere", "tinyleaf")
    assert res["status"] == "ok", res["message"]
    assert res["stdout"] == "0.5 1.0\n"
    assert res["dependencies"]["installed"] == ["onlyhere==0.5", "tinyleaf==1.0"]


def test_an_https_index_with_the_policys_ca(index, place):
    if not getattr(index, "tls_url", None):
        pytest.skip("no openssl to make the test's CA")
    res = run(policy(place, index_url=index.tls_url, index_ca=index.ca_pem),
              "import tinytop\nprint(tinytop.VERSION)", "tinytop")
    assert res["status"] == "ok", res["message"]
    assert res["stdout"] == "2.0\n"
    assert res["dependencies"]["installed"] == ["tinyleaf==1.0", "tinytop==2.0"]
    assert_nothing_left(res)
    # without it the rootfs's CA bundle does not know the test's CA: pip
    # finds nothing it may trust (no --trusted-host for https)
    res = run(policy(place, index_url=index.tls_url, cache=False), "pass", "tinyleaf")
    assert res["status"] == "error", res
    assert res["message"] == ("error: dependencies: pip install failed: No matching "
                              "distribution found for tinyleaf")


def test_index_ca_is_checked(index, place):
    p = saferun("run", "--no-check", "--policy",
                policy(place, index_url=index.url, index_ca="/etc/hostname"), "-r", "x",
                "-c", "pass")
    assert p.returncode == 2, p
    assert ("policy.dependencies.index_ca: needs an https:// policy.dependencies.index_url "
            "(it is the CA pip checks that index's certificate with)") in p.stderr.decode()
    missing = os.path.join(place, "no-such-ca.pem")
    res = run(policy(place, index_url="https://198.18.0.2/simple", index_ca=missing), "pass",
              "tinyleaf")
    assert res["status"] == "error"
    assert res["message"] == (f"error: dependencies: policy.dependencies.index_ca {missing} "
                              "is not a file the sandbox can read (every dir above it needs "
                              "o+x, it needs o+r)")


@pytest.mark.parametrize("url,msg", [
    ("https://user:secret@pypi.org/simple",
     "policy.dependencies.index_url: holds credentials (user:password@...): refused, they "
     "would end up in logs and results; use an index that needs none"),
    ("ftp://pypi.org/simple",
     'policy.dependencies.index_url: "ftp://pypi.org/simple" is not an index URL '
     '(http:// or https://, no spaces, e.g. "https://pypi.org/simple")'),
    ("http://pypi.org:99999/simple",
     'policy.dependencies.index_url: "http://pypi.org:99999/simple" has a port that is '
     'not 1 to 65535'),
])
def test_a_bad_index_url_is_refused(place, url, msg):
    p = saferun("run", "--no-check", "--policy", policy(place, index_url=url), "-r", "x",
                "-c", "pass")
    assert p.returncode == 2, p
    assert msg in p.stderr.decode()
    assert "secret" not in p.stderr.decode() + p.stdout.decode()


def test_an_index_host_that_does_not_resolve(place):
    res = saferun("run", "--no-check", "--policy",
                  policy(place, index_url="http://no-such-host.invalid/simple"),
                  "-r", "tinyleaf", "-c", "pass", timeout=120)
    assert res.returncode == 2, res
    assert (b'policy.dependencies.index_url: host "no-such-host.invalid" does not resolve'
            in res.stderr), res.stderr
