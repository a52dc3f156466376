#!/usr/bin/python3
"""Throughput and latency of print('hi') through saferund, and its RSS.

usage: sudo tests/api/bench_daemon.py [--requests N] [--clients 1,8,32]
                                      [--profile minimal] [--no-check] [--write]

Starts its own daemon (build/saferund or $SAFERUND) in cgroups of its own,
with a policy of the given rootfs profile, and measures POST /v1/run over
the unix socket and over loopback TCP with a bearer token, at each client
count: every client is one keep-alive connection making requests back to
back. Prints the machine, a markdown table (requests/s, p50, p99), GET
/health on both transports, and the daemon's RSS idle and after the load.
--write also puts it into docs/benchmarks.md between
<!-- bench:daemon:start --> and <!-- bench:daemon:end -->."""
import argparse
import concurrent.futures as cf
import datetime
import http.client
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from conftest import Daemon, UnixHTTPConnection  # noqa: E402

TOKEN = "bench-" + "0" * 32
DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "benchmarks.md")
START, END = "<!-- bench:daemon:start -->", "<!-- bench:daemon:end -->"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def connect(d, transport):
    if transport == "unix":
        return UnixHTTPConnection(d.socket), {}
    host, port = d.tcp_addr.rsplit(":", 1)
    return (http.client.HTTPConnection(host, int(port), timeout=60),
            {"Authorization": "Bearer " + TOKEN})


def client(d, transport, n, body):
    """One keep-alive connection making n runs; returns the latencies."""
    conn, headers = connect(d, transport)
    headers["Content-Type"] = "application/json"
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        conn.request("POST", "/v1/run", body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        lat.append(time.perf_counter() - t)
        assert r.status == 200 and json.loads(data)["output"] == "hi\n", data
    conn.close()
    return lat


def percentile(sorted_lat, q):
    return sorted_lat[min(len(sorted_lat) - 1, int(len(sorted_lat) * q))] * 1000


def bench(d, transport, clients, total, body):
    per = max(1, total // clients)
    t = time.perf_counter()
    with cf.ThreadPoolExecutor(clients) as pool:
        futures = [pool.submit(client, d, transport, per, body) for _ in range(clients)]
        lats = sorted(x for f in futures for x in f.result())
    wall = time.perf_counter() - t
    return len(lats) / wall, percentile(lats, 0.5), percentile(lats, 0.99), len(lats)


def bench_health(d, transport, n=1000):
    conn, headers = connect(d, transport)
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        conn.request("GET", "/health", headers=headers)
        conn.getresponse().read()
        lat.append(time.perf_counter() - t)
    conn.close()
    lat.sort()
    return len(lat) / sum(lat), percentile(lat, 0.5), percentile(lat, 0.99)


def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{model}, {os.cpu_count()} cores, kernel {platform.release()}"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(a):
    policy = {"filesystem": {"profile": a.profile}}
    if a.no_check:
        policy["checker"] = {"enabled": False}
    d = Daemon(["--queue-depth", "256"], policies={"default": policy}, tcp=True, token=TOKEN)
    out = []
    try:
        d.start()
        time.sleep(0.5)
        idle = rss_kib(d.proc.pid)
        body = json.dumps({"code": "print('hi')"})
        load_before = loadavg()
        for transport in ("unix", "tcp"):
            client(d, transport, 10, body)  # warm the caches
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        out += [f"- date: {when}",
                f"- machine: {machine()}",
                f"- saferund: max_concurrent_runs {os.cpu_count()} (the default: one per "
                f"core), policy: profile {a.profile}, checker {'off' if a.no_check else 'on'}",
                f"- workload: `POST /v1/run` with `{{\"code\": \"print('hi')\"}}`, "
                f"{a.requests} requests per row; every client is one keep-alive connection "
                f"sending its next request when the last is answered; TCP is loopback with "
                f"a bearer token",
                f"- idle RSS: {idle} KiB",
                "",
                "| transport | clients | requests/s | p50 ms | p99 ms |",
                "|---|---:|---:|---:|---:|"]
        print("\n".join(out), flush=True)
        for transport in ("unix", "tcp"):
            for c in [int(x) for x in a.clients.split(",")]:
                rps, p50, p99, n = bench(d, transport, c, a.requests, body)
                row = f"| {transport} | {c} | {rps:.1f} | {p50:.1f} | {p99:.1f} |"
                out.append(row)
                print(row, flush=True)
        lines = ["", "`GET /health`, 1 client, 1000 requests (the HTTP path without a run):", ""]
        for transport in ("unix", "tcp"):
            rps, p50, p99 = bench_health(d, transport)
            lines.append(f"- {transport}: {rps:.0f} requests/s, p50 {p50:.2f} ms, "
                         f"p99 {p99:.2f} ms")
        lines += ["", f"RSS after the load: {rss_kib(d.proc.pid)} KiB. Load average before: "
                  f"{load_before}; after: {loadavg()}."]
        out += lines
        print("\n".join(lines), flush=True)
    finally:
        d.cleanup()
    return out


def write_docs(lines, a):
    section = "\n".join([
        START,
        f"## saferund (the daemon), {a.profile} profile",
        "",
        "Reproduce (as root): `tests/api/bench_daemon.py --profile "
        f"{a.profile} --write`.",
        "",
        *lines,
        "",
        "How to read it: every run is a cold sandbox, so throughput is bound by "
        "`max_concurrent_runs` and the cores, and is reached at a few clients; more clients "
        "only wait longer in the queue (p50 ≈ clients ÷ requests/s). The client threads run "
        "on the same cores as the runs, and the load average after the run is mostly the "
        "benchmark's own.",
        END,
    ])
    text = open(DOCS).read() if os.path.exists(DOCS) else "# Benchmarks\n"
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    with open(DOCS, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=200, help="per row (default 200)")
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--profile", default="minimal")
    ap.add_argument("--no-check", action="store_true", help="policy with the checker off")
    ap.add_argument("--write", action="store_true", help="also write docs/benchmarks.md")
    a = ap.parse_args()
    lines = run(a)
    if a.write:
        write_docs(lines, a)


if __name__ == "__main__":
    main()
