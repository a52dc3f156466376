"""The warm path through saferund: a policy's warm pool (a zygote
interpreter and pool_size sandboxes it forked ahead) in /v1/health, runs
that say "path": "warm" and keep every limit, check and isolation of a cold
run, the fallback while the zygote is down, SIGHUP rebuilding the pools,
and nothing left of them after the daemon stops.

Layout on the host (runtime/lib/run/warm.c, runtime/zygote/zygote.c): each
sandbox is a sr-* group under the daemon's saferun/ groups holding a
saferun-init and a python3. The zygote's init is the daemon's child; a
forked sandbox's init is the zygote python's child."""
import base64
import concurrent.futures as cf
import contextlib
import json
import os
import re
import signal
import time

import pytest

from conftest import HOST_POLICY, own_sandbox_processes, wait_for
from sandbox_host import host_leftovers, leftovers_since
from test_mcp import Mcp

PRELOAD = ("json", "decimal", "random")
LIMITS = {"memory": "256M", "pids": 32, "wall_time": "10s"}
NO_CHECK = {"checker": {"enabled": False}}
ID = re.compile(r"sr-[0-9a-f]{16}")


def warm_policy(pool_size=2, preload=PRELOAD, fallback="cold", enabled=True, warmup=None,
                **extra):
    warm = {"enabled": enabled, "preload": list(preload), "pool_size": pool_size,
            "fallback": fallback}
    if warmup is not None:
        warm["warmup"] = warmup
    return {**HOST_POLICY, "limits": LIMITS, **extra, "warm": warm}


def warm_daemon(make_daemon, *args, **policies):
    d = make_daemon(*args, policies=policies or {"default": warm_policy()})
    for name, doc in (policies or {"default": warm_policy()}).items():
        if doc["warm"]["enabled"]:
            wait_pool_ready(d, name)
    return d


# ---- the pool in /v1/health ---------------------------------------------------

def pool(d, policy="default"):
    got = [w for w in d.get("/v1/health").json()["warm"] if w["policy"] == policy]
    assert len(got) == 1, d.get("/v1/health").json()
    return got[0]


def wait_pool_ready(d, policy="default", timeout=30):
    def ready():
        w = pool(d, policy)
        return w["zygote_up"] and w["ready"] == w["pool_size"]
    assert wait_for(ready, timeout=timeout, step=0.05), (pool(d, policy), d.text()[-2000:])
    return pool(d, policy)


# ---- the pool on the host -------------------------------------------------------

