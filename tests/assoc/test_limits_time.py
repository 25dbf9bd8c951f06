"""The limits acct_policy.c judges with time and usage (assoc/limits.py): GrpTRESMins against
the decayed usage (and under `safe`, the job's own TRES-minutes), GrpTRESRunMins against the
running jobs' minutes left, GrpWall, MaxTRESMins, a QOS's MinTRESPerJob; the partition's QOS
before the job's unless OverPartQOS; the partition's Allow/Deny words; and DenyOnLimit's
refusal at submission (assoc/submitlimits.py)."""

from __future__ import annotations

import math

import attrs

from ranch.assoc import enforce, ops, submitlimits
from ranch.assoc.db import AcctDb
from ranch.assoc.limits import reason
from ranch.assoc.partpolicy import PartPolicy
from ranch.assoc.tally import Ask, Rule, Tally
from ranch.assoc.usage import Usage


def tree(user: dict[str, str] | None = None, qos: dict[str, dict[str, str]] | None = None,
         flags: dict[str, str] | None = None) -> AcctDb:
    """physics > alice (limits `user`), QOS normal plus each of `qos` (name -> limits), all
    allowed to alice."""
    db = AcctDb.fresh().add_cluster("c1")
    db = ops.add_accounts(db, ("physics",), settings={}).db
    for name, limits in (qos or {}).items():
        if db.qos_named(name) is None:
            db = ops.add_qos(db, (name,), flags=tuple((flags or {}).get(name, "").split(",")
                                                      if name in (flags or {}) else ())).db
        db = ops.modify_qos(db, [name], {}, limits)[0]
    names = ("normal", *(q for q in (qos or {}) if q != "normal"))
    db = ops.add_users(db, ("alice",), ("physics",), default_account="physics",
                       settings=user or {}, qos=names).db
    return db


def rule(db: AcctDb, qos: str = "", part: PartPolicy | None = None, safe: bool = False,
         spent: Usage | None = None) -> Rule:
    got = enforce.rule(db, cluster="c1", user="alice", account="", partition="", qos=qos,
                       part=part, safe=safe, spent=spent)
    assert got is not None
    return got


def judge(r: Rule, ask: Ask, running: tuple[Ask, ...] = (), now: float = 0.0) -> str:
    tally = Tally()
    for a in running:
        tally.add(r, "alice", "physics", a)
    return reason(r, ask, tally, "alice", "physics", now)


def test_run_minutes_count_the_time_left_of_running_jobs() -> None:
    r = rule(tree(user={"GrpTRESRunMins": "cpu=30"}))
    job = Ask(cpus=1, minutes=20, limit=20)
    assert judge(r, job) == ""
    running = attrs.evolve(job, until=20 * 60.0)  # started at 0, ends at 20 minutes
    assert judge(r, job, (running,), now=0.0) == "AssocGrpCPURunMinutesLimit"
    assert judge(r, job, (running,), now=15 * 60.0) == ""  # 5 minutes left: 5 + 20 <= 30
    assert judge(r, Ask(cpus=1, minutes=40, limit=40)) == "AssocGrpCPURunMinutesLimit"
    # a running job without a time limit: INFINITE minutes, as Slurm counts it
    assert judge(r, job, (Ask(cpus=1, until=math.inf),)) == "AssocGrpCPURunMinutesLimit"


def test_tres_minutes_per_job_and_the_qos_minimum() -> None:
    r = rule(tree(user={"MaxTRESMins": "cpu=10"}))
    assert judge(r, Ask(cpus=1, minutes=20, limit=20)) == "AssocMaxCpuMinutesPerJobLimit"
    assert judge(r, Ask(cpus=2, minutes=5, limit=5)) == ""
    assert judge(r, Ask(cpus=1)) == "AssocMaxCpuMinutesPerJobLimit"  # UNLIMITED
    q = rule(tree(qos={"qmin": {"MinTRES": "cpu=2"}}), qos="qmin")
    assert judge(q, Ask(cpus=1, limit=5)) == "QOSMinCpuNotSatisfied"
    assert judge(q, Ask(cpus=2, limit=5)) == ""
    g = rule(tree(qos={"qm": {"MaxTRESMins": "gres/gpu=10"}}), qos="qm")
    assert judge(g, Ask(gpus=1, limit=20)) == "QOSMaxGRESMinutesPerJob"


