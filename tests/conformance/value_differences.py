"""The value matrix's listed disagreements: each entry names the cases it covers (command, option
and what differs, as regular expressions matched in full) and why Ranch answers them otherwise.
A disagreement no entry covers fails test_value_matrix.py, and so does an entry that covers none
(a fixed difference leaves the list with its fix). An entry whose difference depends on the machine
(`when`: who may `su`, ...) holds only where its condition does, and is checked both ways: where
the condition holds its difference must show, where it does not the cases must agree."""

from __future__ import annotations

from collections.abc import Callable
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
    race: bool = False  # True: a race of the cases run side by side, which a run may not meet
    # True: whether it shows depends on the machine at the moment (what it lets a command do,
    # how loaded it is), so a run may meet it or not; where it shows, it shows as listed
    machine: bool = False
    # None: always; else the machine's condition under which the difference shows (asked once
    # per run): the entry covers nothing where it is false, so there the cases must agree
    when: Callable[[], bool] | None = None

    def holds(self) -> bool:
        return self.when is None or _asked(self.when)


_answers: dict[Callable[[], bool], bool] = {}


def _asked(condition: Callable[[], bool]) -> bool:
    if condition not in _answers:
        _answers[condition] = condition()
    return _answers[condition]


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
    Listed("sbatch", "nodes|nodelist", r"field (NumNodes|NumCPUs|NumTasks|TRES)",
           "A batch job of no nodes: Slurm 22.05 keeps -N 0, -N 0-1 and a -w '' that names no "
           "node as a request for 0 nodes (held: NumNodes=0 NumCPUs=0 NumTasks=0 "
           "TRES=(null)), though a batch script needs a node to run on. Ranch reads them as "
           "the least a batch job runs on, one node of one CPU, and shows that.",
           form=r"--nodes=0(-1)?|--nodelist="),
    Listed("sbatch", "partition", "field Partition",
           "A Ranch job belongs to one partition (no partition lists): -p main,main names "
           "one partition twice and is that partition; Slurm keeps the list as given.",
           form=r"--partition=main,main"),
    Listed("salloc", "get-user-env", "class",
           "salloc --get-user-env (root only) loads the user's login environment by running "
           "`su - USER -c env` within a timeout (8 s unless given); where that fails (a "
           "container without PAM's login stack) or is slower than the timeout (a loaded "
           "machine: seen at load 20), salloc gives up (Failed to load current user "
           "environment variables). ralloc takes the option and sets it aside: the command "
           "gets the caller's environment, as salloc's does without the option. Where su "
           "answers in time, both agree.",
           slurm="refused-value: .*Failed to load current user environment variables",
           ranch="refused-controller: .*", machine=True),
    Listed("salloc", "partition", "class",
           "A case that names the real partition (once, or twice: main,main) asks for an "
           "allocation at once (-I) while the other cases run beside it on the same "
           "system: it is granted or refused "
           "(Requested nodes are busy) by whether another case holds the nodes at that "
           "instant, on either system alike; a race of the matrix's parallel cases.",
           form=r"(-p ?|--partition[ =]|--pa=)main(,main)?",
           slurm=r"accepted: .*|refused-controller: .*Requested nodes are busy",
           ranch=r"accepted: .*|refused-controller: .*Requested nodes are busy", race=True),
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
