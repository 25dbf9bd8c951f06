"""A private, real Slurm on loopback: its own munged (own key, own socket), one slurmctld and one
slurmd per node, everything under one temporary directory that is removed afterwards.

    with SlurmCluster(SHAPE) as s:      # raises SlurmUnavailable (with the reason) if it cannot
        s.run("sbatch", "--wrap", "true")

It never reads or writes /etc/slurm or /etc/munge and never talks to a system munged: the
commands find everything through SLURM_CONF, whose AuthInfo=socket= names our munged.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests import logkeeper
from tests.conformance.shape import Shape
from tests.integration.cluster import free_port

DAEMONS = ("munged", "slurmctld", "slurmd")
COMMANDS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo", "sacct")
VERSION = "22.05"  # the release whose behaviour Ranch mirrors
# Requeued jobs wait cred_expire + 1 s before they may start again (default 1200 s); 5 is the
# smallest value Slurm takes.
CRED_EXPIRE = 5
# the suite's scheduler: a pass a second, so tests see jobs start in about a second
BUILTIN = "SchedulerType=sched/builtin\nSchedulerParameters=sched_interval=1\n"

SLURM_ONLY_CONF = """\
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket},cred_expire={cred_expire}
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool/%n
SlurmctldPidFile={dir}/run/slurmctld.pid
SlurmdPidFile={dir}/run/slurmd-%n.pid
SlurmctldLogFile={dir}/log/slurmctld.log
SlurmdLogFile={dir}/log/slurmd-%n.log
PlugStackConfig={dir}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={dir}/log/jobcomp.txt
{scheduler}MessageTimeout=5
ReturnToService=2
SlurmctldDebug=info
SlurmdDebug=info
"""


class SlurmUnavailable(Exception):
    """Why a private Slurm cannot run here (the suite skips and says this)."""


def _find(program: str) -> str | None:
    path = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin:/sbin:/usr/local/sbin"
    return shutil.which(program, path=path)


def slurm_missing() -> str | None:
    """The reason a private Slurm cannot start on this machine, or None."""
    missing = [p for p in (*DAEMONS, *COMMANDS) if _find(p) is None]
    if missing:
        return (f"Slurm/munge not installed (missing {', '.join(missing)}); on Debian: "
                "apt-get install slurm-wlm munge")
    if os.geteuid() != 0:
        return "slurmd runs jobs as their users and so must run as root; these tests are not root"
    try:
        # the daemons answer -V without a config (the commands want one first)
        out = subprocess.run([_find("slurmctld"), "-V"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"slurmctld -V failed: {exc}"
    if not re.fullmatch(rf"slurm(-wlm)? {re.escape(VERSION)}\.\d+", out):
        return f"found {out or 'an unknown Slurm'}; this suite's expectations are Slurm {VERSION}'s"
    return None


class SlurmCluster:
    name = "slurm"

    def __init__(self, shape: Shape, accounting: bool = False, extra_conf: str = "",
                 slurmd_args: tuple[str, ...] = (),
                 node_env: dict[str, dict[str, str]] | None = None,
                 scheduler: str = BUILTIN, munged_per_role: bool = False) -> None:
        self.shape = shape
        self.scheduler = scheduler  # slurm.conf's SchedulerType/SchedulerParameters lines
        self.accounting = accounting  # a private MariaDB + slurmdbd (tests/conformance/slurmdbd.py)
        # slurm.conf lines of one test's own, slurmd's options (-b) and each slurmd's environment
        self.extra_conf = extra_conf
        self.slurmd_args = slurmd_args
        self.node_env = node_env or {}
        # The benches' exact count of what MUNGE costs the controller: slurmctld and the slurmds
        # each get a munged of their own (same key; each reads its own slurm.conf, which differs
        # only in AuthInfo's socket), and the commands keep `munged`. munged-ctld then does just
        # what slurmctld asks: the checks of what it receives, the credentials of what it sends
        # and of each job; Ranch makes and checks its MACs inside rctld.
        self.munged_per_role = munged_per_role and not accounting
        self.dir = Path(tempfile.mkdtemp(prefix="ranch-conformance-slurm-"))
        logkeeper.watch(self.dir)  # kept if a test fails while this cluster runs
        # munged refuses a socket in a directory others cannot search
        self.dir.chmod(0o755)
        self.workdir = self.dir / "work"
        self.conf = self.dir / "slurm.conf"
        self.munge_socket = self.dir / "run" / "munge.sock"
        self.procs: dict[str, subprocess.Popen] = {}

    # -- the daemons -----------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> None:
        reason = slurm_missing()
        if reason:
            raise SlurmUnavailable(reason)
        for sub, mode in (("munge", 0o700), ("run", 0o755), ("state", 0o700), ("log", 0o755),
                          ("work", 0o755)):
            (self.dir / sub).mkdir(mode=mode)
            (self.dir / sub).chmod(mode)  # past the umask
        for node in self.shape.nodes:
            (self.dir / "spool" / node).mkdir(parents=True)
        key = self.dir / "munge" / "munge.key"
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(1024))
        (self.dir / "plugstack.conf").write_text("")  # not /etc/slurm's
        ports = {n: free_port() for n in self.shape.nodes}
        text = SLURM_ONLY_CONF
        if self.accounting:
            from tests.conformance.slurmdbd import Accounting, slurm_conf_lines

            dbd = Accounting(self, free_port(), free_port())
            text = text.replace("AccountingStorageType=accounting_storage/none\n",
                                slurm_conf_lines(dbd.dbd_port, self.munge_socket))
        ctld_port = free_port()

        def conf_text(munge_socket: Path) -> str:
            return (text.format(ctld_port=ctld_port, munge_socket=munge_socket,
                                cred_expire=CRED_EXPIRE, dir=self.dir, scheduler=self.scheduler)
                    + self.extra_conf
                    + self.shape.global_conf()
                    + self.shape.nodes_conf({n: f"NodeHostname=localhost NodeAddr=127.0.0.1 "
                                                f"Port={p}" for n, p in ports.items()}))

        self.conf.write_text(conf_text(self.munge_socket))
        for role in self.roles():
            socket_path = self.dir / "run" / f"{role}.sock"
            # the files differ in AuthInfo alone; slurmctld would log each slurmd's as different
            self.role_conf(role).write_text(conf_text(socket_path) + "DebugFlags=NO_CONF_HASH\n")
            self._start_munged(role, socket_path, key)
        self._start_munged("munged", self.munge_socket, key)
        if self.accounting:
            dbd.start(timeout)
        self._spawn("slurmctld", [_find("slurmctld"), "-D", "-f",
                                  str(self.role_conf("munged-ctld"))])
        self._wait(lambda: self.run("scontrol", "ping").returncode == 0, timeout,
                   "slurmctld to answer scontrol ping")
        for node in self.shape.nodes:
            self.start_slurmd(node)
        self._wait(self.nodes_idle, timeout, "every slurmd to register IDLE")

    def roles(self) -> tuple[str, ...]:
        """The munged daemons of their own (named as in `procs`), beside the commands' `munged`."""
        return ("munged-ctld", "munged-node") if self.munged_per_role else ()

    def role_conf(self, role: str) -> Path:
        """The slurm.conf of the daemons that `role`'s munged serves (`conf` without roles)."""
        return self.dir / f"slurm-{role}.conf" if role in self.roles() else self.conf

    def _start_munged(self, name: str, socket_path: Path, key: Path) -> None:
        m = self.dir / "munge"
        self._spawn(name, [_find("munged"), "--foreground", f"--socket={socket_path}",
                           f"--key-file={key}", f"--pid-file={self.dir}/run/{name}.pid",
                           f"--log-file={m}/{name}.log", f"--seed-file={m}/{name}.seed"])
        self._wait(socket_path.exists, 10, f"{name}'s socket")

    def start_slurmd(self, node: str) -> None:
        self._spawn(f"slurmd-{node}", [_find("slurmd"), "-D", *self.slurmd_args, "-f",
                                        str(self.role_conf("munged-node")), "-N", node],
                    self.node_env.get(node))

    def _spawn(self, name: str, argv: list[str], extra_env: dict[str, str] | None = None) -> None:
        with open(self.dir / "log" / f"{name}.stderr", "ab") as log:
            self.procs[name] = subprocess.Popen(argv, env=self.env() | (extra_env or {}),
                                                stdout=log,
                                                stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL)

    def nodes_idle(self) -> bool:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %t").stdout.split()
        # a node in two partitions (a test's extra_conf) is listed once for each
        return dict(zip(out[::2], out[1::2], strict=True)) == dict.fromkeys(self.shape.nodes,
                                                                            "idle")

    def _wait(self, pred, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise SlurmUnavailable(f"{', '.join(dead)} exited while waiting for {what}:\n"
                                       + self.log_tail())
            if pred():
                return
            time.sleep(0.1)
        raise SlurmUnavailable(f"timed out after {timeout:g} s waiting for {what}:\n"
                               + self.log_tail())

    def log_tail(self, chars: int = 2000) -> str:
        """The ends of the daemons' logs, slurmctld's and slurmd's first."""
        logs = self.dir / "log"
        paths = [logs / "slurmctld.log", *sorted(logs.glob("slurmd-*.log")),
                 *sorted(logs.glob("*.stderr")), self.dir / "munge" / "munged.log"]
        return "\n".join(f"--- {p.name} ---\n{p.read_text(errors='replace')[-chars:]}"
                         for p in paths if p.is_file())

    def stop(self) -> None:
        """Cancel every job, stop the daemons, end any process still holding our SLURM_CONF
        (a job or slurmstepd that outlived its slurmd), remove the directory."""
        try:
            if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
                self.run("scancel", "--user", str(os.geteuid()), timeout=10)
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and self.run(
                        "squeue", "-h", "-t", "R,CG,PD,CF,S", "-o", "%i").stdout.strip():
                    time.sleep(0.2)
        except (OSError, subprocess.SubprocessError):
            pass
        for name in [n for n in self.procs if n.startswith("slurmd-")] + [
                "slurmctld", "slurmdbd", "mariadbd", "munged", *self.roles()]:
            proc = self.procs.pop(name, None)
            if proc is None:
                continue
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pid in self.stray_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        logkeeper.unwatch(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)

    def stray_pids(self) -> list[int]:
        """Processes that carry this cluster's SLURM_CONF: jobs and slurmstepds we started."""
        mark = f"SLURM_CONF={self.conf}".encode()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if mark in f.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                continue
        return found

    def __enter__(self) -> SlurmCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the commands ----------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """The caller's environment without any Slurm settings of its own, plus ours."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLURM_", "SBATCH_", "SQUEUE_", "SCANCEL_", "SINFO_",
                                    "SACCT_", "SCONTROL_", "RANCH_", "MUNGE"))}
        env["SLURM_CONF"] = str(self.conf)
        return env

    def argv(self, command: str, *args: str) -> list[str]:
        return [_find(command) or command, *args]

    def popen(self, command: str, *args: str, cwd: Path | None = None) -> subprocess.Popen:
        return subprocess.Popen(self.argv(command, *args), cwd=cwd or self.workdir, env=self.env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(self, command: str, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(command, *args), cwd=self.workdir, env=self.env(),
                              capture_output=True, text=True, timeout=timeout)

    def states(self) -> dict[int, tuple[str, str]]:
        """Every job's (state, reason): the cheap poll between the commands compared."""
        out = self.run("squeue", "-h", "-t", "all", "-o", "%i|%T|%r").stdout
        found = {}
        for line in out.splitlines():
            jid, state, reason = line.split("|", 2)
            found[int(jid)] = (state, reason)
        return found
