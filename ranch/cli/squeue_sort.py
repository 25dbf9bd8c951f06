"""squeue --sort over job records: its letters (cli/squeue_options.py reads them), each a key."""

from __future__ import annotations

from ranch.cli.squeue_fields import FIELDS, STATE_ORDER, elapsed, priority

# letters whose order is a number's (sort.c compares these numerically), as the record's value
_NUMBER = {
    "C": lambda j, n: j.get("cpus") or 0, "d": lambda j, n: 0,
    "D": lambda j, n: j.get("node_count") or 0, "e": lambda j, n: j.get("end_time") or 0,
    "G": lambda j, n: j.get("gid") or 0, "i": lambda j, n: j["job_id"],
    "l": lambda j, n: -1 if j.get("time_limit") is None else j["time_limit"],
    "L": lambda j, n: 0 if j.get("time_limit") is None else j["time_limit"] * 60 - elapsed(j, n),
    "m": lambda j, n: j.get("mem_per_node") or 0, "M": elapsed,
    "p": lambda j, n: priority(j), "Q": lambda j, n: priority(j),
    "S": lambda j, n: j.get("start_time") or 0, "t": lambda j, n: STATE_ORDER.get(j["state"], 9),
    "T": lambda j, n: STATE_ORDER.get(j["state"], 9), "U": lambda j, n: j.get("uid") or 0,
    "V": lambda j, n: j.get("submit_time") or 0,
    "H": lambda j, n: 0, "I": lambda j, n: 0, "J": lambda j, n: 0, "z": lambda j, n: 0,
}


def sort_jobs(jobs: list[dict], spec: str, now: float) -> list[dict]:
    """`jobs` in --sort's order: stable sorts from its last key to its first, as squeue."""
    from ranch.cli.slurm_names import prog
    from ranch.cli.squeue_options import sort_keys

    out = list(jobs)
    for key, descending in sort_keys(spec, prog("rqueue"), say=False):
        if key == "cluster":
            continue  # one cluster: every job's the same
        number = _NUMBER.get(key)
        if number is not None:
            out.sort(key=lambda j: number(j, now), reverse=descending)
        else:
            get = FIELDS[key][1]
            out.sort(key=lambda j: get(j, now), reverse=descending)
    return out
