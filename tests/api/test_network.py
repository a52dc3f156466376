"""The egress network mode through saferund (docs/network.md): parallel
runs in one daemon, a stateful session's runs, and the start-up clean-up of
the host state (a crashed run's veth goes with its sandbox's network
namespace; the host table inet saferun is removed, and the uplinks'
forwarding put back, once no sandbox veth is left)."""
import concurrent.futures as cf
import os
import subprocess
import threading
import time

import pytest

from conftest import HOST_POLICY, own_sandbox_processes, wait_for
from netns_server import ServerNetns, default_uplink


def nft_tables():
    return subprocess.run(["nft", "list", "tables"], capture_output=True, text=True,
                          check=True).stdout


def sandbox_links():
    out = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    return [l.split()[0] for l in out.splitlines() if l.startswith("sr-")]


def test_start_up_removes_a_stale_egress_table(make_daemon):
    assert sandbox_links() == [], "an egress sandbox is running elsewhere"
    d = make_daemon(start=False)
    # what a supervisor that crashed mid-run leaves behind
    subprocess.run(["nft", "-f", "-"], input="table inet saferun {\n"
                   "  chain input { type filter hook input priority filter; policy accept;\n"
                   "    iifname \"sr-*\" counter reject with icmpx admin-prohibited\n  }\n}\n",
                   text=True, check=True)
    assert "table inet saferun" in nft_tables()
    try:
        d.start()
        assert "table inet saferun" not in nft_tables()
        assert [l["msg"] for l in d.lines("cleanup")] == \
            ["start-up: removed the egress table inet saferun left behind"], d.text()
    finally:
        subprocess.run(["nft", "delete", "table", "inet", "saferun"], capture_output=True)


@pytest.fixture(scope="module")
def tnet():
    uplink = default_uplink()
    fwd = f"/proc/sys/net/ipv4/conf/{uplink}/forwarding" if uplink else None
    saved = open(fwd).read() if fwd else None
    with ServerNetns() as t:
        yield t
    if fwd:
        with open(fwd, "w") as f:
            f.write(saved)


FWD_STATE = "/run/saferun/egress.forwarding"


def forwarding(ifname, value=None):
    path = f"/proc/sys/net/ipv4/conf/{ifname}/forwarding"
    if value is not None:
        with open(path, "w") as f:
            f.write(value)
    with open(path) as f:
        return f.read().strip()


def test_start_up_puts_back_a_crashed_runs_forwarding(make_daemon, tnet):
    # a supervisor SIGKILLed mid-run: its record of the uplink it turned
    # forwarding on for, and the interface still forwarding
    assert sandbox_links() == [], "an egress sandbox is running elsewhere"
    assert forwarding(tnet.host_if) == "0"
    d = make_daemon(start=False)
    index = int(open(f"/sys/class/net/{tnet.host_if}/ifindex").read())
    try:
        with open(FWD_STATE, "w") as f:
            f.write(f"{tnet.host_if} {index} 0\n")
        forwarding(tnet.host_if, "1")
        d.start()
        assert forwarding(tnet.host_if) == "0"
        assert not os.path.exists(FWD_STATE)
        assert [l["msg"] for l in d.lines("cleanup")] == \
            ["start-up: put back the uplinks' forwarding an egress run left on"], d.text()
    finally:
        forwarding(tnet.host_if, "0")
        if os.path.exists(FWD_STATE):
            os.unlink(FWD_STATE)


def test_a_daemon_killed_mid_run_leaves_the_values_to_its_next_start(make_daemon, tnet):
    # SIGKILL while an egress sandbox runs: the sandbox dies with it and its
    # veth with its namespace; the record, written before the sysctl
    # changed, is what lets the next start put the value back
    assert sandbox_links() == [], "an egress sandbox is running elsewhere"
    assert forwarding(tnet.host_if) == "0"
    egress = {**HOST_POLICY, "network": {"mode": "egress", "allow": [
        {"cidr": f"{tnet.server}/32", "ports": [8080]}]}}
    d = make_daemon(policies={"default": HOST_POLICY, "egress": egress})

    def run():
        try:
            d.run("import time\ntime.sleep(60)", policy="egress")
        except Exception:
            pass  # the daemon is killed under it
    t = threading.Thread(target=run)
    t.start()
    try:
        deadline = time.time() + 30
        while time.time() < deadline and forwarding(tnet.host_if) != "1":
            time.sleep(0.02)
        assert forwarding(tnet.host_if) == "1"
        d.proc.kill()
        d.proc.wait()
        # the sandbox dies with its supervisor (parent-death signal)...
        assert wait_for(lambda: not own_sandbox_processes(d.cgroups), timeout=30)
        # ...and its veth with its namespace: the peer lives there, and the
        # kernel deletes the pair when it tears the namespace down. That
        # runs on one kernel worker shared by every namespace that ends on
        # the host (each sandbox has one): behind a full suite's it has
        # taken over 30 s, on a quiet host it is well under one.
        assert wait_for(lambda: not sandbox_links(), timeout=120, step=0.1), sandbox_links()
        # what the crash left
        assert forwarding(tnet.host_if) == "1"
        assert f"\n{tnet.host_if} " in "\n" + open(FWD_STATE).read()
        d.start()
        assert forwarding(tnet.host_if) == "0"
        assert not os.path.exists(FWD_STATE)
        assert "table inet saferun" not in nft_tables()
        msgs = [l["msg"] for l in d.lines("cleanup")]
        assert "start-up: put back the uplinks' forwarding an egress run left on" in msgs, msgs
    finally:
        t.join(timeout=60)
        forwarding(tnet.host_if, "0")
        if os.path.exists(FWD_STATE):
            os.unlink(FWD_STATE)


