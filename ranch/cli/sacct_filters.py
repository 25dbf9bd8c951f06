"""sacct's value checks (its words for what it refuses, src/sacct/options.c) and the filters
racct applies to the records the controller sends."""

from __future__ import annotations

import os

from ranch.cli.controller import CliError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import SimpleNamespace as Namespace

INT_MAX = 2**31 - 1
UNITS = "KMGTP"
# str_2_job_flags' words (src/common/slurmdb_defs.c), each found anywhere in a token
JOB_FLAGS = ("none", "schedsubmit", "schedmain", "schedbackfill", "startrecieved")


def _strtol(text: str) -> tuple[int, str]:
    """C's strtol(text, &end, 10): the number read (0 if none) and what follows it."""
    s = text.lstrip(" \t\n")
    i = 1 if s[:1] in ("+", "-") else 0
    j = i
    while j < len(s) and s[j].isdigit():
        j += 1
    if j == i:
        return 0, text
    return int(s[:j]), s[j:]


def resource_range(text: str, what: str) -> tuple[int, int | None]:
    """get_resource_arg_range (src/common/proc_args.c): `N`, `N-M`, k/m multipliers, empty or
    `*` for any; (min, max or None)."""
    if text in ("", "*"):
        return 1, INT_MAX
    bad = f'Invalid numeric value "{text}" for {what}.'
    low, rest = _strtol(text)
    if rest[:1] in ("k", "K", "m", "M"):
        low *= 1024 if rest[0] in "kK" else 1048576
        rest = rest[1:]
    if (rest and rest[0] != "-") or low < 0:
        raise CliError(bad)
    if low > INT_MAX:
        raise CliError(f"Numeric argument ({low}) to big for {what}.")
    if not rest:
        return low, None
    high, rest = _strtol(rest[1:])
    if rest[:1] in ("k", "K", "m", "M"):
        high *= 1024 if rest[0] in "kK" else 1048576
        rest = rest[1:]
    if (rest and rest[0] != "-") or high <= 0:
        raise CliError(bad)
    if high > INT_MAX:
        raise CliError(f"Numeric argument ({high}) to big for {what}.")
    return low, high


def ids(text: str, group: bool) -> list[int]:
    """slurm_addto_id_char_list: each comma word a number or a user (group) name; an unknown
    name is refused, and so is a list that names nobody."""
    import grp
    import pwd

    from ranch.cli.credential import known_user

    out = []
    for word in text.split(","):
        if not word:
            continue
        if word.isdigit():
            out.append(int(word))
            continue
        if not group and known_user(word):
            try:
                out.append(pwd.getpwnam(word).pw_uid)
            except KeyError:
                out.append(os.getuid())  # the caller's own name (credential.known_user)
            continue
        try:
            out.append(grp.getgrnam(word).gr_gid)
        except KeyError:
            raise CliError(f"Invalid {'group' if group else 'user'} id: {word}") from None
    if not out:
        raise CliError(f"Invalid {'group' if group else 'user'} id: '{text}' names none")
    return out


def limit_minutes(text: str) -> int | None:
    """-k/-K: time_str2mins; zero, negative or malformed is sacct's fatal error. None:
    UNLIMITED."""
    from ranch.conf.timefmt import parse_minutes

    try:
        minutes = parse_minutes(text)
    except ValueError:
        minutes = -1
    if minutes is not None and minutes <= 0:
        raise CliError("Invalid time limit specification")
    return minutes


def reasons(text: str) -> set[str]:
    from ranch.cli.sacct_reasons import BY_LOWER

    out = set()
    for word in text.split(","):
        if not word:
            continue
        name = BY_LOWER.get(word.lower())
        if name is None:
            raise CliError(f"unrecognized job reason value '{word}'")
        out.add(name)
    return out


def check(args: Namespace) -> None:
    """sacct's refusals of values, before any request."""
    if args.gid is not None:
        ids(args.gid, group=True)
    if args.user is not None and args.user != "-1":
        ids(args.user, group=False)
    if args.nnodes is not None:
        resource_range(args.nnodes, "requested node range")
    if args.ncpus is not None:
        resource_range(args.ncpus, "requested cpu range")
    for text in (args.timelimit_min, args.timelimit_max):
        if text is not None:
            limit_minutes(text)
    if args.units is not None and (not args.units or args.units[0].upper() not in UNITS):
        raise CliError(f"Invalid unit type '{args.units[:1]}'. Possible options are '{UNITS}'")
    if args.whole_hetjob is not None and args.whole_hetjob.lower() not in ("yes", "y", "no",
                                                                           "n"):
        raise CliError(f'Invalid --whole-hetjob value "{args.whole_hetjob}". Valid values: '
                       "[yes|no].")
    if args.flags is not None:
        for word in (w for w in args.flags.split(",") if w):
            if not any(f in word.lower() for f in JOB_FLAGS):
                raise CliError(f"str_2_job_flags: Invalid job flag {word}")
    if args.reason is not None:
        reasons(args.reason)
    if args.file is not None:
        import stat

        try:
            regular = stat.S_ISREG(os.stat(args.file).st_mode)
        except OSError:
            regular = False
        if not regular:
            raise CliError(f"{args.file} is not a valid file")
        raise CliError(f"--file {args.file}: Ranch answers from its controller's records, not "
                       "from a job completion file")
    if args.yaml:
        raise CliError("--yaml: not available; --json gives the same document")
    if (args.batch_script or args.env_vars) and not args.jobs:
        what = "job scripts" if args.batch_script and not args.env_vars else "job environment"
        raise CliError(f"When requesting {what} you must also request specific jobs with the "
                       "'-j' option.")
    if args.batch_script and args.env_vars:
        raise CliError("Options --batch-script and --env-vars are mutually exclusive")
    if args.long and args.format:
        raise CliError("Options -o(--format) and -l(--long) are mutually exclusive. Please "
                       "remove one and retry.")


