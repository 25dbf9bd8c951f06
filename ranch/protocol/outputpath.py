"""A job's output file as scontrol prints it (StdOut=, StdErr=): the rule `rcontrol show job`,
rqueue's %o/%e and the web page's job view share."""

from __future__ import annotations


def expand_path(pattern: str, j: dict) -> str:
    """Only %A %a %j %u %x are filled in (the node fills the rest, widths included, when it
    opens the file), under the workdir."""
    if not pattern:
        return ""
    array = j.get("array_task_id") is not None
    path = pattern.replace("%A", str(j.get("array_job_id") if array else j["job_id"]))
    path = path.replace("%a", str(j["array_task_id"] if array else 4294967294))
    path = path.replace("%j", str(j["job_id"])).replace("%u", j.get("user", ""))
    path = path.replace("%x", j.get("name", ""))
    # slurmctld prefixes a relative one with the workdir and "/", as written (-D '': "d//x")
    return path if path.startswith("/") else f"{j.get('workdir', '')}/{path}"
