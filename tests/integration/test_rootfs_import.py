"""saferun rootfs import (docs/rootfs.md, "Importing an image"): docker save
and OCI archives the test builds itself (the minimal rootfs as one layer, a
second layer with whiteouts), a usable sandbox root from them, and hostile
archives refused with nothing written outside the target."""
import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile

import pytest

from conftest import ROOTFS_DIR, saferun

MINIMAL = os.path.join(ROOTFS_DIR, "minimal")

pytestmark = [
    pytest.mark.skipif(not os.path.exists(os.path.join(MINIMAL, "usr/bin/python3")),
                       reason="needs the minimal profile (scripts/build-rootfs minimal)"),
    # unpacking archives on the host: no cgroup, and minutes of python
    # under the VM's emulation
    pytest.mark.host_only(reason="rootfs import unpacks archives on the host (no sandbox "
                          "cgroup, the same on any kernel)"),
]


def tar_bytes(entries, gz=False):
    """entries: (name, kind, extra): kind 'f' (extra: bytes), 's' (the same,
    mode 06777), 'd', 'l' (symlink target), 'h' (hard link target), 'c' (char
    device)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, kind, extra in entries:
            ti = tarfile.TarInfo(name)
            ti.mode = {"d": 0o755, "s": 0o6777}.get(kind, 0o644)
            if kind in "fs":
                ti.size = len(extra)
                t.addfile(ti, io.BytesIO(extra))
                continue
            ti.type = {"d": tarfile.DIRTYPE, "l": tarfile.SYMTYPE, "h": tarfile.LNKTYPE,
                       "c": tarfile.CHRTYPE}[kind]
            if kind in "lh":
                ti.linkname = extra
            t.addfile(ti)
    data = buf.getvalue()
    return gzip.compress(data, mtime=0) if gz else data


def add(t, name, data):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    t.addfile(ti, io.BytesIO(data))


def docker_archive(path, layers):
    with tarfile.open(path, "w") as t:
        names = []
        for i, data in enumerate(layers):
            names.append(f"{i:064x}/layer.tar")
            add(t, names[-1], data)
        add(t, "config.json", b"{}")
        add(t, "manifest.json", json.dumps([{"Config": "config.json", "RepoTags": ["t:1"],
                                             "Layers": names}]).encode())


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def oci_archive(path, layers, tamper=False):
    """layers: gzipped tar bytes."""
    blobs = {}
    config = b'{"architecture": "amd64", "os": "linux"}'
    blobs[digest(config)] = config
    descs = []
    for data in layers:
        blobs[digest(data)] = data
        descs.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                      "digest": digest(data), "size": len(data)})
    manifest = json.dumps({"schemaVersion": 2,
                           "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": digest(config), "size": len(config)},
                           "layers": descs}).encode()
    blobs[digest(manifest)] = manifest
    index = {"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json",
         "digest": digest(manifest), "size": len(manifest)}]}
    with tarfile.open(path, "w") as t:
        add(t, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        add(t, "index.json", json.dumps(index).encode())
        for d, data in blobs.items():
            if tamper and data is layers[-1]:
                data = data[:-1] + bytes([data[-1] ^ 1])
            add(t, "blobs/sha256/" + d.split(":")[1], data)


@pytest.fixture(scope="module")
def base_layer():
    """The minimal rootfs as one layer tar (written once per module)."""
    fd, path = tempfile.mkstemp(prefix="saferun-import-base-", suffix=".tar")
    os.close(fd)
    with tarfile.open(path, "w") as t:
        t.add(MINIMAL, arcname=".", recursive=True)
    with open(path, "rb") as f:
        data = f.read()
    os.unlink(path)
    return data


@pytest.fixture
def place():
    d = tempfile.mkdtemp(prefix="saferun-import-", dir="/var/tmp")
    os.chmod(d, 0o755)
    os.mkdir(os.path.join(d, "rootfs"), 0o755)
    yield d
    shutil.rmtree(d)


SECOND = [("etc/.wh.hostname", "f", b""),               # whiteout of a file
          ("usr/share/zoneinfo/.wh..wh..opq", "f", b""),  # opaque: the lower contents go
          ("usr/share/zoneinfo/Only", "f", b"x"),
          ("opt/app/hello.py", "f", b"print('hello from layer 2')\n"),
          ("opt/app/suid", "s", b"#!/bin/sh\n")]


def do_import(place, image, *args):
    return saferun("rootfs", "import", image, "--dir", os.path.join(place, "rootfs"), *args,
                   timeout=600)


def run_in(place, name, code):
    p = saferun("run", "--json", "--no-check", "--rootfs-dir", os.path.join(place, "rootfs"),
                "--profile", name, "-c", code)
    assert p.stdout, p.stderr.decode()
    return json.loads(p.stdout)


def only_target_written(place):
    """Nothing but the rootfs dir in place; no staging left in it."""
    assert sorted(os.listdir(place)) == ["image.tar", "rootfs"] or \
        sorted(os.listdir(place)) == ["rootfs"], os.listdir(place)
    assert [e for e in os.listdir(os.path.join(place, "rootfs")) if e.startswith(".")] == []


@pytest.mark.parametrize("fmt", ["docker", "oci"])
def test_import_applies_layers_with_whiteouts_and_runs(place, base_layer, fmt):
    image = os.path.join(place, "image.tar")
    second = tar_bytes(SECOND)
    if fmt == "docker":
        docker_archive(image, [base_layer, second])
    else:
        oci_archive(image, [gzip.compress(base_layer, mtime=0), gzip.compress(second, mtime=0)])
    p = do_import(place, image, "--name", "imported")
    assert p.returncode == 0, p.stderr.decode()
    out = p.stdout.decode()
    assert "smoke test passed (python 3.11" in out and "uid 1000 cwd /work" in out, out
    root = os.path.join(place, "rootfs", "imported")
    assert not os.path.lexists(os.path.join(root, "etc/hostname"))
    assert os.listdir(os.path.join(root, "usr/share/zoneinfo")) == ["Only"]
    info = json.load(open(os.path.join(root, "etc/saferun/profile.json")))
    assert info["profile"] == "imported" and info["imported_from"] == "image.tar"
    res = run_in(place, "imported", "import os, runpy\nprint(os.getuid())\n"
                 "runpy.run_path('/opt/app/hello.py')")
    assert res["status"] == "ok", res
    assert res["stdout"] == "1000\nhello from layer 2\n"
    assert oct(os.stat(os.path.join(root, "opt/app/suid")).st_mode) == "0o100755"
    # owned by root, nothing group/other-writable, no setuid
    for top, dirs, files in os.walk(root):
        for n in dirs + files:
            st = os.lstat(os.path.join(top, n))
            if os.path.islink(os.path.join(top, n)):
                continue
            assert st.st_uid == 0 and st.st_mode & 0o7022 == 0, (top, n, oct(st.st_mode))
    p = saferun("rootfs", "list", "--dir", os.path.join(place, "rootfs"))
    listing = p.stdout.decode()
    assert any(line.split()[:2] == ["imported", "imported"] for line in listing.splitlines()), \
        (listing, p.stderr.decode())
    only_target_written(place)


def test_existing_profile_is_kept_unless_forced(place, base_layer):
    image = os.path.join(place, "image.tar")
    docker_archive(image, [base_layer])
    assert do_import(place, image, "--name", "again").returncode == 0
    p = do_import(place, image, "--name", "again")
    assert p.returncode == 1
    assert b"exists: give another --name, or --force to replace it" in p.stderr
    assert do_import(place, image, "--name", "again", "--force").returncode == 0
    only_target_written(place)


def test_image_without_python_is_refused(place):
    image = os.path.join(place, "image.tar")
    docker_archive(image, [tar_bytes([("bin/sh", "f", b"")])])
    p = do_import(place, image, "--name", "nopy")
    assert p.returncode == 1
    assert b"the image has no /usr/bin/python3: saferun runs python3 from there" in p.stderr
    assert os.listdir(os.path.join(place, "rootfs")) == []


def test_oci_digest_mismatch_is_refused(place):
    image = os.path.join(place, "image.tar")
    oci_archive(image, [tar_bytes([("usr/bin/python3", "f", b"")], gz=True)], tamper=True)
    p = do_import(place, image, "--name", "tampered")
    assert p.returncode == 1
    assert b"does not match its digest" in p.stderr, p.stderr
    assert os.listdir(os.path.join(place, "rootfs")) == []


@pytest.mark.parametrize("layers,why", [
    ([[("../evil", "f", b"x")]], b"has a '..' component"),
    ([[("a/../../evil", "f", b"x")]], b"has a '..' component"),
    ([[("/evil", "f", b"x")]], b"is an absolute path"),
    ([[("a", "l", "OUTSIDE")], [("a/pwned", "f", b"x")]], b"goes through the symlink /a"),
    ([[("b", "l", ".."), ("b/evil", "f", b"x")]], b"goes through the symlink /b"),
    ([[("dev/evil", "c", "")]], b"is a device node: refused"),
    ([[("h", "h", "/etc/passwd")]], b"is an absolute path"),
    ([[("h", "h", "../../../etc/passwd")]], b"has a '..' component"),
    ([[("a", "l", "OUTSIDE")], [("h", "h", "a/secret")]], b"goes through the symlink /a"),
])
def test_hostile_archives_are_refused_and_write_nothing_outside(place, layers, why):
    outside = os.path.join(place, "outside")
    os.mkdir(outside)
    with open(os.path.join(outside, "secret"), "w") as f:
        f.write("s")
    layers = [[(n, k, e.replace("OUTSIDE", outside) if isinstance(e, str) else e)
               for n, k, e in layer] for layer in layers]
    image = os.path.join(place, "image.tar")
    docker_archive(image, [tar_bytes(layer) for layer in layers])
    p = do_import(place, image, "--name", "hostile")
    assert p.returncode == 1
    assert why in p.stderr and b"nothing was installed" in p.stderr, p.stderr
    assert os.listdir(outside) == ["secret"]
    assert os.listdir(os.path.join(place, "rootfs")) == []
    assert sorted(os.listdir(place)) == ["image.tar", "outside", "rootfs"]
    assert os.stat(os.path.join(outside, "secret")).st_nlink == 1
