"""The value matrix's listed disagreements: each entry names the cases it covers (command, option
and what differs, as regular expressions matched in full) and why Ranch answers them otherwise.
A disagreement no entry covers fails test_value_matrix.py, and so does an entry that covers none
(a fixed difference leaves the list with its fix)."""

from __future__ import annotations

from dataclasses import dataclass

from ranch.cli.sbatch_options import ACTED


@dataclass(frozen=True)
class Listed:
    command: str  # regular expressions, each matched in full
    option: str  # the case's option (its long name; its letter where it has none)
    what: str  # "class", "exit", "output" or "field KEY"
    reason: str
    slurm: str = ".*"  # Slurm's side of the disagreement (its class and first error line)
    ranch: str = ".*"
    gap: bool = False  # True: a finding not fixed yet (the test reports these apart)
    form: str = ".*"  # the case's form as written (`--Format=AllocMem`)


LAUNCHERS = "sbatch|srun|salloc"
# the options sbatch takes that Ranch reads and sets aside (no help text in its table), as a
# regular expression; and srun's that rrun sets aside (cli/srun_options.py)
_ASIDE_NAMES = sorted({
    "accel-bind", "acctg-freq", "batch", "bb", "bbf", "bcast", "bcast-exclude",
    "cluster-constraint", "clusters", "compress", "container", "contiguous", "core-spec",
    "cores-per-socket", "cpu-freq", "deadline", "delay-boot", "disable-status", "distribution",
    "epilog", "export-file", "extra-node-info", "gid", "gpu-bind", "gpu-freq",
    "gpus-per-socket", "gres-flags", "het-group", "ignore-pbs", "immediate", "licenses",
    "mcs-label", "mem-bind", "mincpus", "msg-timeout", "multi-prog", "network", "no-allocate",
    "no-kill", "nodefile", "ntasks-per-core", "ntasks-per-gpu", "ntasks-per-socket",
    "overcommit", "power", "prefer", "preserve-env", "priority", "profile", "prolog",
    "propagate", "pty", "quit-on-interrupt", "reboot", "relative", "reservation", "resv-ports",
    "send-libs", "slurmd-debug", "sockets-per-node", "spread-job", "switches", "task-epilog",
    "task-prolog", "thread-spec", "threads", "threads-per-core", "time-min", "tmp", "uid",
    "use-min-nodes", "wait-all-nodes", "x11", "kill-command", "bell", "no-bell",
} - ACTED)
ASIDE = "|".join(_ASIDE_NAMES)
REFUSED = "refused-(value|controller).*"
NOT_REFUSED_AT_PARSE = "(accepted|refused-controller).*"

