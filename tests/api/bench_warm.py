#!/usr/bin/python3
"""saferund's rows for scripts/bench: runs through the daemon, warm and cold.

scripts/bench runs this as a child process, next to its hyperfine rows, so that
the daemon's rounds take turns with the other tools' (hyperfine cannot time
an HTTP request):

  bench_warm.py --profile P [--preload numpy,pandas] [--warmup CODE] [--pool-size 4]
                [--refill idle|eager]
                [--rootfs-dir DIR] --memory-out FILE

It starts one saferund (tests/api/conftest.py's Daemon: a temp socket and
policies dir, cgroups of its own) with two policies of the profile:

  warm: {"filesystem": {"profile": P}, "warm": {"enabled": true,
         "preload": [...], "warmup": CODE, "pool_size": N, "fallback": "cold"}}
  cold: {"filesystem": {"profile": P}, "warm": {"enabled": false}}

waits until GET /v1/health says the warm pool is full (ready == pool_size),
measures the memory of the idle daemon, its zygote and each ready sandbox
into --memory-out (JSON), prints "ready SOCKET" (or "fail REASON"; "warm" is
the daemon's --default-policy, for `saferun run` over SOCKET) and then takes
commands on stdin, one a line, answering one line on stdout ("ok", or
"fail REASON"):

  time POLICY CODE_FILE STDIN_FILE EXPECTED_FILE WARMUP RUNS JSON_OUT
      WARMUP untimed then RUNS timed POST /v1/run {"code", "stdin",
      "policy"} on one keep-alive connection over the unix socket, one
      after the other; every result must be status ok with the expected
      output, path "warm" for the warm policy ("cold" for cold), and a
      sandbox id never seen before. JSON_OUT is hyperfine's format
      ({"results": [{"times": [s, ...]}]}) plus the daemon's own view of
      each run (its log's queue_ms, duration_ms, total_ms).
      STDIN_FILE "-": no stdin.
  throughput CLIENTS SECONDS JSON_OUT
      CLIENTS keep-alive connections sending {"code": "print('hi')"} to
      the warm policy back to back for SECONDS: runs/s, p50, p99, how
      many came back cold (fallbacks) or wrong, and the pool's counters.
  memory JSON_OUT
      the same measurement as at the start (the daemon's RSS now).
  quit (or end of input)
      stop the daemon, remove its dirs and cgroups.
"""
import argparse
import concurrent.futures as cf
import glob
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import Daemon, UnixHTTPConnection  # noqa: E402

READY_TIMEOUT = 600  # the datascience zygote imports pandas; slow under load
HEADERS = {"Content-Type": "application/json"}