def proc_status(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return dict(l.split(":\t", 1) for l in f.read().splitlines() if ":\t" in l)
    except OSError:
        return None


def sr_group(pid):
    """The sr-* group a process is in (the same in every hierarchy)."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                for part in line.strip().split("/"):
                    if ID.fullmatch(part):
                        return part
    except OSError:
        pass
    return None


def layout(d):
    """{"top": {group: pids}, "forked": {group: pids}}: the groups whose init
    is the daemon's child (the zygotes, and cold runs in flight) and those
    whose init a zygote's python forked (the pool's sandboxes and warm runs)."""
    procs = {}
    for pid in own_sandbox_processes(d.cgroups):
        st = proc_status(pid)
        if st:
            procs[pid] = {"name": st["Name"], "ppid": int(st["PPid"]), "group": sr_group(pid)}
    top, forked = {}, {}
    for pid, p in procs.items():
        if p["name"] != "saferun-init":
            continue
        parent = procs.get(p["ppid"])
        if p["ppid"] == d.proc.pid:
            top[p["group"]] = []
        elif parent and parent["name"] == "python3":
            forked[p["group"]] = []
    for pid, p in procs.items():
        for groups in (top, forked):
            if p["group"] in groups:
                groups[p["group"]].append(pid)
    return {"top": top, "forked": forked}


def group_names(d):
    return {os.path.basename(g) for g in d.leftover_groups()}


def kill_all(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def gone(pids):
    return all(not os.path.exists(f"/proc/{pid}") for pid in pids)


def listdir(path):
    try:
        return set(os.listdir(path))
    except FileNotFoundError:  # saferun/ goes with its last group
        return set()


def freezer(d, group):
    """The file that freezes a sandbox group, and its two values."""
    v1 = [c for c in d.cgroups if "/freezer/" in c]
    if v1:
        return os.path.join(v1[0], "saferun", group, "freezer.state"), "FROZEN", "THAWED"
    return os.path.join(d.cgroups[0], "saferun", group, "cgroup.freeze"), "1", "0"


@contextlib.contextmanager
def zygote_held_down(d):
    """SIGKILL the (only) pool's zygote and freeze its replacement before it
    is ready: until the block ends the pool has no zygote (the pool thread
    waits for the frozen one's "R"). Thawed after, and the pool ready again."""
    base = os.path.dirname(os.path.dirname(freezer(d, "x")[0]))
    for _ in range(3):
        before = wait_pool_ready(d)
        top = layout(d)["top"]
        assert len(top) == 1, top
        groups = listdir(base)
        kill_all(next(iter(top.values())))
        new, end = None, time.monotonic() + 10
        while not new and time.monotonic() < end:
            new = next(iter(listdir(base) - groups), None)
        assert new, "no new zygote was started"
        path, frozen, thawed = freezer(d, new)
        with open(path, "w") as f:
            f.write(frozen)
        time.sleep(0.3)
        w = pool(d)
        if not w["zygote_up"] and w["zygote_starts"] == before["zygote_starts"]:
            break
        with open(path, "w") as f:  # it got ready first: again
            f.write(thawed)
    else:
        raise AssertionError("could not freeze a new zygote before it was ready")
    try:
        yield before
    finally:
        with open(path, "w") as f:
            f.write(thawed)
    wait_pool_ready(d)


def run_ok(d, code, **fields):
    r = d.run(code, **fields)
    assert r["status"] == "ok", r
    return r


# ---- the pool and its runs ---------------------------------------------------------

def test_the_pool_is_ready_in_health_and_runs_go_warm(make_daemon):
    d = make_daemon(policies={"default": warm_policy(),
                              "host": {**HOST_POLICY, "warm": {"enabled": False}}})
    w = wait_pool_ready(d)
    assert w == {"policy": "default", "languages": ["python"], "zygote_up": True, "ready": 2,
                 "pool_size": 2,
                 "zygote_starts": 1, "spawned": 2, "spawn_failures": 0, "warm_runs": 0,
                 "cold_runs": 0}
    assert [x["policy"] for x in d.get("/v1/health").json()["warm"]] == ["default"]
    assert [l["msg"] for l in d.lines("warm")] == \
        ["policy default: warm pool of 2 starting (preload: 3 modules)"]
    # on the host: a zygote (the daemon's child) and two sandboxes it forked,
    # an init and a python3 each, in a group each
    lay = layout(d)
    assert len(lay["top"]) == 1 and len(lay["forked"]) == 2, lay
    assert all(len(p) == 2 for g in lay.values() for p in g.values()), lay
    assert group_names(d) == set(lay["top"]) | set(lay["forked"])

    r = run_ok(d, "import decimal, json\n"
                  "print(json.dumps({'x': str(decimal.Decimal('1.10') * 3)}))")
    assert r["path"] == "warm" and r["output"] == '{"x": "3.30"}\n' and r["exit_code"] == 0
    # a pre-forked sandbox took it, and its id is that sandbox's group
    assert r["id"] in lay["forked"]
    r = d.run("import sys\nprint('err', file=sys.stderr)\nsys.exit(3)")
    assert (r["status"], r["exit_code"], r["path"], r["stderr"]) == ("error", 3, "warm", "err\n")
    # a policy with warm off runs cold and leaves the pool alone
    r = run_ok(d, "print('cold')", policy="host")
    assert r["path"] == "cold" and r["output"] == "cold\n"
    w = wait_pool_ready(d)
    assert (w["warm_runs"], w["cold_runs"], w["spawned"], w["spawn_failures"]) == (2, 0, 4, 0)


def test_each_run_has_an_id_and_a_group_of_its_own(make_daemon):
    d = warm_daemon(make_daemon)
    zygote = set(layout(d)["top"])
    ids = [run_ok(d, "print(1)")["id"] for _ in range(4)]
    assert all(ID.fullmatch(i) for i in ids) and len(set(ids)) == 4, ids
    assert not set(ids) & zygote
    # during a run its group holds its init and python, nothing else's;
    # the pool full first, so the run takes a sandbox forked before it
    # (not one forked while it waits)
    wait_pool_ready(d)
    with cf.ThreadPoolExecutor(1) as ex:
        fut = ex.submit(d.run, "import time; time.sleep(1); print('done')")
        assert wait_for(lambda: d.get("/health").json()["runs_in_flight"] == 1)
        ready_before = set(layout(d)["forked"])
        r = fut.result(timeout=30)
    assert r["status"] == "ok" and r["path"] == "warm"
    assert r["id"] in ready_before and r["id"] not in ids + list(zygote)
    # and the group goes with the run
    assert wait_for(lambda: r["id"] not in group_names(d), timeout=5)
    assert set(layout(d)["top"]) == zygote


def test_the_checker_still_rejects_and_nothing_runs(make_daemon):
    d = warm_daemon(make_daemon)
    before = pool(d)
    ready_before = set(layout(d)["forked"])
    r = d.run("print('ran')\neval('1 + 1')\n")
    assert r["status"] == "rejected", r
    assert (r["exit_code"], r["stdout"], r["duration_ms"], r["path"]) == (-1, "", 0, "warm")
    assert [f["rule"] for f in r["findings"]] == ["SR201"]
    # The checker vetted the code while a ready sandbox got the files and
    # waited for "go": that sandbox is killed instead, its code never ran,
    # and the pool replaces it.
    assert r["id"] in ready_before
    w = wait_pool_ready(d)
    assert (w["ready"], w["spawned"], w["warm_runs"], w["cold_runs"]) == \
        (2, before["spawned"] + 1, 0, 0)
    assert wait_for(lambda: r["id"] not in group_names(d), timeout=10, step=0.05)
    # the run-time guard travels with the warm run (an evasion of the
    # static pass from tests/integration/test_checker.py)
    code = ("import os\ntools = {'run': os}\nprint('before')\n"
            "tools['run'].system('true')\nprint('after')\n")
    r = d.run(code)
    assert (r["status"], r["exit_code"], r["stdout"], r["path"]) == \
        ("rejected", 121, "before\n", "warm"), r
    assert r["message"] == ("rejected: blocked os.system(b'true') at main.py line 4 "
                            "(SR101 process): this sandbox forbids it")
    # and so does the request's allow list
    r = run_ok(d, code, allow=["os.system"])
    assert (r["stdout"], r["path"]) == ("before\nafter\n", "warm")


def test_the_code_waits_for_the_checkers_verdict(make_daemon):
    """The checker vets the code while the sandbox gets ready; the code
    starts only at the supervisor's "go". The test stops the checker's
    process (code that takes it a few hundred ms) and watches the pool's
    pythons: none uses the CPU until the checker goes on; then the code
    spins until its wall time."""
    policy = warm_policy(checker={"timeout": "30s"})
    policy["limits"] = {**LIMITS, "wall_time": "2s"}
    d = warm_daemon(make_daemon, default=policy)
    pythons = [pid for g in layout(d)["forked"].values() for pid in g
               if proc_status(pid)["Name"] == "python3"]
    assert len(pythons) == 2

    def stat(pid):
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        return s[s.rindex(")") + 2:].split()

    def ticks():
        return {pid: int(stat(pid)[11]) + int(stat(pid)[12]) for pid in pythons}

    def checker():
        for e in os.listdir("/proc"):
            try:
                if e.isdigit() and int(stat(int(e))[1]) == d.proc.pid and \
                        proc_status(int(e))["Name"] != "saferun-init":
                    return int(e)
            except (OSError, TypeError):
                pass
        return None

    # Rebinding one name 20000 times takes the checker a few hundred ms.
    code = "while True:\n    pass\n" + "x = 1\n" * 20000
    with cf.ThreadPoolExecutor(1) as ex:
        fut = ex.submit(d.run, code)
        deadline = time.monotonic() + 10
        pid = None
        while pid is None and time.monotonic() < deadline and not fut.done():
            pid = checker()
        assert pid, "the checker's process was not seen (did the check get faster?)"
        os.kill(pid, signal.SIGSTOP)
        try:
            start = ticks()
            time.sleep(0.5)
            during = ticks()
            assert not fut.done()
        finally:
            os.kill(pid, signal.SIGCONT)
        r = fut.result(timeout=120)
    assert (r["status"], r["path"]) == ("timeout", "warm"), r["message"]
    # a spinning python would have used ~50 ticks in 0.5 s
    assert all(during[p] - start[p] <= 3 for p in pythons), (start, during)


def test_limits_and_request_overrides_hold_on_warm_runs(make_daemon):
    d = warm_daemon(make_daemon)
    # timeout: the request's, lower than the policy's 10 s
    t = time.monotonic()
    r = d.run("while True:\n    pass\n", timeout=1)
    took = time.monotonic() - t
    assert (r["status"], r["path"], r["signal"], r["limits_hit"]) == \
        ("timeout", "warm", 9, ["wall_time"]), r
    assert r["message"] == "timeout: the run passed its wall-clock limit of 1 s"
    assert r["limits"]["wall_time_ms"] == 1000
    assert 1000 <= r["duration_ms"] < 2000 and took < 4, (r["duration_ms"], took)
    # memory: 120 MB fits the policy's 256M, not the request's 64M
    grab = "x = bytearray(120 * 1024 * 1024)\nprint(len(x))\n"
    r = d.run(grab, memory="64M")
    assert (r["status"], r["path"], r["limits_hit"]) == ("oom", "warm", ["memory"]), r
    assert r["message"] == "oom: the run passed its memory limit of 64 MiB"
    assert r["limits"]["memory_bytes"] == 64 << 20
    r = run_ok(d, grab)  # the next sandbox has the policy's limit again
    assert (r["path"], r["output"], r["limits"]["memory_bytes"]) == \
        ("warm", f"{120 << 20}\n", 256 << 20)
    # cpus
    r = run_ok(d, "print('half')", cpus=0.5)
    assert (r["path"], r["limits"]["cpus"]) == ("warm", 0.5)
    # pids: the policy's 32 (threads count)
    r = d.run("import threading, time\n"
              "for i in range(64):\n"
              "    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n")
    assert (r["status"], r["path"], r["limits_hit"]) == ("pids", "warm", ["pids"]), r
    assert r["message"] == "pids: the run hit its limit of 32 processes/threads"
    assert "can't start new thread" in r["stderr"]
    w = wait_pool_ready(d)
    assert (w["warm_runs"], w["cold_runs"], w["spawn_failures"]) == (5, 0, 0)


def test_a_policy_wall_time_ends_a_warm_run(make_daemon):
    d = warm_daemon(make_daemon, default=warm_policy(limits={**LIMITS, "wall_time": "1500ms"}))
    t = time.monotonic()
    r = d.run("import time\ntime.sleep(30)\n")
    took = time.monotonic() - t
    assert (r["status"], r["path"], r["exit_code"]) == ("timeout", "warm", -1), r
    assert 1500 <= r["duration_ms"] < 2500 and took < 4.5, (r["duration_ms"], took)


def test_the_request_env_files_and_stdin_reach_a_warm_run_and_artifacts_return(make_daemon):
    d = warm_daemon(make_daemon)
    code = ("import os, sys, helper\n"
            "print(os.environ['GREETING'], os.environ['HOME'])\n"
            "print(open('data/in.txt').read())\n"
            "print(sys.stdin.read().upper())\n"
            "print(helper.X)\n"
            "open('artifacts/out.csv', 'w').write('a,b\\n1,2\\n')\n")
    r = run_ok(d, code, env={"GREETING": "hello"}, stdin="from stdin",
               files={"data/in.txt": "file text", "helper.py": "X = 41 + 1\n"})
    assert r["path"] == "warm"
    assert r["stdout"] == "hello /work\nfile text\nFROM STDIN\n42\n"
    assert r["artifacts"] == [{"name": "out.csv", "mime": "text/csv", "size": 8, "inline": True,
                               "data_base64": base64.b64encode(b"a,b\n1,2\n").decode()}]
    # the next run has only its own: no env, stdin or artifact of the last,
    # and its own helper.py (not a cached one)
    r = run_ok(d, "import os, sys, helper\n"
                  "print(os.environ.get('GREETING'), repr(sys.stdin.read()), helper.X)\n"
                  "print(sorted(os.listdir('.')), os.listdir('artifacts'))\n",
               files={"helper.py": "X = 7\n"})
    assert r["path"] == "warm"
    assert r["stdout"] == "None '' 7\n['artifacts', 'helper.py', 'main.py'] []\n"
    assert r["artifacts"] == []


# ---- isolation between warm runs ------------------------------------------------------

def test_files_and_module_state_of_a_run_are_not_seen_by_the_next(make_daemon):
    d = warm_daemon(make_daemon)
    r = run_ok(d, "import json\n"
                  "for p in ('/tmp/left.txt', '/work/left.txt', 'sub/left.txt'):\n"
                  "    import os; os.makedirs(os.path.dirname(p), exist_ok=True)\n"
                  "    open(p, 'w').write('x')\n"
                  "json.left_behind = True\n"
                  "print(os.path.exists('/tmp/left.txt'), os.path.exists('/work/left.txt'))\n")
    assert (r["path"], r["output"]) == ("warm", "True True\n")
    check = ("import json, os\n"
             "print(os.path.exists('/tmp/left.txt'), os.path.exists('/work/left.txt'),\n"
             "      os.path.exists('sub'), hasattr(json, 'left_behind'), os.listdir('/tmp'))\n")
    # more runs than the pool holds: sandboxes forked before and after it
    for _ in range(4):
        r = run_ok(d, check)
        assert (r["path"], r["output"]) == ("warm", "False False False False []\n")


def test_each_warm_run_has_fresh_randomness(make_daemon):
    d = warm_daemon(make_daemon)  # random is preloaded: seeded once in the zygote
    outs = [run_ok(d, "import random\nprint(random.random(), random.getrandbits(64))")
            for _ in range(3)]
    assert all(r["path"] == "warm" for r in outs)
    assert len({r["output"] for r in outs}) == 3, [r["output"] for r in outs]


def test_a_warm_run_is_pid_2_and_sees_only_pids_1_and_2(make_daemon):
    d = warm_daemon(make_daemon, default=warm_policy(**NO_CHECK))
    r = run_ok(d, "import os\nprint(os.getpid(),\n"
                  "      sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n")
    assert (r["path"], r["output"]) == ("warm", "2 [1, 2]\n")


def test_a_ready_sandboxs_pid_1_is_the_small_init_not_a_copy_of_the_zygote(make_daemon):
    """Pid 1 of a forked sandbox execs init.c from its memfd once python is
    forked: its program is that memfd and it holds a few pages, where a
    copy of the zygote python (the old init) held the interpreter's."""
    d = warm_daemon(make_daemon, default=warm_policy(pool_size=2))
    inits = [pid for pids in layout(d)["forked"].values() for pid in pids
             if proc_status(pid)["Name"] == "saferun-init"]
    assert len(inits) == 2, layout(d)
    for pid in inits:
        assert os.readlink(f"/proc/{pid}/exe").startswith("/memfd:saferun-init"), pid
        rss_kib = int(proc_status(pid)["VmRSS"].split()[0])
        assert rss_kib < 2048, (pid, rss_kib)
        # its only child is the sandbox's python
        kids = [int(k) for t in os.listdir(f"/proc/{pid}/task")
                for k in open(f"/proc/{pid}/task/{t}/children").read().split()]
        assert [proc_status(k)["Name"] for k in kids] == ["python3"], kids
    r = run_ok(d, "print('after')")
    assert (r["path"], r["output"]) == ("warm", "after\n")


def test_a_background_process_of_a_warm_run_is_gone_after_it(make_daemon):
    d = warm_daemon(make_daemon, default=warm_policy(**NO_CHECK))
    pool_procs = set(own_sandbox_processes(d.cgroups))
    r = run_ok(d, "import os, subprocess\n"
                  "subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
                  "if os.fork() == 0:\n"
                  "    os.setsid()\n"
                  "    if os.fork() == 0:\n"
                  "        os.execvp('sleep', ['sleep', '301'])\n"
                  "    os._exit(0)\n"
                  "os.wait()\n"
                  "print('left two')\n")
    assert (r["path"], r["output"]) == ("warm", "left two\n")

    def sleepers():
        out = []
        for pid in own_sandbox_processes(d.cgroups):
            st = proc_status(pid)
            if st and st["Name"] == "sleep":
                out.append(pid)
        return out
    assert wait_for(lambda: sleepers() == [], timeout=5), sleepers()
    assert wait_for(lambda: r["id"] not in group_names(d), timeout=5)
    # what is left is the pool: the zygote and pool_size fresh sandboxes
    wait_pool_ready(d)
    lay = layout(d)
    assert len(lay["top"]) == 1 and len(lay["forked"]) == 2
    left = set(own_sandbox_processes(d.cgroups))
    assert left == {p for g in lay.values() for ps in g.values() for p in ps}, lay
    assert len(left) == 6 and len(left - pool_procs) == 2


def test_more_runs_than_the_pool_all_go_warm(make_daemon):
    d = warm_daemon(make_daemon, "--max-runs", "4", default=warm_policy(pool_size=1))
    with cf.ThreadPoolExecutor(4) as ex:
        futs = [ex.submit(d.run, f"import time\ntime.sleep(0.5)\nprint({i})") for i in range(4)]
        rs = [f.result(timeout=60) for f in futs]
    assert [(r["status"], r["path"], r["output"]) for r in rs] == \
        [("ok", "warm", f"{i}\n") for i in range(4)]
    assert len({r["id"] for r in rs}) == 4
    w = wait_pool_ready(d)
    assert (w["warm_runs"], w["cold_runs"], w["spawn_failures"]) == (4, 0, 0)


@pytest.mark.parametrize("refill", ["idle", "eager"])
def test_the_pool_refills_while_a_long_run_is_in_flight(make_daemon, refill):
    """refill "idle" puts the pool's work off while a run is in flight and
    two more sandboxes are ready, but for SR_WARM_DEFER_MS (20 ms) at most:
    a run of 3 s does not keep the pool short of a sandbox. "eager" refills
    at once."""
    policy = warm_policy(pool_size=3)
    policy["warm"]["refill"] = refill
    d = warm_daemon(make_daemon, default=policy)
    with cf.ThreadPoolExecutor(1) as ex:
        fut = ex.submit(d.run, "import time\ntime.sleep(3)\nprint('done')")
        assert wait_for(lambda: pool(d)["spawned"] == 4, timeout=2.5, step=0.02), pool(d)
        w = pool(d)
        assert (w["ready"], w["warm_runs"]) == (3, 0), w  # full again, the run still going
        r = fut.result(timeout=60)
    assert (r["status"], r["path"], r["output"]) == ("ok", "warm", "done\n")


def test_pool_size_0_forks_each_run_on_arrival(make_daemon):
    d = warm_daemon(make_daemon, default=warm_policy(pool_size=0))
    assert (pool(d)["ready"], pool(d)["spawned"]) == (0, 0)
    assert len(layout(d)["forked"]) == 0
    for i in range(2):
        r = run_ok(d, f"print({i})")
        assert (r["path"], r["output"]) == ("warm", f"{i}\n")
    w = pool(d)
    # every warm run's sandbox was forked by the zygote: spawned counts them
    # (a failed on-the-spot spawn counts in spawn_failures)
    assert (w["ready"], w["warm_runs"], w["spawn_failures"], w["spawned"]) == (0, 2, 0, 2), w


# ---- when the warm path is broken ----------------------------------------------------

def test_fallback_cold_while_the_zygote_is_down(make_daemon):
    d = warm_daemon(make_daemon)
    with zygote_held_down(d) as before:
        w = pool(d)
        assert (w["zygote_up"], w["ready"], w["last_error"]) == \
            (False, 0, "the zygote ended; restarting it")
        for i in range(2):
            r = run_ok(d, f"print('cold {i}')")
            assert (r["path"], r["output"]) == ("cold", f"cold {i}\n")
        assert pool(d)["cold_runs"] == 2
    w = wait_pool_ready(d)
    assert w["zygote_starts"] == before["zygote_starts"] + 1
    assert (w["cold_runs"], w["warm_runs"]) == (2, 0)
    r = run_ok(d, "print('warm again')")
    assert (r["path"], r["output"]) == ("warm", "warm again\n")
    # the dead zygote's group went with it
    assert len(layout(d)["top"]) == 1
    assert wait_for(lambda: len(group_names(d)) == 3, timeout=5), group_names(d)


def test_fallback_error_refuses_while_the_zygote_is_down(make_daemon):
    d = warm_daemon(make_daemon, default=warm_policy(fallback="error"))
    with zygote_held_down(d):
        groups = group_names(d)
        r = d.post("/v1/run", {"code": "print(1)"})
        # temporary (the zygote is restarted): 503 with Retry-After
        assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
        body = r.json()
        assert body["error"] == body["detail"] and body["field"] is None, body
        assert body["error"] == ("the warm path cannot take this run: "
                                 "the zygote is not running: the zygote ended; restarting it"), body
        assert group_names(d) == groups  # nothing ran cold
        assert pool(d)["cold_runs"] == 0
    r = run_ok(d, "print('warm again')")
    assert (r["path"], r["output"]) == ("warm", "warm again\n")


def test_a_zygote_that_cannot_start_falls_back_or_refuses(make_daemon):
    # (a preload module the profile lacks is skipped; one its warmup needs is not)
    bad = "import saferun_no_such_module\n"
    d = make_daemon(policies={"default": warm_policy(warmup=bad),
                              "strict": warm_policy(warmup=bad, fallback="error")})
    why = ("the zygote's preload or warmup failed: warmup line 1: ModuleNotFoundError: "
           "No module named 'saferun_no_such_module'")
    for name in ("default", "strict"):
        assert wait_for(lambda: pool(d, name)["zygote_starts"] >= 1, timeout=30)
        w = pool(d, name)
        assert (w["zygote_up"], w["ready"], w["spawned"]) == (False, 0, 0), w
        assert w["last_error"].startswith(why), w
    r = run_ok(d, "print('cold')")
    assert (r["path"], r["output"]) == ("cold", "cold\n")
    r = d.post("/v1/run", {"code": "print(1)", "policy": "strict"})
    assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
    assert r.json()["error"] == ("the warm path cannot take this run: the zygote is not "
                                 "running: " + why), r.text
    # it is retried (after a back-off of 1 s)
    assert wait_for(lambda: pool(d)["zygote_starts"] >= 2, timeout=5), pool(d)
    assert pool(d)["cold_runs"] == 1 and pool(d, "strict")["cold_runs"] == 0


def test_the_warmup_runs_once_in_the_zygote(make_daemon):
    """policy.warm.warmup: what it leaves in the preloaded modules is in
    every sandbox (a fork of the zygote), its own names are not, and it
    ran once, before the forks (the same clock reading in every run; the
    pool's sandboxes and the on-the-spot ones were forked at other times).
    A file the warmup left open (matplotlib keeps the fonts savefig used)
    is /dev/null in a sandbox, already when python's at-fork hooks run:
    not a closed fd (matplotlib's hook closing its fonts there crashed every
    sandbox) nor a number the run's own files reuse."""
    warmup = ("import json, os, time\n"
              "json._saferun_warmed = (getattr(json, '_saferun_warmed', (0,))[0] + 1,\n"
              "                        time.monotonic_ns())\n"
              "json._saferun_file = open(os.__file__, 'rb')\n"
              "json._saferun_null = os.stat('/dev/null').st_rdev\n"
              "def after_fork():\n"
              "    try:\n"
              "        json._saferun_file_at_fork = os.readlink(\n"
              "            f'/proc/self/fd/{json._saferun_file.fileno()}')\n"
              "    except OSError as e:\n"
              "        json._saferun_file_at_fork = os.strerror(e.errno)\n"
              "os.register_at_fork(after_in_child=after_fork)\n"
              "scratch = 'gone'\n")
    d = warm_daemon(make_daemon, default=warm_policy(warmup=warmup))
    seen = set()
    for _ in range(4):
        r = run_ok(d, "import json, os\nprint(*json._saferun_warmed, 'scratch' in globals(),\n"
                      "      json._saferun_file_at_fork,\n"
                      "      os.fstat(json._saferun_file.fileno()).st_rdev == json._saferun_null)")
        assert r["path"] == "warm", r
        count, when, scratch, at_fork, now = r["output"].split()
        assert (count, scratch, at_fork, now) == ("1", "False", "/dev/null", "True"), r
        seen.add(when)
        time.sleep(0.05)
    assert len(seen) == 1, seen


SAVEFIG = ("import os\nimport matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n"
           "ax.plot([1, 2, 3], [2, 1, 3])\nax.set_title('salary by city')\n"
           "fig.savefig('plot.png')\nprint(os.path.getsize('plot.png') > 1000)\n")


def test_the_shipped_warmup_saves_a_figure_and_every_sandbox_saves_its_own(make_daemon):
    """The shipped default warmup (policies/default.json) renders and saves
    a PNG in the zygote, then drops the fonts it loaded (matplotlib's at-fork
    hook would drop them in every sandbox, a cost per sandbox): no font file
    stays open in the zygote, and every sandbox forked after it saves a
    figure of its own (a savefig in the zygote used to crash them all:
    docs/warm.md). On the host profile, which has matplotlib (CI's
    bootstrap installs it)."""
    with open(os.path.join(os.environ["SAFERUN_SOURCE_DIR"], "policies", "default.json")) as f:
        warmup = json.load(f)["warm"]["warmup"]
    assert "savefig" in warmup
    d = warm_daemon(make_daemon, default=warm_policy(preload=["matplotlib.pyplot"],
                                                     warmup=warmup))
    zygote = [p for ps in layout(d)["top"].values() for p in ps
              if proc_status(p)["Name"] == "python3"]
    assert len(zygote) == 1, layout(d)
    fds = [os.readlink(f"/proc/{zygote[0]}/fd/{fd}") for fd in os.listdir(f"/proc/{zygote[0]}/fd")]
    assert not [f for f in fds if f.endswith((".ttf", ".afm", ".otf"))], fds
    for _ in range(3):
        r = run_ok(d, SAVEFIG)
        assert (r["path"], r["output"]) == ("warm", "True\n"), r
    w = pool(d)
    assert (w["zygote_starts"], w["spawn_failures"], w["warm_runs"]) == (1, 0, 3), w


def test_a_failing_warmup_names_its_line(make_daemon):
    d = make_daemon(policies={"default": warm_policy(warmup="x = 1\nraise ValueError('no')\n")})
    assert wait_for(lambda: pool(d)["zygote_starts"] >= 1, timeout=30)
    w = pool(d)
    assert (w["zygote_up"], w["ready"]) == (False, 0), w
    assert w["last_error"] == ("the zygote's preload or warmup failed: "
                               "warmup line 2: ValueError: no"), w
    r = run_ok(d, "print('cold')")
    assert (r["path"], r["output"]) == ("cold", "cold\n")


def test_a_ready_sandbox_that_died_does_not_fail_a_run(make_daemon):
    """A pool sandbox killed while it waits (the OOM killer, an operator, or
    its zygote's death just before the pool thread notices): the runs that
    come next must still be served (another sandbox, or the fallback)."""
    d = warm_daemon(make_daemon)
    forked = layout(d)["forked"]
    assert len(forked) == 2
    pids = [p for ps in forked.values() for p in ps]
    kill_all(pids)
    assert wait_for(lambda: gone(pids), timeout=5)
    for i in range(3):
        r = d.run(f"print('served {i}')")
        assert (r["status"], r["output"]) == ("ok", f"served {i}\n"), r


# ---- SIGHUP and the end --------------------------------------------------------------

def test_sighup_rebuilds_the_pools_and_leaves_nothing_of_the_old_one(make_daemon):
    d = warm_daemon(make_daemon)
    old_groups, old_pids = group_names(d), set(own_sandbox_processes(d.cgroups))
    assert len(old_groups) == 3 and len(old_pids) == 6
    d.write_policy("default", warm_policy(pool_size=3))
    d.send(signal.SIGHUP)
    assert wait_for(lambda: d.lines("reload"))
    w = wait_pool_ready(d)
    assert (w["pool_size"], w["ready"], w["zygote_starts"], w["spawned"], w["warm_runs"]) == \
        (3, 3, 1, 3, 0)
    assert wait_for(lambda: gone(old_pids), timeout=5)
    assert not group_names(d) & old_groups
    assert len(group_names(d)) == 4 and len(own_sandbox_processes(d.cgroups)) == 8
    r = run_ok(d, "print(3)")
    assert (r["path"], r["output"]) == ("warm", "3\n")
    # warm switched off: no pool, nothing of it left, runs go cold
    d.write_policy("default", warm_policy(enabled=False))
    d.send(signal.SIGHUP)
    assert wait_for(lambda: len(d.lines("reload")) == 2)
    assert d.get("/v1/health").json()["warm"] == []
    assert wait_for(lambda: own_sandbox_processes(d.cgroups) == [], timeout=5)
    assert wait_for(lambda: d.leftover_groups() == [], timeout=5), d.leftover_groups()
    r = run_ok(d, "print('cold')")
    assert (r["path"], r["output"]) == ("cold", "cold\n")


def test_sighup_during_a_warm_run_lets_it_finish_then_stops_the_old_pool(make_daemon):
    d = warm_daemon(make_daemon)
    old_groups, old_pids = group_names(d), set(own_sandbox_processes(d.cgroups))
    with cf.ThreadPoolExecutor(1) as ex:
        fut = ex.submit(d.run, "import time\ntime.sleep(1.5)\nprint('finished')")
        assert wait_for(lambda: d.get("/health").json()["runs_in_flight"] == 1)
        d.write_policy("default", warm_policy(pool_size=1))
        d.send(signal.SIGHUP)
        assert wait_for(lambda: d.lines("reload"))
        r = fut.result(timeout=30)
    assert (r["status"], r["path"], r["output"]) == ("ok", "warm", "finished\n"), r
    assert r["id"] in old_groups
    w = wait_pool_ready(d)
    assert (w["pool_size"], w["zygote_starts"], w["warm_runs"]) == (1, 1, 0)
    assert wait_for(lambda: gone(old_pids), timeout=10)
    assert wait_for(lambda: not group_names(d) & old_groups, timeout=10), group_names(d)
    assert len(group_names(d)) == 2
    assert run_ok(d, "print(1)")["path"] == "warm"


def test_sigterm_leaves_no_groups_processes_or_mounts(make_daemon):
    d = make_daemon(start=False, policies={"default": warm_policy(),
                                           "nocheck": warm_policy(**NO_CHECK)})
    host_before = host_leftovers()
    d.start()
    wait_pool_ready(d)
    wait_pool_ready(d, "nocheck")
    assert run_ok(d, "print(1)")["path"] == "warm"
    wait_pool_ready(d)
    assert wait_for(lambda: len(own_sandbox_processes(d.cgroups)) == 12, timeout=5)
    with cf.ThreadPoolExecutor(1) as ex:
        fut = ex.submit(d.run, "import subprocess, time\n"
                               "subprocess.Popen(['sleep', '300'])\n"
                               "time.sleep(1)\nprint('drained')", policy="nocheck")
        assert wait_for(lambda: d.get("/health").json()["runs_in_flight"] == 1)
        d.send(signal.SIGTERM)
        r = fut.result(timeout=30)
    assert (r["status"], r["path"], r["output"]) == ("ok", "warm", "drained\n"), r
    assert d.proc.wait(timeout=30) == 0
    assert d.leftover_groups() == []
    assert wait_for(lambda: own_sandbox_processes(d.cgroups) == [], timeout=5), \
        own_sandbox_processes(d.cgroups)
    assert d.mounted_workspaces() == []
    assert leftovers_since(host_before) == {}


def test_sigkill_of_the_daemon_takes_the_pool_with_it(make_daemon):
    d = warm_daemon(make_daemon)
    assert len(group_names(d)) == 3
    d.proc.kill()
    d.proc.wait(timeout=10)
    # the zygote by its parent-death signal, its sandboxes with its namespace
    assert wait_for(lambda: own_sandbox_processes(d.cgroups) == [], timeout=5), \
        own_sandbox_processes(d.cgroups)
    d.start()
    assert [l["msg"] for l in d.lines("cleanup")] == \
        ["start-up: removed 3 sandbox groups left behind"]
    wait_pool_ready(d)
    assert run_ok(d, "print(1)")["path"] == "warm"


# ---- MCP --------------------------------------------------------------------------------

def test_mcp_run_python_goes_warm(make_daemon):
    d = warm_daemon(make_daemon)
    m = Mcp(d.url(""), d.session())
    try:
        m.initialize()
        res = m.tool("run_python", {"code": "import json\nprint(json.dumps([6 * 7]))"})
        assert res["isError"] is False, res
        assert res["structuredContent"]["path"] == "warm"
        assert res["structuredContent"]["stdout"] == "[42]\n"
    finally:
        m.http.close()
    assert pool(d)["warm_runs"] == 1


# ---- warm by default (policies/default.json) -------------------------------------

ROOTFS_DIR = os.environ.get("SAFERUN_ROOTFS_DIR", "/var/lib/saferun/rootfs")


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOTFS_DIR, "minimal", "usr", "bin", "python3")),
                    reason="needs the minimal profile (scripts/build-rootfs minimal)")
