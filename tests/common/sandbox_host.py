"""What a sandbox looks like from the host, shared by the test tiers."""
import os

# Sandbox ids 0..65535 map to host ids from here (runtime/lib/box/sandbox.c).
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


# What a sandbox's set-up mounts (mounts_apply.c): a leak of one into the
# host's namespace (a propagation bug) shows as one of these file systems, or
# as a bind whose root is saferun's (a rootfs, a workspace, a state dir).
SANDBOX_FSTYPES = {"proc", "tmpfs", "sysfs", "mqueue", "devpts", "cgroup", "cgroup2"}
SAFERUN_PATHS = ("/var/lib/saferun", "/run/saferun", "/tmp/sr-", "/tmp/saferun",
                 os.environ.get("SAFERUN_ROOTFS_DIR", "/var/lib/saferun/rootfs"))


def sandbox_like_mounts():
    """The host's mounts a sandbox could have leaked, sorted. Other programs
    on the machine mount things too (firejail binds its /run/firejail files
    the first time it runs): their binds of their own files do not count."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            root, point = fields[3], fields[4]
            fstype = fields[fields.index("-") + 1]
            if fstype in SANDBOX_FSTYPES or any(
                    p.startswith(pfx) for p in (root, point) for pfx in SAFERUN_PATHS):
                found.append(line.rstrip("\n"))
    return sorted(found)


def host_leftovers():
    """What a run could leave on the host besides cgroups and processes:
    mounts, and entries in /tmp, /run and /dev/shm. Those dirs are shared
    with other programs on the machine, so only entries a sandbox could
    have made count there: saferun's names (sr-...) or the sandbox uid
    range. Compare a snapshot taken before with one taken after."""
    def ours(d):
        found = []
        for e in os.listdir(d) if os.path.isdir(d) else []:
            try:
                st = os.lstat(os.path.join(d, e))
            except FileNotFoundError:
                continue
            if e.startswith("sr-") or st.st_uid >= HOST_ID_BASE:
                found.append(e)
        return sorted(found)
    return {
        "mounts": sandbox_like_mounts(),
        "tmp": ours("/tmp"),
        "run": ours("/run"),
        "dev_shm": ours("/dev/shm"),
    }
