"""sbatch's further options in the controller (issue 22): placement by Features and
--exclusive=user, dependencies in the scheduling pass, --nice in priority, --test-only's
estimate, MailProg's arguments, and the submit refusals, each naming its field."""

from __future__ import annotations

from ranch.conf.build import parse_config_text
from ranch.protocol import messages as m
from tests.ctld.harness import Harness as Cluster

from .helpers import FakeConn, register, wall

CONF = """\
ClusterName=test
SlurmctldHost=ctl(127.0.0.1)
HeartbeatInterval=10
SlurmdTimeout=60
MailProg=/opt/mailer
MailDomain=example.org
{extra}
NodeName=n1 CPUs=2 RealMemory=1000 Features=intel,ib
NodeName=n2 CPUs=2 RealMemory=1000 Features=amd
PartitionName=main Nodes=n[1-2] Default=YES
"""


def cluster(extra: str = "") -> tuple[Cluster, dict[str, FakeConn], list]:
    spawned: list = []
    c = Cluster(parse_config_text(CONF.format(extra=extra), path="/t.conf"), wall=wall,
                spawn=lambda fn, *args: spawned.append(args))
    conns = {n: register(c, n)[1] for n in ("n1", "n2")}
    return c, conns, spawned


def job(**kw) -> m.SubmitJob:
    base = {"script": "#!/bin/sh\ntrue\n", "user": "alice", "uid": 1000, "gid": 1000,
            "workdir": "/home/a", "time_limit": 10}
    base.update(kw)
    return m.SubmitJob(**base)


def submit(c: Cluster, **kw) -> int:
    reply = c.jobs.submit(job(**kw))
    assert isinstance(reply, m.SubmitReply), reply
    return reply.job_id


def rec(c: Cluster, job_id: int) -> dict:
    return c.jobs.record(c.jobs.jobs[job_id])


def finish(c: Cluster, conns: dict, job_id: int, state: str = "COMPLETED", code: int = 0):
    node = rec(c, job_id)["nodes"]
    c.heartbeat(m.Heartbeat(node, 99 + job_id, m.Metrics(0, 0, 0, 1000),
                            jobs_ended=(m.JobEnd(job_id, state, exit_code=code),)), conns[node])


async def test_features_place_jobs_and_unplaceable_constraints_are_refused() -> None:
    c, _, _ = cluster()
    assert rec(c, submit(c, constraint="amd"))["nodes"] == "n2"
    assert rec(c, submit(c, constraint="(amd|intel)&ib"))["nodes"] == "n1"
    for kw, field, text in (
        ({"constraint": "gpu"}, "constraint", "Invalid feature specification: no node has"),
        ({"constraint": "[a|b]"}, "constraint", "Invalid feature specification: Ranch does"),
        ({"constraint": "intel", "nodelist": "n2"}, "constraint", "n2 lack the features"),
        ({"dependency": "afterok:x"}, "dependency", "Job dependency problem"),
        ({"nice": 2147483646}, "nice", "Invalid --nice value"),
        ({"mail_type": ("SOMETIMES",)}, "mail_type", "Invalid --mail-type"),
        ({"open_mode": "sideways"}, "open_mode", "open_mode must be"),
    ):
        refused = c.jobs.submit(job(**kw))
        assert isinstance(refused, m.Error) and refused.field == field, (kw, refused)
        assert text in refused.message, refused.message
    # who may give a negative nice is the permission gate's to say (tests/ctld/test_nice_right.py)
    assert isinstance(c.jobs.submit(job(nice=-5, uid=0)), m.SubmitReply)


async def test_exclusive_user_keeps_other_users_off_the_node() -> None:
    c, _, _ = cluster()
    a = submit(c, constraint="intel", oversubscribe="USER")
    d = submit(c, constraint="intel")  # alice's own job may share the node
    assert rec(c, a)["nodes"] == rec(c, d)["nodes"] == "n1"
    c.jobs.cancel(m.CancelJobs(job_ids=(d,), uid=0))
    finish(c, {"n1": None}, d, "CANCELLED")
    b = submit(c, constraint="intel", uid=1001, user="bob")  # a free CPU, not for bob
    assert (rec(c, b)["state"], rec(c, b)["reason"]) == ("PENDING", "Resources")
    c.jobs.cancel(m.CancelJobs(job_ids=(b,), uid=0))
    e = submit(c, uid=1001, user="bob", oversubscribe="USER", constraint="amd")
    f = submit(c, constraint="amd")  # alice's job may not join bob's user-exclusive one
    assert rec(c, e)["nodes"] == "n2"
    assert (rec(c, f)["state"], rec(c, f)["reason"]) == ("PENDING", "Resources")
    assert rec(c, a)["oversubscribe"] == "USER"


