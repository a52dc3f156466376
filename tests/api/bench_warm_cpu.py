#!/usr/bin/python3
"""Where the CPU of a warm run goes (docs/benchmarks.md, "Issue 19").

  sudo SAFERUND=build/saferund tests/api/bench_warm_cpu.py [--runs 200] [--profile minimal]
                                                           [--perf-stat] [--perf-record FILE]

Starts a saferund (tests/api/conftest.py's Daemon: temp socket, cgroups of its own) whose
default policy is the shipped one on --profile (warm, pool_size "auto"), waits for a full
pool, sends --runs `print('hi')` runs one after the other on one keep-alive connection,
and prints per run the CPU of the daemon's cgroup split into: saferund's own threads
(/proc/PID/stat), the zygote's group (the forks), the sandboxes' groups (saferun/ less
the zygote's: each sandbox from its fork to its end, the pool's spawns included) and the
rest (saferund's other children: the checker's confined process per run).

--perf-stat counts page faults, task-clock, context switches and migrations of saferund
and the zygote and everything they fork meanwhile (perf stat -p, inherited);
--perf-record FILE samples them (perf record -g) for `perf report -i FILE`.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import Daemon, UnixHTTPConnection  # noqa: E402


def health(d):
    c = UnixHTTPConnection(d.socket)
    c.request("GET", "/v1/health")
    r = json.loads(c.getresponse().read())
    c.close()
    return r


def cpu_ms(group):
    with open(os.path.join(group, "cpuacct.usage")) as f:   # cgroup v1 (this machine)
        return int(f.read()) / 1e6


def proc_ms(pid):
    v = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--profile", default="minimal")
    ap.add_argument("--perf-stat", action="store_true")
    ap.add_argument("--perf-record")
    a = ap.parse_args()
    d = Daemon(["--queue-depth", "256"], policies={"default": {"filesystem": {"profile": a.profile}}})
    d.start()
    perf = None
    try:
        while True:
            w = health(d)["warm"][0]
            if w.get("zygote_up") and w["ready"] == w["pool_size"]:
                break
            time.sleep(0.1)
        time.sleep(1)
        top = next(c for c in d.cgroups if os.path.exists(os.path.join(c, "cpuacct.usage")))
        zgroup = sorted(glob.glob(top + "/saferun/sr-*"), key=os.path.getctime)[0]
        zpids = open(zgroup + "/cgroup.procs").read().split()
        out = os.path.join(d.dir, "perf.stat")
        if a.perf_stat or a.perf_record:
            pids = ",".join([str(d.proc.pid)] + zpids)
            cmd = (["perf", "record", "-q", "-F", "1999", "-g", "-o", a.perf_record]
                   if a.perf_record else
                   ["perf", "stat", "-x,", "-o", out,
                    "-e", "page-faults,task-clock,context-switches,cpu-migrations"])
            perf = subprocess.Popen(cmd + ["-p", pids], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(1)

        def sample():
            return (cpu_ms(top), cpu_ms(top + "/saferun"), cpu_ms(zgroup), proc_ms(d.proc.pid),
                    time.time())
        t0 = sample()
        conn = UnixHTTPConnection(d.socket)
        paths = {}
        for _ in range(a.runs):
            conn.request("POST", "/v1/run", body=json.dumps({"code": "print('hi')"}),
                         headers={"Content-Type": "application/json"})
            r = json.loads(conn.getresponse().read())
            assert r["status"] == "ok" and r["stdout"] == "hi\n", r
            paths[r["path"]] = paths.get(r["path"], 0) + 1
        time.sleep(0.5)   # the pool replaces the last sandbox taken
        t1 = sample()
        if perf:
            perf.send_signal(2)
            perf.wait()
        total, groups, zyg, own, wall = (b - x for x, b in zip(t0, t1))
        n = a.runs
        res = {"runs": n, "paths": paths, "wall_s": round(wall, 2),
               "load": open("/proc/loadavg").read().split()[:3],
               "cpu_ms_per_run": {"all": round(total / n, 2), "saferund": round(own / n, 2),
                                  "zygote_group": round(zyg / n, 2),
                                  "sandboxes": round((groups - zyg) / n, 2),
                                  "checker_and_other_children":
                                      round((total - groups - own) / n, 2)}}
        if a.perf_stat:
            for line in open(out):
                f = line.strip().split(",")
                if len(f) > 2 and f[2] in ("page-faults", "task-clock", "context-switches",
                                           "cpu-migrations"):
                    res.setdefault("perf_per_run", {})[f[2]] = round(float(f[0]) / n, 2)
        print(json.dumps(res))
    finally:
        if perf and perf.poll() is None:
            perf.kill()
        d.cleanup()


if __name__ == "__main__":
    main()
