"""10. IPC and UTS namespaces are the sandbox's own."""
import socket
import subprocess

from conftest import run


def test_hostname_is_the_sandbox_own():
    res = run("import socket; print(socket.gethostname())")
    assert res["status"] == "ok", res
    assert res["stdout"].strip() == "sandbox"
    assert socket.gethostname() != "sandbox"


def test_sysv_ipc_is_separate():
    key = 0x5afe5afe
    host = subprocess.run(["python3", "-c", f"""
import ctypes
libc = ctypes.CDLL(None)
print(libc.shmget({key}, 4096, 0o1600))
"""], capture_output=True, text=True)
    shmid = int(host.stdout)
    assert shmid >= 0
    try:
        code = f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(libc.shmget({key}, 4096, 0o600), ctypes.get_errno())
print(open('/proc/sysvipc/shm').read().count('\\n'))
"""
        res = run(code)
        assert res["status"] == "ok", res
        # ENOENT: the host's segment with that key does not exist here.
        assert res["stdout"].splitlines() == ["-1 2", "1"]
    finally:
        subprocess.run(["ipcrm", "-m", str(shmid)])
