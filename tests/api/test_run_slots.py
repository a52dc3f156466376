"""Work outside the run slots (issue 15, item 8): every unit of sandbox or
checker work takes one of max_concurrent_runs' slots, like a run. The
checker behind MCP's check_python, pip at session creation, a request
waiting for its session's lock; and code a stateful kernel left running
gets no CPU between runs (its cgroup is frozen until the next run)."""
import concurrent.futures as cf
import os
import shutil
import sys
import tempfile
import time

import pytest

from conftest import HOLD, release_held, wait_for
from test_mcp import new_client

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
from wheels import build_wheel  # noqa: E402

ROOTFS_DIR = os.environ.get("SAFERUN_ROOTFS_DIR", "/var/lib/saferun/rootfs")


def busy(d, pool):
    """A run holding the only slot until release_held, and its future."""
    running = pool.submit(d.post, "/v1/run", {"code": HOLD})
    assert wait_for(lambda: d.get("/health").json()["runs_in_flight"] == 1, timeout=30)
    return running


def test_check_python_takes_a_run_slot(make_daemon):
    d = make_daemon("--max-runs", "1", "--queue-depth", "0")
    m = new_client(d)
    m.initialize()
    with cf.ThreadPoolExecutor(1) as pool:
        running = busy(d, pool)
        msg = m.rpc("tools/call", {"name": "check_python", "arguments": {"code": "print(1)"}})
        res = msg["result"]
        assert res["isError"] is True, res
        assert "saferund is busy" in res["content"][0]["text"], res
        release_held(d.cgroups)
        assert running.result().json()["status"] == "ok"
    res = m.tool("check_python", {"code": "print(1)"})
    assert res["isError"] is False and res["content"][0]["text"].startswith("clean"), res
    assert 'saferund_runs_refused_total{reason="queue_full"} 1' in d.get("/metrics").text


@pytest.mark.skipif(
    not os.path.exists(os.path.join(ROOTFS_DIR, "minimal", "usr", "bin", "python3")),
    reason="needs the minimal profile (scripts/build-rootfs minimal)")
def test_session_requirements_take_a_run_slot(make_daemon):
    place = tempfile.mkdtemp(prefix="saferun-slots-")
    try:
        os.chmod(place, 0o755)
        os.mkdir(os.path.join(place, "wheels"), 0o755)
        build_wheel(os.path.join(place, "wheels"), "tinyleaf", "1.0")
        deps = {"filesystem": {"profile": "minimal"},
                "dependencies": {"allow": ["tinyleaf"],
                                 "wheelhouse": os.path.join(place, "wheels"), "cache": False}}
        d = make_daemon("--max-runs", "1", "--queue-depth", "0",
                        policies={"default": deps})
        with cf.ThreadPoolExecutor(1) as pool:
            running = busy(d, pool)
            r = d.post("/v1/sessions", {"requirements": ["tinyleaf"]})
            assert r.status_code == 429, r.text
            assert "saferund is busy" in r.json()["error"] and r.headers["Retry-After"] == "1"
            assert d.get("/v1/sessions").json()["count"] == 0
            assert d.mounted_workspaces() == []  # its workspace went with it
            release_held(d.cgroups)
            assert running.result().json()["status"] == "ok"
        # the slot came back (an install here would take ~15 s: test_dependencies.py)
        assert d.get("/health").json()["runs_in_flight"] == 0
        assert d.post("/v1/run", {"code": "print(1)"}).json()["stdout"] == "1\n"
    finally:
        shutil.rmtree(place)


def test_a_run_waiting_for_its_sessions_lock_holds_a_place_in_the_queue(make_daemon):
    d = make_daemon("--max-runs", "1", "--queue-depth", "4")
    r = d.post("/v1/sessions", {"stateful": True})
    assert r.status_code == 201, r.text
    url = f"/v1/sessions/{r.json()['session_id']}/run"
    with cf.ThreadPoolExecutor(2) as pool:
        first = pool.submit(d.post, url, {"code": HOLD + "print('first')"})
        assert wait_for(lambda: d.get("/health").json()["runs_in_flight"] == 1, timeout=30)
        second = pool.submit(d.post, url, {"code": "print('second')"})
        # it waits in the run queue, counted, not out of sight on the lock
        assert wait_for(lambda: d.get("/health").json()["queue_depth"] == 1, timeout=30)
        assert d.get("/health").json()["runs_in_flight"] == 1
        release_held(d.cgroups)
        assert first.result().json()["stdout"] == "first\n"
        assert second.result().json()["stdout"] == "second\n"
    health = d.get("/health").json()
    assert health["runs_in_flight"] == 0 and health["queue_depth"] == 0


def kernel_cpu_ns(d):
    """CPU time used so far by the daemon's one sandbox group (the kernel)."""
    for c in d.cgroups:
        parent = os.path.join(c, "saferun")
        groups = [os.path.join(parent, e) for e in os.listdir(parent)
                  if os.path.isdir(os.path.join(parent, e))] if os.path.isdir(parent) else []
        for g in groups:
            if os.path.exists(os.path.join(g, "cpuacct.usage")):  # v1
                with open(os.path.join(g, "cpuacct.usage")) as f:
                    return int(f.read())
            if os.path.exists(os.path.join(g, "cpu.stat")):  # v2
                with open(os.path.join(g, "cpu.stat")) as f:
                    return int(dict(l.split() for l in f)["usage_usec"]) * 1000
    raise AssertionError(f"no sandbox group of the daemon: {d.cgroups}")


def test_a_thread_left_spinning_gets_no_cpu_between_runs(daemon):
    r = daemon.post("/v1/sessions", {"stateful": True})
    assert r.status_code == 201, r.text
    url = f"/v1/sessions/{r.json()['session_id']}/run"
    spin = ("import threading\n"
            "def spin():\n    while True:\n        pass\n"
            "threading.Thread(target=spin, name='spinner', daemon=True).start()\n"
            "print('spinning')")
    body = daemon.post(url, {"code": spin}).json()
    assert body["status"] == "ok" and body["stdout"] == "spinning\n", body
    # frozen before the answer (sr_cgroup_freeze waits for the kernel's
    # word): from now on the spinner gets nothing, where it would take
    # hundreds of ms of its CPU limit each second
    before = kernel_cpu_ns(daemon)
    time.sleep(1)
    used_ms = (kernel_cpu_ns(daemon) - before) / 1e6
    assert used_ms < 50, f"the idle kernel used {used_ms:.0f} ms of CPU in 1 s"
    # thawed for the next run: the thread is still there, and spins again
    body = daemon.post(url, {"code": "import threading, time\nt = time.process_time()\n"
                                     "time.sleep(0.5)\n"
                                     "print([x.name for x in threading.enumerate()"
                                     " if x.name == 'spinner'], time.process_time() > t)"})
    assert body.json()["stdout"] == "['spinner'] True\n", body.text
