# The in-sandbox runner: runs /work/main.py as `python3 main.py` would, but
# with tracebacks that say File "main.py" (Python 3.11 makes a script's path
# absolute). Passed to `python3 -c`; it leaves no names of its own behind.
#
# With a guard argument (the checker's settings, see docs/checker.md) it
# first installs a PEP 578 audit hook: when code in main.py starts a
# process, loads native code, connects a socket while the network is off,
# opens a file outside the allowed dirs, runs exec/eval/compile or imports
# a denied module, the hook writes "saferun: blocked EVENT ..." to stderr
# and ends the process with status 121, which the supervisor reports as
# `rejected`. Events that libraries raise on their own (matplotlib's
# fc-list, dataclasses' exec) are left alone.
def _saferun_main():
    import sys, __main__
    me = sys._getframe().f_code
    path = "main.py"
    guard = sys.argv[1] if len(sys.argv) > 1 else ""
    sys.argv[:] = [path]
    sys.path[0] = sys.path[0] or __import__("os").getcwd()
    with open(path, "rb") as f:
        source = f.read()
    ns = __main__.__dict__
    del ns["_saferun_main"]
    install_guard = ns.pop("_install_guard")
    ns["__file__"] = path
    try:
        code = compile(source, path, "exec")
        if guard:
            install_guard(guard)
        exec(code, ns)
    except SystemExit:
        raise
    except BaseException as e:
        tb = e.__traceback__
        # Hide this runner's own frame: the user sees only main.py's.
        if tb is not None and tb.tb_frame.f_code is me:
            tb = tb.tb_next
            e.__traceback__ = tb
        sys.excepthook(type(e), e, tb)
        sys.exit(1)


def _install_guard(spec):
    import os, sys
    # Fields "key=value" split by \x1e, list items by \x1f (policy paths and
    # names never contain control characters).
    conf = dict(part.split("=", 1) for part in spec.split("\x1e") if "=" in part)
    allow = set(filter(None, conf.get("allow", "").split("\x1f")))
    dirs = [d for d in conf.get("dirs", "/work").split("\x1f") if d]
    network_off = conf.get("net") == "0"
    stdlib = os.path.dirname(os.__file__) + "/"
    # Standard modules that implement the guarded APIs: their frames are
    # skipped to find who asked (main.py, or a library).
    through = ("subprocess.py", "os.py", "pty.py", "pathlib.py", "shutil.py", "glob.py", "codecs.py",
               "tempfile.py", "fileinput.py", "code.py", "codeop.py", "runpy.py", "socket.py",
               "ctypes/__init__.py", "asyncio/", "importlib/", "multiprocessing/", "zipimport.py",
               "pkgutil.py", "urllib/request.py", "http/client.py", "ssl.py", "smtplib.py",
               "ftplib.py", "platform.py", "webbrowser.py")
    devices = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/stdin", "/dev/stdout",
               "/dev/stderr", "/dev/shm/")
    denied = {"subprocess": "SR101 process", "_posixsubprocess": "SR101 process",
              "pty": "SR101 process", "ctypes": "SR102 native", "_ctypes": "SR102 native",
              "cffi": "SR102 native", "imp": "SR104 dynamic-import", "runpy": "SR104 dynamic-import",
              "zipimport": "SR104 dynamic-import", "code": "SR201 eval", "codeop": "SR201 eval"}
    rules = {"subprocess.Popen": "SR101 process", "os.system": "SR101 process",
             "os.exec": "SR101 process", "os.posix_spawn": "SR101 process",
             "os.spawn": "SR101 process", "ctypes.dlopen": "SR102 native",
             "ctypes.dlsym": "SR102 native", "exec": "SR201 eval", "compile": "SR201 eval",
             "open": "SR401 path", "import": "", "os.kill": "SR106 tamper",
             "resource.setrlimit": "SR106 tamper", "sys.settrace": "SR106 tamper",
             "sys.setprofile": "SR106 tamper"}
    if network_off:
        rules["socket.connect"] = rules["socket.sendto"] = "SR103 network"
    names = {"subprocess.Popen": "subprocess", "os.exec": "os.exec", "exec": "exec",
             "compile": "compile", "ctypes.dlopen": "ctypes", "ctypes.dlsym": "ctypes"}

    def relaxed(rule, event):
        rid, _, rname = rule.partition(" ")
        name = names.get(event, event)
        return bool({rid, rname, event, name, name.split(".")[0], "eval" if event == "exec" else name}
                    & allow)

    for event, rule in list(rules.items()):
        if rule and relaxed(rule, event):
            del rules[event]

    packages = tuple(stdlib + t for t in through if t.endswith("/"))

    def caller(event):
        # The first frame outside the hook and the modules above; None when
        # an import is in progress (its own file reads are not the code's).
        f = sys._getframe(2)
        while f is not None:
            name = f.f_code.co_filename
            if name.startswith(("<frozen importlib", stdlib + "importlib/")) and event != "import":
                return None
            if not (name.startswith("<frozen") or (name.startswith(stdlib) and name.endswith(through))
                    or name.startswith(packages)):
                return f
            f = f.f_back
        return None

    def outside(p):
        p = os.path.normpath(os.path.join(dirs[0], os.fsdecode(p)))
        return not (any(p == d or p.startswith(d + "/") for d in dirs) or p.startswith(devices)
                    or p in devices)

    def what(event, args):
        if event == "open":
            p = args[0]
            if isinstance(p, int) or p is None:
                return None
            return f"open({os.fsdecode(p)!r})" if outside(p) else None
        if event == "import":
            rule = denied.get(args[0])
            if rule is None or relaxed(rule, args[0]):
                return None
            return rule, f"import {args[0]}"
        if event in ("socket.connect", "socket.sendto"):
            sock, addr = args[0], args[-1]
            return f"{event}({addr!r})" if getattr(sock, "family", 0) in (2, 10) else None
        if event in ("exec", "compile"):
            return f"{event}()"
        return f"{event}({', '.join(repr(a)[:60] for a in args[:2])})"

    def hook(event, args):
        rule = rules.get(event)
        if rule is None:
            return
        f = caller(event)
        if f is None or f.f_code.co_filename != "main.py":
            return
        found = what(event, args)
        if not found:
            return
        if isinstance(found, tuple):
            rule, found = found
        msg = f"saferun: blocked {found} at main.py line {f.f_lineno} ({rule}): this sandbox forbids it\n"
        try:
            sys.stdout.flush()
        except Exception:
            pass
        os.write(2, msg.encode("utf-8", "replace"))
        os._exit(121)

    sys.addaudithook(hook)


_saferun_main()
