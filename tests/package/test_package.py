"""The .deb packages work from their installed files alone.

CPack builds the three packages from this build dir (cmake/packaging.cmake:
saferun, libsaferun0, libsaferun-dev), apt installs them with nothing but
their Depends into a fresh Debian rootfs (mmdebstrap, variant essential, from
the host's own APT sources), plus gcc and pkg-config for the embedding check.
Inside it, with nothing of the source or build tree reachable, saferun runs a
sandbox on the host profile (the rootfs's own /usr), finds its policies and
its rootfs profiles and scripts where they were installed, and
docs/examples/embed.c, as installed, builds with `pkg-config --cflags --libs
saferun` and runs a sandbox through libsaferun.so.0.

The rootfs is entered by pivot_root in a mount namespace of its own, not by
chroot: a chrooted process may not create a user namespace (clone(2), EPERM),
and every sandbox starts with one. Its /proc, /sys and /dev are the host's
(the sandbox needs the host's cgroups); the mounts die with the namespace.
Nothing is cached across runs; the time is mostly mmdebstrap (about 75 s of CPU).
"""
import os
import shutil
import subprocess
import tempfile

import pytest

BUILD = os.environ["SAFERUN_BUILD_DIR"]
SOURCE = os.environ["SAFERUN_SOURCE_DIR"]
HOOKS = "/usr/share/mmdebstrap/hooks"

# Enter the rootfs ($1) and run the rest of the arguments there as root.
ENTER = r"""
set -eu
root=$1; shift
mount --bind "$root" "$root"
mount --rbind /proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mkdir -p "$root/.host"
cd "$root"
pivot_root . .host
exec /bin/sh -c 'umount -l /.host && rmdir /.host && cd / && exec "$@"' sh "$@"
"""


def cmake_cache(key):
    with open(os.path.join(BUILD, "CMakeCache.txt"), encoding="utf-8") as f:
        for line in f:
            if line.startswith(key + ":"):
                return line.split("=", 1)[1].strip()
    raise KeyError(key)


PREFIX = cmake_cache("CMAKE_INSTALL_PREFIX")


def host_apt():
    """The host's suite, APT sources (deb822) and --aptopt options, as build-rootfs
    reads them, so that the rootfs comes from the mirror the profiles come from."""
    out = subprocess.run(["bash", os.path.join(SOURCE, "scripts", "build-rootfs"), "__host-apt"],
                         capture_output=True, text=True, check=True).stdout
    suite, _, rest = out.partition("\n")
    sources, _, opts = rest.partition("# aptopts\n")
    return suite, sources, [o for o in opts.splitlines() if o]


def mounts_under(path):
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return [line for line in f if line.split()[4].startswith(path.rstrip("/") + "/")]


@pytest.fixture(scope="module")
def work():
    path = tempfile.mkdtemp(prefix="saferun-package-", dir="/var/tmp")
    yield path
    # Every mount was made in a namespace that is gone; never remove through one.
    assert not mounts_under(path), mounts_under(path)
    shutil.rmtree(path)


@pytest.fixture(scope="module")
def debs(work):
    out = os.path.join(work, "debs")
    p = subprocess.run(["cpack", "-G", "DEB", "-B", out], cwd=BUILD, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    found = {}
    for name in os.listdir(out):
        if name.endswith(".deb"):
            path = os.path.join(out, name)
            pkg = subprocess.run(["dpkg-deb", "-f", path, "Package"], capture_output=True,
                                 text=True, check=True).stdout.strip()
            found[pkg] = path
    return found


@pytest.fixture(scope="module")
def rootfs(work, debs):
    root = os.path.join(work, "root")
    suite, sources, aptopts = host_apt()
    cmd = ["mmdebstrap", "--mode=root", "--format=directory", "--variant=essential",
           f"--hook-dir={HOOKS}/maybe-merged-usr", f"--hook-dir={HOOKS}/file-mirror-automount",
           # mount: umount and mount --bind in there; gcc, libc6-dev and
           # pkg-config: building embed.c. Everything else comes from Depends.
           # No dpkg path filters: the tree is removed at the end anyway, and
           # a filter runs mmtarfilter (python) once per package.
           "--include=mount,gcc,libc6-dev,pkg-config", *aptopts]
    cmd += [f"--include={path}" for path in sorted(debs.values())]
    cmd += [suite, root, "-"]
    p = subprocess.run(cmd, input=sources, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f"mmdebstrap failed (exit {p.returncode}):\n{p.stderr[-4000:]}"
    return root


def inside(root, script, timeout=120):
    """Run a shell script as root in the rootfs; nothing of the host but the kernel
    and its /proc, /sys and /dev."""
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", ENTER, "sh", root,
         "/bin/sh", "-c", script], capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL)


