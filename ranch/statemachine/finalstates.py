"""The states that end a job, by name: the one list the job table, the controller and the commands
share (plain strings, so a command that only compares names pays for no enum)."""

FINAL_STATES = frozenset({"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
                          "OUT_OF_MEMORY", "PREEMPTED", "SPECIAL_EXIT", "TIMEOUT"})
