"""Start-up, shutdown, reload: a crash's leftovers are removed, SIGTERM
drains, SIGHUP reloads policies, bad settings are refused by name."""
import concurrent.futures as cf
import json
import os
import signal
import socket
import subprocess
import time

from conftest import HOLD, HOST_POLICY, SAFERUND, own_sandbox_processes, release_held, wait_for


def ids(groups):
    return {os.path.basename(g) for g in groups}


def group_procs(groups):
    n = 0
    for g in groups:
        try:
            with open(os.path.join(g, "cgroup.procs")) as f:
                n += len(f.read().split())
        except OSError:
            pass
    return n


def test_sigkill_mid_run_then_restart_removes_the_leftovers(make_daemon):
    # cold runs' groups only: a warm pool's are test_warm.py's
    # (test_sigkill_of_the_daemon_takes_the_pool_with_it)
    cold = {**HOST_POLICY, "warm": {"enabled": False}}
    d = make_daemon("--max-runs", "4", policies={"default": cold, "host": cold})
    with cf.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(d.post, "/v1/run", {"code": "import time; time.sleep(30)"})
                   for _ in range(2)]
        # and a stateful session busy in its interpreter
        sid = d.post("/v1/sessions", {"stateful": True}).json()["session_id"]
        futures.append(pool.submit(d.post, f"/v1/sessions/{sid}/run",
                                   {"code": "while True:\n    pass\n"}))
        assert wait_for(lambda: len(ids(d.leftover_groups())) == 3)
        time.sleep(0.5)  # the sandboxes are up and running python
        d.proc.kill()
        d.proc.wait(timeout=10)
        for f in futures:
            try:
                f.result(timeout=30)
            except Exception:
                pass  # the connection died with the daemon
        # Their processes die with the daemon, before any restart: a run's
        # init by its parent-death signal (re-armed after the id switches,
        # which clear it), a kernel when its control socket closes.
        assert wait_for(lambda: group_procs(d.leftover_groups()) == 0, timeout=5), \
            group_procs(d.leftover_groups())
    # the (empty) groups and the workspace mount outlive the daemon
    assert len(ids(d.leftover_groups())) == 3
    assert len(d.mounted_workspaces()) == 1
    d.start()
    cleanup = [l["msg"] for l in d.lines("cleanup")]
    assert cleanup == ["start-up: removed 3 sandbox groups left behind",
                       "removed 1 session workspace left behind"], d.text()
    assert d.mounted_workspaces() == []
    assert d.only_pools_left(), d.leftover_groups()
    assert d.run("print('fresh')")["status"] == "ok"


def test_sigterm_lets_a_run_finish_and_exits_0(make_daemon):
    d = make_daemon()
    with cf.ThreadPoolExecutor(1) as pool:
        run = pool.submit(d.post, "/v1/run", {"code": HOLD + "print('done')"})
        assert wait_for(lambda: d.get("/health").json()["runs_in_flight"] == 1)
        d.send(signal.SIGTERM)
        # no new connections: the socket path is gone at once
        assert wait_for(lambda: not os.path.exists(d.socket), timeout=5)
        release_held(d.cgroups)
        r = run.result(timeout=30)
    assert r.status_code == 200 and r.json()["output"] == "done\n"
    assert d.proc.wait(timeout=30) == 0
    assert d.leftover_groups() == []
    assert [l["msg"] for l in d.lines("shutdown")][-1] == "stopped"


def test_sigterm_past_the_grace_period_kills_the_runs(make_daemon):
    d = make_daemon("--shutdown-grace", "1s")
    with cf.ThreadPoolExecutor(1) as pool:
        run = pool.submit(d.post, "/v1/run", {"code": "import time; time.sleep(60)"})
        assert wait_for(lambda: d.get("/health").json()["runs_in_flight"] == 1)
        t = time.monotonic()
        d.send(signal.SIGTERM)
        r = run.result(timeout=30)
        assert d.proc.wait(timeout=30) == 0
        assert time.monotonic() - t < 10
    assert r.status_code == 200 and r.json()["status"] == "killed"
    assert d.leftover_groups() == []
    assert wait_for(lambda: own_sandbox_processes(d.cgroups) == [], timeout=5)


def test_draining_daemon_refuses_new_runs_with_503(make_daemon):
    d = make_daemon("--max-runs", "1", "--queue-depth", "2")
    conn_sleep = {"code": HOLD}
    with cf.ThreadPoolExecutor(2) as pool:
        first = pool.submit(d.post, "/v1/run", conn_sleep)
        assert wait_for(lambda: d.get("/health").json()["runs_in_flight"] == 1)
        queued = pool.submit(d.post, "/v1/run", conn_sleep)
        assert wait_for(lambda: d.get("/health").json()["queue_depth"] == 1)
        d.send(signal.SIGTERM)
        r = queued.result(timeout=30)
        assert r.status_code == 503 and r.headers["Retry-After"]
        release_held(d.cgroups)
        assert first.result(timeout=30).json()["status"] == "ok"
    assert d.proc.wait(timeout=30) == 0