LISTED: tuple[Listed, ...] = (
    # -- the launchers' options Ranch has no use for ---------------------------------------
    Listed(LAUNCHERS, ASIDE, "class",
           "An option Ranch reads and sets aside (README \"sbatch's options\"): it checks no "
           "value of it, where Slurm's parser (or slurmctld, for the words it alone knows: "
           "licenses, reservations, --batch features, cpu-freq governors) refuses a bad one.",
           slurm=REFUSED, ranch=NOT_REFUSED_AT_PARSE),
    Listed(LAUNCHERS, ASIDE, "exit",
           "The same set-aside options: Slurm refuses some of their values with exit 1 (its "
           "slurm_opt.c error paths), Ranch not at all or later, at the controller."),
    Listed("sbatch", ASIDE, r"field .*",
           "A set-aside option: Ranch keeps no such field (BurstBuffer, Container, "
           "ClusterFeatures, CPU_max_freq, TresBind, TresFreq, Network, MCS_label, DelayBoot, "
           "Deadline, TimeMin, MinTmpDiskNode, ReqB:S:C:T, NtasksPerN:B:S:C, Socks/Node, "
           "Reboot, Contiguous, Prefer, Licenses, SpreadJob, MinCPUsNode...), so "
           "`scontrol show job` shows its default."),
    Listed("salloc|srun", "test-only|usage|help|te|us", "class",
           "srun --test-only asks slurmctld when a job would start (rrun has no such "
           "request; it asks for the step); srun --usage prints its usage, rrun's argparse "
           "has no --usage.", slurm="accepted.*"),
    # -- the launchers' options Ranch acts on, read its own way ---------------------------
    Listed(LAUNCHERS, "gpus|gpus-per-node|gpus-per-task|gres|mem-per-gpu|cpus-per-gpu",
           "class|exit",
           "Ranch knows GPUs only (gres gpu[:type]:N): a word it cannot read as a GPU count is "
           "refused at once (exit 255), where Slurm's gres parser refuses it with exit 1 or "
           "lets slurmctld refuse an unknown gres later; this cluster has no GPUs, so Slurm "
           "refuses every GPU request at submission."),
    Listed(LAUNCHERS, "cpus-per-task|ntasks|ntasks-per-node|nodes|mincpus|nodelist|exclude|"
           "mem|mem-per-cpu|tmp", "class",
           "Ranch's controller refuses at submission a request no node of the partition can "
           "ever hold (Requested node configuration is not available); Slurm queues a held "
           "job that asks for more CPUs than the partition has, and refuses others only when "
           "it tries to schedule them.",
           slurm="accepted.*", ranch="refused-controller.*"),
    Listed("sbatch", "time", "class",
           "A negative day count: time_str2secs reads `-5` as minus five days and sbatch "
           "submits it; slurmctld keeps the negative limit as an unsigned number "
           "(TimeLimit=2982611-04:17:00). Ranch refuses a negative time.",
           slurm="accepted.*", form=r".*-5"),
    Listed(LAUNCHERS, ".*", "class|exit",
           "Found by the matrix and not fixed yet: a value form Ranch's own reading of an "
           "option it acts on takes or refuses otherwise than Slurm 22.05 (see the case's "
           "line in the test's report; the fixes so far: time arithmetic, parse_int's "
           "numbers, --cpu-bind words, usage exit codes).",
           gap=True),
    Listed("sbatch", ".*", r"field .*",
           "Found by the matrix and not fixed yet: `scontrol show job` of an option Ranch acts "
           "on differs: NumNodes as min-max (`-N 1` is 1-1, `-N 1-3` stays 1-3), NumTasks "
           "of `-N 2`/`-w c1,c2` (Slurm: a task a node), empty values (`--job-name=`, "
           "`--output=`, `--chdir=`, `--nodelist=`, `--account=`, `--nice=`) that Slurm keeps "
           "empty and Ranch takes as not given, MinCPUsNode of --ntasks-per-node. (TRES is "
           "compared without mem= and hostlists expanded: README's deliberate differences.)",
           gap=True),
    # -- listing commands -------------------------------------------------------------------
    Listed("squeue|sinfo|scancel|scontrol|sacct|sshare", "clusters|cluster|M|cl.*", "class",
           "-M/--clusters asks slurmdbd for the cluster (this Slurm has none: 'Problem "
           "talking to database'); Ranch has one cluster and no federation."),
    Listed("sinfo", "nodes|states|t|n|partition|p", "class",
           "rinfo refuses a hostlist it cannot expand or a state word it does not know "
           "(exit 1, naming it); sinfo takes them and matches nothing."),
    Listed("sinfo", "Format", "output",
           "sinfo -O Port is the port slurmd listens on; rnoded listens on none (it dials the "
           "controller), so rinfo prints the node's Port= from slurm.conf, N/A where none is "
           "configured.",
           form=r".*[= O]Port(:7)?"),
    Listed("sinfo", "format|Format", "output",
           "Each system's own values for the same column: FREE_MEM and CPU_LOAD are measured, "
           "%n/%o are the node's host name and address (one host here for Slurm's slurmds, "
           "the node's name for Ranch's), %v the daemon's version, %R/%u/%U/%H reason "
           "fields, widths of those values (`%all` and -O All print every column, these "
           "among them); %N folds as README's hostlists."),
    Listed("squeue", "Format", "output",
           "Each system's own values: AllocNodes is the host the job was submitted from (this "
           "Slurm's submit host is its slurm.conf name, Ranch's the machine's), PendingTime "
           "the seconds since submission when each system's case ran. Ranch keeps no "
           "submitter session id (AllocSID is 0, as `rcontrol show job`'s AllocNode:Sid) and "
           "no per-job time of the scheduler's last look at a job (LastSchedEval is N/A, "
           "squeue's word for a job never looked at).",
           form=r"--Format=(AllocNodes|AllocSID|LastSchedEval|PendingTime)(:7)?"),
    Listed("sacct", "json", "class",
           "sacct --json needs slurmdbd (this Slurm, with job completion only, refuses it: "
           "'slurm not configured with slurmdbd'); racct answers --json from Ranch's own "
           "records, as every Ranch listing does.",
           slurm="refused-value: .*slurm not configured with slurmdbd", ranch="accepted: .*"),
    Listed("sacct", "qos", "class",
           "sacct -q translates names through slurmdbd's QOS table (this Slurm has none and "
           "refuses any name: 'We need a qos list to translate'); Ranch keeps no QOS table, so "
           "racct filters on the QOS name each job was submitted with.",
           slurm="refused-value: .*We need a qos list to translate", ranch="accepted: .*"),
    Listed("sshare", "help|usage|he|us|format|o|.*", "output|class",
           "rshare's --help text is its own; `-o ''` is sshare's default fields in rshare "
           "and only Account in sshare (its empty list matches the first field)."),
    Listed("sacctmgr", ".*", "output|class",
           "sacctmgr -V says the Debian build's name (slurm-wlm); Ranch's commands say "
           "'slurm 22.05.8', what tools parse. racctmgr has no --help text."),
)