def test_grp_tres_minutes_against_usage_and_under_safe() -> None:
    db = tree(user={"GrpTRESMins": "cpu=10"})
    own = db.find_assoc("c1", "physics", "alice", "")
    assert own is not None
    job = Ask(cpus=1, minutes=20, limit=20)
    assert judge(rule(db), job) == ""  # not safe: only the usage counts
    used = Usage(assocs={own.id: 11 * 60.0})  # 11 CPU-minutes decayed
    assert judge(rule(db, spent=used), job) == "AssocGrpCPUMinutesLimit"
    assert judge(rule(db, safe=True), job) == "AssocGrpCPUMinutesLimit"
    assert judge(rule(db, safe=True), Ask(cpus=1, minutes=5, limit=5)) == ""
    assert judge(rule(db, safe=True, spent=Usage(assocs={own.id: 6 * 60.0})),
                 Ask(cpus=1, minutes=5, limit=5)) == "AssocGrpCPUMinutesLimit"


def test_grp_wall_under_safe() -> None:
    db = tree(user={"GrpWall": "10"})
    assert judge(rule(db), Ask(minutes=20, limit=20)) == ""
    assert judge(rule(db, safe=True), Ask(minutes=20, limit=20)) == "AssocGrpWallLimit"
    assert judge(rule(db, safe=True), Ask(minutes=5, limit=5)) == ""


def test_partition_qos_first_unless_over_part_qos() -> None:
    qos = {"pq": {"GrpTRES": "cpu=1"}, "qover": {"GrpTRES": "cpu=2"},
           "qplain": {"GrpTRES": "cpu=2"}}
    db = tree(qos=qos, flags={"qover": "OverPartQOS"})
    part = PartPolicy.of("pqos", [("QOS", "pq")])
    one = Ask(cpus=1)
    over, plain = rule(db, "qover", part), rule(db, "qplain", part)
    assert [n for n, _ in over.ordered()] == ["qover", "pq"]
    assert [n for n, _ in plain.ordered()] == ["pq", "qplain"]
    tally = Tally()
    tally.add(over, "alice", "physics", one)  # counts in qover and in pq
    assert reason(over, one, tally, "alice", "physics") == ""  # qover's cpu=2 hides pq's
    assert reason(plain, one, tally, "alice", "physics") == "QOSGrpCpuLimit"
    # a partition whose QOS is the job's own: looked at once
    assert [n for n, _ in rule(db, "pq", part).ordered()] == ["pq"]


def test_partition_allow_and_deny_words() -> None:
    db = tree(qos={"low": {}})
    allow = PartPolicy.of("p", [("AllowAccounts", "chem,bio")])
    assert judge(rule(db, part=allow), Ask()) == ("Job's account not permitted to use this "
                                                  "partition (p allows chem,bio not physics)")
    assert judge(rule(db, part=PartPolicy.of("p", [("AllowAccounts", "ALL")])), Ask()) == ""
    assert judge(rule(db, part=PartPolicy.of("p", [("DenyAccounts", "physics")])),
                 Ask()).endswith("(p denies physics including physics)")
    assert judge(rule(db, "low", PartPolicy.of("p", [("DenyQos", "low")])), Ask()) == \
        "Job's QOS not permitted to use this partition (p denies low including low)"
    assert judge(rule(db, part=PartPolicy.of("p", [("AllowQos", "low")])), Ask()) == \
        "Job's QOS not permitted to use this partition (p allows low not normal)"
    # refused at submission under EnforcePartLimits, in slurm_strerror's words
    got = enforce.check(db, enforce.enforced(["associations"]), cluster="c1", user="alice",
                        account="", partitions=["p"], qos="",
                        parts={"p": allow}, part_enforce="ALL")
    assert got == enforce.Refusal(enforce.INVALID_ACCOUNT)
    got = enforce.check(db, enforce.enforced(["associations"]), cluster="c1", user="alice",
                        account="", partitions=["p"], qos="",
                        parts={"p": allow})
    assert got == enforce.Resolved("physics", "normal")  # NO: it pends instead