def qos_names(text: str, known: list[str]) -> set[str]:
    """-q as slurmdb_addto_qos_char_list reads it against the QOS table (`known`, in id order):
    each comma word a QOS name in any case, a leading `+`/`-` read past (mixing the two forms is
    refused); the lower-case names matched. A name the table does not hold ends sacct with its
    two lines (an error, then fatal), exit 1."""
    by_lower = {n.lower(): n for n in known}
    out: set[str] = set()
    plain = signed = False
    words = text.strip("'\"").split(",")  # slurm_parse_char_list: one pair of quotes around all
    for word in (w for w in words if w):
        sign = word[:1] in ("+", "-")
        name = word[1:] if sign else word
        if name.lower() not in by_lower:
            raise CliError(f"You gave a bad qos '{name}'. Valid QOS's are {','.join(known)}\n"
                           f"{_prog()}: fatal: problem processing qos list")
        signed, plain = signed or sign, plain or not sign
        if signed and plain:
            raise CliError("You can't set qos equal to something and then add or subtract "
                           f"from it in the same line\n{_prog()}: fatal: problem processing "
                           "qos list")
        out.add(name.lower())
    return out


def _prog() -> str:
    from ranch.cli.slurm_names import prog

    return prog("racct")


def known_qos(target: object) -> list[str] | None:
    """The controller's QOS names in id order, as sacct reads them from slurmdbd (`racctmgr
    show qos`); None while its accounting store is off (the names are then matched as given)."""
    from ranch.cli.controller import request

    body = {"words": ["show", "qos", "format=id,name"], "options": ["noheader", "parsable2"]}
    reply = request(target, "AcctmgrRequest", body, want="AcctmgrReply")  # type: ignore[arg-type]
    if reply.get("rc"):
        return None
    rows = [line.split("|") for line in str(reply.get("out") or "").splitlines() if line]
    return [name for _, name in sorted((int(i), n) for i, n in rows)]


def truncate(records: list[dict], start: float | None, end: float | None) -> None:
    """sacct -T: each start and end time cut to the window [start, end] (a time not set stays
    unset)."""
    for rec in records:
        for key in ("start_time", "end_time"):
            if rec.get(key):
                rec[key] = min(max(rec[key], start or 0), end if end is not None else rec[key])


def _in_range(value: int | None, rng: tuple[int, int | None]) -> bool:
    low, high = rng
    return value is not None and value >= low and (high is None or value <= high)


def narrow(args: Namespace, records: list[dict]) -> list[dict]:
    """The filters of sacct's that the controller leaves to the command: --name, -r, -A, -N,
    -g, -i, -I, -k, -K, -C, -R, -q, -W, -x."""
    out = records
    for opt, keyname, lower in (("name", "name", False), ("partition", "partition", False),
                                ("accounts", "account", True)):
        text = getattr(args, opt)
        if text:
            words = {w.strip().lower() if lower else w.strip() for w in text.split(",")}
            out = [r for r in out if ((r.get(keyname) or "").lower() if lower
                                      else r.get(keyname)) in words]
    if args.nodelist:
        from ranch.conf.hostlist import expand

        try:
            wanted = set(expand(args.nodelist))
        except ValueError:  # sacct takes what it cannot expand as the name it is
            wanted = {args.nodelist}
        out = [r for r in out if r.get("nodes") and wanted & set(expand(r["nodes"]))]
    if args.gid is not None:
        gids = set(ids(args.gid, group=True))
        out = [r for r in out if r.get("gid") in gids]
    if args.nnodes is not None:
        rng = resource_range(args.nnodes, "requested node range")
        out = [r for r in out if _in_range(r.get("node_count"), rng)]
    if args.ncpus is not None:
        rng = resource_range(args.ncpus, "requested cpu range")
        out = [r for r in out if _in_range(r.get("cpus"), rng)]
    if args.timelimit_min is not None:
        low = limit_minutes(args.timelimit_min)
        out = [r for r in out if r.get("time_limit") is None
               or (low is not None and r["time_limit"] >= low)]
    if args.timelimit_max is not None:
        high = limit_minutes(args.timelimit_max)
        out = [r for r in out if high is None
               or (r.get("time_limit") is not None and r["time_limit"] <= high)]
    for text, key in ((args.constraints, "features"), (args.qos, "qos"),
                      (args.wckeys, "wckey")):
        if text:  # sacct's char lists: an empty one is no filter
            wanted = {w.lower() for w in text.split(",") if w}
            if key == "qos":  # the names as the QOS table matched them (racct.run), or as given
                wanted = getattr(args, "qos_matched", None) or {w.lstrip("+-") for w in wanted}
            out = [r for r in out if (r.get(key) or "").lower() in wanted]
    if args.reason:
        wanted = {w.lower() for w in reasons(args.reason)}
        out = [r for r in out if (r.get("reason") or "None").lower() in wanted]
    if args.associations:
        out = []  # association ids are slurmdbd's: no Ranch job has one
    return out
