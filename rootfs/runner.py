# The in-sandbox runner: runs /work/main.py as `python3 main.py` would, but
# with tracebacks that say File "main.py" (Python 3.11 makes a script's path
# absolute). Passed to `python3 -c`; it leaves no names of its own behind.
#
# argv: [guard] [mode]. With a guard (the checker's settings, see
# docs/checker.md) it first installs a PEP 578 audit hook: when code in
# main.py starts a process, loads native code, connects a socket while the
# network is off, opens a file outside the allowed dirs, runs
# exec/eval/compile or imports a denied module, the hook writes "saferun:
# blocked EVENT ..." to stderr and ends the process with status 121, which
# the supervisor reports as `rejected`. Events that libraries raise on
# their own (matplotlib's fc-list, dataclasses' exec) are left alone.
#
# Mode "kernel" (sr_kernel, stateful sessions): no main.py; the code of
# each run arrives over the SOCK_SEQPACKET control socket on fd 3 as a
# message "X" <u32 code length> <u32 stdin length> <u8 flags> <allow list>
# with a memfd holding code then stdin. Every run executes in the same
# __main__ namespace; the reply is "D" <i32 status> (0 ok, 1 exception,
# N: SystemExit(N)) after stdout and stderr are flushed. "R" says ready.
# With SAFERUN_NOTEBOOK=PATH in its environment (E2B's code interpreter,
# docs/e2b.md) a kernel answers like a notebook: the value of the last
# expression and display data (display(), matplotlib figures as PNG,
# _repr_html_ and the other _repr_*_ forms) and the exception (name,
# value, traceback; not printed) go to PATH as JSON after each run.
#
# Mode "zygote" (the warm path, warm.c): no code yet. The supervisor sends
# the zygote module and the preload list over fd 3; the modules are
# imported once, then the module's serve() forks a locked-down sandbox per
# request and returns only there, in a fresh interpreter (a copy of this
# one) whose fd 3 is that run's control socket: the run's code, files,
# environment and guard arrive, are written to the working dir, and the run
# goes on exactly like a one-shot run. Protocol: runtime/lib/child/zygote_proto.h.
#
# Artifacts: the code's files in artifacts/ (made before it runs) come
# back with the result. Matplotlib draws to files (MPLBACKEND=Agg),
# plt.show() saves the open figures as artifacts/figure-N.png and closes
# them, and figures still open when the code (or a kernel's run) ends are
# saved too.
def _saferun_main():
    import sys, __main__
    me = sys._getframe().f_code
    guard = sys.argv[1] if len(sys.argv) > 1 else ""
    mode = sys.argv[2] if len(sys.argv) > 2 else ""
    kernel = mode == "kernel"
    path = "main.py"
    sys.argv[:] = [path]
    sys.path[0] = sys.path[0] or __import__("os").getcwd()
    ns = __main__.__dict__
    del ns["_saferun_main"]
    install_guard = ns.pop("_install_guard")
    serve = ns.pop("_saferun_kernel")
    zygote = ns.pop("_saferun_zygote")
    prewarm = ns.pop("_saferun_prewarm")
    _saferun_exit_status = ns.pop("_saferun_exit_status")
    done = go = None
    if mode == "zygote":
        # Returns in a new sandbox, its files written; go() waits for the
        # supervisor's "go" when the checker vets the code meanwhile.
        guard, done, go = zygote(prewarm)
    save_figures = ns.pop("_saferun_artifacts")()
    ns["__file__"] = path
    update = install_guard(guard) if guard else None
    if kernel:
        serve(ns, update, me, save_figures)
    if go is not None:
        go()
    with open(path, "rb") as f:
        source = f.read()
    # What exists before the code (start-up's modules, this runner, the
    # guard) leaves the collector's generations: the scan for unflushed
    # files at the end sees only what the code made (the warm path's
    # zygote froze its own the same way).
    import gc
    gc.freeze()
    try:
        try:
            code = compile(source, path, "exec")
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
        finally:
            save_figures()
    except SystemExit as e:
        status = _saferun_exit_status(e)
    else:
        status = 0
    # What the interpreter's shutdown does that the code can see, then out.
    # Tearing the interpreter down costs milliseconds (2 ms for a bare
    # python, 60 for one that imported pandas) and, on the warm path, would
    # write to every page this process shares with the zygote.
    if "threading" in sys.modules:
        sys.modules["threading"]._shutdown()
    __import__("atexit")._run_exitfuncs()
    # Files the code left open (and unflushed) are flushed as the teardown
    # would: they are among the objects it made, the collector's
    # generations (what existed before the code is frozen out of them).
    import io
    for gen in range(3):
        for obj in gc.get_objects(gen):
            if isinstance(obj, io.IOBase):
                try:
                    obj.flush()
                except Exception:
                    pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    # The status before the exit: a process with the zygote's address
    # space takes milliseconds to end, and the result need not wait.
    if done is not None:
        try:
            done.send(b"D" + status.to_bytes(4, "little", signed=True))
        except Exception:
            pass  # the code closed it: the exit report says the same, later
    __import__("os")._exit(status)


