"""Build small pure-Python wheels for tests: a wheel is a zip holding the
package, NAME-VERSION.dist-info/{METADATA,WHEEL,RECORD} (PEP 427)."""
import base64
import hashlib
import os
import zipfile


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(wheelhouse, name, version, files=None, requires=()):
    """Write NAME-VERSION-py3-none-any.whl into wheelhouse. files maps
    paths inside the wheel to text; by default one module NAME/__init__.py
    whose VERSION is the version. requires: Requires-Dist lines."""
    mod = name.replace("-", "_")
    files = dict(files or {f"{mod}/__init__.py": f"VERSION = {version!r}\n"})
    info = f"{mod}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files[f"{info}/METADATA"] = meta
    files[f"{info}/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: saferun-tests\n"
                              "Root-Is-Purelib: true\nTag: py3-none-any\n")
    path = os.path.join(wheelhouse, f"{mod}-{version}-py3-none-any.whl")
    record = []
    with zipfile.ZipFile(path, "w") as z:
        for p, text in files.items():
            data = text.encode()
            z.writestr(p, data)
            record.append(_record_line(p, data))
        record.append(f"{info}/RECORD,,")
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path