def test_deny_on_limit_refuses_at_submit_what_would_pend() -> None:
    limits = {"MaxWall": "10", "MaxTRES": "cpu=1", "MinTRES": "mem=10"}
    db = tree(qos={"qdeny": limits, "qwall": limits}, flags={"qdeny": "DenyOnLimit"})
    deny, plain = rule(db, "qdeny"), rule(db, "qwall")
    long = Ask(cpus=1, mem=20, minutes=20, limit=20)
    assert submitlimits.refusal(deny, long) == "QOSMaxWallDurationPerJobLimit"
    assert submitlimits.refusal(plain, long) == ""
    assert submitlimits.refusal(deny, Ask(cpus=2, mem=20)) == "QOSMaxCpuPerJobLimit"
    assert submitlimits.refusal(deny, Ask(cpus=1, mem=5)) == "QOSMinMemory"
    assert submitlimits.refusal(deny, Ask(cpus=1, mem=20)) == ""  # no time asked: fitted
    # the association's limits too, once the QOS is strict
    db = tree(user={"MaxTRESMins": "cpu=10", "GrpTRES": "cpu=1"},
              qos={"qdeny": {}}, flags={"qdeny": "DenyOnLimit"})
    assert submitlimits.refusal(rule(db, "qdeny"), Ask(cpus=1, minutes=20)) == \
        "AssocMaxCpuMinutesPerJobLimit"
    assert submitlimits.refusal(rule(db, "qdeny"), Ask(cpus=2)) == "AssocGrpCpuLimit"
    assert submitlimits.refusal(rule(db), Ask(cpus=2)) == ""
    got = enforce.check(db, enforce.enforced(["limits"]), cluster="c1", user="alice",
                        account="", partitions=[""], qos="qdeny",
                        ask=Ask(cpus=2))
    assert got == enforce.Refusal(enforce.POLICY, "AssocGrpCpuLimit")


def test_a_job_asking_no_time_gets_the_limits_one() -> None:
    """_validate_time_limit: the first wall limit met sets it; a QOS's MaxWall lowers it after;
    the TRES-minutes limits count only under DenyOnLimit, where every limit lowers it."""
    db = tree(user={"GrpTRESRunMins": "cpu=30"})
    assert submitlimits.fitted(rule(db), Ask(cpus=1)) is None  # measured: UNLIMITED, pends
    db = tree(user={"GrpTRESRunMins": "cpu=30", "MaxWall": "20"})
    assert submitlimits.fitted(rule(db), Ask(cpus=1)) == 20
    db = tree(user={"MaxWall": "20", "GrpWall": "50"})
    assert submitlimits.fitted(rule(db), Ask(cpus=1)) == 50  # GrpWall met first
    db = tree(user={"MaxWall": "20"}, qos={"normal": {"MaxWall": "30", "GrpWall": "25"}})
    assert submitlimits.fitted(rule(db), Ask(cpus=1)) == 25  # the QOS's hides the user's
    strict = {"qd": "DenyOnLimit"}
    db = tree(user={"GrpTRESRunMins": "cpu=30", "MaxWall": "20", "GrpWall": "50"},
              qos={"qd": {}}, flags=strict)
    assert submitlimits.fitted(rule(db, "qd"), Ask(cpus=1)) == 20
    assert submitlimits.fitted(rule(db, "qd"), Ask(cpus=3)) == 10
    assert submitlimits.fitted(rule(tree()), Ask(cpus=1)) is None


def test_submit_caps_count_the_jobs_not_ended_whatever_the_flags() -> None:
    db = tree(user={"GrpSubmitJobs": "2"}, qos={"qs": {"MaxSubmitJobsPerUser": "1"}})
    own = db.find_assoc("c1", "physics", "alice", "")
    assert own is not None
    r = rule(db, "qs")
    one = submitlimits.queued({("alice", "physics", "", "qs"): 1}, lambda *k: r)
    assert one.qos_user[("qs", "alice")] == 1 and one.assoc[own.id] == 1
    assert submitlimits.refusal(r, Ask(), queued=one, user="alice", account="physics") == \
        "QOSMaxSubmitJobPerUserLimit"
    assert submitlimits.refusal(r, Ask(), queued=one, user="bob", account="physics") == ""
    plain = rule(db)
    assert submitlimits.refusal(plain, Ask(), queued=one, user="alice") == ""
    assert submitlimits.refusal(plain, Ask(), count=2, queued=one, user="alice") == \
        "AssocGrpSubmitJobsLimit"
    # through the check: the counts are read only where a submit limit needs them
    asked: list[int] = []

    def groups() -> dict[tuple[str, str, str, str], int]:
        asked.append(1)
        return {("alice", "physics", "", "qs"): 1}
    got = enforce.check(db, enforce.enforced(["limits"]), cluster="c1", user="alice",
                        account="", partitions=[""], qos="qs",
                        ask=Ask(), groups=groups)
    assert got == enforce.Refusal(enforce.POLICY, "QOSMaxSubmitJobPerUserLimit") and asked
    bare = tree()
    asked.clear()
    assert isinstance(enforce.check(bare, enforce.enforced(["limits"]), cluster="c1",
                                    user="alice", account="", partitions=[""], qos="",
                                    ask=Ask(), groups=groups),
                      enforce.Resolved) and not asked