def _saferun_exit_status(e):
    # As the interpreter turns an uncaught SystemExit into a status.
    import sys
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    try:
        print(e.code, file=sys.stderr)
    except Exception:
        pass
    return 1


def _saferun_artifacts():
    import os, sys
    try:
        os.makedirs("artifacts", exist_ok=True)
    except OSError:
        pass  # a read-only working dir: no artifacts, the code still runs
    os.environ.setdefault("MPLBACKEND", "Agg")
    count = [0]

    def save_figures():
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        for num in plt.get_fignums():
            fig = plt.figure(num)
            if save_figures.sink is not None:  # notebook mode: into the run's results
                save_figures.sink(fig)
                plt.close(fig)
                continue
            if getattr(fig, "_saferun_saved", False):
                plt.close(fig)  # the code saved it itself: once is enough
                continue
            while True:
                count[0] += 1
                name = f"artifacts/figure-{count[0]}.png"
                if not os.path.lexists(name):
                    break
            try:
                fig.savefig(name)
            except Exception as e:
                print(f"saferun: figure {num} could not be saved: {e}", file=sys.stderr)
            plt.close(fig)

    save_figures.sink = None

    def patch(pyplot):
        pyplot.show = lambda *args, **kwargs: save_figures()
        figure = sys.modules["matplotlib.figure"].Figure
        savefig = figure.savefig

        def saved(fig, *args, **kwargs):
            fig._saferun_saved = True
            return savefig(fig, *args, **kwargs)

        figure.savefig = saved

    class ShowSaves:
        # Finds matplotlib.pyplot once, the normal way, and makes its show()
        # save instead of opening a window (or warning that it cannot).
        def find_spec(self, name, path=None, target=None):
            if name != "matplotlib.pyplot":
                return None
            sys.meta_path.remove(self)
            import importlib.util
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None:
                return spec
            load = spec.loader.exec_module

            def exec_module(module):
                load(module)
                patch(module)

            spec.loader.exec_module = exec_module
            return spec

    if "matplotlib.pyplot" in sys.modules:
        patch(sys.modules["matplotlib.pyplot"])  # preloaded (the warm path)
    else:
        sys.meta_path.insert(0, ShowSaves())
    return save_figures


