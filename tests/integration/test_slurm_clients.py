"""Real Slurm clients, unchanged, against a real test cluster through Slurm's names
(`ranch-slurm-shims`): submitit (its defaults: its script runs the work with srun, as a step) and
dask-jobqueue's SLURMCluster (its defaults). Each runs in its own process with the
shims first on PATH, as a user's would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ranch.protocol import messages as m

from .cluster import REPO, Cluster, free_port

CONF = """\
ClusterName=clients
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=1
SlurmdTimeout=10
MessageTimeout=3
KillWait=1
MinJobAge=600
NodeName=n[1-2] CPUs=2 RealMemory=2000
PartitionName=main Nodes=n[1-2] Default=YES
"""

SUBMITIT = """\
import json, sys, time
import submitit

def add(a, b):
    return a + b

executor = submitit.AutoExecutor(folder=sys.argv[1])
assert executor.cluster == "slurm", executor.cluster  # found sbatch and srun on PATH
executor.update_parameters(timeout_min=5)  # slurm_use_srun stays True, its default
job = executor.submit(add, 2, 3)
result = job.result()
# the result file can come before the job's end; ask sacct again (job.get_info forces the
# call) until the job has left RUNNING, as a user who checks job.state later would see it
for _ in range(300):
    if job.get_info().get("State") not in ("RUNNING", "COMPLETING", "PENDING", None):
        break
    time.sleep(0.1)
# a map over an array (sbatch --array; each task's srun writes log_%A_%a/%A_%a_%t files)
tasks = executor.map_array(add, [1, 2, 3], [10, 20, 30])
mapped = [t.result() for t in tasks]
for _ in range(300):  # as above: the results can come before the tasks' ends
    if all(t.get_info().get("State") not in ("RUNNING", "COMPLETING", "PENDING", None)
           for t in tasks):
        break
    time.sleep(0.1)
print(json.dumps({"job_id": job.job_id, "result": result, "state": job.state,
                  "stdout": str(job.paths.stdout), "stderr": str(job.paths.stderr),
                  "script": job.paths.submission_file.read_text(),
                  "mapped": mapped, "task_ids": [t.job_id for t in tasks],
                  "task_stdout": [str(t.paths.stdout) for t in tasks],
                  "task_states": [t.state for t in tasks]}))
"""

DASK = """\
import json, sys
from dask.distributed import Client
from dask_jobqueue import SLURMCluster

cluster = SLURMCluster(cores=1, memory="200MB", log_directory=sys.argv[1])
cluster.scale(jobs=2)
with Client(cluster) as client:
    client.wait_for_workers(2, timeout=90)
    total = sum(client.gather(client.map(lambda x: x * x, range(10))))
    # asked of the scheduler itself: scheduler_info() returns the client's cached identity,
    # which the client's own refresh every 2 s (workers left out) may overwrite in between
    workers = len(client.nthreads())
ids = [job.job_id for job in cluster.workers.values()]
cluster.close()
print(json.dumps({"total": total, "workers": workers, "job_ids": ids,
                  "script": cluster.job_script()}))
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A cluster, and the environment a user has after `export PATH=SHIMS:$PATH`."""
    work = tmp_path_factory.mktemp("clients")
    port = free_port()
    cluster = Cluster(work, ["n1", "n2"], conf_text=CONF.format(port=port))
    cluster.port, cluster.addr = port, ("127.0.0.1", port)
    bindir = work / "shims"
    subprocess.run([sys.executable, "-m", "ranch.cli.shims", str(bindir)], cwd=REPO, check=True,
                   env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
           "RANCH_SERVER": f"127.0.0.1:{port}", "RANCH_KEY_FILE": cluster.key_file}
    env.pop("PYTHONPATH", None)  # the clients import only their own packages
    with cluster:
        cluster.start_ctld()
        for name in cluster.node_names:
            argv = ["-m", "ranch.noded", "--server", f"127.0.0.1:{port}", "--name", name,
                    "--spool-dir", str(work / "spool" / name)]
            cluster.nodes[name] = cluster._spawn(name, argv)
        cluster.wait_for(lambda: all(cluster.state(n) == "IDLE" for n in ("n1", "n2")), 30,
                         what="nodes IDLE")
        yield cluster, env, work


def client(slurm, code: str, folder: Path) -> dict:
    _, env, work = slurm
    script = work / f"client-{folder.name}.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script), str(folder)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def submitit_run(slurm):
    pytest.importorskip("submitit")
    return client(slurm, SUBMITIT, slurm[2] / "submitit")


def test_submitit_gets_its_result(slurm, submitit_run) -> None:
    _, env, _ = slurm
    assert submitit_run["result"] == 5
    script = submitit_run["script"]
    for line in ("#SBATCH --open-mode=append", "#SBATCH --signal=USR2@90",
                 "#SBATCH --wckey=submitit"):
        assert line in script  # what Ranch refused before issue 22
    assert "srun --unbuffered --output" in script  # issue 20: the work is a step
    job_id = submitit_run["job_id"]
    assert Path(submitit_run["stdout"]).name == f"{job_id}_0_log.out"
    assert Path(submitit_run["stdout"]).exists() and Path(submitit_run["stderr"]).exists()
    done = subprocess.run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.stdout == "COMPLETED\n"
    cluster = slurm[0]
    [rec] = cluster.request(m.GetJobs((int(job_id),))).jobs
    assert [(s["id"], s["state"], s["ntasks"]) for s in rec["steps"]] == [(0, "COMPLETED", 1)]


def test_submitit_maps_over_an_array(submitit_run) -> None:
    """map_array: one sbatch --array job; each task's srun writes its files under the array's
    master id and the task's index (%A_%a), which Ranch once expanded to the task's own id."""
    assert submitit_run["mapped"] == [11, 22, 33]
    master = submitit_run["task_ids"][0].split("_")[0]
    assert submitit_run["task_ids"] == [f"{master}_{i}" for i in range(3)]
    for i, path in enumerate(submitit_run["task_stdout"]):
        assert Path(path).name == f"{master}_{i}_0_log.out" and Path(path).exists()
    assert submitit_run["task_states"] == ["COMPLETED"] * 3


def test_submitit_reads_the_state_from_sacct(submitit_run) -> None:
    # submitit asks only sacct for states (no squeue fallback): racct answers it
    assert submitit_run["state"] == "COMPLETED"


def test_dask_jobqueue_computes_with_two_workers_each_with_its_own_logs(slurm) -> None:
    pytest.importorskip("dask_jobqueue")
    logs = slurm[2] / "dask-logs"
    got = client(slurm, DASK, logs)
    assert got["total"] == 285 and got["workers"] == 2
    assert "#SBATCH -e " in got["script"] and "dask-worker-%J.err" in got["script"]
    names = sorted(p.name for p in logs.iterdir())
    ids = sorted(got["job_ids"], key=int)
    assert len(set(ids)) == 2
    assert names == sorted(f"dask-worker-{i}.{ext}" for i in ids for ext in ("err", "out"))