def log(msg):
    print("bench_warm: " + msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- memory

def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def kib(field):
    """'1234 kB' -> 1234."""
    return int(field.split()[0]) if field else 0


def smaps_rollup(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[0].endswith(":") and parts[2] == "kB":
                out[parts[0][:-1]] = int(parts[1])
    return out


def proc_mem(pid):
    st, sm = proc_status(pid), smaps_rollup(pid)
    return {"pid": pid, "name": st["Name"], "rss": kib(st.get("VmRSS")),
            "pss": sm.get("Pss", 0), "private": sm.get("Private_Clean", 0) + sm.get("Private_Dirty", 0),
            "private_dirty": sm.get("Private_Dirty", 0), "pte": kib(st.get("VmPTE"))}


def children(pid):
    """Direct children of pid (any thread's)."""
    out = []
    for task in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            with open(task) as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return sorted(set(out))


def cgroup_memory(pid, d):
    """What the kernel charges to pid's sandbox cgroup (memory controller),
    in KiB, or None."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = [l.rstrip("\n").split(":", 2) for l in f]
    except OSError:
        return None
    for _, ctrls, path in lines:
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if not name.startswith("sr-"):
            continue
        for c in d.cgroups:
            for fname in ("memory.usage_in_bytes", "memory.current"):
                p = os.path.join(c, "saferun", name, fname)
                if os.path.exists(p):
                    with open(p) as f:
                        return int(f.read()) // 1024
    return None


def measure_memory(d):
    """The daemon's RSS; its zygote (init + python) and every sandbox the
    zygote forked (init + python, in nested pid namespaces): the
    zygote's init is saferund's child, its python the init's child, and
    each sandbox's init a child of that python."""
    out = {"daemon": proc_mem(d.proc.pid), "zygotes": []}
    for zinit in children(d.proc.pid):
        try:
            zpy = children(zinit)
            if proc_status(zinit)["Name"] != "saferun-init" or len(zpy) != 1 or \
                    not children(zpy[0]):
                continue  # a cold run's sandbox, not a zygote with sandboxes
            z = {"init": proc_mem(zinit), "python": proc_mem(zpy[0]), "sandboxes": []}
        except OSError:
            continue  # a cold run that just ended
        for sinit in children(zpy[0]):
            try:
                procs = [proc_mem(sinit)] + [proc_mem(c) for c in children(sinit)]
            except OSError:
                continue  # a sandbox whose run just ended
            z["sandboxes"].append({
                "processes": procs,
                # Marginal: what is not shared with the zygote, plus page tables.
                "marginal": sum(p["private"] + p["pte"] for p in procs),
                "private": sum(p["private"] for p in procs),
                "pte": sum(p["pte"] for p in procs),
                "rss": sum(p["rss"] for p in procs),
                "pss": sum(p["pss"] for p in procs),
                "cgroup": cgroup_memory(sinit, d),
            })
        out["zygotes"].append(z)
    # Cross-check with the sandbox cgroups: every sr-* group holding a
    # process that is not the zygote's is a sandbox.
    groups = set()
    for c in d.cgroups[:1]:
        for procs in glob.glob(os.path.join(c, "saferun", "sr-*", "cgroup.procs")):
            with open(procs) as f:
                if f.read().split():
                    groups.add(os.path.basename(os.path.dirname(procs)))
    out["sandbox_groups"] = len(groups)
    return out


# ---------------------------------------------------------------- CPU time

def daemon_cpu_ns(d):
    """CPU time of everything in the daemon's cgroup: saferund, the zygote
    and every sandbox (the counters are hierarchical and keep what removed
    groups used)."""
    for c in d.cgroups:
        if os.path.exists(os.path.join(c, "cpuacct.usage")):
            with open(os.path.join(c, "cpuacct.usage")) as f:
                return int(f.read())
        if os.path.exists(os.path.join(c, "cpu.stat")):
            with open(os.path.join(c, "cpu.stat")) as f:
                for line in f:
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) * 1000
    return 0


def machine_busy_ms():
    """CPU time the whole machine spent not idle, all cores."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]  # idle, iowait
    return (sum(v[:8]) - idle) * 1000.0 / os.sysconf("SC_CLK_TCK")


def own_cpu_ms():
    t = os.times()
    return (t.user + t.system) * 1000.0


class CpuMeter:
    """CPU ms spent between start() and stop(): by the daemon's cgroup, by
    this client process, by the whole machine."""

    def __init__(self, d):
        self.d = d

    def __enter__(self):
        self.t = (daemon_cpu_ns(self.d) / 1e6, own_cpu_ms(), machine_busy_ms())
        return self

    def __exit__(self, *exc):
        now = (daemon_cpu_ns(self.d) / 1e6, own_cpu_ms(), machine_busy_ms())
        self.daemon, self.client, self.machine = (b - a for a, b in zip(self.t, now))
        return False

    def per_run(self, n):
        n = max(1, n)
        return {"daemon": self.daemon / n, "client": self.client / n, "machine": self.machine / n}


# ---------------------------------------------------------------- runs

class Bench:
    def __init__(self, a):
        self.a = a
        self.seen_ids = set()
        preload = [m for m in a.preload.split(",") if m]
        self.warm_policy = {"filesystem": {"profile": a.profile},
                            "warm": {"enabled": True, "preload": preload,
                                     "pool_size": a.pool_size, "fallback": "cold"}}
        if a.warmup:
            self.warm_policy["warm"]["warmup"] = a.warmup
        if a.refill:
            self.warm_policy["warm"]["refill"] = a.refill
        # the shipped default is warm: the cold rows switch it off
        self.cold_policy = {"filesystem": {"profile": a.profile}, "warm": {"enabled": False}}
        # the policy of a run that names none: `saferun run` through the daemon
        args = ["--queue-depth", "256", "--default-policy", "warm"]
        if a.rootfs_dir:
            args += ["--rootfs-dir", a.rootfs_dir]
        self.d = Daemon(args, policies={"warm": self.warm_policy, "cold": self.cold_policy})

    def health(self):
        conn = UnixHTTPConnection(self.d.socket)
        try:
            conn.request("GET", "/v1/health")
            r = conn.getresponse()
            return json.loads(r.read())
        finally:
            conn.close()

    def pool(self):
        for p in self.health().get("warm", []):
            if p["policy"] == "warm":
                return p
        return None

    def start(self):
        self.d.start()
        t = time.time()
        while True:
            p = self.pool()
            if p and p["zygote_up"] and p["ready"] >= p["pool_size"]:
                break
            if time.time() - t > READY_TIMEOUT:
                raise RuntimeError("the warm pool was not ready in %d s: %s"
                                   % (READY_TIMEOUT, json.dumps(p)))
            if self.d.proc.poll() is not None:
                raise RuntimeError("saferund exited %s" % self.d.proc.returncode)
            time.sleep(0.05)
        self.ready_s = time.time() - t
        log("warm pool ready in %.1f s: %s" % (self.ready_s, json.dumps(p)))
        time.sleep(1)  # let the last forks settle (their pages, the pool thread)
        return p

    def check(self, r, policy, expected):
        want_path = "warm" if policy == "warm" else "cold"
        if r.get("status") != "ok":
            return "status %s: %s" % (r.get("status"), (r.get("message") or r.get("output") or "")[:100])
        if r.get("output") != expected:
            return "unexpected output: %r" % (r.get("output") or "")[:80]
        if r.get("path") != want_path:
            return "path %s, not %s" % (r.get("path"), want_path)
        if r.get("id") in self.seen_ids:
            return "sandbox %s used twice" % r.get("id")
        self.seen_ids.add(r.get("id"))
        return None

    def post(self, conn, body):
        t = time.perf_counter()
        conn.request("POST", "/v1/run", body=body, headers=HEADERS)
        resp = conn.getresponse()
        data = resp.read()
        dt = time.perf_counter() - t
        if resp.status != 200:
            raise RuntimeError("HTTP %d: %s" % (resp.status, data[:200].decode(errors="replace")))
        return dt, json.loads(data)

    def cmd_time(self, policy, code_file, stdin_file, expected_file, warmup, runs, out):
        with open(code_file) as f:
            code = f.read()
        with open(expected_file) as f:
            expected = f.read()
        req = {"code": code, "policy": policy}
        if stdin_file != "-":
            with open(stdin_file) as f:
                req["stdin"] = f.read()
        body = json.dumps(req)
        conn = UnixHTTPConnection(self.d.socket, timeout=300)
        times, ids = [], []
        try:
            for i in range(int(warmup)):
                dt, r = self.post(conn, body)
                bad = self.check(r, policy, expected)
                if bad:
                    raise RuntimeError(bad)
            with CpuMeter(self.d) as cpu:
                for i in range(int(runs)):
                    dt, r = self.post(conn, body)
                    bad = self.check(r, policy, expected)
                    if bad:
                        raise RuntimeError(bad)
                    times.append(dt)
                    ids.append(r["id"])
        finally:
            conn.close()
        runs_log = {e["id"]: e for e in self.d.lines("run") if e.get("id") in set(ids)}
        daemon = {k: [runs_log[i][k] for i in ids if i in runs_log and k in runs_log[i]]
                  for k in ("queue_ms", "duration_ms", "total_ms")}
        daemon["cpu_ms_per_run"] = cpu.per_run(len(times))
        daemon["runs"] = len(times)
        with open(out, "w") as f:
            json.dump({"results": [{"command": policy, "times": times, "daemon": daemon}]}, f)

    def cmd_throughput(self, clients, seconds, out):
        clients, seconds = int(clients), float(seconds)
        body = json.dumps({"code": "print('hi')", "policy": "warm"})
        before = self.pool()

        def client(stop):
            conn = UnixHTTPConnection(self.d.socket, timeout=300)
            lat, paths, bad, ids = [], {}, [], []
            try:
                while time.perf_counter() < stop:
                    dt, r = self.post(conn, body)
                    lat.append(dt)
                    paths[r.get("path")] = paths.get(r.get("path"), 0) + 1
                    ids.append(r.get("id"))
                    if r.get("status") != "ok" or r.get("output") != "hi\n":
                        bad.append("%s %r" % (r.get("status"), (r.get("output") or "")[:60]))
            finally:
                conn.close()
            return lat, paths, bad, ids

        with cf.ThreadPoolExecutor(clients) as pool, CpuMeter(self.d) as cpu:
            t = time.perf_counter()
            stop = t + seconds
            results = [f.result() for f in [pool.submit(client, stop) for _ in range(clients)]]
            wall = time.perf_counter() - t
        after = self.pool()
        lat = sorted(x for r in results for x in r[0])
        paths = {}
        for r in results:
            for k, v in r[1].items():
                paths[k] = paths.get(k, 0) + v
        ids = [i for r in results for i in r[3]]
        res = {"clients": clients, "seconds": wall, "runs": len(lat),
               "runs_per_s": len(lat) / wall,
               "p50_ms": percentile(lat, 0.50) * 1000, "p99_ms": percentile(lat, 0.99) * 1000,
               "paths": paths, "bad": sum(len(r[2]) for r in results),
               "bad_examples": [b for r in results for b in r[2]][:3],
               "distinct_sandboxes": len(set(ids)),
               "cpu_ms_per_run": cpu.per_run(len(lat)),
               "cpu_busy": cpu.machine / (wall * 1000 * os.cpu_count()),
               "pool": {k: after[k] - before[k] for k in
                        ("spawned", "warm_runs", "cold_runs", "spawn_failures")},
               "load": loadavg()}
        with open(out, "w") as f:
            json.dump(res, f)

    def cmd_memory(self, out):
        with open(out, "w") as f:
            json.dump(self.memory(), f)

    def memory(self):
        m = measure_memory(self.d)
        m["pool_size"] = self.a.pool_size
        m["preload"] = self.warm_policy["warm"]["preload"]
        m["ready_s"] = getattr(self, "ready_s", None)
        m["health"] = self.pool()
        return m


def percentile(sorted_values, q):
    """Nearest rank."""
    if not sorted_values:
        return float("nan")
    i = max(0, min(len(sorted_values) - 1, int(-(-len(sorted_values) * q // 1)) - 1))
    return sorted_values[i]


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", required=True)
    ap.add_argument("--preload", default="", help="comma-separated modules the zygote imports")
    ap.add_argument("--warmup", default="", help="the warm policy's warm.warmup (Python)")
    ap.add_argument("--pool-size", type=int, default=4)
    ap.add_argument("--refill", choices=["idle", "eager"], default="",
                    help="the warm policy's warm.refill (default: the policy's default)")
    ap.add_argument("--rootfs-dir", default="")
    ap.add_argument("--memory-out", required=True)
    a = ap.parse_args()
    # A Ctrl-C reaches our process group: end the same way as on SIGTERM.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    b = Bench(a)
    try:
        try:
            b.start()
            with open(a.memory_out, "w") as f:
                json.dump(b.memory(), f)
        except Exception as e:  # noqa: BLE001 (reported to the script)
            print("fail %s" % str(e).replace("\n", " ")[:300], flush=True)
            log("daemon log:\n" + b.d.text()[-3000:])
            return
        print("ready " + b.d.socket, flush=True)
        for line in iter(sys.stdin.readline, ""):
            words = line.split()
            if not words:
                continue
            if words[0] == "quit":
                break
            try:
                getattr(b, "cmd_" + words[0])(*words[1:])
                print("ok", flush=True)
            except Exception as e:  # noqa: BLE001
                print("fail %s" % str(e).replace("\n", " ")[:300], flush=True)
    except KeyboardInterrupt:
        pass  # Ctrl-C reaches the script too, which reports it
    finally:
        b.d.cleanup()
        if "Sanitizer" in getattr(b.d, "final_log", ""):
            log("saferund's log has a sanitizer report:\n" + b.d.final_log[-3000:])


if __name__ == "__main__":
    main()
