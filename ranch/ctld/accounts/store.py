"""The one owner of the accounting tree (issue 43): racctmgr's command lines answered over it as
sacctmgr 22.05 answers them (assoc/acctmgr_session.py), every accepted change reported to the
change log whole (the reply waits for the journal), saved in the state file, taken back at start.
Off (AccountingStorageType unset) it refuses every line in sacctmgr's words without slurmdbd."""

from __future__ import annotations

import logging
import math
import pwd
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import trio

from ranch.assoc import enforce, serial, shares, usage
from ranch.assoc.acctmgr_ask import PROMPT, UNANSWERED
from ranch.assoc.acctmgr_session import answer
from ranch.assoc.db import AcctDb
from ranch.assoc.limits import Ask, Rule
from ranch.assoc.partpolicy import PartPolicy
from ranch.assoc.submitlimits import Groups
from ranch.assoc.usage import RunningJob, Usage, UsageSettings
from ranch.ctld import logs
from ranch.ctld.accounts.ports import AccountChanges
from ranch.ctld.state.integrity import DamagedState
from ranch.protocol import messages as m

# (user, account, partition, QOS) -> the limits over such a job, None: it has no association
RuleOf = Callable[[str, str, str, str], Rule | None]

# sacctmgr's answer on a Slurm without slurmdbd (measured: tests/conformance/test_value_matrix.py)
NO_DATABASE = ("You are not running a supported accounting_storage plugin\n"
               "Only 'accounting_storage/slurmdbd' is supported.\n")
OFF = m.AcctmgrReply(err=NO_DATABASE, rc=1)
DEFAULTS = UsageSettings()  # Slurm's: a 7-day half-life, a 5-minute calc period
# The page's usage over time: one sample per calc period (a day at Slurm's 5 minutes), fewer
# when the tree is large, so the ring never holds more than SAMPLE_CELLS figures
SAMPLES = 288
SAMPLE_CELLS = 200_000
OPERATORS = ("Operator", "Administrator")  # AdminLevel that sees every row (assoc_mgr.c)
# one sample: (wall time, ((account, user, raw usage), ...)); user "" is the account's own row
Sample = tuple[float, tuple[tuple[str, str, float], ...]]


