"""sbatch --test-only's question: the first moment a job fits as running jobs end."""

from __future__ import annotations

from collections.abc import Sequence

from ranch.sched.features import NodeFilter
from ranch.sched.fifo import Cluster
from ranch.sched.model import Ending, Pending, Share
from ranch.sched.place import Placed, place


def will_run(job: Pending, cluster: Cluster, ends: Sequence[Ending], now: float
             ) -> tuple[float, dict[str, Share]] | str:
    """(start, shares) of the first fit now or after the earliest endings (ties by job id),
    or the reason it never fits (Resources, ReqNodeNotAvail...). Pending jobs, windows and
    partition limits are not weighed, as slurmctld's will-run does not weigh them."""
    uses = {n: u.copy() for n, u in cluster.uses.items()}
    nodes = cluster.nodes
    required = [nodes[n] for n in dict.fromkeys(job.req_nodes) if n in nodes]
    excluded = set(job.exc_nodes)
    names = cluster.members.get(job.partition, ())
    ok = NodeFilter(job, uses, cluster.holders)  # one filter: `busy` counts every attempt

    def attempt() -> Placed:
        if any(not ok(n) for n in required):
            return None, "Resources"
        others = [nodes[n] for n in names if n not in excluded and ok(nodes[n])]
        shares, why = place(job.need, required, others, uses)
        return shares, ok.explain(why)

    shares, why = attempt()
    if shares is not None:
        return now, shares
    if why != "Resources":
        return why
    for end in sorted(ends, key=lambda e: (e.at, e.job_id)):
        for name, share in end.shares.items():
            if name in uses:
                uses[name].remove(end.job_id, share)
        shares, why = attempt()
        if shares is not None:
            return max(now, end.at), shares
    return why
