"""network.mode "egress" (docs/network.md): a veth per sandbox, an allow list
enforced by nftables rules in the sandbox's own namespace, the host out of
reach, refusals in the result, nothing left behind.

Every destination is a server in a network namespace this module creates,
on the benchmarking range 198.18.0.0/15 (never a real address), joined to
the host by a veth of its own: the sandbox's packets are routed and
masqueraded by the host exactly as they would be to the outside.

Other jobs' egress sandboxes may share the machine: a test checks its own
sandboxes' links (named by their addresses) and the shared state's invariant
under saferun's lock (egress_host.py); a test that writes the forwarding
record by hand runs saferun in a network namespace and /run/saferun of its
own (egress_host.PrivateHost)."""
import contextlib
import json
import os
import shutil
import socket
import subprocess
import time

import pytest

from conftest import SAFERUN, profiles, saferun
from egress_host import (FWD_STATE, PrivateHost, host_link, idle_forwarding, link_of_run,
                         own_leftovers, read_record)
from netns_server import ServerNetns, default_uplink, ip

# In the sandbox: try each (proto, address, port), print one line each:
# the reply, or the errno's name.
PROBE = r"""
import errno, socket, struct
def probe(proto, addr, port):
    try:
        if proto == "tcp":
            s = socket.create_connection((addr, port), timeout=3)
            return s.recv(100).decode()
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
        s.connect((addr, port))
        if port == 53:
            s.send(struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
                   + b"\x07example\x03com\x00\x00\x01\x00\x01")
            r = s.recv(512)
            return "A " + socket.inet_ntoa(r[-4:])
        s.send(b"ping"); return s.recv(100).decode()
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
for proto, addr, port in TARGETS:
    print(proto, addr, port, probe(proto, addr, port))
"""


def network_tools_missing():
    """What the module needs to build its test network: None, or why not."""
    missing = [t for t in ("ip", "nft") if not shutil.which(t)]
    if missing:
        return f"no {' or '.join(missing)} (iproute2, nftables)"
    if subprocess.run(["nft", "list", "tables"], capture_output=True).returncode != 0:
        return "the kernel has no nf_tables"
    return None


@pytest.fixture(scope="module")
def tnet():
    why = network_tools_missing()
    if why:
        pytest.skip(why)
    # saferun turns forwarding on for the interface that leads to an
    # allowed destination (docs/network.md) and puts it back after the
    # last egress sandbox; should a test fail half-way, the host's default
    # route interface gets its value back here
    uplink = default_uplink()
    fwd = f"/proc/sys/net/ipv4/conf/{uplink}/forwarding" if uplink else None
    saved = open(fwd).read() if fwd else None
    try:
        t = ServerNetns()
    except subprocess.CalledProcessError as e:
        pytest.skip(f"cannot build the test network ({' '.join(e.cmd)}): {e.stderr}")
    yield t
    t.close()
    if fwd:
        with open(fwd, "w") as f:
            f.write(saved)


def policy(tmp_path, allow, dns=None, mode="egress", **more):
    net = {"mode": mode, "allow": allow}
    if dns is not None:
        net["dns"] = dns
    path = tmp_path / "egress.json"
    path.write_text(json.dumps({"network": net, **more}))
    return str(path)


def run_egress(pol, targets, *args, extra="", host=None):
    code = f"TARGETS = {targets!r}\n" + PROBE + extra
    argv = ["run", "--json", "--no-check", "--profile", "host", "--policy", pol, *args, "-c", code]
    if host:  # a PrivateHost's
        p = subprocess.run([*host.prefix(), SAFERUN, *argv], capture_output=True, timeout=120)
    else:
        p = saferun(*argv)
    assert p.stdout, p.stderr.decode()
    res = json.loads(p.stdout)
    lines = res["stdout"].splitlines()
    res["_probes"] = {tuple(l.split(" ", 4)[:3]): l.split(" ", 3)[3] for l in lines
                      if l.split(" ")[0] in ("tcp", "udp")}
    return res