def system_knows(name: str) -> bool:
    """sacctmgr's uid_from_string: whether this host has a user of that name."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def seeded(cluster: str) -> AcctDb:
    """What slurmdbd holds once the cluster registered: root, QOS normal, the cluster."""
    return AcctDb.fresh().add_cluster(cluster)


class Accounts:
    """The tree, as one immutable AcctDb replaced by each accepted change."""

    def __init__(self, *, cluster: str, enabled: bool, changes: AccountChanges,
                 where: str = "the saved state", settings: UsageSettings = DEFAULTS,
                 running: Callable[[], Iterable[RunningJob]] = tuple,
                 wall: Callable[[], float] = time.time,
                 history: Callable[[], Iterable[RunningJob]] | None = None) -> None:
        """`enabled`: AccountingStorageType=accounting_storage/slurmdbd; `where`: the saved
        state's name, for a refusal of a damaged record; `settings`: the Priority* keys;
        `running`: the running jobs, as usage accrual reads them (given by the composition
        root: this owner knows no job store); `wall`: the epoch clock jobs' start times use;
        `history`: the finished jobs on disk (a blocking read), usage's seed on a first start."""
        self.cluster = cluster
        self.enabled = enabled
        self.changes = changes
        self.where = where
        self.settings = settings
        self.running = running
        self.wall = wall
        self.history = history
        self.db = seeded(cluster)
        self.usage = Usage()
        self.samples: deque[Sample] = deque(maxlen=SAMPLES)  # in memory only: the page's
        self.held = False  # a tree was restored or changed: it is saved even while off
        self._flags: dict[tuple[str, ...], frozenset[str]] = {}
        # the limits' rules (assoc/limits.py) per job kind, for the tree they were read from
        self._rules: tuple[tuple[object, ...], RuleOf | None] = ((), None)

    def use_config(self, cluster: str, enabled: bool,
                   settings: UsageSettings | None = None) -> None:
        """Reconfigure: the store on or off; a new ClusterName gets its root association."""
        self.enabled = enabled
        self.settings = settings or self.settings
        if cluster != self.cluster and not any(c.name == cluster for c in self.db.clusters):
            self._keep(self.db.add_cluster(cluster), "cluster added", cluster)
        self.cluster = cluster

    def request(self, msg: m.AcctmgrRequest, caller: str, uid: int) -> m.AcctmgrReply:
        """One command line by `caller` ("root" for the cluster's admins, whom slurmdbd's
        SlurmUser rights cover). A question the answers sent do not reach waits: nothing is
        kept, and the reply stops at the prompt (racctmgr asks its user, then sends again)."""
        if not self.enabled:
            return OFF
        files = dict(msg.files)
        unreadable = dict(msg.unreadable)

        def read(path: str) -> str:
            if path in files:
                return files[path]
            raise OSError(unreadable.get(path, "No such file or directory"))

        values = {name: True for name in msg.options}
        reply = answer(list(msg.words), values, self.db, msg.stdin, system_knows, caller, read,
                       uid)
        cut = reply.out.find(UNANSWERED)
        if cut >= 0 and not msg.final:
            return m.AcctmgrReply(out=reply.out[:cut + len(PROMPT)], waiting=True)
        if reply.db is not self.db and reply.db != self.db:
            self._keep(reply.db, "accounting changed", " ".join(msg.words), user=msg.user)
        return m.AcctmgrReply(out=reply.out, err=reply.err, rc=reply.rc, files=reply.files)

    def admit(self, words: tuple[str, ...], user: str, account: str,
              partitions: tuple[str, ...], qos: str, reservation: str,
              count: int, ask: Ask | None = None,
              parts: Mapping[str, PartPolicy] | None = None,
              part_enforce: str = "NO",
              groups: Callable[[], Groups] | None = None
              ) -> tuple[str, str, int | None] | str | None:
        """A submission under AccountingStorageEnforce=`words` (assoc/enforce.py): the account
        and QOS the job keeps and the time limit its limits give it (None: keep its own), or
        sbatch's lines refusing it; None when nothing is enforced (the store off, or no
        association flag). `parts`: the partitions' accounting words, refused here under
        EnforcePartLimits=`part_enforce`; `groups`: the jobs not ended by (user, account,
        partition, QOS), for the submit limits."""
        flags = enforce.enforced(words)
        if not self.enabled or "associations" not in flags:
            return None
        got = enforce.check(self.db, flags, cluster=self.cluster, user=user, account=account,
                            partitions=partitions, qos=qos, reservation=reservation,
                            count=count, ask=ask, parts=parts, part_enforce=part_enforce,
                            spent=self.usage, groups=groups, rule_of=self.rule_of(words, parts))
        if isinstance(got, enforce.Refusal):
            return f"{got.reason}\n{got.message}" if got.reason else got.message
        return got.account, got.qos, got.time_limit

    def rule_of(self, words: tuple[str, ...],
                parts: Mapping[str, PartPolicy] | None = None) -> RuleOf | None:
        """Under AccountingStorageEnforce=`words` with `limits`: the limits over a job of
        (user, account, partition, QOS) (assoc/enforce.rule), `parts` the partitions' QOS=
        and Allow/Deny words; the same resolver, remembering what it read, until the tree,
        the usage or the partitions change. None when limits are not enforced (the store off,
        or no `limits` flag)."""
        flags = self._flags.get(words)
        if flags is None:
            flags = self._flags[words] = enforce.enforced(words)
        if not self.enabled or "limits" not in flags:
            return None
        parts = parts or {}
        made = (self.db, self.usage, parts, "safe" in flags)
        if self._rules[1] is not None and all(
                a is b for a, b in zip(self._rules[0], made, strict=True)):
            return self._rules[1]
        db, cluster, spent, safe = self.db, self.cluster, self.usage, "safe" in flags
        known: dict[tuple[str, str, str, str], Rule | None] = {}

        def rule(user: str, account: str, partition: str, qos: str) -> Rule | None:
            key = (user, account, partition, qos)
            try:
                return known[key]
            except KeyError:
                got = known[key] = enforce.rule(
                    db, cluster=cluster, user=user, account=account, partition=partition,
                    qos=qos, part=parts.get(partition), safe=safe, spent=spent)
                return got
        self._rules = (made, rule)
        return rule

    def _keep(self, db: AcctDb, what: str, detail: str, user: str = "") -> None:
        self.db, self.held = db, True
        self.changes.accounts_changed(self._record())
        logs.event(what, command=detail, user=user or "-")

    def _record(self) -> dict[str, Any]:
        """The tree and its usage, one record: each calc period journals both whole (a tree of
        N associations costs about 150 bytes each, its usage about 125 more with the wall and
        per-TRES figures of GrpWall and GrpTRESMins); no usage until the first calc period ran
        (the tree's record as before)."""
        tree = serial.to_json(self.db)
        return tree if self.usage == Usage() else {**tree, "usage": usage.to_json(self.usage)}

    # -- usage (priority/multifactor's decay thread) -----------------------------------------

    async def run_usage(self) -> None:
        """Forever: every PriorityCalcPeriod, accrue and decay (the period is read again each
        time: a reconfigure may change it)."""
        if self.enabled and self.usage == Usage() and self.history is not None:
            # first start with the store on: seed from the job history (read in a thread)
            jobs = await trio.to_thread.run_sync(lambda: list(self.history() if self.history
                                                              else ()))
            self.usage = usage.seeded(self.db, self.cluster, self.settings, jobs, self.wall())
            logs.event("usage seeded from the job history", jobs=len(jobs))
        self.accrue()  # marks the start; usage restored keeps its own last decay time
        while True:
            await trio.sleep(self.settings.calc_period)
            self.accrue()

    def accrue(self) -> None:
        """One calc period over the running jobs; journaled (the decay time with it)."""
        if not self.enabled:
            return
        self.usage = usage.accrue(self.usage, self.db, self.cluster, self.settings,
                                  self.running(), self.wall())
        self.held = True
        self.changes.accounts_changed(self._record())
        self._sample()

    def _sample(self) -> None:
        """The usage of each association (partition-less ones: an account's own and its
        users'), kept for the page's usage over time."""
        got = self.usage.assocs
        row = tuple((a.account, a.user, got.get(a.id, 0.0)) for a in self.db.assocs
                    if a.cluster == self.cluster and not a.partition)
        keep = max(2, min(SAMPLES, SAMPLE_CELLS // max(1, len(row))))
        if self.samples.maxlen != keep:
            self.samples = deque(self.samples, maxlen=keep)
        self.samples.append((self.usage.last_decay or self.wall(), row))

    def sees_all_usage(self, viewer: str) -> bool:
        """PrivateData=usage: whether `viewer` (a user who is not one of the cluster's admins)
        sees every association's usage: AdminLevel Operator or above, as assoc_mgr_get_shares
        lets them; else only their own associations' rows."""
        user = self.db.user(viewer)
        return user is not None and user.admin_level in OPERATORS

    def shares_reply(self, viewer: str = "") -> m.ShareReply:
        """sshare's rows of this cluster (none while the store is off); `viewer`: the user
        PrivateData=usage cuts them for ("": every row), who sees only the rows of their own
        associations unless their AdminLevel lets them see all (Slurm's coordinators, who also
        see their accounts', are not kept: docs/slurm-compat.md)."""
        if not self.enabled:
            return m.ShareReply(cluster=self.cluster)
        running = usage.run_minutes(self.db, self.cluster, self.settings, self.running(),
                                    self.wall())
        every = not viewer or self.sees_all_usage(viewer)
        lines = tuple(m.ShareLine(
            r.depth, r.account, r.user, r.partition, r.id, r.raw_shares, r.norm_shares,
            r.raw_usage, r.norm_usage, r.effective_usage,
            None if math.isinf(r.level_fs) else r.level_fs, r.fairshare, r.grp_tres_mins,
            usage.run_minutes_text(running.get(r.id, {})))
            for r in shares.rows(self.db, self.cluster, self.usage.assocs)
            if every or r.user == viewer)
        return m.ShareReply(True, self.cluster, lines)

    # -- state file ------------------------------------------------------------------------------

    def save_doc(self) -> dict[str, Any] | None:
        """The tree and usage (None: the store was never on, nothing to keep)."""
        return self._record() if self.enabled or self.held else None

    def restore(self, doc: dict[str, Any] | None) -> None:
        """The saved tree; a damaged record refuses the start (integrity.DamagedState), as any
        damaged state does."""
        if doc is None:
            return
        try:
            self.db = serial.from_json(doc)
            self.usage = usage.from_json(doc["usage"]) if "usage" in doc else Usage()
        except ValueError as exc:
            raise DamagedState(self.where, 0, str(exc)) from None
        if self.settings.reset == "NOW":  # PriorityUsageResetPeriod=NOW: cleared at start
            self.usage = usage.reset(self.usage, self.wall())
        self.held = True
        if self.enabled and not any(c.name == self.cluster for c in self.db.clusters):
            logs.event("accounting tree lacks this cluster; adding it", logging.WARNING,
                       cluster=self.cluster)
            self._keep(self.db.add_cluster(self.cluster), "cluster added", self.cluster)

    def journal_records(self, taken: Any) -> list[dict[str, Any]]:
        """The tree's record when `taken` (ctld/state/changelog.py Taken) holds a change."""
        return [] if taken.accounts is None else [{"acct": taken.accounts}]
