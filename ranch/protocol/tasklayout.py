"""Slurm's block task layout, the one rule the controller (srun's steps), the node (a batch job's
SLURM_TASKS_PER_NODE) and the commands (salloc's environment) all lay tasks out by."""

from __future__ import annotations


def block_layout(ntasks: int, room: list[int]) -> list[int]:
    """Tasks per node as slurm_step_layout_create lays out a block step (_task_layout_block
    without pack_nodes): rounds over the nodes while they have room for another task, then over
    all of them. Equal rooms give the even split, the remainder first; uneven ones (a -N 2 -n 3
    job holds 2 CPUs on one node, 1 on the other) fill the larger; past every room, the tasks
    are dealt round."""
    tasks = [0] * len(room)
    placed, j, over = 0, 0, False
    while placed < ntasks and room:
        spare = False
        for i, cap in enumerate(room):
            if placed < ntasks and (j < cap or over):
                tasks[i] += 1
                placed += 1
                spare = spare or j + 1 < cap
        over = over or not spare
        j += 1
    return tasks
