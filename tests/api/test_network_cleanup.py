"""saferund's start-up clean-up of the egress mode's host state
(docs/network.md): a crashed run's veth goes with its sandbox's network
namespace; the host table inet saferun is removed once no sandbox veth is
left."""
import subprocess


def nft_tables():
    return subprocess.run(["nft", "list", "tables"], capture_output=True, text=True,
                          check=True).stdout


def sandbox_links():
    out = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    return [l.split()[0] for l in out.splitlines() if l.startswith("sr-")]


def test_start_up_removes_a_stale_egress_table(make_daemon):
    assert sandbox_links() == [], "an egress sandbox is running elsewhere"
    d = make_daemon(start=False)
    # what a supervisor that crashed mid-run leaves behind
    subprocess.run(["nft", "-f", "-"], input="table inet saferun {\n"
                   "  chain input { type filter hook input priority filter; policy accept;\n"
                   "    iifname \"sr-*\" counter reject with icmpx admin-prohibited\n  }\n}\n",
                   text=True, check=True)
    assert "table inet saferun" in nft_tables()
    try:
        d.start()
        assert "table inet saferun" not in nft_tables()
        assert [l["msg"] for l in d.lines("cleanup")] == \
            ["start-up: removed the egress table inet saferun left behind"], d.text()
    finally:
        subprocess.run(["nft", "delete", "table", "inet", "saferun"], capture_output=True)