async def test_nice_lowers_priority() -> None:
    c, _, _ = cluster()
    first = rec(c, submit(c, hold=True))["priority"]
    assert rec(c, submit(c, hold=True, nice=100))["priority"] == first - 1 - 100
    assert rec(c, submit(c, hold=True, nice=-10, uid=0))["priority"] == first - 2 + 10


async def test_dependencies_in_the_pass_and_kill_invalid_depend_by_config() -> None:
    c, conns, spawned = cluster("SchedulerParameters=kill_invalid_depend,bf_continue")
    a = submit(c, name="a")
    ok = submit(c, dependency=f"afterok:{a}", mail_type=("INVALID_DEPEND",))
    keep = submit(c, dependency=f"afterok:{a}", kill_on_invalid_dep=False)
    notok = submit(c, dependency=f"afternotok:{a}")
    assert [rec(c, j)["reason"] for j in (ok, keep, notok)] == ["Dependency"] * 3
    assert rec(c, ok)["dependency"] == f"afterok:{a}(unfulfilled)"
    finish(c, conns, a, "FAILED", code=1)
    assert (rec(c, ok)["state"], rec(c, ok)["reason"]) == ("CANCELLED",
                                                          "DependencyNeverSatisfied")
    assert (rec(c, keep)["state"], rec(c, keep)["reason"]) == ("PENDING",
                                                              "DependencyNeverSatisfied")
    assert rec(c, keep)["dependency"] == f"afterok:{a}(failed)"
    assert rec(c, notok)["state"] == "RUNNING" and rec(c, notok)["dependency"] == "(null)"
    mails = [args for args in spawned if args and args[0][0] == "/opt/mailer"]
    assert [a[0][2] for a in mails] == [f"Slurm Job_id={ok} Name=wrap Invalid dependency"]


async def test_mailprog_is_called_as_slurmctld_calls_it() -> None:
    c, conns, spawned = cluster()
    j = submit(c, name="calc", mail_type=("BEGIN", "END", "FAIL"), comment="x")
    finish(c, conns, j, "COMPLETED")
    k = submit(c, name="bad", mail_type=("END",), mail_user="carol@lab")
    finish(c, conns, k, "FAILED", code=3)  # END only: slurmctld sends none for FAILED
    argvs = [args[0] for args in spawned]
    assert argvs[0][:2] == ["/opt/mailer", "-s"] and argvs[0][3] == "alice@example.org"
    assert argvs[0][2] == f"Slurm Job_id={j} Name=calc Began, Queued time 00:00:00"
    assert argvs[1][2].startswith(f"Slurm Job_id={j} Name=calc Ended, Run time 00:00:")
    assert argvs[1][2].endswith(", COMPLETED, ExitCode 0")
    assert len(argvs) == 2
    env = spawned[1][1]
    assert (env["SLURM_JOB_ID"], env["SLURM_JOB_NAME"], env["SLURM_JOB_STATE"]) == (
        str(j), "calc", "COMPLETED")
    assert env["SLURM_JOB_MAIL_TYPE"] == "Ended" and env["SLURM_JOB_COMMENT"] == "x"


async def test_test_only_answers_when_and_where_and_makes_nothing() -> None:
    from ranch.ctld.jobs.willrun import will_run

    c, _, _ = cluster()
    now = wall()
    reply = will_run(c.jobs, job(num_nodes=2))
    assert isinstance(reply, m.SubmitReply)
    assert (reply.job_id, reply.nodes, reply.cpus, reply.partition) == (1, "n[1-2]", 2, "main")
    assert abs(reply.start_time - now) < 1
    assert c.jobs.jobs == {}
    busy = submit(c, ntasks=2, constraint="amd", time_limit=30)  # n2 full for 30 minutes
    assert rec(c, busy)["nodes"] == "n2"
    reply = will_run(c.jobs, job(constraint="amd"))
    assert reply.nodes == "n2" and abs(reply.start_time - (now + 1800)) < 2
    assert isinstance(will_run(c.jobs, job(constraint="gpu")), m.Error)
