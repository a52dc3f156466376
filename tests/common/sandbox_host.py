"""What a sandbox looks like from the host, shared by the test tiers."""
import os

# Sandbox ids 0..65535 map to host ids from here (runtime/lib/sandbox.c).
HOST_ID_BASE = 1879048192


def sandbox_processes():
    """Host pids of processes whose uid is in the sandbox range."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) >= HOST_ID_BASE:
                            pids.append(int(d))
                        break
        except OSError:
            pass
    return pids