def _saferun_kernel(ns, update, me, save_figures):
    import io, linecache, os, socket, struct, sys, traceback
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, fileno=3)

    def watch():
        # The supervisor gone (its end of fd 3 closed: saferund killed)
        # ends the kernel even while a run is busy; the kernel has no
        # parent-death signal (see sandbox.c).
        import select
        p = select.poll()
        p.register(3, 0)  # only POLLHUP and POLLERR, which are always reported
        while True:
            for _, ev in p.poll():
                if ev & (select.POLLHUP | select.POLLERR):
                    os._exit(0)

    __import__("threading").Thread(target=watch, name="saferun-watch", daemon=True).start()
    nb_path = os.environ.pop("SAFERUN_NOTEBOOK", None)
    nb = {"results": [], "error": None}
    if nb_path:
        import ast, base64, json
        reprs = (("html", "_repr_html_"), ("markdown", "_repr_markdown_"), ("svg", "_repr_svg_"),
                 ("png", "_repr_png_"), ("jpeg", "_repr_jpeg_"), ("latex", "_repr_latex_"),
                 ("json", "_repr_json_"), ("javascript", "_repr_javascript_"))

        def fmt(value, main):
            out = {}
            figure = sys.modules.get("matplotlib.figure")
            if figure is not None and isinstance(value, figure.Figure):
                buf = io.BytesIO()
                value.savefig(buf, format="png")
                out["png"] = base64.b64encode(buf.getvalue()).decode()
            for key, name in reprs:
                try:
                    f = getattr(value, name, None)
                    r = f() if key not in out and callable(f) else None
                except Exception:
                    r = None
                if isinstance(r, tuple):
                    r = r[0]
                if isinstance(r, bytes):
                    r = base64.b64encode(r).decode()
                if r is not None:
                    out[key] = r
            try:
                out["text"] = repr(value)
            except Exception as e:
                out["text"] = f"<repr() failed: {type(e).__name__}>"
            out["is_main_result"] = main
            return out

        save_figures.sink = lambda fig: nb["results"].append(fmt(fig, False))
        ns.setdefault("display", lambda *objs, **kw: nb["results"].extend(fmt(o, False) for o in objs))

    ctl.send(b"R")

    def run(source):
        # main.py is not on disk: tracebacks find the source here.
        text = source.decode("utf-8", "replace")
        linecache.cache["main.py"] = (len(text), None, text.splitlines(True), "main.py")
        try:
            exec(compile(source, "main.py", "exec"), ns)
            return 0
        except SystemExit as e:
            if e.code is None or isinstance(e.code, int):
                return (e.code or 0) & 0xFF
            print(e.code, file=sys.stderr)
            return 1
        except BaseException as e:
            tb = e.__traceback__
            while tb is not None and tb.tb_frame.f_code in (me, run.__code__):
                tb = tb.tb_next
            e.__traceback__ = tb
            # The default hook reads source lines from disk; traceback's
            # printer reads linecache, where this run's source is.
            if sys.excepthook is sys.__excepthook__:
                traceback.print_exception(e)
            else:
                sys.excepthook(type(e), e, tb)
            return 1

    def run_nb(source):
        # The last statement, when an expression, is evaluated on its own:
        # its value is the run's main result (as a notebook cell's).
        text = source.decode("utf-8", "replace")
        linecache.cache["main.py"] = (len(text), None, text.splitlines(True), "main.py")
        nb["results"], nb["error"] = [], None
        try:
            tree = ast.parse(source, "main.py")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, "main.py", "exec"), ns)
            if last is not None:
                value = eval(compile(last, "main.py", "eval"), ns)
                if value is not None:
                    ns["_"] = value
                    nb["results"].append(fmt(value, True))
            return 0
        except BaseException as e:
            tb = e.__traceback__
            while tb is not None and tb.tb_frame.f_code in (me, run_nb.__code__):
                tb = tb.tb_next
            e.__traceback__ = tb
            nb["error"] = {"name": type(e).__name__, "value": str(e),
                           "traceback": "".join(traceback.format_exception(e))}
            return 1

    def write_nb():
        try:
            with open(nb_path, "w", encoding="utf-8") as f:
                json.dump(nb, f, default=str)
        except Exception as e:
            print(f"saferun: the run's results could not be written: {e}", file=sys.stderr)
        nb["results"], nb["error"] = [], None

    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 1 << 16, 1)
        except OSError:
            os._exit(0)
        if not msg or msg[:1] != b"X" or len(fds) != 1:
            os._exit(0)  # the supervisor is gone, or this is not from it
        code_len, stdin_len, flags = struct.unpack_from("<IIB", msg, 1)
        with os.fdopen(fds[0], "rb") as f:
            data = f.read(code_len + stdin_len)
        sys.stdin = io.TextIOWrapper(io.BytesIO(data[code_len:]), encoding="utf-8")
        if update:
            update(msg[10:].decode("utf-8", "replace").split("\x1f"), not flags & 1)
        status = (run_nb if nb_path else run)(data[:code_len])
        save_figures()
        if nb_path:
            write_nb()
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except Exception:
                pass
        ctl.send(b"D" + struct.pack("<i", status))


