"""`rcontrol reconfigure --dry-run [FILE] [--json]` (issue 44): how the live queue would reorder
under a candidate config, and which pending jobs would start at once; nothing is applied."""

from __future__ import annotations

import getpass
import json
import os
import sys

from ranch.cli.controller import CliError, Target, ask
from ranch.cli.slurm_names import prog

HEADER = ("JOBID", "USER", "PARTITION", "PRIORITY_NOW", "PRIORITY_AFTER", "POS_NOW",
          "POS_AFTER")


def command(target: Target, rest: list[str], as_json: bool) -> int:
    if rest[0] != "--dry-run" or len(rest) > 2:
        raise CliError("reconfigure takes no arguments but --dry-run [FILE]", code=2)
    # rctld reads the file: a relative path is the caller's, made absolute here
    path = os.path.abspath(rest[1]) if len(rest) == 2 else ""
    reply = ask(target, "ReconfigureDryRun", {"path": path, "user": getpass.getuser()},
                want="ReconfigureDryRunReply")
    if as_json:
        print(json.dumps(reply, indent=2))
        return 0 if reply.get("ok") else 1
    if not reply.get("ok"):
        print(f"{prog('rcontrol')}: error: the candidate config does not load; nothing was "
              f"changed", file=sys.stderr)
        for err in reply.get("errors") or ():
            print(err, file=sys.stderr)
        return 1
    sys.stdout.write(text(reply))
    return 0


def text(reply: dict) -> str:
    """The reply as an admin reads it: the queue in the candidate's order, then the starts."""
    lines = [f"Candidate {reply['path']}: {reply['priority_now']} -> {reply['priority_after']}"
             f" (nothing applied)"]
    rows = [HEADER] + [
        (str(r["job_id"]), r["user"], r["partition"], str(r["priority_now"]),
         str(r["priority_after"]), str(r["position_now"]), str(r["position_after"]))
        for r in reply.get("rows") or ()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines += ["  ".join(c.rjust(w) if i >= 3 else c.ljust(w)
                        for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
              for row in rows]
    starts = reply.get("starts") or ()
    if not rows[1:]:
        lines.append("(no pending job)")
    lines.append("Would start at once: " + (", ".join(
        f"{s['job_id']} on {s['nodes']} ({s['by']})" for s in starts) if starts else "none"))
    return "\n".join(lines) + "\n"
