"""What a listing costs the daemon (issue 15, item 5): a run that builds a
deep tree of long names under artifacts/ must not make saferund allocate
depth x name length per entry (hundreds of MB outside the run's cgroup).
The listings of a run's artifacts and of a session's files are bounded in
bytes as well as entries, and their results say they were cut short and
why."""

# 120 dirs of 250-byte names, then 3000 files at the bottom: each file's
# path is ~30 KB, ~90 MB of paths for an unbounded listing.
DEEP_TREE = """
import os
os.chdir({top!r})
for _ in range(120):
    os.mkdir('d' * 250)
    os.chdir('d' * 250)
for i in range({files}):
    open('f%05d' % i + 'x' * 200, 'w').close()
print('built')
"""
MIB = 1 << 20


def peak_rss(pid):
    """The process's peak resident set (VmHWM), in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_a_deep_tree_of_artifacts_costs_the_daemon_a_bounded_listing(daemon):
    # a small tree first: whatever a first run allocates once is in the peak
    small = daemon.run(DEEP_TREE.format(top="artifacts", files=3))
    assert small["status"] == "ok" and small["stdout"] == "built\n", small
    before = peak_rss(daemon.proc.pid)
    body = daemon.run(DEEP_TREE.format(top="artifacts", files=3000))
    grown = peak_rss(daemon.proc.pid) - before
    print(f"peak RSS grew by {grown / MIB:.1f} MiB")
    assert body["status"] == "ok" and body["stdout"] == "built\n", body
    assert grown < 48 * MIB, f"the daemon's peak RSS grew by {grown / MIB:.0f} MiB"
    assert body["artifacts_truncated"] is True
    assert "4 MiB" in body["artifacts_truncated_reason"], body["artifacts_truncated_reason"]
    # what is listed is the first files of the tree, in name order
    names = [a["name"] for a in body["artifacts"]]
    assert names and names == sorted(names) and len(names) < 3000
    assert all(n.count("/") == 120 and a["size"] == 0
               for n, a in zip(names, body["artifacts"]))
    assert daemon.get("/health").status_code == 200


def test_a_session_listing_says_why_it_stopped(daemon):
    r = daemon.post("/v1/sessions", {})
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    r = daemon.post(f"/v1/sessions/{sid}/run",
                    {"code": DEEP_TREE.format(top="src", files=300)})
    assert r.status_code == 200 and r.json()["stdout"] == "built\n", r.text
    before = peak_rss(daemon.proc.pid)
    r = daemon.get(f"/v1/sessions/{sid}/files")
    assert r.status_code == 200, r.text[:500]
    body = r.json()
    assert peak_rss(daemon.proc.pid) - before < 48 * MIB
    assert body["truncated"] is True and "4 MiB" in body["truncated_reason"], body.keys()
    assert body["count"] == len(body["files"]) < 300 + 122
    paths = [f["path"] for f in body["files"]]
    assert paths[:2] == ["artifacts", "src"] and paths == sorted(paths)
    # once the tree is gone, the listing is whole and has neither key
    r, data = daemon.raw("DELETE", f"/v1/sessions/{sid}/files/src")
    assert r.status == 200, data
    body = daemon.get(f"/v1/sessions/{sid}/files").json()
    assert "truncated" not in body and "truncated_reason" not in body
    assert [f["path"] for f in body["files"]] == ["artifacts"]