def _saferun_zygote(prewarm):
    import gc, os, socket, struct, sys
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, fileno=3)
    msg, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 2)
    if msg[:1] != b"Z" or len(fds) != 2:
        os._exit(2)
    spec_len = struct.unpack_from("<I", msg, 1)[0]
    spec = msg[5:5 + spec_len]
    names, _, warmup = msg[5 + spec_len:].decode().partition("\x1e")
    preload = [m for m in names.split("\x1f") if m]
    # A zygote must stay single-threaded (below), and the BLAS and OpenMP
    # runtimes start their thread pools as they load, sized by these
    # variables: a policy whose environment lacks them still gets a
    # zygote. Set for the imports and the warmup only, then taken out.
    one_thread = [k for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
                  if k not in os.environ]
    for k in one_thread:
        os.environ[k] = "1"
    try:
        import importlib.machinery, importlib.util
        loader = importlib.machinery.ExtensionFileLoader(
            "_saferun_zygote", f"/proc/self/fd/{fds[0]}")
        module = importlib.util.module_from_spec(
            importlib.util.spec_from_loader("_saferun_zygote", loader))
        loader.exec_module(module)
        skipped = []
        for name in preload:
            try:
                __import__(name)
            except ModuleNotFoundError as e:
                # Not in this profile (the default policy preloads the
                # datascience modules; the minimal profile lacks them):
                # skipped and reported. A module that is there but fails
                # to import is an error.
                if e.name is None or not (name + ".").startswith(e.name + "."):
                    raise
                skipped.append(name)
        if warmup:
            # The policy's warmup (operator code): its names go with it.
            exec(compile(warmup, "<warmup>", "exec"), {"__name__": "__saferun_warmup__"})
    except BaseException as e:
        tb, line = e.__traceback__, ""
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == "<warmup>":
                line = f"warmup line {tb.tb_lineno}: "
            tb = tb.tb_next
        ctl.send(b"E" + f"{line}{type(e).__name__}: {e}".encode("utf-8", "replace")[:4000])
        os._exit(1)
    for k in one_thread:
        os.environ.pop(k, None)
    os.close(fds[0])
    sys.modules.pop("_saferun_zygote", None)
    # A fork keeps only the forking thread: a thread a preload started
    # would be missing (its locks held forever) in every sandbox.
    threads = len(os.listdir("/proc/self/task"))
    if threads > 1:
        ctl.send(b"E" + f"the preload list started {threads - 1} thread(s); a zygote must "
                 f"be single-threaded (for numpy: OPENBLAS_NUM_THREADS=1)".encode())
        os._exit(1)
    # What the imports made lives in every sandbox's copy: out of the
    # collector's reach, so collections there do not write to those pages.
    gc.collect()
    gc.freeze()
    ctl.send(b"R" + "\x1f".join(skipped).encode())
    ctl.detach()
    if module.serve(3, spec, fds[1]) is None:
        os._exit(0)  # the supervisor closed the zygote's socket
    # A new sandbox: this process is its python, locked down; fd 3 is the
    # run's control socket.
    del module
    # Out of the code's way, for the status at the end.
    import fcntl, resource
    top = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 1
    done = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0,
                         fileno=fcntl.fcntl(3, fcntl.F_DUPFD_CLOEXEC, top))
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, fileno=3)
    prewarm()
    ctl.send(b"R")
    msg, fds, _, _ = socket.recv_fds(ctl, 64, 2)
    if msg[:1] != b"W" or len(fds) != 2:
        os._exit(2)
    code_len, env_len, guard_len, n_files, files_len, flags = struct.unpack_from("<IIIIII", msg, 1)
    with os.fdopen(fds[0], "rb") as f:
        data = f.read()
    os.dup2(fds[1], 0)
    os.close(fds[1])
    go = None
    if flags & 1:
        # The checker vets the code while this sandbox gets ready: nothing
        # of the code runs before its "G". Anything else (the code was
        # rejected, the supervisor went): out, having run nothing.
        def go():
            if ctl.recv(16) != b"G":
                os._exit(3)
            ctl.close()
    else:
        ctl.close()
    at = code_len + env_len
    os.environ.clear()
    for kv in data[code_len:at].split(b"\0"):
        if b"=" in kv:
            k, v = kv.split(b"=", 1)
            os.environb[k] = v
    guard = data[at:at + guard_len].decode("utf-8", "replace")
    at += guard_len
    files = [("main.py", data[:code_len])]
    for _ in range(n_files):
        name_len, size = struct.unpack_from("<II", data, at)
        at += 8
        name = data[at:at + name_len].decode("utf-8", "surrogateescape")
        files.append((name, data[at + name_len:at + name_len + size]))
        at += name_len + size
    for name, content in files:
        if "/" in name:
            os.makedirs(os.path.dirname(name), exist_ok=True)
        with open(name, "xb") as f:
            f.write(content)
    # The working dir's finder (if the zygote made one) lists a dir that
    # is gone: the run's files must be importable.
    for key in [k for k in sys.path_importer_cache if k == os.getcwd()
                or k.startswith(os.getcwd() + "/")]:
        del sys.path_importer_cache[key]
    # Fresh randomness: the zygote's generators were seeded once for all.
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()
    return guard, done, go


