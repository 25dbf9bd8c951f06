"""A steady flow of work against a controller pair, as users and admins make it: submissions,
cancels, drains and resumes, through the commands' own code (cli/), which finds the controller
from RANCH_CONF. Every acknowledged operation is a JSON line in OUT (flushed at once), so the
test can hold the surviving controller to each one. Runs until the file STOP exists; while
STOP.pause exists it pauses (and says so once, op "paused"), so a check reads a still picture.

    python tests/ha/flow.py OUT STOP RUNS_FILE [drain|nodrain|probe]

`probe` submits a held job every PROBE seconds, each from a thread of its own, so that one
caught in a request to a controller that vanished does not hold up the next (bench/ha_bench.py:
the first one started after a fault and accepted tells when the new controller served).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time

import orjson


def call(main, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = int(exc.code or 0)
    return rc, out.getvalue(), err.getvalue()


PROBE = 0.25


def probe(out_path: str, stop: str) -> int:
    import threading

    from ranch.cli import rbatch, sbatch_request
    from ranch.cli.controller import find_target
    from ranch.cli.job_requests import request

    environ = dict(os.environ)
    values, _words, script_args, script, command = rbatch.gather(
        ["--hold", "-o", "/dev/null", "--wrap", "true"], environ)
    body = sbatch_request.body(values, script, command, script_args, environ)
    lock = threading.Lock()
    with open(out_path, "ab", buffering=0) as out:
        def note(**rec: object) -> None:
            with lock:
                out.write(orjson.dumps({"t": time.time(), **rec}) + b"\n")

        def one() -> None:
            start = time.time()
            try:
                reply = request(find_target(None, None, None), "SubmitJob", body,
                                want="SubmitReply")
            except Exception as exc:  # recorded, as the flow records a failed command
                note(op="submit-failed", start=start, error=str(exc))
                return
            note(op="submit", job=int(reply["job_id"]), start=start)

        threads: list[threading.Thread] = []
        while not os.path.exists(stop):
            if os.path.exists(stop + ".pause"):
                for t in threads:
                    t.join()
                threads = []
                note(op="paused")
                while os.path.exists(stop + ".pause") and not os.path.exists(stop):
                    time.sleep(0.05)
                continue
            thread = threading.Thread(target=one, daemon=True)
            thread.start()
            threads = [t for t in threads if t.is_alive()] + [thread]
            time.sleep(PROBE)
    return 0


def main() -> int:
    from ranch.cli import rbatch, rcancel, rcontrol

    out_path, stop, runs = sys.argv[1:4]
    if sys.argv[4:5] == ["probe"]:
        return probe(out_path, stop)
    drains = sys.argv[4:5] != ["nodrain"]
    script = f"echo $SLURM_JOB_ID >> {runs}; sleep 1"
    n = 0
    drained = False
    with open(out_path, "ab", buffering=0) as out:
        def note(**rec: object) -> None:
            out.write(orjson.dumps({"t": time.time(), **rec}) + b"\n")

        while not os.path.exists(stop):
            if os.path.exists(stop + ".pause"):
                note(op="paused", n=n)
                while os.path.exists(stop + ".pause") and not os.path.exists(stop):
                    time.sleep(0.05)
                continue
            n += 1
            start = time.time()
            rc, text, err = call(rbatch.main, ["-J", f"f{n}", "-o", "/dev/null", "--wrap",
                                               script])
            if rc == 0 and text.startswith("Submitted batch job "):
                job = int(text.split()[-1])
                note(op="submit", job=job, start=start)
                if n % 4 == 0:  # every fourth is cancelled at once (still pending, or running)
                    rc, _, err = call(rcancel.main, [str(job)])
                    if rc == 0:
                        note(op="cancel", job=job)
                    else:
                        note(op="cancel-failed", job=job, error=err.strip())
            else:
                note(op="submit-failed", error=err.strip())
            if drains and n % 5 == 0:
                state = "RESUME" if drained else "DRAIN"
                rc, _, err = call(rcontrol.main, ["update", "NodeName=n2", f"State={state}",
                                                  "Reason=flow"])
                # flipped either way: a command that failed after it was sent may have been
                # done (its reply lost with the controller), and one refused as needless was
                drained = not drained
                if rc == 0:
                    note(op="node", node="n2", state=state)
                else:
                    note(op="node-failed", state=state, error=err.strip())
            time.sleep(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
