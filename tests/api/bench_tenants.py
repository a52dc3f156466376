#!/usr/bin/python3
"""A benign tenant's latency while another tenant floods the same daemon.

usage: sudo tests/api/bench_tenants.py [--requests N] [--profile minimal]

Starts its own daemons (build/saferund or $SAFERUND) with the default
settings (max_concurrent_runs: one per core) over loopback TCP. The benign
client sends print(1) back to back, one request at a time; the flood is two
clients of another tenant sending fork bombs, memory bombs, CPU spins and
sleeps (each with a 3 s timeout, so a row ends in minutes). Rows:

- unloaded: the benign client alone;
- one tenant: no tenants file, both clients the same caller (first come,
  first served, as before tenants);
- two tenants, flood may take every slot: a tenants file (slots handed
  out in turn), the flood tenant's max_concurrent_runs set to all of them;
- two tenants (defaults): slots in turn, and each tenant at most
  max_concurrent_runs - 1 runs at once; each tenant's sandboxes in its
  own cgroup, both of weight 100;
- two tenants, benign weight 400: the same, the benign tenant's cgroup
  (and its turns at the slots) weighing four times the flood's.

Prints a markdown table of the benign client's p50 and p99 and their ratio
to the unloaded p99."""
import argparse
import http.client
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from conftest import Daemon  # noqa: E402

BENIGN, FLOOD = "benign-token-" + "0" * 24, "flood-token-" + "1" * 24
BOMBS = [
    "import os\nwhile True:\n    os.fork()",
    "x = []\nwhile True:\n    x.append(bytearray(50 << 20))",
    "while True:\n    pass",
    "import time\ntime.sleep(10)",
]


def post(conn, token, body):
    conn.request("POST", "/v1/run", body=json.dumps(body),
                 headers={"Authorization": "Bearer " + token,
                          "Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, r.read()


def flood(d, stop):
    host, port = d.tcp_addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    i = 0
    while not stop.is_set():
        body = {"code": BOMBS[i % len(BOMBS)], "timeout": 3, "allow": []}
        status, _ = post(conn, FLOOD, body)
        if status == 429:
            time.sleep(0.05)
        i += 1


def benign(d, n):
    host, port = d.tcp_addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        status, data = post(conn, BENIGN, {"code": "print(1)"})
        lat.append((time.perf_counter() - t) * 1000)
        assert status == 200 and json.loads(data)["output"] == "1\n", data
    return sorted(lat)


def pct(lat, q):
    return lat[min(len(lat) - 1, int(q * len(lat)))]


def row(name, tenants, flooding, a):
    args = []
    d = Daemon(args, policies={"default": {"filesystem": {"profile": a.profile}}}, tcp=True,
               token=None if tenants else BENIGN)
    if tenants:
        path = os.path.join(d.dir, "tenants.json")
        with open(path, "w") as f:
            json.dump({"tenants": tenants}, f)
        d.args += ["--tenants", path]
    stop = threading.Event()
    try:
        d.start()
        benign(d, 5)  # warm the caches
        threads = [threading.Thread(target=flood, args=(d, stop), daemon=True)
                   for _ in range(2 if flooding else 0)]
        for t in threads:
            t.start()
        time.sleep(2 if flooding else 0)
        lat = benign(d, a.requests)
        stop.set()
        for t in threads:
            t.join(timeout=60)
        return name, pct(lat, 0.5), pct(lat, 0.99)
    finally:
        stop.set()
        d.cleanup()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--profile", default="minimal")
    a = ap.parse_args()
    two = [{"name": "benign", "tokens": [BENIGN]}, {"name": "flood", "tokens": [FLOOD]}]
    greedy = [two[0], dict(two[1], quotas={"max_concurrent_runs": os.cpu_count()})]
    rows = [row("unloaded", None, False, a),
            row("one tenant (FIFO, as before tenants)", [{"name": "all", "tokens": [BENIGN, FLOOD]}],
                True, a),
            row("two tenants, flood may take every slot (slots in turn)", greedy, True, a),
            row("two tenants (defaults)", two, True, a),
            row("two tenants, benign weight 400", [dict(two[0], weight=400), two[1]], True, a)]
    base = rows[0][2]
    print(f"{os.cpu_count()} CPUs, max_concurrent_runs {os.cpu_count()}, "
          f"{a.requests} print(1) requests per row, profile {a.profile}\n")
    print("| row | p50 ms | p99 ms | p99 / unloaded p99 |")
    print("|---|---|---|---|")
    for name, p50, p99 in rows:
        print(f"| {name} | {p50:.0f} | {p99:.0f} | {p99 / base:.1f}x |")


if __name__ == "__main__":
    main()