def _saferun_prewarm():
    # A sandbox waiting for its run walks the run's path once with no
    # code: what it writes to (interpreter state, allocator pages, the
    # objects these calls touch) is copied from the zygote now, while the
    # pool refills, instead of during the run (milliseconds of page
    # copies). Nothing of it is left: the file is gone, the names local.
    import gc, io, os
    fd = os.memfd_create("saferun-prewarm", os.MFD_CLOEXEC)
    os.write(fd, b"pass\n")
    os.lseek(fd, 0, os.SEEK_SET)
    with os.fdopen(fd, "rb") as f:
        source = f.read()
    name = ".saferun-prewarm"
    with open(name, "xb") as f:
        f.write(source)
    with open(name, "rb") as f:
        source = f.read()
    os.unlink(name)
    exec(compile(source, "main.py", "exec"), {})
    for gen in range(3):
        for obj in gc.get_objects(gen):
            isinstance(obj, io.IOBase)


def _install_guard(spec):
    import os, sys
    # Fields "key=value" split by \x1e, list items by \x1f (policy paths and
    # names never contain control characters).
    conf = dict(part.split("=", 1) for part in spec.split("\x1e") if "=" in part)
    allow = set(filter(None, conf.get("allow", "").split("\x1f")))
    dirs = [d.rstrip("/") or "/" for d in conf.get("dirs", "/work").split("\x1f") if d]
    network_off = conf.get("net") == "0"
    stdlib = os.path.dirname(os.__file__) + "/"
    # Standard modules that implement the guarded APIs: their frames are
    # skipped to find who called them (the code, or a library).
    through = ("subprocess.py", "os.py", "pty.py", "pathlib.py", "shutil.py", "glob.py", "codecs.py",
               "tempfile.py", "fileinput.py", "code.py", "codeop.py", "runpy.py", "socket.py",
               "ctypes/__init__.py", "asyncio/", "importlib/", "multiprocessing/", "zipimport.py",
               "pkgutil.py", "urllib/request.py", "http/client.py", "ssl.py", "smtplib.py",
               "ftplib.py", "platform.py", "webbrowser.py", "pickle.py", "copy.py", "copyreg.py")
    # Standard modules that run a string or code they are given (timeit's
    # statement, a profiler's or debugger's command, a doctest, a string
    # annotation): what they execute for the code's frames is the code's.
    helpers = tuple(stdlib + h for h in ("timeit.py", "profile.py", "cProfile.py", "pdb.py", "bdb.py",
                                         "trace.py", "doctest.py", "typing.py", "inspect.py",
                                         "code.py", "codeop.py", "runpy.py"))
    machinery = ("<frozen importlib", stdlib + "importlib/")
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
             "code.__new__": "SR201 eval", "open": "SR401 path", "os.listdir": "SR401 path",
             "os.scandir": "SR401 path", "import": "", "os.kill": "SR106 tamper",
             "resource.setrlimit": "SR106 tamper", "sys.settrace": "SR106 tamper",
             "sys.setprofile": "SR106 tamper", "_posixsubprocess.fork_exec": "SR101 process"}
    if network_off:
        rules["socket.connect"] = rules["socket.sendto"] = "SR103 network"
    names = {"subprocess.Popen": "subprocess", "os.exec": "os.exec", "exec": "exec",
             "compile": "compile", "code.__new__": "compile", "ctypes.dlopen": "ctypes",
             "ctypes.dlsym": "ctypes", "os.listdir": "listdir", "os.scandir": "scandir",
             "_posixsubprocess.fork_exec": "subprocess"}
    # Code objects that are the code's whatever their file name: what its
    # frames compiled and executed (an allowed exec runs guarded code),
    # and what a helper above executed for them. By id, kept alive.
    theirs, kept, made = set(), [], set()
    skipped = set()  # this guard's own frames (the fork_exec wrapper)
    # The runner's frame, which runs the code's atexit functions after it.
    runner = sys._getframe(1).f_code

    def relaxed(rule, event):
        rid, _, rname = rule.partition(" ")
        name = names.get(event, event)
        names_of = {rid, rname, event, name, name.split(".")[0], event.split(".")[0]}
        # exec or eval of a string compiles it first: allowing either
        # allows that compile too (and a code object made by hand).
        if event in ("exec", "compile", "code.__new__"):
            names_of |= {"exec", "eval"}
        return bool(names_of & allow)

    base_allow, base_rules = set(allow), dict(rules)
    state = {"on": True, "wrapped": False}

    def update(extra, on):
        # Per run (kernel mode): the policy's allow list plus this run's.
        allow.clear()
        allow.update(base_allow, filter(None, extra))
        rules.clear()
        rules.update((e, r) for e, r in base_rules.items() if not (r and relaxed(r, e)))
        state["on"] = on

    update((), True)

    packages = tuple(stdlib + t for t in through if t.endswith("/"))

    def own(name):
        # The code's own source: main.py, and modules it wrote into the
        # working or writable dirs and imported. Its frames cannot claim
        # another file: compile, exec and code.__new__ are blocked for it
        # (when allowed, what it made is the code's: see adopt).
        return name == "main.py" or name in made or (
            name.startswith("/") and not name.startswith(stdlib)
            and any(name.startswith(d + "/") for d in dirs))

    def mine(f):
        return id(f.f_code) in theirs or own(f.f_code.co_filename)

    def below_mine(f):
        while f is not None and not mine(f):
            f = f.f_back
        return f

    code_type = type(own.__code__)

    def adopt(code):
        # A code object executed for the code, and those nested in it
        # (functions, classes, comprehensions it defines).
        todo = [code]
        while todo:
            c = todo.pop()
            if not isinstance(c, code_type) or id(c) in theirs:
                continue
            theirs.add(id(c))
            kept.append(c)
            todo.extend(c.co_consts)

    def importer(f):
        # Whose import this is: the first frame outside the import machinery
        # (importlib.import_module and __import__ included), the code's or a
        # library's; a library's own imports (asyncio's `import subprocess`)
        # are its business.
        while f is not None and f.f_code.co_filename.startswith(machinery):
            f = f.f_back
        return f

    def caller(f):
        # Who called: the first frame outside the modules above; None when
        # an import is in progress (its file reads and exec are not the code's),
        # False when the stack holds only those modules' frames (a thread
        # started bare with _thread, whose target is one of them).
        while f is not None:
            if id(f.f_code) in theirs:
                return f
            name = f.f_code.co_filename
            if id(f.f_code) in skipped:
                f = f.f_back
                continue
            if name.startswith(machinery):
                return None
            if not (name.startswith("<frozen") or (name.startswith(stdlib) and name.endswith(through))
                    or name.startswith(packages)):
                return f
            f = f.f_back
        return False

    def module_of(path):
        # The standard module a file read during an import belongs to
        # (.../pty.py, .../__pycache__/pty.cpython-311.pyc, .../ctypes/__init__.py).
        if not isinstance(path, str) or not path.startswith(stdlib):
            return None
        base = path[len(stdlib):].replace("__pycache__/", "").split(".")[0]
        return base[:-len("/__init__")] if base.endswith("/__init__") else base.replace("/", ".")

    def outside(p):
        p = os.path.normpath(os.path.join(dirs[0], os.fsdecode(p)))
        return not (any(p == d or p.startswith(d + "/") for d in dirs) or p.startswith(devices)
                    or p in devices)

    def denied_import(name):
        rule = denied.get(name) or denied.get(name.partition(".")[0])
        if rule is None or relaxed(rule, name) or "import" not in rules:
            return None
        return rule, f"import {name}"

    def what(event, args):
        if event == "open":
            p = args[0]
            if isinstance(p, int) or p is None:
                return None
            return f"open({os.fsdecode(p)!r})" if outside(p) else None
        if event in ("os.listdir", "os.scandir"):
            p = "." if args[0] is None else args[0]
            if isinstance(p, int):
                return None
            return f"{event}({os.fsdecode(p)!r})" if outside(p) else None
        if event == "import":
            return denied_import(args[0])
        if event in ("socket.connect", "socket.sendto"):
            sock, addr = args[0], args[-1]
            return f"{event}({addr!r})" if getattr(sock, "family", 0) in (2, 10) else None
        if event in ("exec", "compile", "code.__new__"):
            return f"{event}()"
        return f"{event}({', '.join(repr(a)[:60] for a in args[:2])})"

    def block(found, rule, f):
        # The status and the line the supervisor reads (sandbox.c): the
        # line of main.py that led here, and the module's own when the
        # event came from one the code wrote.
        at = f
        while at is not None and at.f_code.co_filename != "main.py":
            at = at.f_back
        where = ""
        if f is None:
            where = " in a thread started with no frame of its own"
        elif f.f_code is runner:
            where = " in an exit callback"
        elif f.f_code.co_filename != "main.py":
            name = f.f_code.co_filename
            name = name[len(dirs[0]) + 1:] if name.startswith(dirs[0] + "/") else name
            where = f" in {name} line {f.f_lineno}"
        msg = (f"saferun: blocked {found} at main.py line {at.f_lineno if at else 0} ({rule})"
               f"{where}: this sandbox forbids it\n")
        try:
            sys.stdout.flush()
        except Exception:
            pass
        os.write(2, msg.encode("utf-8", "replace"))
        os._exit(121)

    class DeniedImports:
        # First on sys.meta_path: importlib.import_module (and the rest of
        # importlib) raises no `import` event, but every import that is not
        # done yet asks the finders, this one first.
        __slots__ = ()

        def find_spec(self, name, path=None, target=None):
            if state["on"]:
                found = denied_import(name)
                f = found and importer(sys._getframe(1))
                if f is not None and found and mine(f):
                    block(found[1], found[0], f)
            return None

    finder = DeniedImports()

    def first(self):
        # Put the finder back in front after any change to the list.
        if not list.__len__(self) or list.__getitem__(self, 0) is not finder:
            for i in range(list.__len__(self) - 1, -1, -1):
                if list.__getitem__(self, i) is finder:
                    list.__delitem__(self, i)
            list.insert(self, 0, finder)

    def keeping(op):
        def method(self, *args):
            r = op(self, *args)
            first(self)
            return r
        return method

    # sys.meta_path as a list that keeps the finder first. Code can still
    # replace sys.meta_path or call list's own methods on it: the hook puts
    # the finder back at the next event, and a denied module's source read
    # during an import is refused whatever the finders (see the hook).
    meta_path = type("MetaPath", (list,), {"__slots__": (), **{
        op: keeping(getattr(list, op)) for op in (
            "__setitem__", "__delitem__", "__iadd__", "__imul__", "insert", "pop", "remove",
            "clear", "sort", "reverse")}})([finder, *sys.meta_path])

    def guard_meta_path():
        mp = sys.meta_path
        if mp is meta_path and list.__len__(mp) and list.__getitem__(mp, 0) is finder:
            return
        if mp is not meta_path:
            list.__init__(meta_path, [m for m in mp if m is not finder] if isinstance(mp, list) else [])
            sys.meta_path = meta_path
        first(meta_path)

    def on_behalf(f):
        # Who asked for this exec or compile: the first frame outside the
        # helpers above (and the modules the walk skips anyway).
        while f is not None and f.f_code.co_filename.startswith(helpers) and id(f.f_code) not in theirs:
            f = f.f_back
        return caller(f)

    def made_by_the_code(event, args):
        f = on_behalf(sys._getframe(2))
        if not f or not mine(f):
            return
        if event == "exec":
            adopt(args[0])
        elif isinstance(args[1], str) and sys._getframe(2) is f:
            made.add(args[1])  # compiled or made by its own frames: that name is its

    def hook(event, args):
        if sys.meta_path is not meta_path or not meta_path or list.__getitem__(meta_path, 0) is not finder:
            guard_meta_path()
        if not state["wrapped"]:
            wrap_fork_exec()
        if event in ("exec", "compile", "code.__new__") and state["on"]:
            made_by_the_code(event, args)
        rule = rules.get(event)
        if rule is None or not state["on"]:
            return
        try:
            f0 = sys._getframe(1)
        except ValueError:
            f0 = None  # a thread _thread started on a builtin: no frame at all
        f = caller(f0)
        if f is False:
            # Only the standard modules' frames, or none: a thread started
            # bare (the code's: a library starts its threads from its own
            # frames).
            f = started_by.get(get_ident())
            found = what(event, args)
            if found:
                block(*((found[1], found[0]) if isinstance(found, tuple) else (found, rule)), f)
            return
        if f is None:
            # An import in progress: a denied module's file is not read
            # for the code, whether or not the finder above was asked.
            mod = module_of(args[0]) if event == "open" else None
            found = mod and denied_import(mod)
            f = found and importer(f0)
            if f is not None and found and mine(f):
                block(found[1], found[0], f)
            return
        if not mine(f):
            starter = started_by.get(get_ident())
            if starter is not None and thread_entry(f):
                f = starter  # the target of a thread the code started
            elif f is not f0 or not rule.startswith(("SR101", "SR102")):
                return
            else:
                # A library frame called a process or native-code builtin
                # itself (not through subprocess, os or ctypes): a callback the
                # code handed it (heapq's key=methodcaller("system")). With the
                # code's frames below, or in a thread the code started, the
                # call is the code's.
                g = below_mine(f.f_back) or starter
                if g is None and f0.f_code is runner:
                    g = f0  # an exit function the code registered
                if g is None:
                    return
                f = g
        found = what(event, args)
        if not found:
            return
        if isinstance(found, tuple):
            rule, found = found
        block(found, rule, f)

    # _posixsubprocess.fork_exec starts a program without an audit event
    # (subprocess.Popen raises its own first): code that finds it (in
    # sys.modules, once a library imported subprocess) meets this wrapper
    # instead, put in at the first event after a library loaded it (the
    # guard does not load it: a module in sys.modules imports silently).
    fork_exec = []

    def checked_fork_exec(*args):
        sys.audit("_posixsubprocess.fork_exec", *args[:2])
        return fork_exec[0](*args)

    skipped.add(id(checked_fork_exec.__code__))

    def wrap_fork_exec():
        mod = sys.modules.get("_posixsubprocess")
        if mod is None:
            return
        if not fork_exec:
            fork_exec.append(mod.fork_exec)
            mod.fork_exec = checked_fork_exec
        sub = sys.modules.get("subprocess")
        if sub is not None and getattr(sub, "_fork_exec", None) is not None:
            if sub._fork_exec is fork_exec[0]:
                sub._fork_exec = checked_fork_exec
            state["wrapped"] = True

    # Threads the code starts. Python 3.11 raises no event when a thread
    # starts, and a thread's stack begins in threading, so a target such as
    # os.system would have none of the code's frames below it. A thread
    # started with the code's frames below (or from a thread of the code's)
    # is the code's: the frame that started it stands below its own, and
    # what threading (or the wrapper below) calls as its target is the code's
    # call. _thread is imported at start-up; threading takes its functions
    # when imported, so both see the wrappers.
    import _thread
    get_ident = _thread.get_ident
    started_by = {}  # thread ident -> the code's frame that started it

    # The frames that call a thread's target: threading's Thread.run, a
    # thread pool's work item (concurrent.futures; multiprocessing's pool
    # is among the modules the walk skips) and the wrapper below.
    entries = (stdlib + "threading.py", stdlib + "concurrent/futures/thread.py")

    def thread_entry(f):
        return f.f_code is code_thread_code or (f.f_code.co_name == "run"
                                                and f.f_code.co_filename in entries)

    def code_thread(function, starter):
        def run(*args, **kwargs):
            me = get_ident()
            started_by[me] = starter
            try:
                return function(*args, **kwargs)
            finally:
                started_by.pop(me, None)
        return run

    code_thread_code = code_thread(None, None).__code__

    def wrap_start(name):
        start = getattr(_thread, name)

        def checked_start(function, *rest, **kw):
            if state["on"]:
                starter = below_mine(sys._getframe(1)) or started_by.get(get_ident())
                if starter is not None:
                    function = code_thread(function, starter)
            return start(function, *rest, **kw)

        skipped.add(id(checked_start.__code__))
        setattr(_thread, name, checked_start)
        threading = sys.modules.get("threading")
        for alias in ("_start_new_thread", "_start_joinable_thread"):
            if threading is not None and getattr(threading, alias, None) is start:
                setattr(threading, alias, checked_start)

    for name in ("start_new_thread", "start_new", "start_joinable_thread"):
        if hasattr(_thread, name):
            wrap_start(name)

    wrap_fork_exec()
    sys.meta_path = meta_path
    sys.addaudithook(hook)
    return update


_saferun_main()
