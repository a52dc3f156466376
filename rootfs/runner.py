# The in-sandbox runner: runs /work/main.py as `python3 main.py` would, but
# with tracebacks that say File "main.py" (Python 3.11 makes a script's path
# absolute). Passed to `python3 -c`; it leaves no names of its own behind.
def _saferun_main():
    import sys, __main__
    me = sys._getframe().f_code
    path = "main.py"
    sys.argv[:] = [path]
    sys.path[0] = sys.path[0] or __import__("os").getcwd()
    with open(path, "rb") as f:
        source = f.read()
    ns = __main__.__dict__
    del ns["_saferun_main"]
    ns["__file__"] = path
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

_saferun_main()
