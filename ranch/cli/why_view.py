"""`rqueue --why ID` (issue 44): why the job is not running, when it should start, and what
would start it sooner, as rctld's planner explains it (ranch/sched/why.py); --json: the answer
as the controller sends it."""

from __future__ import annotations

import sys

from ranch.cli.controller import CliError, request

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ranch.cli.controller import Target


def fetch(target: Target, text: str) -> dict:
    job_id = text.strip()
    if not job_id.isdigit():
        raise CliError(f"--why takes one job id, not '{text}'")
    return request(target, "GetWhy", {"job_id": int(job_id)}, want="WhyReply")


def render(doc: dict) -> str:
    """The answer as lines a person reads: the binding constraint and its evidence, the
    estimate, the changes the planner confirmed."""
    from ranch.conf.timefmt import slurm_timestamp

    out = [f"JobId={doc['job_id']} {doc['state']} Reason={doc.get('reason') or 'None'}",
           f"  Why: {doc.get('binding', '')}"]
    out += [f"       {line}" for line in doc.get("evidence") or ()]
    if doc["state"] == "PENDING":
        start = doc.get("start")
        if start is None:
            out.append(f"  Estimated start: N/A ({doc.get('estimate') or 'none'})")
        else:
            where = f" on {doc['nodes']}" if doc.get("nodes") else ""
            out.append(f"  Estimated start: {slurm_timestamp(start)}{where} "
                       f"({doc.get('estimate', '')})")
        tips = doc.get("suggestions") or ()
        if tips:
            out.append("  Sooner (each checked by the planner):")
            width = max(len(t["option"]) for t in tips)
            out += [f"    {t['option']:<{width}}  {t['text']}" for t in tips]
        else:
            out.append("  Sooner: no change the planner could confirm")
    return "\n".join(out) + "\n"


def run(target: Target, text: str, as_json: bool) -> int:
    doc = fetch(target, text)
    if as_json:
        import json

        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render(doc))
    return 0
