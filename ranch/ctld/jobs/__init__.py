"""The job store and its components: submission, scheduling, nodes' reports, commands, steps."""
