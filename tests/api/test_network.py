"""The egress network mode through saferund (docs/network.md): parallel
runs in one daemon, a stateful session's runs, and the start-up clean-up of
the host state (a crashed run's veth goes with its sandbox's network
namespace; the host table inet saferun is removed, and the uplinks'
forwarding put back, once no sandbox veth is left)."""
import concurrent.futures as cf
import os
import threading

import pytest

from conftest import HOST_POLICY, own_sandbox_processes, wait_for
from egress_host import PrivateHost, host_link, own_leftovers, sandbox_links
from netns_server import ServerNetns, default_uplink


def test_start_up_removes_a_stale_egress_table(make_daemon, tmp_path):
    # what a supervisor that crashed mid-run leaves behind, in a host of the
    # test's own (no other job's sandbox keeps the table, or sees it go)
    with PrivateHost(tmp_path) as h:
        d = make_daemon(start=False)
        h.sh("nft -f - <<'EOF'\ntable inet saferun {\n"
             "  chain input { type filter hook input priority filter; policy accept;\n"
             "    iifname \"sr-*\" counter reject with icmpx admin-prohibited\n  }\n}\nEOF\n")
        assert "table inet saferun" in h.tables()
        d.start(argv_prefix=h.prefix())
        assert "table inet saferun" not in h.tables()
        assert [l["msg"] for l in d.lines("cleanup")] == \
            ["start-up: removed the egress table inet saferun left behind"], d.text()


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


def test_start_up_puts_back_a_crashed_runs_forwarding(make_daemon, tmp_path):
    # a supervisor SIGKILLed mid-run: its record of the uplink it turned
    # forwarding on for, and the interface still forwarding (in a host of
    # the test's own: the record is no other job's)
    with PrivateHost(tmp_path) as h:
        d = make_daemon(start=False)
        with open(h.fwd_state, "w") as f:
            f.write(f"{h.uplink} {h.uplink_index()} 0\n")
        h.forwarding("1")
        d.start(argv_prefix=h.prefix())
        assert h.forwarding() == "0"
        assert not os.path.exists(h.fwd_state)
        assert [l["msg"] for l in d.lines("cleanup")] == \
            ["start-up: put back the uplinks' forwarding an egress run left on"], d.text()


def test_a_daemon_killed_mid_run_leaves_the_values_to_its_next_start(make_daemon, tmp_path):
    # SIGKILL while an egress sandbox runs: the sandbox dies with it and its
    # veth with its namespace; the record, written before the sysctl
    # changed, is what lets the next start put the value back. In a host of
    # the test's own: what the crash leaves is no other job's to see.
    with PrivateHost(tmp_path) as h:
        egress = {**HOST_POLICY, "network": {"mode": "egress", "allow": [
            {"cidr": f"{h.server}/32", "ports": [8080]}]}}
        d = make_daemon(policies={"default": HOST_POLICY, "egress": egress}, start=False)
        d.start(argv_prefix=h.prefix())

        def run():
            try:
                d.run("import time\ntime.sleep(60)", policy="egress")
            except Exception:
                pass  # the daemon is killed under it
        t = threading.Thread(target=run)
        t.start()
        try:
            assert wait_for(lambda: h.forwarding() == "1", timeout=30)
            assert len(h.links()) == 1
            d.proc.kill()
            d.proc.wait()
            # the sandbox dies with its supervisor (parent-death signal)...
            assert wait_for(lambda: not own_sandbox_processes(d.cgroups), timeout=30)
            # ...and its veth with its namespace: the peer lives there, and
            # the kernel deletes the pair when it tears the namespace down.
            # That runs on one kernel worker shared by every namespace that
            # ends on the host (each sandbox has one): behind a full suite's
            # it has taken over 30 s, on a quiet host it is well under one.
            assert wait_for(lambda: not h.links(), timeout=120, step=0.1), h.links()
            # what the crash left
            assert h.forwarding() == "1"
            assert f"\n{h.uplink} " in "\n" + open(h.fwd_state).read()
            assert "table inet saferun" in h.tables()
            d.start(argv_prefix=h.prefix())
            assert h.forwarding() == "0"
            assert not os.path.exists(h.fwd_state)
            assert "table inet saferun" not in h.tables()
            msgs = [l["msg"] for l in d.lines("cleanup")]
            assert "start-up: removed the egress table inet saferun left behind" in msgs, msgs
            assert "start-up: put back the uplinks' forwarding an egress run left on" in msgs, msgs
        finally:
            t.join(timeout=60)


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
    addresses = {r["network"]["address"] for r in results}
    assert len(addresses) == 4
    # a stateful session keeps one sandbox (one veth) across runs; each
    # run reports its own refusals
    sid = d.post("/v1/sessions", {"stateful": True, "policy": "egress"}).json()["session_id"]
    for _ in range(2):
        r = d.post(f"/v1/sessions/{sid}/run", {"code": code}).json()
        assert r["status"] == "ok", r
        assert r["stdout"] == "hello from 8080\nEHOSTUNREACH\n", r
        assert r["network"]["denied_packets"] == 1, r
        addresses.add(r["network"]["address"])
    assert len(addresses) == 5, addresses
    assert host_link(r["network"]["address"]) in sandbox_links()
    with d.session() as s:
        assert s.delete(d.url(f"/v1/sessions/{sid}"), timeout=60).status_code == 200
    assert d.run("print(1)")["stdout"] == "1\n"
    assert not own_leftovers(addresses, {tnet.host_if: "0"})


def test_parallel_egress_set_ups_do_not_deadlock(make_daemon, tnet):
    # The host lock is held while a sandbox's veth and uplinks are set up;
    # another thread cloning its sandbox meanwhile gives the child a copy of
    # every fd. With a lock that belongs to the open file (flock), that
    # child held it while its parent waited for it: the run never started.
    egress = {**HOST_POLICY, "network": {"mode": "egress", "allow": [
        {"cidr": f"{tnet.server}/32", "ports": [8080]}]}}
    d = make_daemon("--max-runs", "8", policies={"default": HOST_POLICY, "egress": egress})
    code = PROBE.format(ip=tnet.server)
    addresses = set()
    for _ in range(4):
        with cf.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(
                lambda _: d.post("/v1/run", {"code": code, "policy": "egress"},
                                 timeout=45).json(), range(8)))
        assert [r["stdout"] for r in results] == ["hello from 8080\nEHOSTUNREACH\n"] * 8, \
            [(r["status"], r.get("message")) for r in results
             if r["stdout"] != "hello from 8080\nEHOSTUNREACH\n"]
        addresses |= {r["network"]["address"] for r in results}
    assert not own_leftovers(addresses, {tnet.host_if: "0"})


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
    assert not own_leftovers([r["network"]["address"]], {tnet.host_if: "0"})