def test_the_default_policy_is_warm_and_skips_preloads_the_profile_lacks(make_daemon):
    """The shipped default preloads the datascience modules; the minimal
    profile has none of them: the zygote starts without them, says so,
    and its warmup (which touches only what was imported) passes. The
    pool is sized from the machine: one per core, at least 2."""
    d = make_daemon(policies={"default": {"filesystem": {"profile": "minimal"}}})
    w = wait_pool_ready(d)
    cores = len(os.sched_getaffinity(0))
    assert (w["zygote_up"], w["pool_size"], w["preload_skipped"], w["zygote_starts"]) == \
        (True, min(max(cores, 2), 16), ["numpy", "pandas", "matplotlib.pyplot"], 1), w
    assert "last_error" not in w, w
    r = run_ok(d, "import sys\nprint('pandas' in sys.modules, sys.version_info >= (3, 8))")
    assert (r["path"], r["output"]) == ("warm", "False True\n"), r


def test_a_daemon_too_small_for_a_zygote_starts_and_says_why_it_runs_cold(make_daemon):
    """pool_size "auto" on a machine (here: a cgroup) with under 512 MiB
    for the daemon: no zygote, a log line and /v1/health say why, runs go
    cold. An egress policy runs cold too (a forked sandbox has only lo)."""
    auto = {**HOST_POLICY, "warm": {"preload": [], "pool_size": "auto"}}
    d = make_daemon(start=False, policies={"default": auto,
                                           "net": {**auto, "network": {"mode": "egress"}}})
    for c in d.cgroups:
        os.makedirs(c, exist_ok=True)
        for name, value in (("memory.limit_in_bytes", "300M"), ("memory.max", "300M")):
            if os.path.exists(os.path.join(c, name)):
                with open(os.path.join(c, name), "w") as f:
                    f.write(value)
    d.start()
    warm = {w["policy"]: w for w in d.get("/v1/health").json()["warm"]}
    why = warm["default"].pop("cold_reason")
    assert warm["default"] == {"policy": "default", "zygote_up": False}, warm
    assert re.fullmatch(r"\d+ MiB of memory available to this process \(MemAvailable, its "
                        r"cgroup's limit\); a zygote and its pool want 512 MiB: runs go cold",
                        why), why
    assert int(why.split()[0]) < 300, why
    assert warm["net"]["cold_reason"] == "its network is egress, which only the cold path builds"
    msgs = [l["msg"] for l in d.lines("warm")]
    assert sorted(msgs) == sorted([f"policy default runs cold: {why}",
                                   "policy net runs cold: its network is egress, which only "
                                   "the cold path builds"]), msgs
    r = run_ok(d, "print('cold')")
    assert (r["path"], r["output"]) == ("cold", "cold\n"), r
    assert own_sandbox_processes(d.cgroups) == []
