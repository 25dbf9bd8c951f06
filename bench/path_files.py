"""How many of Ranch's source files a request crosses (issue 29): `rbatch --wrap` until the job's
process runs on a node and the node has said so (a second submission: the first takes one-time
steps), and `rcontrol update NodeName=... State=DRAIN` until its reply (which leaves once the
drain is in the journal). Real rctld and rnoded processes on 127.0.0.1 and the
real commands, each with a profile hook (bench/path_files/sitecustomize.py) that records, while
armed (SIGWINCH for the daemons; from start to exit for the command), under which task:

- "ran": each file under ranch/ a function of which ran (its import alone does not count);
- "chain": each file with a frame on the call stack of one of the request's effects, where its
  work leaves the process (a send, a write, an fsync, a rename): the files a reader follows from
  the request to what it does. Functions called and returned on the way (checks, the state
  machine, the codec) are in "ran" only.

HeartbeatInterval is long, so no heartbeat falls into the window, and the tasks an idle window of
the same length shows running (timers: the stall watch, the saver...) are left out. Prints the
files per process and in all (--list: which, and each effect's stack); asserts nothing.

And (issue 42) how each effect's stack walks ctld's folders, outermost first (rpc > state >
jobs > nodes > jobs: the folders of bench/structure_counts.py, consecutive frames of one folder
counted once): how often it re-enters a folder it left (there, jobs: 1) and its forwarding
frames (a frame of a one-line forwarding method, as bench/structure_counts.py finds them in this
tree): per request the most re-entries of any stack and the distinct forwarders met, and with
--list each stack's walk.

    .venv/bin/python bench/path_files.py [--list]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.structure_counts import forwarders, unit_of  # noqa: E402
from tests.integration.cluster import Cluster, wait_for  # noqa: E402

TRACER = REPO / "bench" / "path_files"
CONF = """\
ClusterName=paths
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
HeartbeatInterval=60
SlurmdTimeout=600
MessageTimeout=10
NodeName=n1 CPUs=2 RealMemory=64
PartitionName=main Nodes=n1 Default=YES
"""


def traced_env(out: Path, armed: bool) -> dict[str, str]:
    return {"PYTHONPATH": f"{TRACER}{os.pathsep}{REPO}", "RANCH_TRACE_OUT": str(out),
            "RANCH_TRACE_ROOT": str(REPO / "ranch"), "RANCH_TRACE_ARMED": "1" if armed else ""}


def toggle(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGWINCH)


def read(out: Path) -> dict[str, dict[str, list[str]]]:
    """{"ran": files that ran code, "chain": files on the stack of an effect}, each as file ->
    ["what\troot task", ...]."""
    wait_for(out.exists, what=f"{out.name} written")
    time.sleep(0.2)  # the dump is one small write; let it finish
    doc = json.loads(out.read_text())
    out.unlink()
    return {part: {(k if part == "stacks" else str(Path(k).relative_to(REPO))): v
                   for k, v in files.items()} for part, files in doc.items()}


def command(c: Cluster, out: Path, module: str, *argv: str) -> subprocess.CompletedProcess:
    env = c._env({"RANCH_SERVER": f"127.0.0.1:{c.port}", **traced_env(out, True)})
    return subprocess.run([sys.executable, "-m", module, *argv], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)


def roots(doc: dict[str, dict[str, list[str]]]) -> set[str]:
    return {call.split("\t", 1)[1] for part in ("ran", "chain") for calls in doc[part].values()
            for call in calls}


def on_path(files: dict[str, list[str]], background: set[str],
            skip_imports: bool) -> dict[str, set[str]]:
    """Each file that ran code (or, for the chain, stood on an effect's stack) under a task the
    idle window did not show running (a background loop: stall watch, saver, deadlines...),
    with those tasks. An import alone does not count."""
    out: dict[str, set[str]] = {}
    for f, calls in files.items():
        for call in calls:
            name, root = call.split("\t", 1)
            if not (skip_imports and name == "<module>") and root not in background:
                out.setdefault(f, set()).add(root)
    return out


MEASURES = {
    "ran": "files whose code ran for the request",
    "chain": "files on the call stack of one of the request's effects (send, write, fsync, "
             "rename, spawn): the chain a reader follows",
}


def walk(stack: str, forwarding: set[str]) -> tuple[list[str], list[str], list[str]]:
    """A recorded stack (`effect < innermost < ... < outermost`, frames `path:qualname` under
    ranch/) as (ctld folders outermost first, consecutive ones once; the folders re-entered;
    its frames of forwarding methods)."""
    frames = stack.split(" < ")[1:][::-1]
    folders: list[str] = []
    for f in frames:
        path = f.split(":", 1)[0]
        if path.startswith("ctld/"):
            unit = unit_of(path.removeprefix("ctld/"))
            if not folders or folders[-1] != unit:
                folders.append(unit)
    again = [u for i, u in enumerate(folders) if u in folders[:i]]
    return folders, again, [f for f in frames if f in forwarding]


def walks(title: str, parts: dict[str, dict[str, dict[str, list[str]]]],
          background: set[str], listing: bool) -> None:
    """Re-entries and forwarding frames of the request's stacks (issue 42)."""
    forwarding = {f"{w.split(':', 1)[0]}:{w.split(' ', 1)[1]}"
                  for w in forwarders(REPO / "ranch")}
    print(f" ctld folders on its effects' stacks ({title.split(' ')[0]})")
    for proc, doc in parts.items():
        stacks = [s for s in doc["stacks"] if "/" + s.rsplit(" < ", 1)[-1] not in background]
        seen = [(s, *walk(s, forwarding)) for s in stacks]
        seen = [w for w in seen if w[1]]  # stacks with a ctld frame
        if not seen:
            continue
        most = max(len(w[2]) for w in seen)
        fwd = sorted({f for w in seen for f in w[3]})
        print(f"  {proc:8s} {len(seen)} stacks; re-entries: at most {most} in a stack, "
              f"{sum(1 for w in seen if w[2])} stacks with any; forwarding frames: "
              f"{len(fwd)} distinct, at most {max(len(w[3]) for w in seen)} in a stack")
        for f in fwd:
            print(f"           forwarder {f}")
        if listing:
            for s, folders, again, fw in seen:
                print(f"           {' > '.join(folders)}: re-enters {len(again)}"
                      f"{' (' + ', '.join(again) + ')' if again else ''}, forwarding "
                      f"{len(fw)}  [{s.split(' < ', 1)[0]} < ... < {s.rsplit(' < ', 1)[-1]}]")


def report(title: str, parts: dict[str, dict[str, dict[str, list[str]]]], background: set[str],
           listing: bool) -> None:
    print(f"\n{title}")
    for measure, words in MEASURES.items():
        every: set[str] = set()
        print(f" {words}")
        for proc, doc in parts.items():
            files = doc[measure]
            path = on_path(files, background, skip_imports=measure == "ran")
            every |= set(path)
            per = collections.Counter(f.split("/")[1] if f.count("/") > 1 else "ranch"
                                      for f in path)
            print(f"  {proc:8s} {len(path):3d} files: "
                  + ", ".join(f"{pkg} {n}" for pkg, n in sorted(per.items())))
            if listing and measure == "chain":
                for stack in doc["stacks"]:
                    print(f"           stack: {stack}")
            if listing:
                for f in sorted(path):
                    print(f"           {f:34s} under {', '.join(sorted(path[f]))}")
        print(f"  in all   {len(every):3d} files")
    walks(title, parts, background, listing)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--list", action="store_true", help="name the files")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="path-files-") as tmp:
        d = Path(tmp)
        c = Cluster(d / "c", nodes=["n1"], conf_text=CONF.format(port=0))
        c.conf_path.write_text(CONF.format(port=c.port))
        with c:
            ctld_out, node_out = d / "ctld.json", d / "node.json"
            c.start_ctld(env=traced_env(ctld_out, False))
            node = c.start_node("n1", env=traced_env(node_out, False))
            c.wait_for(lambda: c.state("n1") == "IDLE", what="n1 idle")
            time.sleep(1.0)  # the registration's after-work settles
            assert c.ctld is not None
            # an idle window as long as a request's: what background tasks run meanwhile
            toggle(c.ctld)
            toggle(node)
            time.sleep(3.0)
            toggle(node)
            toggle(c.ctld)
            background = roots(read(ctld_out)) | roots(read(node_out))
            print("background tasks (idle window):", ", ".join(sorted(background)) or "none")
            # a first job, unmeasured: it takes the controller's first block of job ids (a
            # write of the next-id file that one submission in ID_BLOCK does) and rnoded's
            # first job spool; the measured one is a submission like the many that follow
            warm = c.run_cli("ranch.cli.rbatch", "--wrap", "true", "-o", os.devnull)
            assert warm.returncode == 0, warm.stderr
            c.wait_for(lambda: not c.run_cli("ranch.cli.rqueue", "--noheader").stdout.strip(),
                       what="the first job done")
            time.sleep(0.5)
            # rbatch --wrap, until the job's process runs on n1
            toggle(c.ctld)
            toggle(node)
            cmd_out = d / "rbatch.json"
            done = command(c, cmd_out, "ranch.cli.rbatch", "--wrap", "sleep 30",
                           "-o", str(d / "job.out"))
            assert done.returncode == 0, done.stderr
            job_id = done.stdout.split()[-1]
            # its output file is opened by the job's process as it starts
            wait_for((d / "job.out").exists, what="the job's output file")
            # and the node's answers (the LaunchJob's Ack, then JobStarted), which leave just
            # after: the launch is not over before them, and without this wait the window
            # would end before or after them as the two processes happen to run
            time.sleep(1.0)
            toggle(node)
            toggle(c.ctld)
            report(f"rbatch --wrap (job {job_id}) to a process on the node",
                   {"rbatch": read(cmd_out), "rctld": read(ctld_out), "rnoded": read(node_out)},
                   background, args.list)
            # rcontrol update State=DRAIN, to its reply (durable first)
            c.run_cli("ranch.cli.rcancel", job_id)
            c.wait_for(lambda: c.state("n1") == "IDLE", what="n1 idle again")
            time.sleep(0.5)
            toggle(c.ctld)
            cmd_out = d / "rcontrol.json"
            done = command(c, cmd_out, "ranch.cli.rcontrol", "update", "NodeName=n1",
                           "State=DRAIN", "Reason=path count")
            assert done.returncode == 0, done.stderr
            toggle(c.ctld)
            report("rcontrol update NodeName=n1 State=DRAIN to its reply",
                   {"rcontrol": read(cmd_out), "rctld": read(ctld_out)}, background, args.list)


if __name__ == "__main__":
    main()