def probe_result(res, proto, addr, port):
    return res["_probes"][(proto, addr, str(port))]


# In a sandbox allowed the test server's port 8082: wait (30 s at most) for
# the test's go, a listener there (go()) where there was none.
GO = r"""
def wait_for_go(server, end=30):
    import socket, time
    end += time.time()
    while time.time() < end:
        try:
            socket.create_connection((server, 8082), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False
"""


@contextlib.contextmanager
def go(tnet):
    """A listener on the test server's port 8082 while in the block."""
    p = subprocess.Popen(["ip", "netns", "exec", tnet.ns, "/usr/bin/python3", "-c",
                          "import socket, sys, time\ns = socket.socket()\n"
                          "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                          "s.bind((sys.argv[1], 8082)); s.listen(64)\n"
                          "print('ready', flush=True); time.sleep(120)\n", tnet.server],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        yield
    finally:
        p.kill()
        p.wait()


def forwarding(ifname):
    with open(f"/proc/sys/net/ipv4/conf/{ifname}/forwarding") as f:
        return f.read().strip()


def leftovers(tnet, *results, idle=None):
    """What these runs' sandboxes left on the host (their veths and
    addresses), and the shared state's invariant (egress_host): the table
    and the forwarding record only while some sandbox link is there, and
    the test network's uplink back to 0 once none is."""
    return own_leftovers([r["network"]["address"] for r in results],
                         {tnet.host_if: "0", **(idle or {})})


def test_allowed_destination_works_and_other_ports_are_refused(tnet, tmp_path):
    pol = policy(tmp_path, [{"cidr": f"{tnet.server}/32", "ports": [8080], "proto": "tcp"}])
    res = run_egress(pol, [("tcp", tnet.server, 8080), ("tcp", tnet.server, 8081),
                           ("udp", tnet.server, 9999)])
    assert res["status"] == "ok", res
    assert probe_result(res, "tcp", tnet.server, 8080) == "hello from 8080"
    # refused in the sandbox by an ICMP admin-prohibited: connect() fails
    # with EHOSTUNREACH at once (a closed port would be ECONNREFUSED, a
    # drop a timeout); a refused datagram fails its send() with EPERM
    assert probe_result(res, "tcp", tnet.server, 8081) == "EHOSTUNREACH"
    assert probe_result(res, "udp", tnet.server, 9999) == "EPERM"
    net = res["network"]
    assert net["mode"] == "egress" and net["address"].startswith("10.213.")
    assert net["denied_packets"] == 2
    assert sorted((d["address"], d["proto"], d["port"]) for d in net["denied"]) == [
        (tnet.server, "tcp", 8081), (tnet.server, "udp", 9999)]


# The sandboxed code tries to delete its rules (nf_tables over netlink, as
# nft would) and to take its interface down: seccomp refuses the socket, and
# it holds no CAP_NET_ADMIN in the user namespace that owns its network
# namespace.
TAMPER = r"""
import errno, socket, struct
def nlmsg(mtype, flags, seq, payload):
    return struct.pack("=IHHII", 16 + len(payload), mtype, flags, seq, 0) + payload
def tamper():
    try:
        s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)  # NETLINK_NETFILTER
        name = b"saferun\0"
        attr = struct.pack("=HH", 4 + len(name), 1) + name + b"\0" * (-len(name) % 4)
        batch = (nlmsg(0x10, 1, 1, struct.pack("=BBH", 0, 0, socket.htons(10)))
                 + nlmsg(0x0a02, 1 | 4, 2, struct.pack("=BBH", 1, 0, 0) + attr)
                 + nlmsg(0x11, 1, 3, struct.pack("=BBH", 0, 0, socket.htons(10))))
        s.send(batch)
        reply = s.recv(4096)
        code = struct.unpack("=i", reply[16:20])[0]
        return errno.errorcode.get(-code, str(code))
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
def ifdown():
    import fcntl
    s = socket.socket()
    try:
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"eth0", 0))  # SIOCSIFFLAGS
        return "changed"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
print("tamper", tamper())
print("ifdown", ifdown())
"""


# In the sandbox: listen on 7070, reach the allowed server, accept until
# the test's go (GO, below; 30 s at most), then show the listener was up
# (from inside, over lo).
LISTENER = r"""
import socket, time
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", 7070)); srv.listen(16); srv.settimeout(0.2)
c = socket.create_connection((SERVER, 8080), timeout=5)
print("egress", c.recv(100).decode()); c.close()
accepted, end = [], time.time() + 30
while time.time() < end:
    try:
        conn, peer = srv.accept(); accepted.append(peer[0]); conn.close()
    except socket.timeout:
        pass
    try:
        socket.create_connection((SERVER, 8082), timeout=1).close()
        break
    except OSError:
        pass
print("accepted", accepted)
socket.create_connection(("127.0.0.1", 7070), timeout=3); print("listening")
"""

# From the "LAN neighbour" (tnet's netns: its default route is the host):
# one TCP connect, and how it went.
CONNECT = r"""
import errno, socket, sys
try:
    socket.create_connection((sys.argv[1], 7070), timeout=1); print("connected")
except socket.timeout:
    print("timeout")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e)))
"""


def sandbox_address(link):
    """The sandbox end of a host veth (its host end + 1), or None."""
    for word in ip("-4", "-o", "addr", "show", "dev", link, check=False).stdout.split():
        if word.startswith("10.213."):
            host = socket.inet_aton(word.split("/")[0])
            return socket.inet_ntoa((int.from_bytes(host, "big") + 1).to_bytes(4, "big"))
    return None


def test_a_lan_neighbour_cannot_route_into_a_sandbox(tnet, tmp_path):
    """Egress turns forwarding on for the uplink to the allowed server (here
    tnet's veth): the host must still forward nothing new into a sandbox."""
    pol = policy(tmp_path, [{"cidr": f"{tnet.server}/32", "ports": [8080, 8082],
                             "proto": "tcp"}])
    p = subprocess.Popen([SAFERUN, "run", "--json", "--no-check", "--profile", "host",
                          "--policy", pol, "-c", f"SERVER = {tnet.server!r}\n" + LISTENER],
                         stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    tries, seen, end = [], {}, time.time() + 60
    while p.poll() is None and time.time() < end and len(tries) < 3:
        link = link_of_run(p.pid)
        if link:
            seen[link] = sandbox_address(link)
        for addr in filter(None, seen.values()):
            r = subprocess.run(["ip", "netns", "exec", tnet.ns, "/usr/bin/python3", "-c",
                                CONNECT, addr], capture_output=True, text=True, timeout=30)
            tries.append(r.stdout.strip())
        time.sleep(0.1)
    with go(tnet):
        res = json.loads(p.communicate(timeout=120)[0])
    assert res["status"] == "ok", res
    out = res["stdout"].splitlines()
    assert out[0] == "egress hello from 8080" and out[2] == "listening", out  # egress still works
    assert out[1] == "accepted []", out
    # dropped in the host's forward path: no answer at all (not even a reset)
    assert len(tries) >= 3 and set(tries) == {"timeout"}, tries
    assert list(seen) == [host_link(res["network"]["address"])], (seen, res["network"])
    assert set(seen.values()) == {res["network"]["address"]}, seen
    assert not leftovers(tnet, res)


def test_the_code_cannot_change_its_rules_or_links(tnet, tmp_path):
    pol = policy(tmp_path, [{"cidr": f"{tnet.server}/32", "ports": [8080]}])
    res = run_egress(pol, [], extra=TAMPER + PROBE.replace(
        "for proto", f"TARGETS = [('tcp', '{tnet.server}', 8081), ('tcp', '{tnet.server}', 8080)]"
        "\nfor proto"))
    assert res["status"] == "ok", res
    lines = res["stdout"].splitlines()
    # the default seccomp policy refuses netlink sockets outright; the
    # interface change reaches the kernel and fails its capability check
    assert "tamper EAFNOSUPPORT" in lines and "ifdown EPERM" in lines, lines
    assert probe_result(res, "tcp", tnet.server, 8081) == "EHOSTUNREACH"
    assert probe_result(res, "tcp", tnet.server, 8080) == "hello from 8080"


def test_udp_rule_and_port_wildcard(tnet, tmp_path):
    pol = policy(tmp_path, [{"cidr": "198.18.0.0/15", "ports": "*", "proto": "udp"}])
    res = run_egress(pol, [("udp", tnet.server, 9999), ("tcp", tnet.server, 8080)])
    assert res["status"] == "ok", res
    assert probe_result(res, "udp", tnet.server, 9999) == "ping"
    assert probe_result(res, "tcp", tnet.server, 8080) == "EHOSTUNREACH"


def test_destination_not_in_the_list_is_refused(tnet, tmp_path):
    pol = policy(tmp_path, [{"cidr": f"{tnet.server}/32", "ports": [8080]}])
    res = run_egress(pol, [("tcp", "192.0.2.77", 80), ("tcp", tnet.server, 8080)])
    assert res["status"] == "ok", res
    assert probe_result(res, "tcp", "192.0.2.77", 80) == "EHOSTUNREACH"
    assert probe_result(res, "tcp", tnet.server, 8080) == "hello from 8080"
    assert [(d["address"], d["port"]) for d in res["network"]["denied"]] == [("192.0.2.77", 80)]


def test_host_is_unreachable_even_when_everything_is_allowed(tnet, tmp_path):
    # host listeners on its loopback, on the test veth's host end and on
    # the default route's address: the sandbox may reach none of them
    host_addrs = [tnet.host_ip]
    src = ip("-4", "route", "get", "192.0.2.1", check=False).stdout.split()
    if "src" in src:
        host_addrs.append(src[src.index("src") + 1])
    listeners, accepted = [], []
    for a in ["127.0.0.1", *host_addrs]:
        s = socket.socket()
        s.bind((a, 0))
        s.listen()
        s.settimeout(0.2)
        listeners.append(s)
    pol = policy(tmp_path, [{"cidr": "0.0.0.0/0", "ports": "*", "proto": "tcp"},
                            {"cidr": "0.0.0.0/0", "ports": "*", "proto": "udp"}])
    targets = [("tcp", s.getsockname()[0], s.getsockname()[1]) for s in listeners]
    lo_port = targets[0][2]
    gateway = "open('/proc/net/route').read()"
    # cloud metadata (link-local) and multicast stay closed under 0.0.0.0/0 too
    closed = [("tcp", "169.254.169.254", 80), ("udp", "224.0.0.251", 5353)]
    try:
        res = run_egress(pol, targets + closed + [("tcp", tnet.server, 8080)],
                         extra=f"\nr = [l.split() for l in {gateway}.splitlines()[1:]]\n"
                               "gw = [l[2] for l in r if l[1] == '00000000'][0]\n"
                               "print('gw', socket.inet_ntoa(bytes.fromhex(gw)[::-1]))\n"
                               "print('tcp gw 22', probe('tcp', socket.inet_ntoa("
                               "bytes.fromhex(gw)[::-1]), 22))\n")
        for s in listeners:
            try:
                accepted.append(s.accept())
            except (socket.timeout, BlockingIOError):
                pass
    finally:
        for s in listeners:
            s.close()
    assert res["status"] == "ok", res
    assert probe_result(res, "tcp", tnet.server, 8080) == "hello from 8080"
    # the sandbox's 127.0.0.0/8 is its own lo: nothing listens there
    assert probe_result(res, "tcp", "127.0.0.1", lo_port) == "ECONNREFUSED"
    for (proto, a, port) in targets[1:]:
        assert probe_result(res, proto, a, port) == "EHOSTUNREACH", (a, res["stdout"])
    assert probe_result(res, "tcp", "gw", 22) == "EHOSTUNREACH"
    assert probe_result(res, "tcp", "169.254.169.254", 80) == "EHOSTUNREACH"
    assert probe_result(res, "udp", "224.0.0.251", 5353) == "EPERM"
    assert not accepted
    denied = {d["address"] for d in res["network"]["denied"]}
    assert set(host_addrs) <= denied


def test_host_address_added_during_the_run_is_refused_by_the_host_table(tnet, tmp_path):
    # the sandbox's rules list the host's addresses at start; one the host
    # gains later (inside an allowed CIDR) meets the host's input chain
    late = f"{tnet.net}.5"
    pol = policy(tmp_path, [{"cidr": "198.18.0.0/15", "ports": "*"}])
    code = ("TARGETS = []\n" + PROBE + GO + f"print('go', wait_for_go('{tnet.server}'))\n"
            f"print('late', probe('tcp', '{late}', 7001))\n")
    srv = None
    a = None
    try:
        a = subprocess.Popen([SAFERUN, "run", "--json", "--no-check", "--profile", "host",
                              "--policy", pol, "-c", code],
                             stdout=subprocess.PIPE)
        deadline = time.time() + 20
        while time.time() < deadline and not link_of_run(a.pid):
            time.sleep(0.02)
        ip("addr", "add", f"{late}/32", "dev", tnet.host_if)
        srv = socket.socket()
        srv.bind((late, 7001))
        srv.listen()
        srv.settimeout(0.2)
        with go(tnet):
            res = json.loads(a.communicate(timeout=60)[0])
        try:
            accepted = srv.accept()
        except socket.timeout:
            accepted = None
    finally:
        if srv:
            srv.close()
        ip("addr", "del", f"{late}/32", "dev", tnet.host_if, check=False)
        if a and a.poll() is None:
            a.kill()
    assert res["status"] == "ok", res
    assert res["stdout"].strip().splitlines()[-2:] == ["go True", "late EHOSTUNREACH"], res
    assert accepted is None


def test_dns_is_refused_unless_allowed(tnet, tmp_path):
    pol = policy(tmp_path, [])
    res = run_egress(pol, [("udp", tnet.server, 53)])
    assert res["status"] == "ok", res
    assert probe_result(res, "udp", tnet.server, 53) == "EPERM"
    assert res["network"]["denied"] == [{"address": tnet.server, "proto": "udp", "port": 53}]
    pol = policy(tmp_path, [], dns=[tnet.server])
    res = run_egress(pol, [("udp", tnet.server, 53), ("udp", tnet.server, 9999)])
    assert res["status"] == "ok", res
    assert probe_result(res, "udp", tnet.server, 53) == "A 198.18.0.99"
    # the resolver's address is open on port 53 only
    assert probe_result(res, "udp", tnet.server, 9999) == "EPERM"


@pytest.mark.parametrize("profile", profiles())
def test_names_resolve_through_the_allowed_resolver(tnet, tmp_path, profile):
    # the sandbox's /etc/resolv.conf names the policy's resolvers, so
    # ordinary lookups go to the (test's) resolver, and only there
    pol = policy(tmp_path, [{"cidr": f"{tnet.server}/32", "ports": [8080]}], dns=[tnet.server])
    code = ("import socket\nprint(open('/etc/resolv.conf').read().split('\\n')[0])\n"
            "print(socket.gethostbyname('example.com'))\n")
    p = saferun("run", "--json", "--no-check", "--profile", profile, "--policy", pol, "-c", code)
    res = json.loads(p.stdout)
    assert res["status"] == "ok", res
    assert res["stdout"].splitlines() == [f"nameserver {tnet.server}", "198.18.0.99"]


@pytest.mark.parametrize("profile", profiles())
def test_allowed_names_are_pinned_in_etc_hosts(tnet, tmp_path, profile):
    # a name in the allow list resolves in the sandbox to the address the
    # supervisor resolved (the one the rules open), from /etc/hosts: before
    # the resolver (whose answer for every name is 198.18.0.99), and with
    # no resolver at all
    name = socket.gethostname()
    try:
        addr = socket.gethostbyname(name)
    except OSError:
        pytest.skip(f"the host's name {name} does not resolve on the host")
    if addr.startswith("198.18."):
        pytest.skip("the host's name resolves into the test network's range")
    code = (f"import socket\nprint([l for l in open('/etc/hosts') if l.endswith('\\t{name}\\n')])\n"
            f"print(socket.gethostbyname('{name}'))\n")
    results = []
    for dns in ([tnet.server], []):
        pol = policy(tmp_path, [{"host": name, "ports": [8080]},
                                {"cidr": f"{tnet.server}/32", "ports": [8080]}], dns=dns)
        p = saferun("run", "--json", "--no-check", "--profile", profile, "--policy", pol,
                    "-c", code)
        res = json.loads(p.stdout)
        assert res["status"] == "ok", res
        assert res["stdout"].splitlines() == [repr([f"{addr}\t{name}\n"]), addr], dns
        results.append(res)
    assert not leftovers(tnet, *results)


def test_host_names_are_resolved_by_the_supervisor(tnet, tmp_path):
    # a numeric name goes through getaddrinfo as any name does; a name
    # that does not resolve refuses the run before anything is built
    pol = policy(tmp_path, [{"host": tnet.server, "ports": [8080]}])
    res = run_egress(pol, [("tcp", tnet.server, 8080)])
    assert probe_result(res, "tcp", tnet.server, 8080) == "hello from 8080"
    pol = policy(tmp_path, [{"host": "no-such-host.invalid", "ports": [80]}])
    p = saferun("run", "--no-check", "--policy", pol, "-c", "print(1)", timeout=120)
    assert p.returncode == 2, p
    assert b'policy.network.allow[0].host: "no-such-host.invalid" does not resolve' in p.stderr
    assert not leftovers(tnet, res)


@pytest.mark.parametrize("how", ["ok", "timeout", "killed", "error"])
def test_nothing_is_left_on_the_host(tnet, tmp_path, how):
    code = {"ok": "", "timeout": "\nimport time\ntime.sleep(60)\n",
            "killed": "\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
            "error": "\nraise SystemExit(3)\n"}[how]
    pol = policy(tmp_path, [{"cidr": f"{tnet.server}/32", "ports": [8080]}])
    res = run_egress(pol, [("tcp", tnet.server, 8080)], "--timeout", "2", extra=code)
    assert res["status"] == how, res
    assert probe_result(res, "tcp", tnet.server, 8080) == "hello from 8080"
    assert not leftovers(tnet, res)


def test_concurrent_sandboxes_get_distinct_addresses(tnet, tmp_path):
    # the three at once: each holds its address until all have one
    pol = policy(tmp_path, [{"cidr": f"{tnet.server}/32", "ports": [8080, 8082]}])
    code = (f"TARGETS = [('tcp', '{tnet.server}', 8080)]\n" + PROBE + GO +
            f"print('go', wait_for_go('{tnet.server}'))\n")
    procs = [subprocess.Popen([SAFERUN, "run", "--json", "--no-check", "--profile", "host",
                               "--policy", pol, "-c", code], stdout=subprocess.PIPE)
             for _ in range(3)]
    try:
        deadline = time.time() + 30
        while time.time() < deadline and not all(link_of_run(p.pid) for p in procs):
            time.sleep(0.02)
        links = {link_of_run(p.pid) for p in procs}
        with go(tnet):
            results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for r in results:
        assert r["status"] == "ok", r
        assert r["stdout"].startswith(f"tcp {tnet.server} 8080 hello from 8080"), r
    addrs = [r["network"]["address"] for r in results]
    assert len(set(addrs)) == 3, addrs
    assert links == {host_link(a) for a in addrs}, links
    assert all(r["stdout"].endswith("go True\n") for r in results), results
    assert not leftovers(tnet, *results)


def test_uplink_forwarding_is_put_back_after_the_run(tnet, tmp_path):
    # replies from the test's server come in on its veth (its route leads to
    # the allowed /32) and on the default route's interface (which overlaps
    # everything): both must forward during the run, and neither after it
    # (once no sandbox is left: another job's may share them)
    uplink = default_uplink()
    idle = idle_forwarding([uplink]) if uplink else {}
    pol = policy(tmp_path, [{"cidr": f"{tnet.server}/32", "ports": [8080]}])
    res = run_egress(pol, [("tcp", tnet.server, 8080)])
    assert probe_result(res, "tcp", tnet.server, 8080) == "hello from 8080"
    assert not leftovers(tnet, res, idle=idle)


def test_uplink_forwarding_stays_on_until_the_last_sandbox_ends(tnet, tmp_path):
    # A is still running when B ends: B leaves the forwarding (and its
    # record) for A, which still connects; A's end puts it back
    pol = policy(tmp_path, [{"cidr": f"{tnet.server}/32", "ports": [8080, 8082]}])
    code = ("TARGETS = []\n" + PROBE + GO + f"print('go', wait_for_go('{tnet.server}'))\n"
            f"print('late', probe('tcp', '{tnet.server}', 8080))\n")
    a = subprocess.Popen([SAFERUN, "run", "--json", "--no-check", "--profile", "host",
                          "--policy", pol, "-c", code], stdout=subprocess.PIPE)
    try:
        deadline = time.time() + 20
        while time.time() < deadline and not link_of_run(a.pid):
            time.sleep(0.02)
        assert link_of_run(a.pid), "A has no sandbox link"
        assert forwarding(tnet.host_if) == "1"
        res = run_egress(pol, [("tcp", tnet.server, 8080)])
        assert probe_result(res, "tcp", tnet.server, 8080) == "hello from 8080"
        assert a.poll() is None, "A ended before B"
        assert forwarding(tnet.host_if) == "1"
        assert tnet.host_if in read_record()
        with go(tnet):
            ra = json.loads(a.communicate(timeout=60)[0])
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
    assert ra["status"] == "ok", ra
    assert ra["stdout"].strip().splitlines()[-2:] == ["go True", "late hello from 8080"], ra
    assert not leftovers(tnet, res, ra)


def test_a_crashed_runs_forwarding_is_put_back_by_the_next_run(tnet, tmp_path):
    # what a supervisor SIGKILLed mid-run leaves: the record, written before
    # the sysctl changed, and the interface forwarding; its veth went with
    # its sandbox. The next egress run (here one that needs no uplink at
    # all) ends as the last sandbox and puts the value back. In a host of
    # the test's own: the record is no other job's.
    with PrivateHost(tmp_path) as h:
        with open(h.fwd_state, "w") as f:
            f.write(f"{h.uplink} {h.uplink_index()} 0\n")
        h.forwarding("1")
        res = run_egress(policy(tmp_path, []), [], host=h)
        assert res["status"] == "ok", res
        assert h.forwarding() == "0"
        assert not os.path.exists(h.fwd_state)
        assert not h.links() and "inet saferun" not in h.tables()


def test_an_unreadable_forwarding_record_refuses_the_run(tnet, tmp_path):
    # saferun would lose the values it cannot read back: it changes nothing
    # (in a host of the test's own: no other job's run meets the garbage)
    with PrivateHost(tmp_path) as h:
        with open(h.fwd_state, "w") as f:
            f.write("garbage\n")
        res = run_egress(policy(tmp_path, [{"cidr": f"{h.server}/32", "ports": [8080]}]), [],
                         host=h)
        assert res["status"] == "internal_error", res
        assert (f'{FWD_STATE} line 1: "garbage" is not "<interface> <index> <forwarding before>"'
                in res["message"]), res
        assert h.forwarding() == "0"
        assert open(h.fwd_state).read() == "garbage\n"
        assert not h.links() and "inet saferun" not in h.tables()


def test_sandboxes_do_not_reach_each_other(tnet, tmp_path):
    # a listening sandbox and one allowed everything: the host forwards
    # nothing from one sandbox veth to another (a connection that got
    # through would wait in the listener's backlog)
    pol = policy(tmp_path, [{"cidr": "0.0.0.0/0", "ports": "*"}])
    listen = ("import socket\ns = socket.socket(); s.bind(('0.0.0.0', 7000)); s.listen()\n"
              "s.setblocking(False)\n" + GO + f"print('go', wait_for_go('{tnet.server}'))\n"
              "try:\n    s.accept(); print('accepted')\nexcept OSError:\n    print('nobody')\n")
    a = subprocess.Popen([SAFERUN, "run", "--json", "--no-check", "--profile", "host",
                          "--policy", pol, "-c", listen], stdout=subprocess.PIPE)
    try:
        deadline = time.time() + 20
        while time.time() < deadline and not link_of_run(a.pid):
            time.sleep(0.02)
        link = link_of_run(a.pid)
        assert link, "A has no sandbox link"
        addr = sandbox_address(link)
        res = run_egress(pol, [("tcp", addr, 7000)])
        with go(tnet):
            ra = json.loads(a.communicate(timeout=60)[0])
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
    assert probe_result(res, "tcp", addr, 7000) == "EHOSTUNREACH"
    assert ra["stdout"].split() == ["go", "True", "nobody"], ra
    assert not leftovers(tnet, res, ra)


def test_checker_and_audit_hook_let_egress_code_connect(tnet, tmp_path):
    # with the checker on: SR103 ("needs the network, which is off") is for
    # mode none only; the runner's audit hook lets socket.connect through
    code = (f"import socket\ns = socket.create_connection(('{tnet.server}', 8080), timeout=3)\n"
            "print(s.recv(100).decode())\n")
    pol = policy(tmp_path, [{"cidr": f"{tnet.server}/32", "ports": [8080]}])
    p = saferun("run", "--json", "--profile", "host", "--policy", pol, "-c", code)
    res = json.loads(p.stdout)
    assert res["status"] == "ok", res
    assert res["stdout"] == "hello from 8080\n"
    pol = policy(tmp_path, [], mode="none")
    res = json.loads(saferun("run", "--json", "--profile", "host", "--policy", pol, "-c",
                             code).stdout)
    assert res["status"] == "rejected"
    assert [f["rule"] for f in res["findings"]] == ["SR103"]


def test_mode_none_has_only_lo(tmp_path):
    pol = policy(tmp_path, [], mode="none")
    p = saferun("run", "--json", "--no-check", "--profile", "host", "--policy", pol, "-c",
                "import socket\nprint(socket.if_nameindex())")
    res = json.loads(p.stdout)
    assert res["stdout"].strip() == "[(1, 'lo')]"
    assert "network" not in res


def test_warm_path_refuses_egress_runs(tnet, tmp_path):
    # a warm sandbox has only lo: an egress run is "unfit" for the pool
    # and goes cold (warm.fallback "cold", the daemon's default) or, as
    # `saferun run --warm` asks, is refused
    pol = policy(tmp_path, [{"cidr": f"{tnet.server}/32", "ports": [8080]}])
    p = saferun("run", "--warm", "--no-check", "--profile", "host", "--policy", pol, "-c",
                "print(1)")
    assert p.returncode == 2
    assert p.stderr.decode() == ("saferun: the warm path cannot take this run: "
                                 "an egress network (cold path only)\n")
    assert not leftovers(tnet)


def test_policy_errors_name_the_field(tmp_path):
    cases = [
        ({"mode": "egress", "allow": [{"cidr": "198.18.0.1/24", "ports": [80]}]},
         'policy.network.allow[0].cidr: "198.18.0.1/24" has host bits set beyond /24'),
        ({"mode": "egress", "allow": [{"cidr": "198.18.0.0/24"}]},
         "policy.network.allow[0].ports: missing"),
        ({"mode": "none", "allow": [{"cidr": "198.18.0.0/24", "ports": "*"}]},
         'policy.network.allow: needs "mode": "egress"'),
    ]
    for net, want in cases:
        path = tmp_path / "bad.json"
        path.write_text(json.dumps({"network": net}))
        p = saferun("policy", "check", str(path))
        assert p.returncode == 2, p
        assert want in p.stderr.decode(), p.stderr
