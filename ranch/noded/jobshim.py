"""The per-job supervisor: starts the batch script and writes its exit status to the job's spool
directory, so a job's result survives rnoded's death. Run as a file with `python -S -E`.

Kept to the standard library and a handful of imports on purpose: its start-up time is part of
every job's launch cost (bench/jobshim_bench.py measures it).

argv[1] is the job directory holding launch.bin (a marshal'd dict written by ranch.noded.joblaunch:
marshal, not json, because importing json costs more than the rest of the start-up), or "+" for
the fork server (serve(), kept by ranch/noded/spareshim.py), which forks each job's supervisor.
Protocol with rnoded: one line on stdout, "ok SCRIPT_PID SHIM_START STARTED_AT" (pids.json's
figures) once the script has been exec'd or "fail MESSAGE"; pids.json (shim pid + start time +
script pid) before that line; status.json when the script has ended.
"""

import marshal
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
else:
    import _signal as signal  # the C module: `signal` would import enum (~6 ms)

PR_SET_CHILD_SUBREAPER = 36
SERVER = "+"  # argv[1] of the fork server: job directories come on its stdin socket
CLAIM = "claim"  # noded/jobstore.py's CLAIM: whoever creates it first decides the run's start


def _json(value: object) -> str:
    """Enough JSON for our flat records (numbers, bools, strings) without importing json."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def write_json(path: str, data: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("{" + ", ".join(f"{_json(k)}: {_json(v)}" for k, v in data.items()) + "}")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)  # atomic: a reader sees the whole file or none


def proc_start_ticks(pid: int | str = "self") -> int:
    """Field 22 of /proc/PID/stat: with the pid, identifies a process across pid reuse."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    return int(data[data.rindex(b")") + 2 :].split()[19])


def oom_kills(cgroup: list | None = None) -> int | None:
    """oom_kill count of the job's own cgroup ([path, version]) or else of ours; None where it
    cannot be read."""
    try:
        if cgroup:
            path, version = cgroup
        else:
            path, version = "", 2
            with open("/proc/self/cgroup") as f:
                for line in f:
                    if line.startswith("0::"):
                        path = "/sys/fs/cgroup" + line[3:].strip()
                    elif ":memory:" in line:  # v1 wins: its file is the one that counts
                        path, version = "/sys/fs/cgroup/memory" + line.split(":", 2)[2].strip(), 1
                        break
        name = "memory.events" if version == 2 else "memory.oom_control"
        with open(os.path.join(path, name)) as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    except (OSError, ValueError):
        pass
    return None


def cgroup_usage(cgroup: list | None) -> dict:
    """The job cgroup's CPU (v2 cpu.stat, microseconds) and memory peak (v2 memory.peak, v1
    memory.max_usage_in_bytes), read before the cgroup is removed (issue 48); {} where none."""
    out: dict = {}
    if not cgroup:
        return out
    path, version = cgroup
    try:
        if version == 2:
            with open(os.path.join(path, "cpu.stat")) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key in ("user_usec", "system_usec"):
                        out["cg_" + key] = int(value)
        name = "memory.peak" if version == 2 else "memory.max_usage_in_bytes"
        with open(os.path.join(path, name)) as f:
            out["cg_mem_peak"] = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return out


_libc: list = []  # the C library, loaded once: a server's children find it loaded


def load_libc() -> None:
    """ctypes and the C library (ctypes costs ~2 ms to import: the server pays it once)."""
    try:
        import ctypes

        _libc.append(ctypes.CDLL(None, use_errno=True))
    except (OSError, ImportError):
        pass


