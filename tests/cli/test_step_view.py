"""The step renderers over fixed records: squeue -s, scontrol show step, sacct's step lines and
rcancel N.S's words. The expected texts are what Slurm 22.05.8 printed for the same steps
(a 2-node job, `srun -n1 sleep 30` running on c1, measured with tests/conformance's private
Slurm); tests/conformance/test_step_listings.py compares the live commands."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.cli import rcancel, sacct_fields, step_view
from ranch.cli.controller import CliError
from ranch.cli.show_records import records_text

START = 1795663423.0  # 2026-11-26T03:23:43 UTC


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def job(**extra) -> dict:
    rec = {"job_id": 1, "state": "RUNNING", "partition": "main", "user": "root", "uid": 0,
           "batch_host": "c1", "start_time": START, "batch_flag": 1, "mem_per_node": 0,
           "steps": [{"id": 0, "name": "sleep", "state": "RUNNING", "nodes": "c1",
                      "num_nodes": 1, "ntasks": 1, "cpus": 1, "start_time": START + 1,
                      "end_time": None, "host": "vm", "exit_code": 0, "signal": 0},
                     {"id": 1, "name": "true", "state": "COMPLETED", "nodes": "c1,c2",
                      "num_nodes": 2, "ntasks": 2, "cpus": 2, "start_time": START + 1,
                      "end_time": START + 2, "host": "vm", "exit_code": 0, "signal": 0}]}
    rec.update(extra)
    return rec


def queue(fmt=None, long=None, header=True, now=START + 19) -> str:
    return step_view.queue_text(step_view.all_steps([job()]), now, fmt_text=fmt,
                                long_text=long, header=header, prog="squeue")


def test_squeue_s_default_lists_running_steps_then_batch() -> None:
    assert queue(now=START + 19) == (
        "         STEPID     NAME PARTITION     USER      TIME NODELIST\n"
        "            1.0    sleep      main     root      0:18 c1\n"
        "        1.batch    batch      main     root      0:19 c1\n")
    assert queue(header=False).startswith("            1.0 ")


def test_squeue_s_o_keeps_an_invalid_letter_and_says_so(capsys) -> None:
    text = queue("%A|%b|%i|%j|%l|%M|%N|%P|%S|%u|%U|%L|%y")
    assert text.splitlines() == [
        "TASKS|TRES_PER_JOB|STEPID|NAME|TIME_LIMIT|TIME|NODELIST|PARTITION|START_TIME|USER|UID|"
        "%L|%y",
        "1|(null)|1.0|sleep|UNLIMITED|0:18|c1|main|2026-11-26T03:23:44|root|0|%L|%y",
        "1|(null)|1.batch|batch|UNLIMITED|0:19|c1|main|2026-11-26T03:23:43|root|0|%L|%y"]
    assert capsys.readouterr().err == (
        "squeue: error: Invalid job step format specification: L\n"
        "squeue: error: Invalid job step format specification: y\n")
    assert queue("%20i|%-5j|%.3u", header=False).splitlines() == [
        "1.0                 |%-5j|roo", "1.batch             |%-5j|roo"]


def test_squeue_s_O_widths_cut_and_unknown_names(capsys) -> None:
    assert queue(long="stepid:8,stepname:.10,stepstate:5").splitlines() == [
        "STEPID        NAMESTATE", "1.0          sleepRUNNI", "1.batch      batchRUNNI"]
    text = queue(long="StepID,StepName,StepState,Nodes,NumTasks,NumCPUs,Name")
    assert text.splitlines()[1].split() == ["1.0", "sleep", "RUNNING", "c1", "1", "1"]
    assert text.splitlines()[2].split() == ["1.batch", "batch", "RUNNING", "c1", "1", "0"]
    assert capsys.readouterr().err == (
        "squeue: error: Invalid job step format specification: Name\n")


def test_no_steps_for_a_job_that_is_not_running() -> None:
    assert step_view.all_steps([job(state="PENDING"), job(job_id=2, state="COMPLETED")]) == []
    assert step_view.all_steps([job(batch_flag=0)])[0]["id"] == "0"  # an allocation: no batch


def test_scontrol_show_step_keys_and_order() -> None:
    steps, missing = step_view.pick([job()], None)
    assert missing is None
    assert records_text([step_view.step_lines(s) for s in steps], one_line=False) == (
        "StepId=1.batch UserId=0 StartTime=2026-11-26T03:23:43 TimeLimit=UNLIMITED\n"
        "   State=RUNNING Partition=main NodeList=c1\n"
        "   Nodes=1 CPUs=0 Tasks=1 Name=batch Network=(null)\n"
        "   TRES=(null)\n"
        "   ResvPorts=(null)\n"
        "   CPUFreqReq=Default\n"
        "   SrunHost:Pid=(null):0\n\n"
        "StepId=1.0 UserId=0 StartTime=2026-11-26T03:23:44 TimeLimit=UNLIMITED\n"
        "   State=RUNNING Partition=main NodeList=c1\n"
        "   Nodes=1 CPUs=1 Tasks=1 Name=sleep Network=(null)\n"
        "   TRES=cpu=1,mem=0,node=1\n"
        "   ResvPorts=(null)\n"
        "   CPUFreqReq=Default Dist=Cyclic\n"
        "   SrunHost:Pid=vm:0\n\n")


def test_scontrol_show_step_missing() -> None:
    assert step_view.pick([job()], "1.7") == ([], "Job step 1.7 not found")
    assert step_view.pick([job(state="COMPLETED")], "1") == ([], "Job step 1. not found")
    assert step_view.pick([job()], "9.0")[1] == ("slurm_get_job_steps error: Invalid job id "
                                                 "specified")
    assert step_view.pick([], None) == ([], "No job steps in the system")


def test_sacct_step_lines_under_the_job_and_alone() -> None:
    rec = job(state="COMPLETED", end_time=START + 5, exit_code=0, signal=0, name="stepjob",
              node_count=2, nodes="c1,c2", cpus=2)
    rec["steps"][0].update(state="FAILED", exit_code=3, end_time=START + 4)
    fields = [("JobID", -12), ("JobName", 10), ("State", 10), ("ExitCode", 8),
              ("Elapsed", 10), ("NodeList", 15), ("NTasks", 8)]
    rows = sacct_fields.rows([rec], fields, START + 9, steps=True)
    assert rows == [
        ["1", "stepjob", "COMPLETED", "0:0", "00:00:05", "c1,c2", ""],
        ["1.batch", "batch", "COMPLETED", "0:0", "00:00:05", "c1", "1"],
        ["1.0", "sleep", "FAILED", "3:0", "00:00:03", "c1", "1"],
        ["1.1", "true", "COMPLETED", "0:0", "00:00:01", "c1,c2", "2"]]
    assert sacct_fields.rows([rec], fields, START + 9, steps=False) == rows[:1]
    assert sacct_fields.value("DerivedExitCode", rec, START) == "3:0"
    only = {**rec, "_only_steps": {"1"}}
    assert sacct_fields.rows([only], fields, START + 9, steps=True) == rows[3:]


def test_rcancel_step_words_and_exit_codes() -> None:
    assert rcancel.split_steps(["12.1,13", "14.0"]) == [(12, 1), (14, 0)]
    for bad in ("12.x", "abc.0", "12.batch"):
        with pytest.raises(CliError, match=f"^Invalid job id {bad}$"):
            rcancel.split_steps([bad])
    assert rcancel.step_error_code(
        "Kill job error on job step id 12: Invalid job id specified") == 225
    assert rcancel.step_error_code("Kill job error on job step id 12: Invalid user id") == 218
    assert rcancel.step_error_code(
        "Kill job error on job step id 12.1: Invalid job id specified") == 1
    assert rcancel.step_error_code("Kill job error on job id 12: Invalid job id specified") == 1


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="%.0123456789ijNALMPSuUx \n-", max_size=20))
def test_step_format_tokens_read_as_the_regular_expression_did(text: str) -> None:
    import re

    from ranch.cli.step_view import _tokens

    expected = [(m.start(), m.end(), m.group(1), m.group(2))
                for m in re.finditer(r"%(\.?\d*)(.?)", text)]
    assert list(_tokens(text)) == expected
