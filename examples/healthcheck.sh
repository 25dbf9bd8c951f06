#!/bin/sh
# Example HealthCheckProgram for Ranch, in the plain style sites write their own.
#
# Contract (the same as `ranch-healthcheck`):
#   exit 0  healthy; lines starting "WARNING: " are shown as warnings, the node stays up
#   exit 1  drain the node; the first output line becomes the reason ("HC: <line>")
#   exit 2  fail the node (hardware fault), reason as for exit 1
# Ranch clears its own HC drain/fail by itself once this script passes again.
#
# Environment (rnoded passes only these, plus PATH=/usr/sbin:/usr/bin:/sbin:/bin):
#   RANCH_NODENAME / SLURMD_NODENAME   this node's name
#   RANCH_NODE_STATE                   the controller's view, e.g. IDLE+DRAIN
#   RANCH_NODE_IS_HEALTHY              yes|no (unset on the start-up run)
#   RANCH_HC_VERDICT_FILE              demos and tests: when the file it names exists, its content
#                                      decides and nothing else is checked. First word: ok, warn,
#                                      drain or fail; the rest is the message, e.g. "drain bad fan",
#                                      "fail gpu dead", "warn fan slow", "ok". When it names a
#                                      directory, the file named after this node in it is used,
#                                      so one directory steers a whole test cluster.
#
# Tunables (edit here or set in the environment for a manual run):
ROOT_MAX_PCT=${HC_ROOT_MAX_PCT:-95}
TMP_MAX_PCT=${HC_TMP_MAX_PCT:-90}
MIN_FREE_MEM_MB=${HC_MIN_FREE_MEM_MB:-256}
EXPECTED_GPUS=${HC_EXPECTED_GPUS:-}   # empty: any number of GPUs is fine

NODE=${RANCH_NODENAME:-${SLURMD_NODENAME:-$(uname -n)}}
WARNINGS=""

drain() { echo "$*"; exit 1; }
fail() { echo "$*"; exit 2; }
warn() { WARNINGS="${WARNINGS}WARNING: $*
"; }

# --- demo/test override --------------------------------------------------------------------
verdict_file=${RANCH_HC_VERDICT_FILE:-}
if [ -n "$verdict_file" ] && [ -d "$verdict_file" ]; then
    verdict_file="$verdict_file/$NODE"
fi
if [ -n "$verdict_file" ] && [ -f "$verdict_file" ]; then
    verdict="" message=""
    read -r verdict message < "$verdict_file" || true
    case "$verdict" in
        ok|"") exit 0 ;;
        warn) echo "WARNING: ${message:-warning from $verdict_file}"; exit 0 ;;
        fail) fail "${message:-$verdict_file says fail}" ;;
        *) drain "${message:-$verdict_file says $verdict}" ;;
    esac
fi

# --- disk usage --------------------------------------------------------------------------
# df -P prints one line per filesystem: ... Capacity(%) Mounted-on
disk_pct() {
    df -P "$1" 2>/dev/null | awk 'NR == 2 { sub(/%/, "", $5); print $5 }'
}
check_disk() {
    path=$1 max=$2
    pct=$(disk_pct "$path")
    if [ -z "$pct" ]; then
        drain "cannot read disk usage of $path"
    fi
    if [ "$pct" -gt "$max" ]; then
        drain "disk $path ${pct}% full (max ${max}%)"
    fi
}
check_disk / "$ROOT_MAX_PCT"
check_disk /tmp "$TMP_MAX_PCT"

# --- memory ------------------------------------------------------------------------------
avail_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo 2>/dev/null)
if [ -n "$avail_kb" ]; then
    avail_mb=$((avail_kb / 1024))
    if [ "$avail_mb" -lt "$MIN_FREE_MEM_MB" ]; then
        drain "free memory ${avail_mb}M below ${MIN_FREE_MEM_MB}M"
    fi
else
    warn "cannot read MemAvailable from /proc/meminfo"
fi

# --- GPUs (only where the driver is installed) -------------------------------------------
if command -v nvidia-smi >/dev/null 2>&1; then
    if ! gpu_list=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>&1); then
        drain "nvidia-smi failed: $(echo "$gpu_list" | head -n 1)"
    fi
    gpu_count=$(echo "$gpu_list" | grep -c '[0-9]')
    if [ -n "$EXPECTED_GPUS" ] && [ "$gpu_count" -ne "$EXPECTED_GPUS" ]; then
        drain "expected $EXPECTED_GPUS GPUs, found $gpu_count"
    fi
elif [ -n "$EXPECTED_GPUS" ] && [ "$EXPECTED_GPUS" -gt 0 ]; then
    drain "nvidia-smi not found, expected $EXPECTED_GPUS GPUs"
fi

printf '%s' "$WARNINGS"
exit 0
