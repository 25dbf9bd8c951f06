"""A step's supervisor on one node (slurmstepd's part): starts the step's tasks here, records
how each ended in the step's spool directory, and keeps their output pipes open, so that the
step survives rnoded's restart: the next rnoded reopens the pipes (/proc/PID/fd/N) and carries
on where the last one stopped. Run as a file with `python -S -E` (the standard library only,
as noded/jobshim.py, for its start-up time).

argv[1] is the step's directory holding launch.bin (marshal, written by noded/steptasks.py).
The task's descriptors come inherited (pass_fds), their numbers in launch.bin. Protocol with
rnoded on our stdout: "ok" once every task was started (pids.bin written before), then
"exit TASK CODE SIGNAL USER_S SYSTEM_S" as each ends (its exit.TASK file written before, with the
same figures: the CPU is the task's rusage as we reap it); closed once every task ended and
what they left behind was killed. We then linger, holding the read ends of the
pipes until rnoded has drained them and kills us (or LINGER passes: no rnoded came back).
"""

import marshal
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from typing import Any
else:
    import _signal as signal  # the C module: `signal` would import enum (~6 ms)

PR_SET_CHILD_SUBREAPER = 36
LINGER = 600.0  # how long the pipes are held for an rnoded to come back and drain them


def write_marshal(path: str, data: "Any") -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(marshal.dumps(data))
    os.replace(tmp, path)  # atomic: a reader sees the whole record or none


def proc_start_ticks(pid: int | str = "self") -> int:
    """Field 22 of /proc/PID/stat: with the pid, identifies a process across pid reuse."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    return int(data[data.rindex(b")") + 2 :].split()[19])


def become_subreaper() -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def child(spec: dict, task: list, err_w: int) -> None:
    """In the forked child: new session, the task's descriptors, privileges, chdir, exec. Never
    returns; a failure goes to err_w as "ERRNO TEXT" (close-on-exec: silence means exec)."""
    try:
        _, argv, env, fd_in, fd_out, fd_err = task
        os.setsid()
        if fd_in < 0:
            fd_in = os.open(os.devnull, os.O_RDONLY)
        os.dup2(fd_in, 0)
        os.dup2(fd_out, 1)
        os.dup2(fd_err, 2)
        if spec["drop"]:
            os.setgroups(spec["groups"])
            os.setgid(spec["gid"])
            os.setuid(spec["uid"])
        os.chdir(spec["cwd"])
        for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        os.closerange(3, err_w)
        os.closerange(err_w + 1, 1 << 16)
        os.execve(argv[0], argv, env)
    except BaseException as exc:
        code = exc.errno if isinstance(exc, OSError) and exc.errno else 0
        text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        os.write(err_w, f"{code} {text}".encode(errors="replace")[:4000])
    os._exit(127)


def start(spec: dict, task: list) -> tuple[int, str]:
    """Fork and exec one task: (its pid, "") or (0, "ERRNO TEXT")."""
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        os.close(err_r)
        child(spec, task, err_w)
    os.close(err_w)
    chunks = []
    while chunk := os.read(err_r, 4096):
        chunks.append(chunk)
    os.close(err_r)
    failure = b"".join(chunks).decode(errors="replace")
    if failure:
        os.waitpid(pid, 0)
        return 0, failure
    return pid, ""


def say(line: str) -> None:
    try:
        os.write(1, line.encode())
    except OSError:
        pass  # rnoded is gone: the next one reads our records


def end_leftovers(pids: list[int]) -> None:
    """The step's tasks are gone: what they left behind ends with them (Slurm's proctrack)."""
    me = os.getpid()
    for _ in range(50):
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            with open(f"/proc/{me}/task/{me}/children") as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            kids = []
        for kid in kids:
            try:
                os.kill(kid, signal.SIGKILL)
            except OSError:
                pass
        # reap what died without waiting on what lives: a grandchild re-parented to us after
        # the listing is killed at the next round, not waited for (it would hold us for ever)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return
        time.sleep(0.05)


def main() -> int:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)  # rnoded's death must not take us along
    become_subreaper()
    stepdir = sys.argv[1]
    with open(os.path.join(stepdir, "launch.bin"), "rb") as f:
        spec = marshal.load(f)
    started = time.time()
    running: dict[int, int] = {}  # pid -> task
    failed: dict[int, str] = {}
    for task in spec["tasks"]:
        pid, failure = start(spec, task)
        if pid:
            running[pid] = task[0]
        else:
            failed[task[0]] = failure
    hold = set(spec["hold"])
    for fd in {fd for t in spec["tasks"] for fd in t[3:] if fd >= 3}:
        if fd not in hold:
            os.close(fd)  # the tasks' ends: their pipes reach end of file when they end
    write_marshal(os.path.join(stepdir, "pids.bin"), {
        "shim_pid": os.getpid(), "shim_start": proc_start_ticks(), "started_at": started,
        "tasks": {task: pid for pid, task in running.items()}, "failed": failed,
        "hold": spec["hold"]})
    say("ok\n")
    pids = list(running)
    while running:  # reap adopted orphans too, until every task ended
        try:
            # wait4: the task's rusage, its own CPU and its reaped children's (issue 48)
            pid, status, ru = os.wait4(-1, 0)
        except ChildProcessError:
            break
        task = running.pop(pid, None)
        if task is None:
            continue
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 0
        killed = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        user, system = round(ru.ru_utime, 6), round(ru.ru_stime, 6)
        write_marshal(os.path.join(stepdir, f"exit.{task}"),
                      (code, killed, time.time(), user, system))
        say(f"exit {task} {code} {killed} {user} {system}\n")
    end_leftovers(pids)
    os.close(1)  # end of file: every task ended
    time.sleep(LINGER)  # holding the pipes: rnoded kills us once it has drained them
    return 0


if __name__ == "__main__":
    sys.exit(main())
