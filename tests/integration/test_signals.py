"""Every signal a service manager or logrotate sends, to each real daemon: alive (or stopped
cleanly for TERM/INT), logged, nothing lost; log files reopened after a rotation."""

from __future__ import annotations

import os
import signal

from ranch.protocol import messages as m

from .cluster import Cluster
from .test_jobs_e2e import job, job_state, jobs_cluster, start, start_node, submit


def _rotate(path: str) -> None:
    os.rename(path, path + ".1")  # logrotate's move; the daemon still writes to the old inode


def test_rctld_signals(tmp_path) -> None:
    with Cluster(tmp_path, ["n1", "n2"], rts=1) as c:
        log = str(tmp_path / "rctld-file.log")
        c.start_ctld("--log-file", log)
        for name in c.node_names:
            c.start_node(name)
        c.wait_for(lambda: c.state("n1") == "IDLE" and c.state("n2") == "IDLE", what="idle")
        assert c.request(m.UpdateNodes("n2", "DRAIN", "sig-test", "alice")).ok
        pid = c.ctld.pid

        # SIGUSR2 (logrotate's postrotate): a new file under the name, the old one finished
        _rotate(log)
        os.kill(pid, signal.SIGUSR2)
        c.wait_for(lambda: os.path.exists(log) and "log file reopened" in open(log).read(),
                   what="log reopened on SIGUSR2")
        assert isinstance(c.request(m.Ping()), m.Pong)

        # SIGHUP: reconfigure (the new config's warnings logged) and reopen the log
        with open(c.conf_path, "a") as f:
            f.write("SchedulerTimeSlice=30\n")  # kept, not acted on: still a valid config
        _rotate(log)
        os.kill(pid, signal.SIGHUP)
        c.wait_for(lambda: os.path.exists(log) and "reconfigured" in open(log).read(),
                   what="reconfigure on SIGHUP")
        assert "SIGHUP: reconfiguring" in open(log + ".1").read()
        # rcontrol reconfigure: the warnings reach the caller
        with open(c.conf_path, "a") as f:
            f.write("HeartbeatIntervall=1\n")  # misspelt: a warning, not an error
        out = c.run_cli("ranch.cli.rcontrol", "reconfigure")
        assert out.returncode == 0, out.stderr
        assert "rcontrol: warning:" in out.stderr and "HeartbeatIntervall" in out.stderr

        # signals nobody should send it: logged and ignored
        for sig in (signal.SIGUSR1, signal.SIGPIPE):
            os.kill(pid, sig)
            c.wait_for(lambda s=sig: f"signal ignored signal={s.name}" in open(log).read(),
                       what=f"{sig.name} logged")
        assert c.ctld.poll() is None

        # SIGINT and SIGTERM: a clean stop with the state saved; the drain survives
        for sig in (signal.SIGINT, signal.SIGTERM):
            c.ctld.send_signal(sig)
            assert c.ctld.wait(15) == 0
            text = open(log).read()
            assert f"shutting down signal={sig.name}" in text and "state saved" in text
            assert text.rstrip().endswith("stopped")
            os.rename(log, log + f".{sig.name}")
            c.start_ctld("--log-file", log)
            rec = c.snapshot()["n2"]
            assert rec["complete"].startswith("IDLE+DRAIN"), rec["complete"]
            assert rec["state"]["reason"]["text"] == "sig-test"
        show = c.run_cli("ranch.cli.rcontrol", "show", "config")
        in_force, _, kept = show.stdout.partition("\nKept as written, not acted on by Ranch:\n")
        assert f"SlurmctldLogFile        = {log}" in in_force, show.stdout
        # a key Ranch keeps but does not act on is never listed as if in force
        assert "SchedulerTimeSlice      = 30" in kept and "SchedulerTimeSlice" not in in_force


