"""rcancel: cancel or signal jobs, like scancel (`rcancel 12 13_2`, `rcancel -u alice`,
`rcancel --signal=USR1 12`)."""

from __future__ import annotations

import os
import sys

from ranch.cli import quickargs
from ranch.cli.controller import CliError, find_target, run_main
from ranch.cli.quickargs import SUPPRESS, Table
from ranch.cli.slurm_names import prog, version_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import SimpleNamespace as Namespace

OPTIONS: Table = (
    (("--help",), {"action": "help", "help": "show this help and exit"}),
    (("-u", "--user"), {"metavar": "USER", "help": "only (or all) jobs of this user"}),
    (("--me",), {"action": "store_true", "help": "only (or all) my jobs"}),
    (("-n", "--name", "--jobname"), {"metavar": "NAME", "help": "only jobs of this name"}),
    (("-t", "--state"), {"metavar": "STATE", "help": "only jobs in this state: PENDING, RUNNING"}),
    (("-p", "--partition"), {"metavar": "PART", "help": "only jobs of this partition"}),
    (("-w", "--nodelist"), {"metavar": "HOSTLIST", "help": "only jobs on these nodes"}),
    (("-A", "--account"), {"metavar": "ACCOUNT", "help": "only jobs of this account"}),
    (("-q", "--qos"), {"metavar": "QOS", "help": "only jobs of this QOS"}),
    (("--wckey",), {"metavar": "KEY", "help": "only jobs of this wckey"}),
    (("-R", "--reservation"), {"metavar": "NAME", "help": "only jobs of this reservation (none)"}),
    (("-s", "--signal"), {"metavar": "SIGNAL", "help": "send SIGNAL instead of ending the jobs"}),
    (("-b", "--batch"), {"action": "store_true",
                        "help": "accepted; Ranch signals the job's process group, batch shell "
                                "included"}),
    (("-f", "--full"), {"action": "store_true", "help": "accepted (Ranch signals the whole job)"}),
    (("-H", "--hurry"), {"action": "store_true", "help": SUPPRESS}),
    (("-i", "--interactive"), {"action": "store_true", "help": SUPPRESS}),
    (("-M", "--clusters", "--cluster"), {"metavar": "NAME", "help": SUPPRESS}),
    (("--ctld",), {"action": "store_true", "help": SUPPRESS}),
    (("--sibling",), {"metavar": "NAME", "help": SUPPRESS}),
    (("--usage",), {"action": "store_true", "help": "a short usage and exit"}),
    (("-Q", "--quiet"), {"action": "store_true", "help": "no error for jobs already finished"}),
    (("-v", "--verbose"), {"action": "store_true", "help": "say what was cancelled"}),
    (("--server",), {"metavar": "HOST:PORT", "help": "controller address (or RANCH_SERVER)"}),
    (("--key-file",), {"metavar": "PATH", "help": "cluster key (or RANCH_KEY_FILE)"}),
    (("--conf",), {"metavar": "PATH", "help": "read controller address and key from this config"}),
    (("-V", "--version"), {"action": "version", "version": lambda: version_text("rcancel")}),
    (("job_ids",), {"nargs": "*", "metavar": "JOBID"}),
)

def build_parser():  # -> argparse.ArgumentParser
    return quickargs.build(OPTIONS, prog="rcancel", add_help=False,
                           description="Cancel or signal jobs.")


FILTERS = ("name", "state", "partition", "nodelist", "account", "qos", "wckey", "reservation")
_STATES = {"PENDING": "PENDING", "PD": "PENDING", "RUNNING": "RUNNING", "R": "RUNNING",
           "SUSPENDED": "SUSPENDED", "S": "SUSPENDED"}


def _state(text: str) -> str:
    state = _STATES.get(text.strip().upper())
    if state is None:
        raise CliError(f"Invalid job state specified: {text}. Valid job states are PENDING, "
                       "RUNNING, and SUSPENDED")
    return state


