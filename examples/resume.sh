#!/bin/sh
# Ranch ResumeProgram example, called the way Slurm calls it: $1 is a hostlist such as "cloud[01-04]".
# rctld logs everything this prints, and kills it after max(SuspendTimeout, ResumeTimeout).
#
# It "powers on" a node by starting an rnoded for it on this machine, which joins the controller
# that called it: rctld gives its programs RANCH_SERVER, RANCH_KEY_FILE and RANCH_STATE_DIR, and
# SLURM_RESUME_FILE, the JSON of the nodes and the jobs waiting for them (removed when this
# program ends: read it early). RNODED_ARGS adds rnoded options (a wrapper may set it). A real
# one would call a cloud API, IPMI or Redfish per node.
set -eu
hosts="${1:?usage: $0 HOSTLIST}"
# Expand the hostlist like 'scontrol show hostnames' (rcontrol does it locally).
if command -v rcontrol >/dev/null 2>&1 && names=$(rcontrol show hostnames "$hosts" 2>/dev/null)
then :
else names=$(printf '%s\n' "$hosts" | tr ',' ' ')
fi
dir="${RANCH_STATE_DIR:-${TMPDIR:-/tmp}}/power-nodes"
mkdir -p "$dir"
if [ -r "${SLURM_RESUME_FILE:-}" ]; then
    cp "$SLURM_RESUME_FILE" "$dir/last-resume.json"
fi
if [ -z "${RANCH_SERVER:-}" ] || ! command -v rnoded >/dev/null 2>&1; then
    for node in $names; do
        echo "resume: would power on $node (no RANCH_SERVER or rnoded here)"
    done
    exit 0
fi
for node in $names; do
    pidfile="$dir/$node.pid"
    if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        echo "resume: rnoded of $node already runs (pid $(cat "$pidfile"))"
        continue
    fi
    # Its own log and no descriptor of ours: this program's output pipe closes when it exits.
    # shellcheck disable=SC2086 # RNODED_ARGS: extra options, e.g. "--fake-gpus 4"
    rnoded --server "$RANCH_SERVER" --name "$node" --spool-dir "$dir/$node" ${RNODED_ARGS:-} \
        </dev/null >>"$dir/$node.log" 2>&1 &
    echo $! >"$pidfile"
    echo "resume: started rnoded for $node (pid $!)"
done
exit 0
