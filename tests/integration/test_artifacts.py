"""Artifacts: what a run leaves in artifacts/ comes back in its result,
read from the host side after the run, beneath the working dir, without
following a symlink; matplotlib figures are saved there on their own."""
import base64
import importlib.util

import pytest

from conftest import profiles, run
from test_kernel import kernel

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def by_name(res):
    return {a["name"]: a for a in res["artifacts"]}


@pytest.mark.parametrize("profile", profiles())
def test_files_in_artifacts_come_back_with_name_mime_size_and_bytes(profile):
    res = run("""
import os
os.makedirs('artifacts/deep/er')
open('artifacts/table.csv', 'w').write('a,b\\n1,2\\n')
open('artifacts/deep/er/blob.bin', 'wb').write(bytes(range(256)))
open('not-an-artifact.txt', 'w').write('x')
print('ok')
""", profile=profile)
    assert res["status"] == "ok", res
    arts = by_name(res)
    assert sorted(arts) == ["deep/er/blob.bin", "table.csv"]
    assert arts["table.csv"]["mime"] == "text/csv" and arts["table.csv"]["size"] == 8
    assert base64.b64decode(arts["table.csv"]["data_base64"]) == b"a,b\n1,2\n"
    assert arts["deep/er/blob.bin"]["mime"] == "application/octet-stream"
    assert base64.b64decode(arts["deep/er/blob.bin"]["data_base64"]) == bytes(range(256))
    assert all(a["inline"] for a in res["artifacts"])


def test_a_file_the_code_left_open_is_complete():
    """Buffered data of a file never closed is written at the end (the warm
    path skips the interpreter's teardown, which would do it)."""
    res = run('f = open("artifacts/out.txt", "w")\nf.write("x" * 10 + "\\n")\n')
    assert res["status"] == "ok", res
    assert [(a["name"], a["size"], base64.b64decode(a["data_base64"]))
            for a in res["artifacts"]] == [("out.txt", 11, b"x" * 10 + b"\n")]


@pytest.mark.parametrize("profile", profiles())
def test_the_end_of_a_run_is_the_interpreters_end(profile):
    """saferun skips python's own teardown (milliseconds; on the warm path
    it would also write to every page shared with the zygote) but does
    what the code can see of it, in its order: the SystemExit message,
    non-daemon threads joined, atexit handlers, files never closed
    flushed, the status."""
    res = run("""
import atexit, sys, threading, time
f = open('artifacts/left-open.txt', 'w')
f.write('never flushed')
atexit.register(lambda: print('atexit ran'))
atexit.register(lambda: f.write(', then by atexit'))
def late():
    time.sleep(0.3)
    print('thread done')
threading.Thread(target=late).start()
print('main done')
sys.exit('bye')
""", profile=profile)
    assert (res["status"], res["exit_code"]) == ("error", 1), res
    assert res["stdout"] == "main done\nthread done\natexit ran\n"
    assert res["stderr"] == "bye\n"
    assert [(a["name"], base64.b64decode(a["data_base64"])) for a in res["artifacts"]] == \
        [("left-open.txt", b"never flushed, then by atexit")]
    for code, status in (("import sys; sys.exit(3)", 3), ("import sys; sys.exit()", 0),
                         ("raise SystemExit(None)", 0), ("import os; os._exit(5)", 5)):
        res = run(code, profile=profile)
        assert res["exit_code"] == status, (code, res)


def test_a_run_without_artifacts_has_an_empty_list():
    res = run("print(1)")
    assert res["status"] == "ok" and res["artifacts"] == []
    assert "artifacts_truncated" not in res


def test_artifacts_of_a_failed_or_timed_out_run_still_come_back():
    res = run("open('artifacts/partial.txt', 'w').write('so far')\n1/0")
    assert res["status"] == "error"
    assert [a["name"] for a in res["artifacts"]] == ["partial.txt"]
    res = run("open('artifacts/t.txt', 'w').write('t')\nwhile True: pass", "--timeout", "3")
    assert res["status"] == "timeout"
    assert [a["name"] for a in res["artifacts"]] == ["t.txt"]


