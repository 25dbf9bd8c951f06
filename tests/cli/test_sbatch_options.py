"""rbatch reads sbatch 22.05's options as sbatch does: getopt_long on the command line, the
same words on `#SBATCH` lines, SBATCH_* input variables, sbatch's precedence between them,
and what each value turns into in the request (per-node figures, the job's environment)."""

from __future__ import annotations

import os
import signal

import pytest

from ranch.cli import sbatch_options as so
from ranch.cli import sbatch_request as sr
from ranch.cli import sbatch_values as sv
from ranch.cli.controller import CliError
from ranch.cli.job_export import exported
from ranch.cli.rbatch import gather

SCRIPT = "#!/bin/sh\n#SBATCH -J fromscript\n#SBATCH --time=5 # a comment\n#SBATCH -p script\n" \
         "\n# not an option line\necho hi\n#SBATCH -J ignored\n"


def request(argv: list[str], env: dict[str, str] | None = None, tmp_path=None) -> dict:
    """The SubmitJob body rbatch would send for this command line and environment."""
    values, cli, args, script, command = gather(argv, dict(env or {}))
    sr.memory_choice(values, cli)
    return sr.body(values, script, command, args, dict(env or {}))


# -- getopt_long, as sbatch reads its words ------------------------------------------------


def test_optional_arguments_attach_only_with_equals() -> None:
    values, rest = so.parse(["--exclusive", "job.sh", "--exclusive=user"])
    assert values == {"exclusive": None} and rest == ["job.sh", "--exclusive=user"]
    values, rest = so.parse(["--exclusive=user", "--nice", "--get-user-env=60L", "x"])
    assert values == {"exclusive": "user", "nice": None, "get-user-env": "60L"}


def test_unique_prefixes_short_clusters_and_the_first_word_ends_options() -> None:
    values, rest = so.parse(["--ntasks-per-n=2", "-HN2", "-c", "3", "--sig", "B:USR2@30",
                             "job.sh", "-N", "9"])
    assert values == {"ntasks-per-node": "2", "hold": True, "nodes": "2", "cpus-per-task": "3",
                      "signal": "B:USR2@30"}
    assert rest == ["job.sh", "-N", "9"]  # the script's own arguments
    assert so.parse(["--", "-x"])[1] == ["-x"]


@pytest.mark.parametrize(("words", "message"), [
    (["--frobnicate"], "unrecognized option '--frobnicate'"),
    (["--n=3"], "option '--n' is ambiguous; possibilities:"),
    (["--hold=yes"], "option '--hold' doesn't allow an argument"),
    (["-N"], "option requires an argument -- 'N'"),
    (["--partition"], "option '--partition' requires an argument"),
    (["-Z"], "invalid option -- 'Z'"),
])
def test_getopt_refusals_name_the_option(words: list[str], message: str) -> None:
    with pytest.raises(so.OptionError, match=message.replace("(", r"\(").replace("'", "'")):
        so.parse(words)


def test_every_sbatch_22_05_option_is_accepted() -> None:
    # those Ranch has nothing to act on are read and set aside, never refused
    words = ["--acctg-freq=task=30", "--bb=x", "--cluster-constraint=a", "-M", "c1",
             "--container=/c", "--contiguous", "--core-spec=1", "--cores-per-socket=2",
             "--cpu-freq=low", "--deadline=now+1hour", "--delay-boot=5", "-m", "block",
             "--export-file=/dev/null", "-B", "1:2:1", "--gpu-bind=closest", "--gpu-freq=low",
             "--gres-flags=enforce-binding", "--ignore-pbs", "-L", "lic:1", "--mcs-label=x",
             "--mem-bind=local", "--mincpus=2", "--network=x", "-k", "--ntasks-per-core=1",
             "--ntasks-per-gpu=1", "--ntasks-per-socket=1", "-O", "--power=level",
             "--prefer=x", "--priority=5", "--profile=all", "--propagate", "--reboot",
             "--reservation=r", "--sockets-per-node=1", "--spread-job", "--switches=1",
             "--thread-spec=1", "--threads-per-core=1", "--time-min=5", "--tmp=10",
             "--use-min-nodes", "-v", "--wait-all-nodes=1", "script.sh"]
    values, rest = so.parse(words)
    assert rest == ["script.sh"] and "reservation" in values


