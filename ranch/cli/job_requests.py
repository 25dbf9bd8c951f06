"""The job commands' requests to rctld: fetching jobs and reading job ids as users write them
(the request itself is cli/controller.py's)."""

from __future__ import annotations

from ranch.cli.controller import CliError, Refused, Target, request

__all__ = ["Refused", "fetch_jobs", "parse_job_ids", "request"]  # rbatch takes these from here


def fetch_jobs(target: Target, ids: tuple[int, ...] = (), fields: tuple[str, ...] = (),
               shown: bool = False) -> tuple[float, list[dict]]:
    """(generated_at, job records) from the controller; `fields`: the record keys the caller
    reads (empty: all; a controller may send more); `shown`: only shown to the user, so a
    standby may answer (controller.request)."""
    ask: dict = {"job_ids": list(ids)}
    if fields:
        ask["fields"] = sorted(fields)
    body = request(target, "GetJobs", ask, want="JobList", timeout=30.0, shown=shown)
    try:
        return float(body.get("generated_at") or 0.0), list(body["jobs"])
    except (KeyError, TypeError) as exc:
        raise CliError(f"malformed JobList reply: missing {exc}") from None


def parse_job_ids(words: list[str], jobs: list[dict] | None = None) -> tuple[int, ...]:
    """Job ids as users write them: "12", "12_3" (array task), comma lists."""
    out: list[int] = []
    for word in words:
        for part in word.split(","):
            part = part.strip()
            if not part:
                continue
            base, sep, task = part.partition("_")
            if not base.isdigit() or (sep and not task.isdigit()):
                raise CliError(f"Invalid job id specified: {part}", code=1)
            if not sep:
                out.append(int(base))
                continue
            if jobs is None:
                raise CliError(f"Invalid job id specified: {part}")
            hits = [j["job_id"] for j in jobs
                    if j.get("array_job_id") == int(base) and j.get("array_task_id") == int(task)]
            if not hits:
                raise CliError(f"Invalid job id specified: {part}")
            out += hits
    return tuple(out)
