#!/bin/sh
# Ranch SuspendProgram example, called the way Slurm calls it: $1 is a hostlist such as "cloud[01-04]".
# rctld logs everything this prints, and kills it after max(SuspendTimeout, ResumeTimeout).
#
# It "powers off" a node by stopping (SIGTERM) the rnoded that resume.sh started for it. A real
# one would call a cloud API, IPMI or Redfish per node.
set -eu
hosts="${1:?usage: $0 HOSTLIST}"
# Expand the hostlist like 'scontrol show hostnames' (rcontrol does it locally).
if command -v rcontrol >/dev/null 2>&1 && names=$(rcontrol show hostnames "$hosts" 2>/dev/null)
then :
else names=$(printf '%s\n' "$hosts" | tr ',' ' ')
fi
dir="${RANCH_STATE_DIR:-${TMPDIR:-/tmp}}/power-nodes"
for node in $names; do
    pidfile="$dir/$node.pid"
    if [ -f "$pidfile" ]; then
        pid=$(cat "$pidfile")
        rm -f "$pidfile"
        if kill -TERM "$pid" 2>/dev/null; then
            echo "suspend: stopped rnoded of $node (pid $pid)"
            continue
        fi
    fi
    echo "suspend: would power off $node (no rnoded of it started here)"
done
exit 0
