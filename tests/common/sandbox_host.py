"""What a sandbox looks like from the host, shared by the test tiers."""
import ctypes
import os
import subprocess

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


CLONE_NEWNS = 0x00020000
_own_namespace = False


def own_mount_namespace():
    """Put this test process (and so everything it starts: the CLI, the
    drivers, saferund and their sandboxes) in a mount namespace of its own
    whose mounts are shared among themselves but not with the host's.
    A sandbox that leaks a mount (a propagation bug) leaks it into this
    namespace, where sandbox_like_mounts() sees it; another job's daemons
    and sandboxes on the same machine mount in the host's, where it does
    not: the leftover checks look at this test's mounts only. Called by
    the tiers' conftests at import, while the process has one thread
    (unshare(CLONE_NEWNS) refuses a threaded process)."""
    global _own_namespace
    if _own_namespace:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"unshare(CLONE_NEWNS): {os.strerror(e)}")
    # Cut from the host's peer groups first, then one new peer group of
    # our own, as a host with systemd has it: a sandbox's namespace is a
    # copy of this one, so a mount it forgets to make private comes back.
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    subprocess.run(["mount", "--make-rshared", "/"], check=True)
    _own_namespace = True


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


def leftovers_since(before):
    """What host_leftovers() has now that the snapshot `before` had not:
    only what appeared counts. What went away meanwhile is not a leak, and
    is often another job's (a daemon's workspace that was mounted when this
    test's mount namespace was made, then unmounted in the host's)."""
    now = host_leftovers()
    return {k: sorted(set(v) - set(before[k])) for k, v in now.items()
            if set(v) - set(before[k])}