def become_subreaper() -> None:
    """Orphans of the job (daemonised grandchildren) re-parent to us, so none escapes the job."""
    if not _libc:
        load_libc()
    if _libc and hasattr(_libc[0], "prctl"):
        _libc[0].prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def child(spec: dict, err_w: int) -> None:
    """In the forked child: new session, drop privileges, chdir, open output, exec. Never
    returns; a failure is written to err_w (close-on-exec, so silence means exec worked)."""
    step = "setsid"
    try:
        if spec.get("cgroup"):
            try:  # as root, before dropping privileges: the job's memory limit
                with open(os.path.join(spec["cgroup"][0], "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            except OSError:
                pass  # the limit is lost, not the job
        os.setsid()
        if spec["drop"]:
            step = "setgroups"
            os.setgroups(spec["groups"])
            step = "setgid"
            os.setgid(spec["gid"])
            step = "setuid"
            os.setuid(spec["uid"])
        step = f"chdir to workdir {spec['workdir']}"
        os.chdir(spec["workdir"])
        # Always O_APPEND (after truncating a first run): rnoded's own lines (slurmstepd's
        # "CANCELLED AT") land after what the job wrote, never over it.
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (0 if spec["append"] else os.O_TRUNC)
        step = f"open output {spec['stdout']}"
        out = os.open(spec["stdout"], flags, 0o644)
        err = out
        if spec["stderr"] and spec["stderr"] != spec["stdout"]:
            step = f"open error output {spec['stderr']}"
            err = os.open(spec["stderr"], flags, 0o644)
        step = f"open input {spec.get('stdin') or os.devnull}"
        null = os.open(spec.get("stdin") or os.devnull, os.O_RDONLY)  # -i, else /dev/null
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        step = f"exec {spec['argv'][0]}"
        env = spec["env"]
        env["SLURM_TASK_PID"] = str(os.getpid())  # the script's own pid, as slurmstepd sets it
        os.execve(spec["argv"][0], spec["argv"], env)
    except BaseException as exc:  # anything here is a launch failure
        text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        os.write(err_w, f"{step}: {text}".encode(errors="replace")[:4000])
    os._exit(127)


def claim(jobdir: str) -> bool:
    """Take the run's claim file (O_EXCL) before starting the script: a restarted rnoded that
    finds a record without pids.json takes it first when the script never started, and the
    run is then given back instead of being reported FAILED (or run behind its back)."""
    try:
        os.close(os.open(os.path.join(jobdir, CLAIM), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                         0o600))
    except FileExistsError:
        say("fail the run was given up before it started")
        return False
    return True


def say(line: str) -> None:
    """Our one line to rnoded (gone, it re-adopts us from pids.json and status.json)."""
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except OSError:
        pass


def log_to(jobdir: str) -> None:
    """Our stderr (the server's /dev/null) to the job's shim.log, as a cold start's."""
    try:
        log = os.open(os.path.join(jobdir, "shim.log"), os.O_WRONLY | os.O_APPEND)
        os.dup2(log, 2)
        os.close(log)
    except OSError:
        pass  # no log: rnoded reads the missing answer as the supervisor's failure


def reap_children(*_: object) -> None:
    """The server's SIGCHLD. Not SIGCHLD ignored: a /proc lookup of a pid the kernel reaped so
    costs ~1 ms of CPU (up to 50), and rnoded looks at each job's tree as it starts."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def serve() -> int:
    """The fork server: for each job directory sent on the socket on stdin, with the write end of
    the job's answer pipe beside it (SCM_RIGHTS), fork its supervisor and answer the child's pid,
    until end of file. A job so costs a fork of this small process, not a Python start (8-10 ms
    of CPU against ~1); rnoded watches each child through a pidfd, as one it re-adopted."""
    import socket

    load_libc()  # for the children: the server itself is no subreaper (it has no job)
    signal.signal(signal.SIGCHLD, reap_children)
    control = socket.socket(fileno=0)
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, 4096, 1)
        except OSError:
            return 0
        if not data or len(fds) != 1:  # end of file: rnoded stopped or needs us no more
            return 0
        pid = os.fork()
        if pid == 0:
            os._exit(forked(os.fsdecode(data), fds[0]))
        os.close(fds[0])
        control.send(str(pid).encode())


def forked(jobdir: str, answer: int) -> int:
    """In a child of the server: become what a cold start is (own session, stdin /dev/null,
    stdout the job's answer pipe, stderr its shim.log), then run."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the server's would reap under wait4
        os.setsid()
        become_subreaper()
        os.dup2(answer, 1)
        os.close(answer)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # the server's socket is not ours
        log_to(jobdir)
        return run(jobdir)
    except BaseException:  # its traceback into shim.log, as a cold start's
        sys.excepthook(*sys.exc_info())
        sys.stderr.flush()
        return 1


def start_script(spec: dict, jobdir: str) -> int | None:
    """Fork the script's process; its pid, or None once a failure to start it is recorded (in
    status.json and as rnoded's "fail" line)."""
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        os.close(err_r)
        child(spec, err_w)
    os.close(err_w)
    chunks = []
    while chunk := os.read(err_r, 4096):
        chunks.append(chunk)
    os.close(err_r)
    failure = b"".join(chunks).decode(errors="replace")
    if not failure:
        return pid
    os.waitpid(pid, 0)
    if spec.get("cgroup"):
        try:
            os.rmdir(spec["cgroup"][0])
        except OSError:
            pass
    write_json(os.path.join(jobdir, "status.json"), {"launch_error": failure})
    say(f"fail {failure}")
    return None


def reap(used: list[float], flags: int = 0) -> tuple[int, int]:
    """wait4 on any child, adding what it used to `used` (user s, system s: issue 48's
    TotalCPU)."""
    done, wstatus, ru = os.wait4(-1, flags)
    if done:
        used[0] += ru.ru_utime
        used[1] += ru.ru_stime
    return done, wstatus


def wait_script(pid: int, used: list[float]) -> int:
    """The script's wait status; adopted orphans are reaped too, until the script itself ends."""
    while True:
        try:
            done, wstatus = reap(used)
        except ChildProcessError:
            return 0
        if done == pid:
            return wstatus


def kill_leftovers(pid: int, used: list[float]) -> int:
    """Kill and reap what the script left behind (as Slurm's proctrack does); how many were
    killed one by one."""
    leftovers = 0
    for _ in range(50):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as listing:
                kids = [int(x) for x in listing.read().split()]
        except OSError:
            kids = []
        for kid in kids:
            try:
                os.kill(kid, signal.SIGKILL)
                leftovers += 1
            except OSError:
                pass
        # reap what died without waiting on what lives: a grandchild re-parented to us after
        # the listing is killed at the next round, not waited for (it would hold us for ever)
        try:
            while reap(used, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            break
        time.sleep(0.05)
    return leftovers


def main() -> int:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)  # rnoded's death must not take us along
    if sys.argv[1] == SERVER:
        return serve()
    become_subreaper()
    return run(sys.argv[1])


def run(jobdir: str) -> int:
    """Supervise the job of `jobdir`: claim it, start its script, wait, record its end."""
    with open(os.path.join(jobdir, "launch.bin"), "rb") as f:
        spec = marshal.load(f)
    cgroup = spec.get("cgroup")
    oom_before = 0 if cgroup else oom_kills()
    started = time.time()
    if not claim(jobdir):
        return 0  # a restarted rnoded gave this run up before it started: never run it
    pid = start_script(spec, jobdir)
    if pid is None:
        return 0
    pids = {"shim_pid": os.getpid(), "shim_start": proc_start_ticks(), "script_pid": pid,
            "started_at": started}
    write_json(os.path.join(jobdir, "pids.json"), pids)
    say(f"ok {pid} {pids['shim_start']} {started!r}")  # pids.json's figures
    os.dup2(os.open(os.devnull, os.O_RDWR), 1)
    # what every process of the job used, summed as we reap it (wait4: issue 48's TotalCPU)
    used = [0.0, 0.0]  # user s, system s
    status = wait_script(pid, used)
    ended = time.time()
    # The script is gone: whatever it left behind ends with it (as Slurm's proctrack does).
    leftovers = kill_leftovers(pid, used)
    oom_after = oom_kills(cgroup)
    measured = cgroup_usage(cgroup)
    if cgroup:
        try:
            os.rmdir(cgroup[0])  # empty now: every process of the job has been reaped
        except OSError:
            pass
    result = {
        "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else 0,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0,
        "started_at": started,
        "ended_at": ended,
        "oom": oom_before is not None and oom_after is not None and oom_after > oom_before,
        "oom_exact": bool(cgroup),  # the job's own cgroup: any OOM kill in it was the job's
        "leftovers_killed": leftovers,
        "user_s": round(used[0], 6),
        "system_s": round(used[1], 6),
        **measured,
    }
    write_json(os.path.join(jobdir, "status.json"), result)
    return 0

if __name__ == "__main__":
    sys.exit(main())
