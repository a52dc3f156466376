#!/usr/bin/python3
"""Throughput and latency of print('hi') through saferund, and its idle RSS.

usage: bench_daemon.py [--requests N] [--clients 1,8,32] [--profile host]
Starts its own daemon (build/saferund or $SAFERUND) in cgroups of its own,
over the unix socket and loopback TCP with a token. Prints a table."""
import argparse
import concurrent.futures as cf
import http.client
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from conftest import Daemon, UnixHTTPConnection  # noqa: E402

TOKEN = "bench-" + "0" * 32


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def client(d, transport, n, body):
    """One keep-alive connection making n requests; returns latencies."""
    if transport == "unix":
        conn = UnixHTTPConnection(d.socket)
        headers = {"Content-Type": "application/json"}
    else:
        host, port = d.tcp_addr.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        headers = {"Content-Type": "application/json", "Authorization": "Bearer " + TOKEN}
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


def bench(d, transport, clients, total, body):
    per = max(1, total // clients)
    t = time.perf_counter()
    with cf.ThreadPoolExecutor(clients) as pool:
        lats = [x for f in [pool.submit(client, d, transport, per, body) for _ in range(clients)]
                for x in f.result()]
    wall = time.perf_counter() - t
    lats.sort()
    return len(lats) / wall, lats[len(lats) // 2] * 1000, lats[int(len(lats) * 0.99)] * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--profile", default="host")
    ap.add_argument("--no-check", action="store_true", help="policy with the checker off")
    a = ap.parse_args()
    policy = {"filesystem": {"profile": a.profile}}
    if a.no_check:
        policy["checker"] = {"enabled": False}
    d = Daemon(["--queue-depth", "256"], policies={"default": policy}, tcp=True, token=TOKEN)
    try:
        d.start()
        time.sleep(0.5)
        idle = rss_kib(d.proc.pid)
        body = json.dumps({"code": "print('hi')"})
        client(d, "unix", 10, body)  # warm the caches
        print(f"saferund: {os.cpu_count()} CPUs, max_concurrent_runs={os.cpu_count()}, "
              f"profile {a.profile}, checker {'off' if a.no_check else 'on'}, "
              f"{a.requests} requests per row")
        print(f"idle RSS: {idle} KiB")
        print("| transport | clients | runs/s | p50 ms | p99 ms |")
        print("|---|---:|---:|---:|---:|")
        for transport in ("unix", "tcp"):
            for c in [int(x) for x in a.clients.split(",")]:
                rps, p50, p99 = bench(d, transport, c, a.requests, body)
                print(f"| {transport} | {c} | {rps:.1f} | {p50:.1f} | {p99:.1f} |", flush=True)
        conn = UnixHTTPConnection(d.socket)
        lat = []
        for _ in range(1000):
            t = time.perf_counter()
            conn.request("GET", "/health")
            conn.getresponse().read()
            lat.append(time.perf_counter() - t)
        lat.sort()
        print(f"GET /health over the unix socket, 1 client: {len(lat) / sum(lat):.0f} req/s, "
              f"p50 {lat[len(lat) // 2] * 1000:.2f} ms")
        print(f"RSS after the load: {rss_kib(d.proc.pid)} KiB")
    finally:
        d.cleanup()


if __name__ == "__main__":
    main()