def test_symlinks_fifos_and_devices_are_not_artifacts_and_never_followed():
    res = run("""
import os
os.symlink('/etc/passwd', 'artifacts/passwd')
os.symlink('/etc', 'artifacts/etc')
os.mkfifo('artifacts/fifo')
open('artifacts/real.txt', 'w').write('real')
""")
    assert res["status"] == "ok", res
    assert [a["name"] for a in res["artifacts"]] == ["real.txt"]
    assert "root:" not in str(res)


def test_an_artifacts_dir_swapped_for_a_symlink_to_a_host_dir_yields_nothing():
    # the supervisor reads as root: a symlink must not take it to /etc
    res = run("""
import os, shutil
shutil.rmtree('artifacts')
os.symlink('/etc', 'artifacts')
""")
    assert res["status"] == "ok", res
    assert res["artifacts"] == []


def test_bytes_inline_up_to_the_cap_then_listed_without_them():
    # 8 MiB inline per run: a 9 MiB file is listed, its bytes are not; the
    # small file after it (by name) still fits
    res = run("""
open('artifacts/a-big.bin', 'wb').write(b'x' * (9 << 20))
open('artifacts/b-small.txt', 'w').write('small')
""", "--memory", "256M")
    assert res["status"] == "ok", res
    big, small = res["artifacts"]
    assert big["name"] == "a-big.bin" and big["size"] == 9 << 20
    assert big["inline"] is False and "data_base64" not in big
    assert small["inline"] is True and base64.b64decode(small["data_base64"]) == b"small"


def test_at_most_100_artifacts_are_listed():
    res = run("for i in range(105): open(f'artifacts/f{i:03}.txt', 'w').write(str(i))")
    assert res["status"] == "ok", res
    assert len(res["artifacts"]) == 100 and res["artifacts_truncated"] is True
    assert res["artifacts"][0]["name"] == "f000.txt"


needs_matplotlib = pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None,
    reason="python3-matplotlib is not installed (scripts/bootstrap --test installs it)")


@needs_matplotlib
def test_matplotlib_figures_come_back_as_png_without_the_code_saving_them():
    res = run("""
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [3, 1, 2])
plt.show()          # saves figure-1.png instead of blocking
fig, ax = plt.subplots()
ax.bar(['a', 'b'], [1, 2])
print('backend', plt.get_backend())
""")
    assert res["status"] == "ok", res
    assert res["stdout"] == "backend agg\n"
    assert "non-interactive" not in res["stderr"]  # show() did not just warn
    assert [a["name"] for a in res["artifacts"]] == ["figure-1.png", "figure-2.png"]
    for a in res["artifacts"]:
        assert a["mime"] == "image/png"
        assert base64.b64decode(a["data_base64"]).startswith(PNG_MAGIC)


@needs_matplotlib
def test_a_figure_left_open_by_a_failing_run_is_saved_too():
    res = run("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nraise ValueError('late')")
    assert res["status"] == "error" and "ValueError: late" in res["stderr"]
    assert [a["name"] for a in res["artifacts"]] == ["figure-1.png"]


def test_a_kernel_run_lists_what_it_changed_in_artifacts(tmp_path):
    results, files, _ = kernel(
        "open('artifacts/one.txt', 'w').write('1')",
        "open('artifacts/two.txt', 'w').write('2')",
        "print('nothing new')",
        "open('artifacts/one.txt', 'w').write('one again')",
        tmp_path=tmp_path)
    assert [[a["name"] for a in r["artifacts"]] for r in results] == [
        ["one.txt"], ["two.txt"], [], ["one.txt"]]
    assert base64.b64decode(results[3]["artifacts"][0]["data_base64"]) == b"one again"
    assert files["artifacts/two.txt"][0] == 1  # still in the workspace


@needs_matplotlib
def test_a_figure_the_code_saved_itself_is_not_saved_again():
    res = run("""
import matplotlib.pyplot as plt
plt.plot([1, 2])
plt.savefig('artifacts/mine.png')
plt.figure()
plt.plot([2, 1])
""")
    assert res["status"] == "ok", res
    assert [a["name"] for a in res["artifacts"]] == ["figure-1.png", "mine.png"]


def test_over_400_files_still_lists_the_first_100():
    res = run("for i in range(450): open(f'artifacts/f{i:03}.txt', 'w').write('x')")
    assert res["status"] == "ok", res
    assert len(res["artifacts"]) == 100 and res["artifacts_truncated"] is True
