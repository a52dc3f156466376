"""The egress mode's host state (docs/network.md) as the egress tests check
it (integration and api), with other jobs' egress sandboxes on the machine.

- A test's own sandboxes: the host end of a sandbox's veth is "sr-<slot>",
  and the sandbox is .2 of the slot's /30 in 10.213.0.0/16, so a result's
  network.address names its link (host_link); a running sandbox's default
  route, through the host end (.1), names it too (link_of_pid).
- What every egress sandbox of the host shares (the table inet saferun, the
  uplinks' forwarding and its record) is read under saferun's own lock, a
  POSIX record lock on /run/saferun/egress.lock (what the supervisor's
  lock_host takes), where its invariant holds: none of it is there while
  no sandbox link is (shared_problems).
- A test that leaves such state behind on purpose (a crash, a record written
  by hand) runs its saferun or saferund in a PrivateHost: a network
  namespace and a /run/saferun of its own."""
import contextlib
import fcntl
import ipaddress
import os
import random
import struct
import subprocess

from netns_server import ip

RUN_DIR = "/run/saferun"
FWD_STATE = RUN_DIR + "/egress.forwarding"
# The comment in the table saferun makes (egress.c, HOST_TABLE_MARK): a
# table without it is not one this build made.
TABLE_MARK = "saferun: only replies into sandboxes"
POOL_BASE = int(ipaddress.IPv4Address("10.213.0.0"))


def host_link(address):
    """The host end of the veth of the sandbox at address (a result's
    network.address)."""
    off = int(ipaddress.IPv4Address(address)) - POOL_BASE
    assert 0 <= off < 1 << 16 and off % 4 == 2, address
    return f"sr-{off // 4}"


def host_end_address(address):
    return str(ipaddress.IPv4Address(address) - 1)


def sandbox_links():
    """Every sandbox link of the host (anyone's)."""
    return {n for n in os.listdir("/sys/class/net") if n.startswith("sr-")}


def link_of_pid(pid):
    """The host end of the veth of the network namespace pid is in (from
    its default route's gateway), or None."""
    try:
        with open(f"/proc/{pid}/net/route") as f:
            rows = f.read().splitlines()[1:]
    except OSError:
        return None
    for row in rows:
        f = row.split()
        if len(f) > 2 and f[1] == "00000000":
            gw = int(ipaddress.IPv4Address(struct.pack("<I", int(f[2], 16))))
            if 0 <= gw - POOL_BASE < 1 << 16 and (gw - POOL_BASE) % 4 == 1:
                return f"sr-{(gw - POOL_BASE) // 4}"
    return None


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(c) for c in f.read().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def link_of_run(pid):
    """The host link of the egress sandbox a `saferun run` (pid) started,
    once it has its address and route, else None."""
    for p in descendants(pid):
        link = link_of_pid(p)
        if link and link in sandbox_links():
            return link
    return None