def filtered(args: Namespace, jobs: list[dict], ids: tuple[int, ...]) -> list[int]:
    """scancel's filters over the active jobs (and within the ids given, if any)."""
    from ranch.conf.hostlist import HostlistError, expand

    state = _state(args.state) if args.state is not None else None
    try:  # a filter given empty (scancel --account=) matches the jobs whose value is empty
        nodes = set(expand(args.nodelist)) if args.nodelist else set()
    except HostlistError:  # scancel takes it as given: it names no node, so no job
        nodes = {args.nodelist}
    out = []
    for j in jobs:
        if j["state"] not in ("PENDING", "RUNNING", "CONFIGURING", "SUSPENDED"):
            continue
        if ids and j["job_id"] not in ids and j.get("array_job_id") not in ids:
            continue
        live = "RUNNING" if j["state"] == "CONFIGURING" else j["state"]
        if state and live != state:
            continue
        if args.name is not None and j.get("name") != args.name:
            continue
        if args.partition is not None and j.get("partition") != args.partition:
            continue
        if args.account is not None and (j.get("account") or "") != args.account.lower():
            continue
        if args.qos is not None and (j.get("qos") or "") != args.qos:
            continue
        if (args.wckey is not None
                and (j.get("wckey") or "") != args.wckey.lstrip("*").lower()):
            continue
        if args.reservation is not None:
            continue  # Ranch has no reservations: no job is in one
        if args.nodelist is not None and not (j.get("nodes") and nodes & set(expand(j["nodes"]))):
            continue
        if args.user and args.user not in (j.get("user"), str(j.get("uid"))):
            continue
        out.append(j["job_id"])
    # an array's own id names all its tasks (rctld cancels them together): send it alone
    by_id = {j["job_id"]: j for j in jobs}
    masters = {i for i in out if by_id[i].get("array_job_id") == i}
    return [i for i in out if i in masters or by_id[i].get("array_job_id") not in masters]


def parse_signal(text: str) -> int:
    """A signal by number or name, with or without SIG (scancel --signal: sig_name2num takes
    any number but 0 as it is; the node refuses one it cannot send)."""
    import signal as signals  # only for --signal: its enum costs every rcancel's start otherwise

    t = text.strip().upper()
    if t.isdigit():
        num = int(t)
        if num:
            return num
    else:
        name = t if t.startswith("SIG") else "SIG" + t
        sig = getattr(signals, name, None)
        if isinstance(sig, signals.Signals):
            return int(sig)
    raise CliError(f"Unknown job signal: {text}")


# scancel's _usage (src/scancel/opt.c)
USAGE = """Usage: scancel [-A account] [--batch] [--full] [--interactive] [-n job_name]
               [-p partition] [-Q] [-q qos] [-R reservation] [-s signal | integer]
               [-t PENDING | RUNNING | SUSPENDED] [--usage] [-u user_name]
               [--hurry] [-V] [-v] [-w hosts...] [--wckey=wckey]
               [job_id[_array_id][.step_id]]
"""


def check_user(text: str) -> None:
    """scancel -u: uid_from_string's user (credential.known_user)."""
    from ranch.cli.credential import known_user

    if not known_user(text):
        raise CliError(f"Invalid user name: {text}")


def _kill_error(word: str, why: str) -> str:
    return f"Kill job error on job id {word}: {why}"


