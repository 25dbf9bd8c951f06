#!/bin/sh
# Ranch ResumeProgram example, called the way Slurm calls it: $1 is a hostlist such as "cloud[01-04]".
# rctld logs everything this prints, and kills it after max(SuspendTimeout, ResumeTimeout).
# A real one would call a cloud API, IPMI or Redfish per node; this one says what it would do.
set -eu
hosts="${1:?usage: $0 HOSTLIST}"
# Expand the hostlist like 'scontrol show hostnames' (rcontrol does it locally).
if command -v rcontrol >/dev/null 2>&1 && names=$(rcontrol show hostnames "$hosts" 2>/dev/null)
then :
else names=$(printf '%s\n' "$hosts" | tr ',' ' ')
fi
for node in $names; do
    echo "resume: would power on $node"
done
exit 0