PROBE = """
import errno, socket
for port in (8080, 8081):
    try:
        print(socket.create_connection(('{ip}', port), timeout=3).recv(100).decode())
    except OSError as e:
        print(errno.errorcode[e.errno])
"""


def test_parallel_runs_and_a_session(make_daemon, tnet):
    egress = {**HOST_POLICY, "network": {"mode": "egress", "allow": [
        {"cidr": f"{tnet.server}/32", "ports": [8080]}]}}
    d = make_daemon("--max-runs", "4", policies={"default": HOST_POLICY, "egress": egress})
    code = PROBE.format(ip=tnet.server)
    with cf.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: d.run(code, policy="egress"), range(4)))
    for r in results:
        assert r["status"] == "ok", r
        assert r["stdout"] == "hello from 8080\nEHOSTUNREACH\n", r
        assert r["network"]["denied"] == [{"address": tnet.server, "proto": "tcp", "port": 8081}]
    assert len({r["network"]["address"] for r in results}) == 4
    # a stateful session keeps one sandbox (one veth) across runs; each
    # run reports its own refusals
    sid = d.post("/v1/sessions", {"stateful": True, "policy": "egress"}).json()["session_id"]
    for _ in range(2):
        r = d.post(f"/v1/sessions/{sid}/run", {"code": code}).json()
        assert r["status"] == "ok", r
        assert r["stdout"] == "hello from 8080\nEHOSTUNREACH\n", r
        assert r["network"]["denied_packets"] == 1, r
    assert len(sandbox_links()) == 1
    with d.session() as s:
        assert s.delete(d.url(f"/v1/sessions/{sid}"), timeout=60).status_code == 200
    assert d.run("print(1)")["stdout"] == "1\n"
    assert sandbox_links() == []
    assert "table inet saferun" not in nft_tables()
    assert forwarding(tnet.host_if) == "0" and not os.path.exists(FWD_STATE)


def test_parallel_egress_set_ups_do_not_deadlock(make_daemon, tnet):
    # The host lock is held while a sandbox's veth and uplinks are set up;
    # another thread cloning its sandbox meanwhile gives the child a copy of
    # every fd. With a lock that belongs to the open file (flock), that
    # child held it while its parent waited for it: the run never started.
    egress = {**HOST_POLICY, "network": {"mode": "egress", "allow": [
        {"cidr": f"{tnet.server}/32", "ports": [8080]}]}}
    d = make_daemon("--max-runs", "8", policies={"default": HOST_POLICY, "egress": egress})
    code = PROBE.format(ip=tnet.server)
    for _ in range(4):
        with cf.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(
                lambda _: d.post("/v1/run", {"code": code, "policy": "egress"},
                                 timeout=45).json(), range(8)))
        assert [r["stdout"] for r in results] == ["hello from 8080\nEHOSTUNREACH\n"] * 8
    assert sandbox_links() == []
    assert forwarding(tnet.host_if) == "0" and not os.path.exists(FWD_STATE)


def test_a_warm_policy_runs_egress_cold(make_daemon, tnet):
    # a warm pool's sandboxes have only lo: egress requests fall back cold
    egress = {**HOST_POLICY, "warm": {"enabled": True, "pool_size": 1},
              "network": {"mode": "egress", "allow": [
                  {"cidr": f"{tnet.server}/32", "ports": [8080]}]}}
    d = make_daemon(policies={"default": HOST_POLICY, "egress": egress})
    r = d.run(PROBE.format(ip=tnet.server), policy="egress")
    assert r["status"] == "ok", r
    assert r["path"] == "cold"
    assert r["stdout"] == "hello from 8080\nEHOSTUNREACH\n", r
    assert sandbox_links() == []
