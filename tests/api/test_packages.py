"""GET /v1/packages, GET /packages and GET /: what a client may import and
what the server serves. The oracle for a profile's packages is that
profile's own python3 (importlib.metadata over its dist-packages dirs)."""
import json
import os
import re
import shutil
import subprocess

import pytest

ROOTFS = "/var/lib/saferun/rootfs"
# What the profile's python3 itself reports: first of each name in its
# sys.path order, as [name, version] sorted like the daemon sorts.
ORACLE = r"""
import importlib.metadata as m, json, re, sys
key = lambda n: re.sub(r"[-_.]+", "-", n).lower()
seen = {}
for d in m.distributions(path=[p for p in sys.path if p.endswith("dist-packages")]):
    seen.setdefault(key(d.metadata["Name"]), [d.metadata["Name"], d.version])
print(json.dumps([seen[k] for k in sorted(seen)]))
"""


def key(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def oracle(profile):
    cmd = ["/usr/bin/python3", "-I", "-c", ORACLE]
    if profile != "host":
        cmd = ["chroot", os.path.join(ROOTFS, profile)] + cmd
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def built(profile):
    return os.access(os.path.join(ROOTFS, profile, "usr/bin/python3"), os.X_OK)


def packages(daemon):
    r = daemon.get("/v1/packages")
    assert r.status_code == 200, r.text
    return r.json()


def test_host_profile_lists_what_host_python_imports(daemon):
    body = packages(daemon)
    assert set(body) == {"profile", "languages", "packages", "count"}
    assert body["profile"] == "host"
    got = [[p["name"], p["version"]] for p in body["packages"]]
    assert got == oracle("host")
    assert body["count"] == len(got) > 0
    by_key = {key(n): v for n, v in got}
    # the Debian packages behind two of them: same upstream version
    for deb, name in (("python3-requests", "requests"), ("python3-urllib3", "urllib3")):
        p = subprocess.run(["dpkg-query", "-W", "-f=${Version}", deb], capture_output=True,
                           text=True)
        if p.returncode == 0:  # "2.28.1+dfsg-1" for 2.28.1, an epoch "1:" before it
            assert re.match(r"(\d+:)?" + re.escape(by_key[name]) + r"[-+~]", p.stdout), \
                (deb, p.stdout, by_key[name])


def test_names_route_is_the_same_list_names_only(daemon):
    full = packages(daemon)
    r = daemon.get("/packages")
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"packages", "count"}
    assert body["packages"] == [p["name"] for p in full["packages"]]
    assert body["count"] == len(body["packages"])
    assert body["packages"] == sorted(body["packages"], key=key)
    assert len({key(n) for n in body["packages"]}) == len(body["packages"])


@pytest.mark.skipif(not built("minimal"), reason="the minimal rootfs is not built "
                    "(scripts/test builds it; or: saferun rootfs build minimal)")
def test_minimal_profile_lists_its_own_packages(make_daemon):
    d = make_daemon(policies={"default": {"filesystem": {"profile": "minimal"}}})
    body = packages(d)
    assert body["profile"] == "minimal"
    assert [[p["name"], p["version"]] for p in body["packages"]] == oracle("minimal")
    assert body["count"] == len(body["packages"])


@pytest.mark.skipif(not built("datascience"), reason="the datascience rootfs is not built "
                    "here (saferun rootfs build datascience); scripts/test builds only minimal")
def test_datascience_profile_has_the_data_stack_with_versions(make_daemon):
    d = make_daemon(policies={"default": {"filesystem": {"profile": "datascience"}}})
    body = packages(d)
    assert body["profile"] == "datascience"
    got = {key(p["name"]): p["version"] for p in body["packages"]}
    want = {key(n): v for n, v in oracle("datascience")}
    for name in ("numpy", "pandas", "matplotlib"):
        assert got[name] == want[name], name
        assert re.match(r"^\d+\.\d+", got[name]), got[name]
    assert got == want


def test_profile_not_built_is_500_saying_how_to_build_it(make_daemon, tmp_path):
    d = make_daemon("--rootfs-dir", str(tmp_path),
                    policies={"default": {"filesystem": {"profile": "minimal"}}})
    for path in ("/v1/packages", "/packages"):
        r = d.get(path)
        assert r.status_code == 500
        assert "saferun rootfs build minimal" in r.json()["detail"]
        assert str(tmp_path) in r.json()["detail"]


def write(path, text, mode="w"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, mode) as f:
        f.write(text)


def meta(name, version, extra=""):
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{extra}\nlong description\n"


