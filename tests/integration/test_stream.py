"""sr_run_request.on_output: a run's output reaches the caller while the run
goes on, on the cold path, the warm path and a kernel (a session's runs).
Driven through the library by stream_driver.c; ordering is proved against
the code's own clock, never with a timing bound."""
import json
import os
import subprocess
import tempfile
import time

import pytest

from conftest import SAFERUN

pytestmark = pytest.mark.host_only(
    reason="the output callback is the supervisor reading the sandbox's pipes, the same on "
    "any cgroup version; stream_driver is not in the guest's image")

DRIVER = os.environ.get("SAFERUN_STREAM_DRIVER") or os.path.join(
    os.path.dirname(SAFERUN), "tests", "stream_driver")

# Prints, then takes the time (the sandbox shares the host's wall clock),
# then prints that time: the first chunk must have reached the callback
# before the code took it.
CODE = """import sys, time
print("first", flush=True)
time.sleep(0.3)
print(repr(time.time()), flush=True)
print("to stderr", file=sys.stderr, flush=True)
"""


def drive(mode, code, output_bytes=1 << 20):
    with tempfile.TemporaryDirectory(prefix="sr-stream-") as base:
        os.chmod(base, 0o711)  # the sandbox's user walks into its workspace
        p = subprocess.run([DRIVER, mode, "host", str(output_bytes), base, code],
                           capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    chunks = [(c["chunk"], c["t"], bytes.fromhex(c["hex"]).decode()) for c in lines[:-2]]
    assert all("chunk" in c for c in lines[:-2])
    return chunks, lines[-2], lines[-1]


@pytest.mark.parametrize("mode", ["cold", "warm", "kernel"])
def test_chunks_arrive_while_the_code_runs(mode):
    chunks, ret, res = drive(mode, CODE)
    assert res["status"] == "ok", res
    assert res["path"] == ("warm" if mode == "warm" else "cold")
    out = "".join(d for s, _, d in chunks if s == 1)
    err = "".join(d for s, _, d in chunks if s == 2)
    # The callback saw exactly the result's bytes, each stream on its own.
    assert out == res["stdout"] and err == res["stderr"] == "to stderr\n"
    marker = float(res["stdout"].splitlines()[1])
    first = next(t for s, t, d in chunks if s == 1)
    assert chunks[0][2].startswith("first")
    # The first chunk came while the code was still sleeping before its
    # marker, and every chunk before the run's call returned.
    assert first < marker, (first, marker)
    assert all(t <= ret["returned"] for _, t, _ in chunks)
    assert ret["calls"] == len(chunks)


@pytest.mark.parametrize("mode", ["cold", "kernel"])
def test_only_bytes_within_the_cap_are_passed(mode):
    code = "import sys\nfor i in range(50):\n    print('x' * 99, flush=True)\n"
    chunks, _, res = drive(mode, code, output_bytes=1000)
    assert res["status"] == "output_limit", res
    out = "".join(d for s, _, d in chunks if s == 1)
    assert out == res["stdout"] and len(out) == 1000


CLI_CODE = """import sys, time
print("first", flush=True)
print("err first", file=sys.stderr, flush=True)
time.sleep(0.3)
print(repr(time.time()))
raise SystemExit(3)
"""


@pytest.mark.parametrize("path", [[], ["--warm"]])
def test_cli_prints_the_output_as_it_comes(path):
    p = subprocess.Popen([SAFERUN, "run", *path, "--no-check", "--profile", "host", "-c",
                          CLI_CODE], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.readline()
    first_t = time.time()
    rest, err = p.communicate(timeout=120)
    assert first == b"first\n"
    marker = float(rest.decode())
    assert first_t < marker, (first_t, marker)
    # the same bytes and exit code as when it printed at the end
    assert err == b"err first\n" and p.returncode == 3
    # --json prints the one result object, at the end
    j = subprocess.run([SAFERUN, "run", *path, "--json", "--no-check", "--profile", "host",
                        "-c", CLI_CODE], capture_output=True, timeout=120)
    res = json.loads(j.stdout)
    assert res["stdout"].startswith("first\n") and res["exit_code"] == 3
    assert j.stderr == b"" and j.returncode == 3