@contextlib.contextmanager
def saferun_lock():
    """Hold the lock every supervisor takes to change the shared state."""
    os.makedirs(RUN_DIR, exist_ok=True)
    fd = os.open(RUN_DIR + "/egress.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)  # F_SETLKW, a record lock like lock_host's
        yield
    finally:
        os.close(fd)  # this process's only fd of the file: the lock goes with it


def forwarding(ifname):
    with open(f"/proc/sys/net/ipv4/conf/{ifname}/forwarding") as f:
        return f.read().strip()


def read_record():
    """{interface: forwarding before} from saferun's forwarding record."""
    try:
        with open(FWD_STATE) as f:
            return {line.split()[0]: line.split()[2] for line in f if len(line.split()) == 3}
    except FileNotFoundError:
        return {}


def idle_forwarding(ifnames):
    """{interface: forwarding once no sandbox needs it}: what saferun's
    record will put back, or the value now, read under the lock."""
    with saferun_lock():
        record = read_record()
        return {i: record.get(i, forwarding(i)) for i in ifnames}


def shared_problems(idle=None):
    """The shared egress state read at one instant, under saferun's lock,
    against its invariant: with no sandbox link on the host there is no
    saferun table, no forwarding record, and each interface of idle
    ({name: value}, the test's uplinks) has its idle value; with some, an
    interface off its idle value is in the record (to be put back). []
    when it holds."""
    idle = idle or {}
    with saferun_lock():
        links = sandbox_links()
        table = subprocess.run(["nft", "list", "table", "inet", "saferun"],
                               capture_output=True, text=True).stdout
        record = open(FWD_STATE).read() if os.path.exists(FWD_STATE) else None
        now = {i: forwarding(i) for i in idle}
    recorded = {line.split()[0] for line in (record or "").splitlines() if line.strip()}
    if links:
        return [f"forwarding {v} on {i} but not in {FWD_STATE}" for i, v in now.items()
                if v != idle[i] and i not in recorded]
    problems = ["table inet saferun with no sandbox link"] if TABLE_MARK in table else []
    if record is not None:
        problems.append(f"{FWD_STATE} with no sandbox link: {record!r}")
    return problems + [f"forwarding {v} on {i} (was {idle[i]}) with no sandbox link"
                       for i, v in now.items() if v != idle[i]]


def own_leftovers(addresses, idle=None):
    """What the sandboxes at these addresses (their results' network.address)
    left on the host: their links and host-end addresses, and the shared
    state's invariant (shared_problems)."""
    links = sandbox_links()
    addrs = ip("-4", "-o", "addr").stdout
    left = []
    for a in addresses:
        if host_link(a) in links:
            left.append(f"link {host_link(a)}")
        if f" {host_end_address(a)}/" in addrs:
            left.append(f"addr {host_end_address(a)}")
    return left + shared_problems(idle)


# In a PrivateHost's mount namespace (its mounts slaves of the host's,
# none of its own seen outside): the test's dir as /run/saferun, with every dir of
# the host's bound in (ids/: uid slots stay host-wide).
BIND_RUN_DIR = r"""set -e
for d in /run/saferun/*/; do
  d=${d%/}; [ -d "$d" ] || continue
  mkdir -p "$0/${d##*/}"; mount --bind "$d" "$0/${d##*/}"
done
mount --rbind "$0" /run/saferun
exec "$@"
"""


class PrivateHost:
    """A network namespace and a /run/saferun of a test's own, for a saferun
    or saferund whose egress state (its sandboxes' links, the table, the
    uplinks' forwarding and its record, the lock) is the test's alone. Its
    uplink is an interface toward a /30 whose .2 (server) is an
    allowed destination's address (nothing answers there)."""

    def __init__(self, tmp_dir):
        tag = f"{os.getpid() % 100000}x{random.randrange(1000)}"
        self.ns = f"srh{tag}"
        self.run_dir = os.path.join(str(tmp_dir), "run-saferun")
        os.makedirs(self.run_dir, exist_ok=True)
        self.fwd_state = os.path.join(self.run_dir, "egress.forwarding")
        self.uplink = "up0"
        net = f"198.18.{random.randrange(1, 250)}"
        self.server = f"{net}.2"
        ip("netns", "add", self.ns)
        try:
            ip("-n", self.ns, "link", "set", "lo", "up")
            # a veth with its peer in the namespace too (this kernel has
            # no dummy links): a route to the server's /30
            ip("-n", self.ns, "link", "add", self.uplink, "type", "veth", "peer", "name",
               self.uplink + "p")
            ip("-n", self.ns, "addr", "add", f"{net}.1/30", "dev", self.uplink)
            ip("-n", self.ns, "link", "set", self.uplink + "p", "up")
            ip("-n", self.ns, "link", "set", self.uplink, "up")
        except BaseException:
            self.close()
            raise

    def prefix(self):
        """argv before a saferun or saferund command to run it here."""
        # not `ip netns exec`: its fresh /sys has no cgroup mounts
        return ["nsenter", f"--net=/run/netns/{self.ns}", "unshare", "--mount",
                "--propagation", "slave", "sh", "-c", BIND_RUN_DIR, self.run_dir]

    def sh(self, script):
        return subprocess.run(["ip", "netns", "exec", self.ns, "sh", "-c", script],
                              capture_output=True, text=True, check=True).stdout

    def links(self):
        return {n for n in self.sh("ls /sys/class/net").split() if n.startswith("sr-")}

    def tables(self):
        return self.sh("nft list tables")

    def forwarding(self, value=None):
        path = f"/proc/sys/net/ipv4/conf/{self.uplink}/forwarding"
        if value is not None:
            self.sh(f"echo {value} > {path}")
        return self.sh(f"cat {path}").strip()

    def uplink_index(self):
        return int(self.sh(f"cat /sys/class/net/{self.uplink}/ifindex"))

    def close(self):
        ip("netns", "del", self.ns, check=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