@pytest.fixture
def fake_rootfs(tmp_path):
    """A profile "fake" with every form of metadata in the three places."""
    root = tmp_path / "fake"
    dist = str(root / "usr/lib/python3/dist-packages")
    local = str(root / "usr/local/lib/python3.11/dist-packages")
    write(f"{dist}/alpha-1.0.dist-info/METADATA", meta("Alpha", "1.0"))
    write(f"{dist}/beta-2.0.egg-info/PKG-INFO", meta("beta", "2.0"))
    write(f"{dist}/gamma-3.0-py3.11.egg-info", meta("gamma", "3.0"))           # a file
    write(f"{dist}/Delta_Pkg-4.0.dist-info/METADATA", meta("Delta_Pkg", "4.0"))
    write(f"{dist}/delta.pkg-9.dist-info/METADATA", meta("delta.pkg", "9"))  # same name
    write(f"{local}/alpha-1.5.dist-info/METADATA", meta("alpha", "1.5"))      # wins: first
    write(f"{dist}/nameless-5.1.dist-info/METADATA", "Metadata-Version: 2.1\n\nName: x\n")
    write(f"{dist}/bad-6.dist-info/METADATA", meta("bad\"name\u00e9", "6 .0"))
    write(f"{dist}/late-7.dist-info/METADATA",
          "Metadata-Version: 2.1\n" + "Summary: s\n" * 60 + "Name: late\nVersion: 7\n")
    write(f"{dist}/big-8.dist-info/METADATA", meta("big", "8") + "x" * (1 << 20))
    write(f"{dist}/binary-1.dist-info/METADATA", b"\xff\xfe\x00Name: \xe9\n", mode="wb")
    os.makedirs(f"{dist}/empty-0.1.dist-info")
    os.mkfifo(f"{dist}/fifo-1.egg-info")
    write(str(tmp_path / "secret"), meta("secret", "1"))
    os.makedirs(f"{dist}/linked-1.dist-info")
    os.symlink(str(tmp_path / "secret"), f"{dist}/linked-1.dist-info/METADATA")
    write(f"{dist}/numpy/__init__.py", "")                                    # not metadata
    write(str(root / "usr/lib/python3.11/argparse-1.0.dist-info/METADATA"),   # stdlib dir
          meta("stdlibthing", "1"))
    return tmp_path


def test_every_metadata_form_is_read_and_odd_ones_are_safe(make_daemon, fake_rootfs):
    d = make_daemon("--rootfs-dir", str(fake_rootfs),
                    policies={"default": {"filesystem": {"profile": "fake"}}})
    got = [[p["name"], p["version"]] for p in packages(d)["packages"]]
    assert got == [
        ["alpha", "1.5"],        # /usr/local first, as python3 imports it
        ["bad", "6"],            # metadata refused: the dir name says
        ["beta", "2.0"],         # egg-info dir
        ["big", "8"],            # long file: the headers are at the top
        ["binary", "1"],         # not text: the dir name says
        ["Delta_Pkg", "4.0"],    # delta.pkg is the same name
        ["empty", "0.1"],        # no METADATA: the dir name says
        ["fifo", "1"],           # not read (a fifo would block)
        ["gamma", "3.0"],        # egg-info file
        ["late", "7"],           # past the header lines: the dir name says
        ["linked", "1"],         # a symlinked METADATA is not followed
        ["nameless", "5.1"],     # the header block ends at the blank line
    ]


def test_list_follows_packages_added_and_removed(make_daemon, fake_rootfs):
    d = make_daemon("--rootfs-dir", str(fake_rootfs),
                    policies={"default": {"filesystem": {"profile": "fake"}}})
    dist = fake_rootfs / "fake/usr/lib/python3/dist-packages"
    before = [p["name"] for p in packages(d)["packages"]]
    assert "zeta" not in before
    write(str(dist / "zeta-1.0.dist-info/METADATA"), meta("zeta", "1.0"))
    shutil.rmtree(dist / "beta-2.0.egg-info")
    after = [p["name"] for p in packages(d)["packages"]]
    assert after == sorted(set(before) - {"beta"} | {"zeta"}, key=key)
    # a new python3.X dir under /usr/local/lib is seen too
    write(str(fake_rootfs / "fake/usr/local/lib/python3.12/dist-packages/eta-1.dist-info/METADATA"),
          meta("eta", "1"))
    assert "eta" in [p["name"] for p in packages(d)["packages"]]


def test_root_names_the_service_and_every_route(daemon):
    r = daemon.get("/")
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"service", "version", "endpoints", "docs"}
    assert body["service"] == "saferund"
    assert body["version"] == daemon.get("/health").json()["version"]
    assert body["docs"] == "/v1/openapi.json"
    for want in ("POST /v1/run", "GET /health", "GET /v1/health", "GET /v1/packages",
                 "GET /packages", "GET /", "GET /metrics", "GET /v1/openapi.json"):
        assert want in body["endpoints"], want
    # every route it names is documented ("{x*}" is "{x}" in OpenAPI)
    doc = daemon.get("/v1/openapi.json").json()
    for line in body["endpoints"]:
        method, path = line.split(" ", 1)
        path = re.sub(r"\{(\w+)\*\}", r"{\1}", path)
        assert method.lower() in doc["paths"].get(path, {}), line


def test_agentrunplus_client_flow(daemon):
    """What an AgentRunPlus client checks: the root, health, packages."""
    root = daemon.get("/").json()
    assert root["service"] and root["endpoints"]
    health = daemon.get("/health").json()
    assert health["status"] == "healthy"
    assert isinstance(health["active_sessions"], int) and health["protocols"]
    names = daemon.get("/packages").json()
    assert isinstance(names["packages"], list) and names["count"] == len(names["packages"])
    assert "requests" in names["packages"]
