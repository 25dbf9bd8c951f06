"""Loaded by bench/path_files.py's processes only (it puts this folder on PYTHONPATH): records
which of Ranch's source files run code while armed, and under which task (its outermost frame),
and which stand on the call stack when the process writes, sends, fsyncs or renames (a C call
bound to a module, a socket or a file: os.replace, not str.replace). SIGWINCH arms and disarms
(writing what it saw to $RANCH_TRACE_OUT); RANCH_TRACE_ARMED=1 records from the start and writes
at exit."""

import atexit
import json
import os
import signal
import sys
import threading

_out = os.environ.get("RANCH_TRACE_OUT")
if _out:
    _root = os.environ["RANCH_TRACE_ROOT"]
    _files: dict[str, set[str]] = {}  # file -> "function\troot" for each call recorded
    # file -> "effect\troot": the files on the stack when the request's work leaves the process
    # (a send, a write, an fsync, a rename, a spawn): the chain a reader follows to an effect
    _chain: dict[str, set[str]] = {}
    _stacks: set[str] = set()  # each distinct effect stack, innermost first
    _effects = {"send", "sendall", "sendmsg", "write", "writev", "fsync", "fdatasync",
                "replace", "rename", "posix_spawn", "fork_exec"}
    _armed = [os.environ.get("RANCH_TRACE_ARMED") == "1"]

    _bound_to = {"module", "socket", "FileIO", "BufferedWriter", "TextIOWrapper"}
    _task_starts = ("/trio/_core/_run.py", "/threading.py", "/trio/_core/_thread_cache.py")

    def _on_effect(frame, name: str) -> None:
        # up to the task's start: trio's run loop, or a thread's bootstrap, lies below it
        stack = []
        f = frame
        while f is not None and not f.f_code.co_filename.endswith(_task_starts):
            if f.f_code.co_filename.startswith(_root):
                stack.append(f)
            f = f.f_back
        if not stack:
            return
        rc = stack[-1].f_code
        where = f"{rc.co_filename[len(_root):]}:{rc.co_qualname}"
        for f in stack:
            _chain.setdefault(f.f_code.co_filename, set()).add(f"{name}\t{where}")
        _stacks.add(" < ".join([name] + [
            f"{f.f_code.co_filename[len(_root) + 1:]}:{f.f_code.co_qualname}" for f in stack]))

    def _prof(frame, event, arg):
        if event == "c_call" and _armed[0]:
            name = getattr(arg, "__name__", "")
            # os.replace, not str.replace: the callable is bound to a module, socket or file
            # (a method called unbound shows its descriptor, which names its class instead)
            owner = getattr(arg, "__objclass__", None) or type(getattr(arg, "__self__", None))
            if name in _effects and any(c.__name__ in _bound_to for c in owner.__mro__):
                _on_effect(frame, name)
        elif event == "call" and _armed[0]:
            code = frame.f_code
            if code.co_filename.startswith(_root):
                # the outermost of the Ranch frames right above this one (trio's run loop or
                # a thread's start lies below them): the task the call belongs to, so that
                # background tasks can be told apart
                root, f = frame, frame.f_back
                while f is not None and f.f_code.co_filename.startswith(_root):
                    root, f = f, f.f_back
                rc = root.f_code
                where = f"{rc.co_filename[len(_root):]}:{rc.co_qualname}"
                _files.setdefault(code.co_filename, set()).add(f"{code.co_name}\t{where}")

    def _dump() -> None:
        with open(_out, "w") as f:
            json.dump({"ran": {k: sorted(v) for k, v in _files.items()},
                       "chain": {k: sorted(v) for k, v in _chain.items()},
                       "stacks": {s: [] for s in sorted(_stacks)}}, f)

    def _toggle(signum, frame) -> None:
        if _armed[0]:
            _armed[0] = False
            _dump()
        else:
            _files.clear()
            _chain.clear()
            _stacks.clear()
            _armed[0] = True

    signal.signal(signal.SIGWINCH, _toggle)
    if _armed[0]:
        atexit.register(_dump)
    sys.setprofile(_prof)
    threading.setprofile(_prof)