def run(argv: list[str]) -> int:
    """scancel's two ways (src/scancel/scancel.c): with job ids only (no filter, no --signal,
    no -b, -i, -u), each id is sent as given, and one that names no job or a job that already
    ended is no error (said with -v only; exit 0). Otherwise the ids are first checked against
    the active jobs: one that names none is `Kill job error on job id N: Invalid job id
    specified` (not said with -Q) and exit 1, and the filters choose among the rest."""
    from ranch.cli.controller import request
    from ranch.cli.credential import user_name
    from ranch.cli.job_requests import fetch_jobs

    args = quickargs.parse(OPTIONS, argv, build_parser)
    if args.usage:
        print(USAGE.replace("scancel", prog("rcancel")), end="")
        return 0
    if args.user is not None:
        check_user(args.user)
    if args.me:
        args.user = str(os.getuid())
    filters = [f for f in FILTERS if getattr(args, f) is not None]
    if not args.job_ids and not args.user and not filters:
        raise CliError("No job identification provided")
    if args.state is not None:
        _state(args.state)  # a usage error before any request
    sig = parse_signal(args.signal) if args.signal is not None else 0
    plain = not (filters or sig or args.batch or args.interactive or args.user)
    target = find_target(args.server, args.key_file, args.conf)
    me = prog("rcancel")
    jobs = None
    if not plain or any("_" in w for w in args.job_ids):
        _, jobs = fetch_jobs(target)
    steps = split_steps(args.job_ids)  # scancel 12.1: those words name steps, not jobs
    found, missing = _named(args.job_ids, jobs, plain)
    ids = tuple(found)
    failed = _say_missing(args, missing, plain, sig, me)
    only_user = args.user or ""
    if args.job_ids and not ids and not steps:  # none names a job: nothing to ask
        return failed
    if filters:
        assert jobs is not None
        ids = tuple(filtered(args, jobs, ids))
        only_user = ""
        if not ids and not steps:
            if args.verbose:
                print(f"{me}: no job matches", file=sys.stderr)
            return failed
    elif only_user and only_user.isdigit():  # --me, -u UID: the controller matches names
        names = {j.get("user") for j in (jobs or fetch_jobs(target)[1])
                 if str(j.get("uid")) == only_user}
        only_user = names.pop() if len(names) == 1 else only_user
    body = {"job_ids": list(ids), "user": user_name(), "uid": os.getuid(),
            "signal": sig, "only_user": only_user, "steps": [list(s) for s in steps]}
    if args.verbose:
        for jid, sid in steps:
            print(f"{me}: {'Signal' if sig else 'Terminating'} step {jid}.{sid}",
                  file=sys.stderr)
    result = request(target, "CancelJobs", body, want="JobResult", timeout=30.0)
    return _said(args, result, ids, steps, plain, sig, failed)


def _named(words: list[str], jobs: list[dict] | None, plain: bool
           ) -> tuple[list[int], list[str]]:
    """(the job ids the words name, the words that name no job: no active one unless
    `plain`); steps (`12.1`) are left to split_steps."""
    from ranch.cli.job_requests import parse_job_ids

    found: list[int] = []
    missing: list[str] = []  # words that name no (active) job
    for word in words:
        for part in _words(word):
            part = part.strip()
            if "." in part or not part:
                continue
            try:
                hits = _task_list(part, jobs) if "_[" in part else parse_job_ids([part], jobs)
            except CliError as exc:
                job, _, task = part.partition("_")
                # an array task that names none is passed over; a malformed one (2_2x) is
                # refused before anything is asked, as scancel's own parser does
                if not (job.isdigit() and (task.isdigit() or task == "*"
                                           or (task.startswith("[") and task.endswith("]")))):
                    raise CliError(f"Invalid job id {part}") from exc
                missing.append(part)
                continue
            if not plain:
                active = {j["job_id"] for j in jobs or () if j["state"] in ACTIVE}
                active |= {j.get("array_job_id") for j in jobs or ()
                           if j["state"] in ACTIVE and j.get("array_job_id")}
                if not set(hits) & active:
                    missing.append(part)
                    continue
            found += hits
    return found, missing


def _say_missing(args: Namespace, missing: list[str], plain: bool, sig: int, me: str) -> int:
    """scancel's lines for the words that name no job: errors (exit 1) unless the ids were
    sent as given, where only -v says them."""
    failed = 0
    if not plain:
        for part in missing:
            failed = 1
            if not args.quiet:
                print(f"{me}: error: {_kill_error(part, 'Invalid job id specified')}",
                      file=sys.stderr)
    elif args.verbose:
        for part in missing:
            print(f"{me}: {'Signal' if sig else 'Terminating'} job {part}", file=sys.stderr)
            print(f"{me}: error: {_kill_error(part, 'Invalid job id specified')}",
                  file=sys.stderr)
    return failed


