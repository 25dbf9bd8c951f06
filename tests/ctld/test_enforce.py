"""AccountingStorageEnforce at submission through an assembled controller: rbatch's refusals in
slurmctld 22.05's words (no field: sbatch prints them bare), DefaultAccount and DefaultQOS filled
in and kept on the job, --test-only refused alike, and nothing checked without the keys."""

from __future__ import annotations

import attrs

from ranch.assoc import enforce, ops, serial
from ranch.assoc.db import AcctDb
from ranch.protocol import messages as m
from tests.ctld.helpers import Cluster, job, make_config, wall

ACCT = "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageEnforce={}"


def tree() -> AcctDb:
    """alice in physics (MaxSubmitJobs=2, DefaultQOS high); bob has no user record."""
    db = AcctDb.fresh().add_cluster("test")
    db = ops.add_qos(db, ("high", "low")).db
    db = ops.add_accounts(db, ("physics",), settings={"MaxSubmitJobs": "2"}).db
    db = ops.add_users(db, ("alice",), ("physics",), default_account="physics").db
    physics = db.base_assoc("physics", "test")
    assert physics is not None
    return ops.modify_assocs(db, [physics], {}, qos=("normal", "high"), def_qos="high")[0]


def cluster(flags: str | None) -> Cluster:
    c = Cluster(make_config(extra=ACCT.format(flags) if flags is not None else ""), wall=wall)
    c.controller.accounts.restore(serial.to_json(tree()))
    return c


def refused(c: Cluster, req: m.SubmitJob) -> str:
    got = c.jobs.submission.submit(req)
    assert isinstance(got, m.Error) and got.field == "", got
    assert c.jobs.will_run.answer(req) == got  # sbatch --test-only answers the same
    return got.message


async def test_no_association_is_invalid_account() -> None:
    c = cluster("associations")
    assert refused(c, job(account="nosuch")) == enforce.INVALID_ACCOUNT
    assert refused(c, attrs.evolve(job(), user="bob")) == enforce.INVALID_ACCOUNT
    assert c.jobs.store.jobs == {}


async def test_default_account_and_default_qos_are_kept_on_the_job() -> None:
    c = cluster("associations,qos")
    got = c.jobs.submission.submit(job())
    assert isinstance(got, m.SubmitReply)
    req = c.jobs.store.jobs[got.job_id].req
    assert (req.account, req.qos) == ("physics", "high")
    rec = c.jobs.listing.record(c.jobs.store.jobs[got.job_id])
    assert (rec["account"], rec["qos"]) == ("physics", "high")


async def test_a_qos_not_allowed_is_invalid_qos() -> None:
    c = cluster("qos")
    assert refused(c, job(qos="low")) == enforce.INVALID_QOS
    assert refused(c, job(qos="nosuch")) == enforce.INVALID_QOS
    assert isinstance(c.jobs.submission.submit(job(qos="normal")), m.SubmitReply)


async def test_max_submit_jobs_refuses_the_third_with_its_reason_line() -> None:
    c = cluster("limits")
    for _ in range(2):
        assert isinstance(c.jobs.submission.submit(job()), m.SubmitReply)
    assert refused(c, job()) == f"AssocMaxSubmitJobLimit\n{enforce.POLICY}"
    assert refused(c, job(array="0-1")) == f"AssocMaxSubmitJobLimit\n{enforce.POLICY}"


async def test_without_enforce_or_without_the_store_nothing_is_checked() -> None:
    for c in (cluster(None), Cluster(make_config(extra="AccountingStorageEnforce=associations"),
                                     wall=wall)):
        got = c.jobs.submission.submit(attrs.evolve(job(account="nosuch", qos="x"), user="bob"))
        assert isinstance(got, m.SubmitReply)
        req = c.jobs.store.jobs[got.job_id].req
        assert (req.account, req.qos) == ("nosuch", "x")