def test_rnoded_signals(tmp_path) -> None:
    # SlurmdTimeout 30: the test restarts rnoded twice and a loaded machine took over 3 s
    with Cluster(tmp_path, ["n1"], rts=0, slurmd_timeout=30) as c:
        log = str(tmp_path / "n1-file.log")
        c.start_ctld()
        c.start_node("n1", args=["--log-file", log])
        c.wait_for(lambda: c.state("n1") == "IDLE", what="n1 idle")
        pid = c.nodes["n1"].pid

        _rotate(log)
        os.kill(pid, signal.SIGUSR2)
        c.wait_for(lambda: os.path.exists(log) and "log file" in open(log).read()
                   and "reopened" in open(log).read(), what="rnoded log reopened")

        # SIGHUP: reopen, and register afresh (the config served again)
        _rotate(log)
        os.kill(pid, signal.SIGHUP)
        c.wait_for(lambda: os.path.exists(log)
                   and "registered n1 with the controller" in open(log).read(),
                   what="rnoded registered again on SIGHUP")
        assert "registering afresh" in open(log).read()
        os.kill(pid, signal.SIGPIPE)
        c.wait_for(lambda: "received SIGPIPE: ignored" in open(log).read(), what="SIGPIPE")
        assert c.nodes["n1"].poll() is None and c.state("n1") == "IDLE"

        # SIGINT and SIGTERM stop the daemon, not the node (ReturnToService=0 here: a DOWN
        # node would stay DOWN), and nothing is said to rctld that would DOWN it.
        for sig in (signal.SIGINT, signal.SIGTERM):
            proc = c.nodes.pop("n1")
            proc.send_signal(sig)
            assert proc.wait(15) == 0
            text = open(log).read()
            assert f"received {sig.name}: stopping" in text and text.rstrip().endswith(
                "rnoded n1 stopped")
            assert not c.state("n1").startswith("DOWN")
            os.rename(log, log + f".{sig.name}")
            c.start_node("n1", args=["--log-file", log])
            c.wait_for(lambda: os.path.exists(log)
                       and "registered n1 with the controller" in open(log).read(),
                       what=f"n1 back after {sig.name}")
        assert c.state("n1") == "IDLE"
        assert "node leaving" not in c.log("rctld")


def test_rnoded_restart_under_a_running_job(tmp_path) -> None:
    """systemctl restart rnoded while its job runs: the job runs once, to its end, unrequeued,
    and the node is never DOWN."""
    with jobs_cluster(tmp_path, ["n1"]) as c:
        start(c)
        j = submit(c, "--wrap", "while [ ! -e go ]; do sleep 0.05; done; echo ran")
        c.wait_for(lambda: job_state(c, j) == "RUNNING", what="job running")
        assert c.stop_node("n1") == 0  # SIGTERM
        assert job_state(c, j) == "RUNNING" and not c.state("n1").startswith("DOWN")
        start_node(c, "n1")
        c.wait_for(lambda: c.log("n1").count("registered n1 with the controller") == 2,
                   what="n1 registered again")
        (tmp_path / "go").touch()
        c.wait_for(lambda: job_state(c, j) == "COMPLETED", what="job completed")
        assert job(c, j)["restart_cnt"] == 0
        assert (tmp_path / f"slurm-{j}.out").read_text() == "ran\n"
        assert "new=DOWN" not in c.log("rctld") and c.state("n1") == "IDLE"


def test_rnoded_logs_to_the_served_slurmd_log_file(tmp_path) -> None:
    """SlurmdLogFile reaches the node with its config (%n: the node's name); SIGUSR2 reopens."""
    logs = tmp_path / "nodelogs"
    logs.mkdir()
    with Cluster(tmp_path, ["n1"], extra=f"SlurmdLogFile={logs}/%n.log") as c:
        c.start()
        log = logs / "n1.log"
        c.wait_for(lambda: log.exists() and "registered n1" in log.read_text(),
                   what="rnoded writing to its SlurmdLogFile")
        assert f"logging to {log} (SlurmdLogFile)" in c.log("n1")  # said where it was
        _rotate(str(log))
        os.kill(c.nodes["n1"].pid, signal.SIGUSR2)
        c.wait_for(lambda: log.exists() and "reopened" in log.read_text(), what="reopened")
        show = c.run_cli("ranch.cli.rcontrol", "show", "config").stdout
        assert f"SlurmdLogFile           = {logs}/%n.log" in show