def _said(args: Namespace, result: dict, ids: tuple[int, ...], steps: list[tuple[int, int]],
          plain: bool, sig: int, failed: int) -> int:
    """What scancel says of the controller's answer, and its exit code."""
    me = prog("rcancel")
    if args.verbose:
        step_jobs = {jid for jid, _ in steps} - set(ids)  # their lines were printed above
        for jid in [j for j in result.get("job_ids") or () if j not in step_jobs]:
            print(f"{me}: {'Signal' if sig else 'Terminating'} job {jid}", file=sys.stderr)
    for err in result.get("errors") or ():
        gone = _gone(err)
        if gone is not None:  # a job that ended (or never was) since it was named
            if plain:
                if args.verbose:
                    print(f"{me}: {'Signal' if sig else 'Terminating'} job {gone[0]}",
                          file=sys.stderr)
                    print(f"{me}: error: {_kill_error(*gone)}", file=sys.stderr)
                continue
            failed = 1
            if not args.quiet:
                print(f"{me}: error: {_kill_error(*gone)}", file=sys.stderr)
            continue
        failed = step_error_code(err)
        print(f"{me}: error: {err}", file=sys.stderr)
    return failed


def _words(text: str) -> list[str]:
    """The comma list of ids, a comma inside `12_[7,8]` not splitting it."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


def _task_list(part: str, jobs: list[dict] | None) -> tuple[int, ...]:
    """`12_[4-6]`, `12_[1,3-5]`, `12_[1-9:2]`: the records of those tasks of array 12 (tasks
    that are not there are passed over, as scancel does); CliError for a malformed one."""
    base, _, spec = part.partition("_[")
    if not base.isdigit() or not spec.endswith("]") or jobs is None:
        raise CliError(f"Invalid job id {part}")
    wanted: set[int] = set()
    for item in spec[:-1].split(","):
        rng, _, step = item.partition(":")
        low, dash, high = rng.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()) or (step and not step.isdigit()):
            raise CliError(f"Invalid job id {part}")
        wanted.update(range(int(low), int(high if dash else low) + 1, int(step or 1)))
    return tuple(j["job_id"] for j in jobs
                 if j.get("array_job_id") == int(base) and j.get("array_task_id") in wanted)


ACTIVE = frozenset({"PENDING", "RUNNING", "CONFIGURING", "SUSPENDED", "REQUEUED",
                    "RESIZING"})


def _gone(err: str) -> tuple[str, str] | None:
    """(job id, Slurm's reason) when rctld's error says a job ended or never was."""
    if err.startswith("Invalid job id specified: "):
        return err.rsplit(" ", 1)[1], "Invalid job id specified"
    if err.endswith("already completing or completed"):
        head = err.split(":", 1)[0]
        return head.rsplit(" ", 1)[1], "Job/step already completing or completed"
    return None


def split_steps(words: list[str]) -> list[tuple[int, int]]:
    """The `12.1` words (scancel N.S): (job id, step id) each; a malformed one is scancel's
    `Invalid job id 12.x` (a batch or extern step cannot be cancelled by its name either)."""
    out = []
    for word in words:
        for part in word.split(","):
            part = part.strip()
            if "." not in part:
                continue
            head, _, step = part.partition(".")
            if not (head.isdigit() and step.isdigit()):
                raise CliError(f"Invalid job id {part}", code=1)
            out.append((int(head), int(step)))
    return out


def step_error_code(err: str) -> int:
    """scancel's exit code for an error line (measured on Slurm 22.05): a running job's step
    that is not there, or somebody else's, exits with slurmctld's error number modulo 256
    (ESLURM_INVALID_JOB_ID 2017: 225; ESLURM_USER_ID_MISSING 2010: 218); everything else 1."""
    if err.startswith("Kill job error on job step id ") and "." not in err.split(":", 1)[0]:
        return 218 if err.endswith("Invalid user id") else 225
    return 1


def main(argv: list[str] | None = None) -> int:
    return run_main("rcancel", run, argv)


if __name__ == "__main__":
    sys.exit(main())