def test_grp_wall_counts_the_wall_run_kept_with_the_usage() -> None:
    """grp_used_wall: each running job's decayed wall seconds (times UsageFactor) up the
    chain and in its QOS, kept in the usage record; GrpWall holds a job once it reaches it."""
    from ranch.assoc import usage
    from ranch.assoc.usage import RunningJob, UsageSettings

    db = tree(user={"GrpWall": "10"})
    own = db.find_assoc("c1", "physics", "alice", "")
    assert own is not None
    flat = UsageSettings(half_life=0)
    ran = [RunningJob("alice", "physics", "", "normal", (("cpu", 4.0),), 0.0)]
    u = usage.accrue(Usage(last_decay=1.0, last_reset=1.0), db, "c1", flat, ran, 541.0)
    assert u.walls[own.id] == 540.0 and u.qos_walls["normal"] == 540.0  # 9 minutes, not x4
    assert u.assocs[own.id] == 2160.0
    assert usage.from_json(usage.to_json(u)) == u
    old = usage.to_json(Usage({3: 1.0}, {}, 1.0, 1.0))
    assert "walls" not in old and usage.from_json(old).walls == {}
    assert judge(rule(db, spent=u), Ask(minutes=5, limit=5)) == ""  # 9 < 10
    later = usage.accrue(u, db, "c1", flat, ran, 601.0)
    assert judge(rule(db, spent=later), Ask(minutes=5, limit=5)) == "AssocGrpWallLimit"
    q = tree(qos={"normal": {"GrpWall": "10"}})
    assert judge(rule(q, spent=Usage(qos_walls={"normal": 600.0})), Ask()) == "QOSGrpWallLimit"


def test_grp_tres_minutes_judge_each_tres_on_its_own_usage() -> None:
    """usage_tres_raw: each TRES's decayed seconds (times UsageFactor) kept with the usage;
    GrpTRESMins=gres/gpu is held on the GPU-minutes, not the CPU's."""
    from ranch.assoc import usage
    from ranch.assoc.usage import RunningJob, UsageSettings

    db = tree(user={"GrpTRESMins": "gres/gpu=10,cpu=1000"})
    own = db.find_assoc("c1", "physics", "alice", "")
    assert own is not None
    ran = [RunningJob("alice", "physics", "", "normal", (("cpu", 1.0), ("gres/gpu", 2.0)), 0.0)]
    u = usage.accrue(Usage(last_decay=1.0, last_reset=1.0), db, "c1", UsageSettings(half_life=0),
                     ran, 301.0)
    assert u.tres[own.id] == {"cpu": 300.0, "gres/gpu": 600.0}  # 5 min x 2 GPUs
    assert usage.from_json(usage.to_json(u)) == u
    gpu = Ask(cpus=1, gpus=1, minutes=1, limit=1)
    assert judge(rule(db, spent=u), gpu) == "AssocGrpGRESMinutes"  # 10 GPU-minutes reached
    assert judge(rule(db, spent=u), Ask(cpus=1, minutes=1, limit=1)) == ""  # asks no GPU
    # a record kept before the TRES: its billing stands in for the CPUs
    old = Usage({own.id: 1000 * 60.0}, {}, 1.0, 1.0)
    assert judge(rule(db, spent=old), Ask(cpus=1)) == "AssocGrpCPUMinutesLimit"
    import pytest

    with pytest.raises(ValueError, match="usage record tres"):
        usage.from_json({**usage.to_json(u), "tres": {str(own.id): {"cpu": -1}}})
    with pytest.raises(ValueError, match="usage record walls"):
        usage.from_json({**usage.to_json(u), "walls": {"1": "x"}})
