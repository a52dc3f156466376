"""A server network namespace for the egress tests (integration and api):
a netns with one veth to the host, on the benchmarking range 198.18.0.0/15
(never a real address), servers on its side, torn down after."""
import os
import random
import subprocess

# The netns's servers: TCP 8080 says hello, UDP 9999 echoes, UDP 53 is a
# tiny resolver that answers every A query with 198.18.0.99.
SERVERS = r"""
import socket, sys, threading
addr = sys.argv[1]
def tcp(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(16)
    while True:
        c, _ = s.accept(); c.sendall(b"hello from %d" % port); c.close()
def udp_echo(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((addr, port))
    while True:
        d, peer = s.recvfrom(2048); s.sendto(d, peer)
def dns():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((addr, 53))
    while True:
        q, peer = s.recvfrom(512)
        head = q[:2] + b"\x81\x80" + q[4:6] + b"\x00\x01\x00\x00\x00\x00"
        answer = b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04" + bytes([198, 18, 0, 99])
        s.sendto(head + q[12:] + answer, peer)
for f, a in ((tcp, 8080), (udp_echo, 9999), (dns, None)):
    threading.Thread(target=f, args=(() if a is None else (a,)), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""

def ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


class ServerNetns:
    """A netns with one veth to the host: host end .1, servers on .2."""

    def __init__(self):
        tag = os.getpid() % 100000
        self.ns = f"egt{tag}"
        self.host_if = f"egt{tag}h"
        third = random.randrange(1, 250)
        self.net = f"198.18.{third}"
        self.host_ip, self.server = f"{self.net}.1", f"{self.net}.2"
        self.proc = None
        try:
            ip("netns", "add", self.ns)
            ip("link", "add", self.host_if, "type", "veth", "peer", "name", "eth1", "netns", self.ns)
            ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
            ip("link", "set", self.host_if, "up")
            ip("-n", self.ns, "addr", "add", f"{self.server}/30", "dev", "eth1")
            ip("-n", self.ns, "link", "set", "eth1", "up")
            ip("-n", self.ns, "link", "set", "lo", "up")
            ip("-n", self.ns, "route", "add", "default", "via", self.host_ip)
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", self.ns, "/usr/bin/python3", "-c", SERVERS, self.server],
                stdout=subprocess.PIPE, text=True)
            assert self.proc.stdout.readline().strip() == "ready"
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
        ip("link", "del", self.host_if, check=False)
        ip("netns", "del", self.ns, check=False)


def default_uplink():
    out = ip("-4", "route", "get", "192.0.2.1", check=False).stdout.split()
    return out[out.index("dev") + 1] if "dev" in out else None
