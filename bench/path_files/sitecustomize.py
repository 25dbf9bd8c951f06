"""Loaded by bench/path_files.py's processes only (it puts this folder on PYTHONPATH): records
which of Ranch's source files run code while armed, and under which task (its outermost frame).
SIGWINCH arms and disarms (writing what ran to $RANCH_TRACE_OUT); RANCH_TRACE_ARMED=1 records
from the start and writes at exit."""

import atexit
import json
import os
import signal
import sys
import threading

_out = os.environ.get("RANCH_TRACE_OUT")
if _out:
    _root = os.environ["RANCH_TRACE_ROOT"]
    _files: dict[str, set[str]] = {}  # file -> "function<root" for each call recorded
    _armed = [os.environ.get("RANCH_TRACE_ARMED") == "1"]

    def _prof(frame, event, arg):
        if event == "call" and _armed[0]:
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
            json.dump({k: sorted(v) for k, v in _files.items()}, f)

    def _toggle(signum, frame) -> None:
        if _armed[0]:
            _armed[0] = False
            _dump()
        else:
            _files.clear()
            _armed[0] = True

    signal.signal(signal.SIGWINCH, _toggle)
    if _armed[0]:
        atexit.register(_dump)
    sys.setprofile(_prof)
    threading.setprofile(_prof)
