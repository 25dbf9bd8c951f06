"""Bounds on what a request may carry, shared by the commands (checked before sending) and rctld.

Each refusal names the field, the size it had and the limit (docs/limits.md lists them all).
"""

from __future__ import annotations

# Slurm's max_script_size default (SchedulerParameters): 4 MB.
MAX_SCRIPT_BYTES = 4 << 20
# One frame, after its length prefix, from a peer that proved the key (protocol.framing.MAX_SIZE):
# a script of MAX_SCRIPT_BYTES with its environment, JSON-escaped, fits.
MAX_FRAME_BYTES = 16 << 20
# Slurm keeps a time limit in minutes in 32 bits; 0xffffffff is INFINITE and 0xfffffffe NO_VAL,
# so the largest finite limit is 0xfffffffd minutes (about 8,171 years).
MAX_TIME_LIMIT_MINUTES = 0xFFFFFFFD
# A node's reason (rcontrol update ... Reason=): long enough for any NHC or admin note, short
# enough that it can be shown, saved, logged and put in a metric label for every node.
MAX_REASON_CHARS = 1024


def too_long(field: str, size: int, limit: int, unit: str) -> str:
    """The refusal text: "Reason is 1,048,576 characters; the limit is 1,024"."""
    return f"{field} is {size:,} {unit}; the limit is {limit:,}"