def test_sighup_reloads_policies_all_or_nothing(daemon):
    daemon.write_policy("tiny", {**HOST_POLICY, "limits": {"wall_time": "2s"}})
    assert daemon.post("/v1/run", {"code": "1", "policy": "tiny"}).status_code == 400
    daemon.send(signal.SIGHUP)
    assert wait_for(lambda: daemon.lines("reload"))
    body = daemon.run("print(1)", policy="tiny")
    assert body["limits"]["wall_time_ms"] == 2000
    # a broken file: the reload is refused and the old set stays
    daemon.write_policy("broken", {"limits": {"memory": "lots"}})
    daemon.send(signal.SIGHUP)
    assert wait_for(lambda: len(daemon.lines("reload")) == 2)
    err = daemon.lines("reload")[-1]
    assert err["level"] == "error" and "limits.memory" in err["msg"] and "broken" in err["msg"]
    assert daemon.run("print(1)", policy="tiny")["status"] == "ok"
    assert daemon.get("/health").json()["policies"] == ["default", "host", "tiny"]


def test_socket_activation_serves_the_inherited_socket(make_daemon):
    d = make_daemon(start=False)
    path = os.path.join(d.dir, "activated.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(16)
    fd = s.fileno()
    d.args = ["--policies-dir", d.policies]
    # sd_listen_fds: the socket is fd 3 and LISTEN_PID is the daemon's pid
    # (sh execs it, keeping the pid).
    wrapper = ("import os, sys; os.dup2(int(sys.argv[1]), 3); os.close(int(sys.argv[1])); "
               "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1'); "
               "os.execv(sys.argv[2], sys.argv[2:])")
    d.start(argv_prefix=["/usr/bin/python3", "-c", wrapper, str(fd)], pass_fds=(fd,))
    s.close()
    d.socket = path
    assert d.run("print('activated')")["output"] == "activated\n"
    assert d.wait_ready()["listeners"] == [{"socket": path, "token": False}]
    assert d.stop() == 0
    assert os.path.exists(path)  # systemd's socket: not ours to remove


def run_saferund(*args, config=None, tmp_path=None):
    argv = [SAFERUND, "--socket", str(tmp_path / "s.sock"), *args]
    if config is not None:
        cfg = tmp_path / "saferund.json"
        cfg.write_text(config if isinstance(config, str) else json.dumps(config))
        argv += ["--config", str(cfg)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def test_config_errors_name_the_key(tmp_path):
    cases = [
        ({"max_concurrent_runs": 0}, "max_concurrent_runs: 0 is not a whole number between 1"),
        ({"queue_depth": "many"}, "queue_depth: \"many\" is not a whole number"),
        ({"max_body_size": "8X"}, "max_body_size: \"8X\" is not a size"),
        ({"shutdown_grace": True}, "shutdown_grace: this value is not a duration"),
        ({"socket_group": 5}, "socket_group: must be a string"),
        ({"insecure_no_token": "yes"}, "insecure_no_token: must be true or false"),
        ({"listen_on": "x"}, "listen_on: unknown key (known: socket,"),
        ("{not json", "not a JSON object"),
    ]
    for config, message in cases:
        p = run_saferund(config=config, tmp_path=tmp_path)
        assert p.returncode == 2, (config, p.stderr)
        assert message in json.loads(p.stderr.splitlines()[-1])["msg"], (config, p.stderr)


def test_flag_errors_name_the_flag(tmp_path):
    for args, message in [(["--max-runs", "x"], "--max-runs: \"x\" is not a whole number"),
                          (["--max-body", "-1"], "--max-body: \"-1\" is not a size"),
                          (["--bogus"], "--bogus: unknown option"),
                          (["--policies-dir", str(tmp_path / "none")], "policies dir"),
                          (["--default-policy", "nosuch"], "default_policy: no policy")]:
        p = run_saferund(*args, tmp_path=tmp_path)
        assert p.returncode == 2, (args, p.stderr)
        assert message in json.loads(p.stderr.splitlines()[-1])["msg"], (args, p.stderr)


def test_flags_override_the_config_file(make_daemon, tmp_path):
    cfg = tmp_path / "saferund.json"
    cfg.write_text(json.dumps({"comment": "test", "max_concurrent_runs": 3, "queue_depth": 7}))
    d = make_daemon("--config", str(cfg), "--queue-depth", "9")
    h = d.get("/health").json()
    assert h["max_concurrent_runs"] == 3 and h["queue_capacity"] == 9


def test_a_second_daemon_is_refused_before_it_touches_the_first_ones_runs(daemon, make_daemon):
    d2 = make_daemon(start=False)
    d2.args[1] = daemon.socket
    d2.cgroups = daemon.cgroups  # even in the same cgroup
    with cf.ThreadPoolExecutor(1) as pool:
        run = pool.submit(daemon.post, "/v1/run", {"code": "import time; time.sleep(1); print('ok')"})
        assert wait_for(lambda: daemon.leftover_groups())
        d2.start(wait=False)
        assert d2.proc.wait(timeout=30) == 2
        assert "another saferund is listening" in d2.text()
        assert run.result().json()["output"] == "ok\n"
    assert daemon.get("/health").status_code == 200


def test_start_up_kills_what_is_left_in_a_stale_group(make_daemon):
    """A group that still holds processes (a crash mid-kill) is emptied too."""
    d = make_daemon(start=False)
    stale = [os.path.join(c, "saferun", "sr-stale0123456789") for c in d.cgroups]
    for g in stale:
        os.makedirs(g)

    def enter():
        for g in stale:
            with open(os.path.join(g, "cgroup.procs"), "w") as f:
                f.write("0")

    sleeper = subprocess.Popen(["sleep", "300"], preexec_fn=enter)
    try:
        d.start()
        assert sleeper.wait(timeout=10) == -signal.SIGKILL
        assert not any(os.path.exists(g) for g in stale)
        assert [l["msg"] for l in d.lines("cleanup")] == \
            ["start-up: removed 1 sandbox group left behind"]
    finally:
        sleeper.kill()
        sleeper.wait()