def test_packages_hold_their_parts(debs):
    assert sorted(debs) == ["libsaferun-dev", "libsaferun0", "saferun"]

    def files(pkg):
        listing = subprocess.run(["dpkg-deb", "-c", debs[pkg]], capture_output=True, text=True,
                                 check=True).stdout
        # "MODE OWNER SIZE DATE TIME ./PATH[ -> TARGET]"
        return {line.split(None, 5)[5].split(" -> ")[0].lstrip(".")
                for line in listing.splitlines() if not line.startswith("d")}

    def field(pkg, name):
        return subprocess.run(["dpkg-deb", "-f", debs[pkg], name], capture_output=True,
                              text=True, check=True).stdout.strip()

    tools, lib, dev = files("saferun"), files("libsaferun0"), files("libsaferun-dev")
    for path in ("/bin/saferun", "/bin/saferund", "/share/saferun/policies/default.json",
                 "/share/saferun/profiles/minimal.txt", "/libexec/saferun/build-rootfs",
                 "/libexec/saferun/import-rootfs", "/lib/systemd/system/saferund.service",
                 "/lib/systemd/system/saferund.socket", "/share/man/man1/saferun.1",
                 "/share/man/man8/saferund.8", "/share/man/man5/saferun-policy.5"):
        assert PREFIX + path in tools, (path, sorted(tools))
    assert any(f.endswith("/libsaferun.so.0") for f in lib), sorted(lib)
    assert not any(f.endswith("/libsaferun.so") or f.endswith(".h") for f in lib), sorted(lib)
    for suffix in ("/include/saferun.h", "/libsaferun.so", "/libsaferun.a",
                   "/pkgconfig/saferun.pc"):
        assert any(f.endswith(suffix) for f in dev), (suffix, sorted(dev))
    assert field("libsaferun-dev", "Depends").startswith("libsaferun0 (= ")
    for dep in ("libseccomp2", "libcap2", "libnl-3-200", "libnl-route-3-200", "libcjson1"):
        assert dep in field("libsaferun0", "Depends").split(", ")
        assert dep in field("saferun", "Depends").split(", ")
    assert "libmicrohttpd12" in field("saferun", "Depends").split(", ")


def test_installed_unit_names_the_installed_daemon(rootfs):
    with open(f"{rootfs}{PREFIX}/lib/systemd/system/saferund.service", encoding="utf-8") as f:
        assert f"\nExecStart={PREFIX}/bin/saferund\n" in f.read()


def test_saferun_runs_a_sandbox_from_the_installed_files(rootfs):
    p = inside(rootfs, "saferun run --profile host -c 'print(1)'")
    assert (p.returncode, p.stdout) == (0, "1\n"), p.stderr
    # --policy NAME: the installed policies dir, not the source tree's
    p = inside(rootfs, "saferun run --policy default --profile host -c 'print(2)'")
    assert (p.returncode, p.stdout) == (0, "2\n"), p.stderr
    p = inside(rootfs, "saferun run --policy nosuch --profile host -c 'print(3)'")
    assert p.returncode == 2 and f"{PREFIX}/share/saferun/policies/nosuch.json" in p.stderr, \
        p.stderr


def test_saferun_rootfs_uses_the_installed_scripts_and_profiles(rootfs):
    p = inside(rootfs, "saferun rootfs list")
    assert p.returncode == 0, p.stderr
    rows = {line.split()[0]: line for line in p.stdout.splitlines()[1:]}
    assert sorted(rows) == ["datascience", "minimal", "node"], p.stdout
    assert "not built" in rows["minimal"], p.stdout
    p = inside(rootfs, "saferun rootfs build nosuch")
    assert p.returncode == 1, p.stderr
    assert f"profiles live in {PREFIX}/share/saferun/profiles)" in p.stderr, p.stderr
    p = inside(rootfs, "saferun rootfs import /nonexistent.tar")
    assert p.returncode == 1, p.stderr
    assert p.stderr.startswith("import-rootfs: /nonexistent.tar: "), p.stderr


def test_embed_example_builds_with_pkg_config_and_runs(rootfs):
    # embed.c runs on the default policy's profile (datascience): the
    # rootfs itself, bound there, stands in for it.
    p = inside(rootfs, f"""
        set -e
        mkdir -p /work /var/lib/saferun/rootfs/datascience
        mount --bind / /var/lib/saferun/rootfs/datascience
        cc -o /tmp/embed {PREFIX}/share/doc/libsaferun-dev/examples/embed.c \\
            $(pkg-config --cflags --libs saferun)
        ldd /tmp/embed | grep -o 'libsaferun.so.0 => [^ ]*'
        /tmp/embed
    """)
    lines = p.stdout.splitlines(keepends=True)
    assert p.returncode == 0 and len(lines) == 2, (p.returncode, p.stdout, p.stderr)
    assert lines[0].startswith(f"libsaferun.so.0 => {PREFIX}/lib/"), lines
    assert lines[1] == "status=ok exit=0 stdout=sum: 45\n", p.stderr
