"""The job commands' messages (rbatch, rqueue, rcancel, racct, rcontrol ... job) <-> rctld."""

from __future__ import annotations

import attrs


@attrs.frozen
class SubmitJob:
    """rbatch: one batch job (or an array of them). Sizes are per node as sbatch means them."""

    script: str  # the batch script's text (--wrap "cmd" already turned into a script)
    user: str
    uid: int
    gid: int
    workdir: str  # -D, default the submit directory
    name: str = ""  # -J; "" = the script's file name or "wrap"
    argv: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    stdout: str = ""  # -o; "" = slurm-%j.out (slurm-%A_%a.out for arrays)
    stderr: str = ""  # -e; "" = into stdout
    num_nodes: int = 1  # -N
    ntasks: int = 1  # -n
    cpus_per_task: int = 1  # -c
    mem_mib: int = 0  # --mem, per node; 0 = none asked
    gpus: int = 0  # --gpus / --gres gpu:N, per node
    partition: str = ""  # -p; "" = the default partition
    nodelist: str = ""  # -w, hostlist expression
    exclude: str = ""  # -x
    time_limit: int | None = None  # -t, minutes; None = the partition's DefaultTime
    # -t to the second, when it had seconds: Ranch enforces them (Slurm rounds up to minutes)
    time_limit_s: float | None = None
    requeue: bool = True
    exclusive: bool = False
    array: str = ""  # --array=1-N (also 1,3,5-7)
    hold: bool = False  # -H
    submit_host: str = ""
    command: str = ""  # the script path as given ("" for --wrap), for show job
    # -N's upper bound. None: exactly num_nodes; 0: as many as the tasks need (sbatch -n without
    # -N spreads the tasks over nodes, num_nodes being the minimum); M: -N num_nodes-M.
    max_nodes: int | None = None
    begin_time: float | None = None  # --begin, wall-clock seconds: PENDING (BeginTime) until
    # issue 22: the rest of sbatch's options. Resources (--ntasks-per-node, --gpus-per-task,
    # --mem-per-cpu, ...) arrive already resolved into the fields above; these keep what the
    # user asked for, for show job, the job's environment and the controller's checks.
    ntasks_per_node: int = 0  # 0 = not asked
    gpus_per_task: int = 0
    cpus_per_gpu: int = 0
    mem_per_cpu: int = 0  # MiB
    mem_per_gpu: int = 0  # MiB
    account: str = ""  # -A: kept and shown (Ranch has no accounting database)
    qos: str = ""  # -q: kept and shown
    wckey: str = ""
    comment: str = ""
    constraint: str = ""  # -C: node Features expression (& | and parentheses)
    dependency: str = ""  # -d: after/afterany/afterok/afternotok/aftercorr/singleton
    kill_on_invalid_dep: bool | None = None  # None: SchedulerParameters=kill_invalid_depend
    nice: int = 0  # --nice: lowers the priority by this much (negative: root only)
    mail_type: tuple[str, ...] = ()  # --mail-type words: BEGIN END FAIL REQUEUE ...
    mail_user: str = ""  # "" = the submitting user
    open_mode: str = ""  # --open-mode: append | truncate
    warn_signal: int = 0  # --signal=[B:]SIG[@TIME]: signal number
    warn_time: int = 0  # seconds before the time limit
    warn_batch: bool = False  # B: the batch shell only
    oversubscribe: str = ""  # --exclusive=user|mcs, -s: USER | MCS | YES ("" = as exclusive)
    hint: str = ""  # --hint: kept and shown
    export: str = ""  # --export as given (the env field is already filtered by it)
    get_user_env: str = ""  # --get-user-env[=T[S|L]] as given: kept and shown
    input: str = ""  # -i: stdin file pattern
    test_only: bool = False  # --test-only: answer when it would start; submit nothing
    # the options given a blank value (-A '', -J '', -w '', --mem-per-gpu=0...) that the fields
    # above cannot tell from not given: slurmctld keeps "" apart from unset and shows it
    given_blank: tuple[str, ...] = ()
    # whether -n (or --ntasks-per-node) set ntasks: without it slurmctld shows a task a node
    # (NumTasks=2 for -N 2); True for a client from before, which showed ntasks as it is
    ntasks_given: bool = True
    # issue 20: an allocation (ralloc/salloc, rrun outside a job): no batch script (`script`
    # is ""), nothing runs but what its owner starts as steps; its owner ends it with
    # JobControl(action="complete")
    allocation: bool = False
    # an allocation's holder, which says "alive" while its command runs (ctld/jobs/inactive.py):
    # "ralloc" (InactiveLimit applies) or "rrun" (its allocation is its one step's: cancelled
    # once rrun is silent with no step running, as slurmctld cancels a killed srun's job);
    # "" (salloc --no-shell, or a client from before): nobody, as slurmctld exempts --no-shell
    held_by: str = ""
    # salloc -I (--immediate, or -I1): an allocation that cannot start in the scheduling pass
    # after its submission ends FAILED at once (BadConstraints, 0:1), as slurmctld refuses one
    immediate: bool = False
    # --reservation: read only by a QOS's RequiresReservation (Ranch runs no job inside a
    # reservation's window: docs/slurm-compat.md)
    reservation: str = ""


