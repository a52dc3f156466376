"""A PEP 503 "simple" package index for the dependency tests, served over
plain http from a server network namespace (netns_server.py, on
198.18.0.0/15): simple/<name>/index.html pages linking to wheels the test
builds (wheels.py). farpkg's page links to the same server on another port,
so an install that follows it leaves the index's host:port."""
import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import time

from netns_server import ServerNetns, default_uplink
from wheels import build_wheel

INDEX_PORT, OTHER_PORT, TLS_PORT = 8081, 8082, 8443

# http.server's own HTTPServer looks its address up (getfqdn) when it
# binds: no resolver in the netns, so it would hang; a plain TCP server
# does not.
SERVE = """
import functools, http.server, socketserver, sys
class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = daemon_threads = True
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[3])
server = Server((sys.argv[1], int(sys.argv[2])), handler)
if len(sys.argv) > 4:  # https: certificate and key
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[4], sys.argv[5])
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"""


def make_tls(d, ip_addr):
    """A CA of the test's own (d/ca.pem) and a certificate it signed for
    ip_addr (d/server.pem, d/server.key), with openssl; valid for a day."""
    def ssl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "1", "-subj", "/CN=saferun test CA")
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", f"/CN={ip_addr}")
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write(f"subjectAltName=IP:{ip_addr}\nbasicConstraints=CA:FALSE\n")
    ssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "1", "-extfile", "san.ext")
    os.chmod(os.path.join(d, "ca.pem"), 0o644)


def simple_page(links):
    body = "".join(f'<a href="{href}">{text}</a><br>\n' for href, text in links)
    return f"<!DOCTYPE html><html><body>\n{body}</body></html>\n"


def build_index(root, server):
    """root/simple/<name>/index.html linking to root/files/*.whl: tinyleaf
    1.0, tinytop 2.0 (needs tinyleaf>=1.0), farpkg 1.0 (linked on
    OTHER_PORT)."""
    files = os.path.join(root, "files")
    os.makedirs(files)
    wheels = {
        "tinyleaf": build_wheel(files, "tinyleaf", "1.0"),
        "tinytop": build_wheel(files, "tinytop", "2.0", requires=["tinyleaf>=1.0"],
                               files={"tinytop/__init__.py":
                                      "import tinyleaf\nVERSION = '2.0'\n"}),
        "farpkg": build_wheel(files, "farpkg", "1.0"),
    }
    for name, path in wheels.items():
        page = os.path.join(root, "simple", name)
        os.makedirs(page)
        digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
        base = os.path.basename(path)
        href = (f"http://{server}:{OTHER_PORT}/files/{base}" if name == "farpkg"
                else f"../../files/{base}")
        with open(os.path.join(page, "index.html"), "w") as f:
            f.write(simple_page([(f"{href}#sha256={digest}", base)]))
    with open(os.path.join(root, "simple", "index.html"), "w") as f:
        f.write(simple_page([(f"{n}/", n) for n in wheels]))


def wait_port(addr, port):
    for _ in range(100):
        try:
            socket.create_connection((addr, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {addr}:{port}")


def tools_missing():
    """None, or why this host cannot build the test network."""
    if any(not shutil.which(t) for t in ("ip", "nft")):
        return "needs ip and nft (iproute2, nftables)"
    if subprocess.run(["nft", "list", "tables"], capture_output=True).returncode:
        return "the kernel has no nf_tables"
    return None


class SimpleIndex:
    """The server netns with two http servers over one tree: the index on
    INDEX_PORT (url), the same files on OTHER_PORT; with https, also an
    https server on TLS_PORT (tls_url) whose certificate the test's CA
    (ca_pem, world-readable) signed. Puts the host's uplink forwarding
    back on close, should a run have left it changed."""

    def __init__(self, https=False):
        uplink = default_uplink()
        self._fwd = f"/proc/sys/net/ipv4/conf/{uplink}/forwarding" if uplink else None
        self._saved = open(self._fwd).read() if self._fwd else None
        self.root = tempfile.mkdtemp(prefix="saferun-index-")
        os.chmod(self.root, 0o755)
        self.procs = []
        self.net = None
        try:
            self.net = ServerNetns()
            self.server = self.net.server
            build_index(self.root, self.server)
            for port in (INDEX_PORT, OTHER_PORT):
                self.procs.append(subprocess.Popen(
                    ["ip", "netns", "exec", self.net.ns, "/usr/bin/python3", "-c", SERVE,
                     self.server, str(port), self.root],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                wait_port(self.server, port)
            if https:
                tls = os.path.join(self.root, "tls")
                os.mkdir(tls, 0o755)
                make_tls(tls, self.server)
                self.ca_pem = os.path.join(tls, "ca.pem")
                self.procs.append(subprocess.Popen(
                    ["ip", "netns", "exec", self.net.ns, "/usr/bin/python3", "-c", SERVE,
                     self.server, str(TLS_PORT), self.root, os.path.join(tls, "server.pem"),
                     os.path.join(tls, "server.key")],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                wait_port(self.server, TLS_PORT)
                self.tls_url = f"https://{self.server}:{TLS_PORT}/simple"
        except BaseException:
            self.close()
            raise
        self.url = f"http://{self.server}:{INDEX_PORT}/simple"

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait()
        self.procs = []
        if self.net:
            self.net.close()
        shutil.rmtree(self.root, ignore_errors=True)
        if self._fwd:
            with open(self._fwd, "w") as f:
                f.write(self._saved)