# -- where options come from ---------------------------------------------------------------


def test_command_line_beats_variables_beat_script_lines(tmp_path, monkeypatch) -> None:
    script = tmp_path / "job.sh"
    script.write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    body = request([str(script)])
    assert (body["name"], body["partition"], body["time_limit"]) == ("fromscript", "script", 5)
    body = request([str(script)], {"SBATCH_PARTITION": "env", "SBATCH_JOB_NAME": "envname"})
    assert (body["name"], body["partition"]) == ("envname", "env")
    body = request(["-p", "cli", str(script)], {"SBATCH_PARTITION": "env"})
    assert body["partition"] == "cli"


def test_sbatch_flag_variables_follow_sbatchs_rule(monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    # empty, "yes" or a non-zero number sets a flag; anything else leaves it unset
    for text, want in (("", False), ("yes", False), ("1", False), ("0", True), ("no", True)):
        body = request(["--wrap", "x"], {"SBATCH_NO_REQUEUE": text})
        assert body["requeue"] is want, text
    body = request(["--wrap", "x"], {"SBATCH_EXCLUSIVE": "user", "SBATCH_WCKEY": "Proj",
                                     "SBATCH_ACCOUNT": "Physics", "SBATCH_QOS": "high",
                                     "SBATCH_SIGNAL": "B:USR1@30", "SLURM_HINT": "nomultithread",
                                     "SBATCH_OPEN_MODE": "append", "SBATCH_TIMELIMIT": "1:00"})
    assert body["oversubscribe"] == "USER" and body["exclusive"] is False
    assert (body["wckey"], body["account"], body["qos"]) == ("proj", "physics", "high")
    assert (body["warn_signal"], body["warn_time"], body["warn_batch"]) == (
        signal.SIGUSR1, 30, True)
    assert (body["hint"], body["open_mode"], body["time_limit_s"]) == (
        "nomultithread", "append", 60)


def test_script_lines_take_no_command_line_only_options(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH --wrap=hostname\n")
    with pytest.raises(CliError, match="--wrap is not allowed in a batch script"):
        request([str(script)])
    script.write_text("#!/bin/sh\n#SBATCH --bogus\n")
    with pytest.raises(CliError, match=r"unrecognized option '--bogus' \(script line 2\)"):
        request([str(script)])


# -- what values mean ----------------------------------------------------------------------


@pytest.mark.parametrize(("text", "want"), [
    ("USR2", (signal.SIGUSR2, 60, False)),
    ("USR2@90", (signal.SIGUSR2, 90, False)),
    ("B:USR2@30", (signal.SIGUSR2, 30, True)),
    ("B:SIGUSR1", (signal.SIGUSR1, 60, True)),
    ("R:10@5", (10, 5, False)),
    ("RB:TERM@1", (signal.SIGTERM, 1, True)),
    ("BR:TERM@1", (signal.SIGTERM, 1, True)),
])
def test_signal_specs(text: str, want: tuple) -> None:
    assert sv.parse_signal(text) == want


@pytest.mark.parametrize("text", ["USR9", "USR2@x", "USR2@70000", "B:"])
def test_bad_signal_specs_are_refused(text: str) -> None:
    with pytest.raises(CliError, match="Invalid --signal specification"):
        sv.parse_signal(text)


def test_mail_types_nice_exclusive_open_mode_and_kill_on_invalid() -> None:
    assert sv.mail_types("begin,END") == ("BEGIN", "END")
    assert "INVALID_DEPEND" in sv.mail_types("ALL") and sv.mail_types("NONE") == ()
    with pytest.raises(CliError, match="Invalid --mail-type"):
        sv.mail_types("SOMETIMES")
    assert (sv.nice_value(None), sv.nice_value("5"), sv.nice_value("-3")) == (100, 5, -3)
    with pytest.raises(CliError, match="out of range"):
        sv.nice_value("9999999999")
    assert sv.exclusive(None) == (True, "") and sv.exclusive("user") == (False, "USER")
    assert sv.exclusive("mcs") == (False, "MCS")
    with pytest.raises(CliError, match="Invalid --exclusive"):
        sv.exclusive("everyone")
    assert (sv.open_mode("a"), sv.open_mode("Truncate")) == ("append", "truncate")
    assert (sv.kill_on_invalid("YES"), sv.kill_on_invalid("no")) == (True, False)
    with pytest.raises(CliError):
        sv.kill_on_invalid("maybe")


def test_per_task_and_per_gpu_forms_become_per_node_figures(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    b = request(["-N", "2", "--ntasks-per-node=3", "-c", "2", "--mem-per-cpu=100M",
                 "--wrap", "x"])
    # sbatch: -N 2 --ntasks-per-node 3 is 6 tasks, 3 on each node; memory per CPU x CPUs; -N 2
    # is 2-2 (verify_node_count: the maximum is the minimum)
    assert (b["num_nodes"], b["max_nodes"], b["ntasks"], b["cpus_per_task"]) == (2, 2, 6, 2)
    assert (b["mem_mib"], b["mem_per_cpu"], b["ntasks_per_node"]) == (600, 100, 3)
    b = request(["-n", "4", "--ntasks-per-node=2", "--wrap", "x"])
    assert (b["num_nodes"], b["max_nodes"], b["ntasks"]) == (2, None, 4)
    b = request(["--gpus-per-task=1", "-n", "2", "--cpus-per-gpu=4", "--mem-per-gpu=1G",
                 "--wrap", "x"])
    assert (b["gpus"], b["cpus_per_task"], b["mem_mib"]) == (2, 4, 2048)
    b = request(["--gpus-per-node=a100:2", "--cpus-per-gpu=3", "--wrap", "x"])
    assert (b["gpus"], b["cpus_per_task"], b["cpus_per_gpu"]) == (2, 6, 3)


def test_memory_options_exclude_one_another(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CliError, match="mutually exclusive"):
        request(["--mem=1G", "--mem-per-cpu=1G", "--wrap", "x"])
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH --mem=4G\n")
    with pytest.raises(CliError, match="mutually exclusive"):  # script lines count as words
        request(["--mem-per-cpu=10", str(script)])
    b = request(["--mem-per-cpu=10", "--wrap", "x"], {"SBATCH_MEM_PER_NODE": "4G"})
    assert (b["mem_mib"], b["mem_per_cpu"]) == (10, 10)  # the words win over a variable
    with pytest.raises(CliError, match="mutually exclusive"):
        request(["--wrap", "x"], {"SBATCH_MEM_PER_NODE": "4G", "SBATCH_MEM_PER_CPU": "1G"})


def test_export_builds_the_job_environment_as_sbatch_does() -> None:
    env = {"HOME": "/h", "EDITOR": "vi", "SLURM_CONF": "/etc/s.conf", "SLURMX": "1"}
    assert exported(None, env) == env and exported("all", env) == env
    assert exported("NONE", env) == {"SLURM_CONF": "/etc/s.conf", "SLURMX": "1"}
    got = exported("EDITOR,ARG1=test,MISSING", env)
    assert got == {"EDITOR": "vi", "ARG1": "test", "SLURM_CONF": "/etc/s.conf"}
    # tokens apply in order, a later one overwriting (src/common/env.c env_merge_filter)
    assert exported("ALL,EDITOR=emacs", env)["EDITOR"] == "emacs"
    assert exported("EDITOR=emacs,ALL", env)["EDITOR"] == "vi"
    assert exported("'A=1,2',B", {"B": "b"}) == {"A": "1,2", "B": "b"}


def test_export_and_options_set_slurm_variables_in_the_job(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = {"HOME": "/h", "EDITOR": "vi"}
    b = request(["--export=NONE", "--open-mode=append", "-d", "afterok:3",
                 "--ntasks-per-node=2", "--wrap", "x"], env)
    got = dict(b["env"])
    assert "HOME" not in got and "EDITOR" not in got
    assert got["SLURM_EXPORT_ENV"] == "NONE" and got["SLURM_OPEN_MODE"] == "a"
    assert got["SLURM_JOB_DEPENDENCY"] == "afterok:3" and got["SLURM_NTASKS_PER_NODE"] == "2"
    assert got["SLURM_GET_USER_ENV"] == "1"  # NONE implies --get-user-env in sbatch 22.05
    assert b["export"] == "NONE"
    # sbatch 22.05 takes NONE with variables: those alone (measured: FOO=z reaches the job)
    got = dict(request(["--export=NONE,FOO=z,EDITOR", "--wrap", "x"], env)["env"])
    assert got["FOO"] == "z" and got["EDITOR"] == "vi" and "HOME" not in got


def test_options_with_nothing_to_act_on_are_kept(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    b = request(["-A", "Physics", "-q", "normal", "--wckey=W", "--comment", "a note",
                 "--hint=compute_bound", "--get-user-env=10L", "--mail-type=END",
                 "--mail-user=me@example.org", "--kill-on-invalid-dep=yes", "--nice=7",
                 "-C", "intel&ib", "-d", "singleton", "--test-only", "-i", "in-%j",
                 "--wrap", "x"])
    assert (b["account"], b["qos"], b["wckey"], b["comment"]) == (
        "physics", "normal", "w", "a note")
    assert (b["hint"], b["get_user_env"], b["mail_type"], b["mail_user"]) == (
        "compute_bound", "10L", ["END"], "me@example.org")
    assert (b["kill_on_invalid_dep"], b["nice"], b["constraint"], b["dependency"]) == (
        True, 7, "intel&ib", "singleton")
    assert b["test_only"] is True and b["input"] == "in-%j"
    assert b["workdir"] == os.getcwd()


# -- the value matrix's findings (issue 34), each as Slurm 22.05's source reads it ---------------


def test_node_counts_read_as_verify_node_count() -> None:
    # proc_args.c: no digits is -1 (a missing minimum is 1, a missing maximum refused), k and m
    # multiply, nothing but white space may follow
    assert [so.node_count(t) for t in ("2", "0", "0-1", "-1", "1k", " 3", "2-2")] == [
        (2, 2), (0, 0), (0, 1), (1, 1), (1024, 1024), (3, 3), (2, 2)]
    for text, said in (("", '"" is not a valid node count'),
                       ("1-", "Maximum node count -1 is less than minimum node count 1"),
                       ("1-2-3", '"2-3" is not a valid node count'),
                       ("2-1", "Maximum node count 1 is less than minimum node count 2")):
        with pytest.raises(CliError, match=said) as exc:
            so.node_count(text)
        assert exc.value.code == 255  # slurm_process_option_or_exit: exit(-1)


def test_an_empty_optional_value_is_the_bare_option() -> None:
    # slurm_process_option turns "" into NULL for optional arguments: --nice= is --nice
    values, _ = so.parse(["--nice=", "--exclusive=", "x"])
    assert values == {"nice": None, "exclusive": None}
    assert sv.nice_value(values["nice"]) == 100


def test_signal_numbers_and_times_as_get_signal_opts() -> None:
    assert sv.parse_signal("65") == (65, 60, False)  # any 16-bit number, as Slurm keeps it
    assert sv.parse_signal("USR1@") == (int(signal.SIGUSR1), 0, False)  # strtol of "" is 0
    assert sv.parse_signal("B:USR1@+30") == (int(signal.SIGUSR1), 30, True)
    for bad in ("0", "USR1@-1", "USR1@30x", "@30"):
        with pytest.raises(CliError):
            sv.parse_signal(bad)


def test_blank_values_are_kept_apart_from_unset(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    b = request(["-A", "", "-J", "", "--mem-per-gpu=0", "--comment=x", "-o", "", "-D", "",
                 "--wrap", "x"])
    assert set(b["given_blank"]) == {"account", "job-name", "mem-per-gpu"}
    # make_full_path: the directory, "/" and the word; -o '' is that directory itself
    assert b["workdir"] == f"{tmp_path}/" and b["stdout"] == f"{tmp_path}//"
    assert request(["--wrap", "x"])["given_blank"] == ()
    with pytest.raises(CliError, match=r"Invalid partition name specified: \(null\)"):
        request(["-p", "", "--wrap", "x"])
    assert request(["-p", "main,main", "--wrap", "x"])["partition"] == "main"


def test_values_are_refused_before_the_script_is_looked_for() -> None:
    # `sbatch -N job.sh` reads job.sh as the node count: exit 255, not a missing script
    for argv in (["-N", "job.sh"], ["-t", "job.sh"], ["-b", "job.sh"]):
        with pytest.raises(CliError) as exc:
            gather(argv, {})
        assert exc.value.code == 255, argv


def test_srun_reads_its_words_as_getopt_long_and_parse_int() -> None:
    from ranch.cli.srun_options import getopt_words

    assert getopt_words(["--jobi=2", "--exclus=", "--overlap=1", "--ki=0", "-n", "2", "a"]) == [
        "--jobid=2", "--exclusive", "--overlap", "--kill-on-bad-exit-value=0", "-n", "2", "a"]
    assert getopt_words(["--exclusive=user", "--se=x", "a"]) == ["--send-libs=x", "a"]
    for argv, said, code in ((["-c", "0", "a"], 'Invalid numeric value "0" for --cpus-per-task',
                              1),
                             (["--ntasks=2 ", "a"], 'Invalid numeric value "2 " for --ntasks', 1),
                             (["--wait=1.5", "a"], 'Invalid numeric value "1.5" for --wait', 1),
                             (["--exclusive=root", "a"], "Invalid --exclusive specification", 255),
                             (["--in=x", "a"], "'--in' is ambiguous; possibilities: '--input' "
                              "'--interactive'", 255)):
        with pytest.raises(CliError, match=said) as exc:
            getopt_words(argv)
        assert exc.value.code == code, argv


def test_never_more_nodes_than_tasks(tmp_path, monkeypatch, capsys) -> None:
    # sbatch's _opt_verify: -N 2 -n 1 is one node, with its warning; -N 1-4 -n 2 at most two
    monkeypatch.chdir(tmp_path)
    b = request(["-N", "2", "-n", "1", "--wrap", "x"])
    assert (b["num_nodes"], b["max_nodes"], b["ntasks_given"]) == (1, 1, True)
    assert "can't run 1 processes on 2 nodes, setting nnodes to 1" in capsys.readouterr().err
    b = request(["-N", "1-4", "-n", "2", "--wrap", "x"])
    assert (b["num_nodes"], b["max_nodes"]) == (1, 2)
    assert request(["-N", "2", "--wrap", "x"])["ntasks_given"] is False


def test_the_script_is_found_as_sbatch_finds_it(tmp_path, monkeypatch) -> None:
    # opt.c search_path: -D's directory first, then PATH; ./ and / paths as typed
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "job.sh").write_text("#!/bin/sh\necho top\n")
    (tmp_path / "sub" / "job.sh").write_text("#!/bin/sh\necho sub\n")
    b = request(["-D", "sub", "job.sh"])
    assert b["command"] == f"{tmp_path}/sub/job.sh" and "echo sub" in b["script"]
    assert request(["job.sh"])["command"] == f"{tmp_path}/job.sh"
    assert request(["./job.sh"])["command"] == "./job.sh"
    b = request(["-D", "nosuch", "job.sh"])  # found nowhere: read from here, shown as typed
    assert b["command"] == "job.sh" and "echo top" in b["script"]
