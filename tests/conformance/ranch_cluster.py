"""Ranch's side of the comparison: a real rctld and one rnoded per node (tests/integration's
Cluster), configured from the same Shape as the private Slurm, and driven by Slurm's command
names: `sbatch` runs rbatch, `squeue` rqueue, `scontrol` rcontrol, `scancel` rcancel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ranch.cli import shims
from tests import logkeeper
from tests.conformance.shape import Shape
from tests.conformance.slurm_cluster import BUILTIN
from tests.integration.cluster import REPO, Cluster, free_port

COMMANDS = {"sbatch": "ranch.cli.rbatch", "squeue": "ranch.cli.rqueue",
            "scontrol": "ranch.cli.rcontrol",
            "scancel": "ranch.cli.rcancel", "sinfo": "ranch.cli.rinfo", "sacct": "ranch.cli.racct",
            "sdiag": "ranch.cli.rdiag"}

RANCH_ONLY_CONF = """\
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout=30
MessageTimeout=5
ReturnToService=1
"""


class RanchCluster:
    name = "ranch"

    def __init__(self, shape: Shape, extra_conf: str = "", node_args: tuple[str, ...] = (),
                 node_env: dict[str, dict[str, str]] | None = None,
                 scheduler: str = BUILTIN) -> None:
        """`scheduler`: the SchedulerType/SchedulerParameters lines, the private Slurm's
        (sched/builtin: both schedule alike; Ranch's default is sched/backfill, as Slurm's)."""
        self.shape = shape
        self.node_args = node_args  # rnoded's options of one test's own (-b)
        self.node_env = node_env or {}
        self.dir = Path(tempfile.mkdtemp(prefix="ranch-conformance-ranch-"))
        logkeeper.watch(self.dir)  # kept if a test fails while this cluster runs
        self.workdir = self.dir / "work"
        self.workdir.mkdir()
        port = free_port()
        self.cluster = Cluster(self.dir / "cluster", shape.nodes, conf_text=(
            RANCH_ONLY_CONF.format(port=port) + scheduler + extra_conf + shape.global_conf()
            + shape.nodes_conf()))
        self.cluster.port, self.cluster.addr = port, ("127.0.0.1", port)
        # `srun` in a job's script runs rrun: the shims a user would put first on PATH
        self.bin = self.dir / "bin"
        shims.write(self.bin, python=sys.executable)

    def start(self, timeout: float = 30.0) -> None:
        c = self.cluster
        c.start_ctld()
        for name in self.shape.nodes:
            self.start_node(name)
        c.wait_for(self.nodes_idle, timeout, what="every rnoded IDLE")

    def start_node(self, name: str) -> None:
        c = self.cluster
        argv = ["-m", "ranch.noded", "--server", f"127.0.0.1:{c.port}", "--name", name,
                "--spool-dir", str(c.dir / "spool" / name), *self.node_args]
        c.nodes[name] = c._spawn(name, argv, self.node_env.get(name))

    def stop(self) -> None:
        self.cluster.stop()
        logkeeper.unwatch(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RanchCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def nodes_idle(self) -> bool:
        return all(self.cluster.state(n) == "IDLE" for n in self.shape.nodes)

    def log_tail(self, chars: int = 2000) -> str:
        c = self.cluster
        return "\n".join(f"--- {n} ---\n{c.log(n)[-chars:]}" for n in ("rctld", *c.node_names))

    # -- the commands, under Slurm's names -------------------------------------------------

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in self.cluster._env().items()
               if not k.startswith(("SLURM_", "SBATCH_", "SQUEUE_", "RANCH_SERVER"))}
        env["PYTHONPATH"] = str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")
        env["RANCH_SERVER"] = f"127.0.0.1:{self.cluster.port}"
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        return env

    def argv(self, command: str, *args: str) -> list[str]:
        return [sys.executable, "-m", COMMANDS[command], *args]

    def popen(self, command: str, *args: str, cwd: Path | None = None) -> subprocess.Popen:
        return subprocess.Popen(self.argv(command, *args), cwd=cwd or self.workdir, env=self.env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(self, command: str, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(command, *args), cwd=self.workdir, env=self.env(),
                              capture_output=True, text=True, timeout=timeout)

    def states(self) -> dict[int, tuple[str, str]]:
        """Every job's (state, reason), straight from rctld: the cheap poll between the
        commands whose output is compared."""
        from ranch.protocol import messages as m

        reply = self.cluster.request(m.GetJobs(), timeout=10)
        return {j["job_id"]: (j["state"], j.get("reason") or "None") for j in reply.jobs}