@attrs.frozen
class SubmitReply:
    job_id: int  # the (array) job's id
    job_ids: tuple[int, ...] = ()  # every job record made (one per array task)
    # --test-only (SubmitJob.test_only): when and where the job would start; nothing was made
    start_time: float | None = None  # wall clock
    nodes: str = ""  # hostlist
    cpus: int = 0
    partition: str = ""
    # issue 35: an allocation (SubmitJob.allocation) the submission's own scheduling pass
    # decided (placed, or refused for -I): its record as GetJobs gives it, so ralloc and rrun
    # need not ask. Empty otherwise, and from an older controller.
    job: dict = attrs.Factory(dict)


@attrs.frozen
class GetJobs:
    """Ask for job records (dicts; shape: docs/internals.md, "Job records"). Empty `job_ids`:
    every job the controller still holds (finished ones for MinJobAge). `fields` names the
    record keys wanted (empty = all): with no `job_ids`, each record then holds only those of
    its keys. A controller may send more keys than asked (an older one sends them all), and
    readers must accept that."""

    job_ids: tuple[int, ...] = ()
    fields: tuple[str, ...] = ()


@attrs.frozen
class JobList:
    generated_at: float
    jobs: tuple[dict, ...]
    state_age: float = 0.0  # seconds the listing was old when sent (ctld/rpc/readcache.py)


@attrs.frozen
class CancelJobs:
    """rcancel: end (signal 0) or signal jobs; `only_user` keeps the named user's jobs only
    (rcancel -u). Empty job_ids with only_user: every job of that user."""

    job_ids: tuple[int, ...] = ()
    user: str = ""
    uid: int = -1
    signal: int = 0
    only_user: str = ""
    steps: tuple[tuple[int, int], ...] = ()  # rcancel N.S: (job id, step id) of steps to end


@attrs.frozen
class JobControl:
    """rcontrol requeue|requeuehold|hold|uhold|release JOBID...; "update": rcontrol update
    JobId=... Key=Value... (`updates`, the values as written; ctld/jobs/jobupdate.py reads them);
    "complete": an allocation's owner releases it (Slurm's slurm_complete_job) with how its
    command ended; "alive": its command still runs (InactiveLimit, ctld/jobs/inactive.py)."""

    action: str  # requeue requeuehold hold uhold release begin update complete alive
    job_ids: tuple[int, ...]
    user: str = ""
    uid: int = -1
    begin_time: float | None = None  # action "begin" (rcontrol update JobId=N StartTime=T)
    exit_code: int = 0  # action "complete": the command's exit code (non-zero: FAILED N:0)
    signal: int = 0  # action "complete": the signal that killed the command (FAILED 0:SIG)
    updates: tuple[tuple[str, str], ...] = ()  # action "update": (key, value) as given


@attrs.frozen
class JobResult:
    ok: bool
    job_ids: tuple[int, ...] = ()  # the jobs acted on
    errors: tuple[str, ...] = ()


@attrs.frozen
class GetAcct:
    """racct (sacct): the jobs rctld holds and those of its finished-job history that match.
    Empty filters match everything; a job matches `job_ids` by its id or its array's id, and
    `tasks` by (array id, task id). `start`/`end` bound the window (wall clock; None: open),
    read as sacct reads it: without `states` a job that was pending, running or ended within
    it; with `states` a job in one of them during it. At most `limit` records come back (0:
    the controller's bound, ctld/jobs/acct.py MAX_RECORDS); AcctList.left_out says how many more
    matched."""

    job_ids: tuple[int, ...] = ()
    tasks: tuple[tuple[int, int], ...] = ()
    uids: tuple[int, ...] = ()
    users: tuple[str, ...] = ()
    states: tuple[str, ...] = ()  # long names: COMPLETED, FAILED, ...
    start: float | None = None
    end: float | None = None
    limit: int = 0


@attrs.frozen
class AcctList:
    """GetAcct's answer: job records (dicts; shape: ctld/jobs/acct.py `record_of`), by job id."""

    generated_at: float = 0.0
    jobs: tuple[dict, ...] = ()
    left_out: int = 0  # records that matched past the limit
    history_error: str = ""  # the history could not be read: only rctld's own jobs are here


@attrs.frozen
class GetWhy:
    """`rqueue --why ID` (issue 44): why a job is not running, its estimated start, and what
    would start it sooner. `only_uid` (set by the controller under PrivateData=jobs for a user
    who is no admin; -1: anybody's): another user's job is answered as no such job."""

    job_id: int
    only_uid: int = -1


@attrs.frozen
class WhySuggestion:
    """A change the planner, run on a copy of the queue with it, confirms starts the job
    sooner: the option as rbatch takes it, in words, and the start and nodes it would get."""

    option: str
    text: str
    start: float
    nodes: str = ""  # hostlist


@attrs.frozen
class WhyReply:
    """GetWhy's answer (ranch/sched/why.py's Explanation): the reason token squeue shows, the
    constraint that binds now with its evidence, the estimate (None: none; `estimate` says how
    it came or why there is none) and the suggestions."""

    job_id: int
    state: str
    reason: str
    binding: str
    evidence: tuple[str, ...] = ()
    start: float | None = None
    nodes: str = ""  # hostlist: where the estimate puts it
    estimate: str = ""
    suggestions: tuple[WhySuggestion, ...] = ()
    generated_at: float = 0.0


JOB_MESSAGES: tuple[type, ...] = (SubmitJob, SubmitReply, GetJobs, JobList, CancelJobs, JobControl,
                                  JobResult, GetAcct, AcctList, GetWhy, WhySuggestion, WhyReply)
