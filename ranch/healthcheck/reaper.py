"""A program's launcher that ends with its whole tree: `setsid` and double-forked children included.

Run as a file (`python -S -E -s reaper.py MODE GRACE PROGRAM ARGS...`, see `launcher_argv`) by
rnoded for health checks and by rctld for the power programs. It becomes a child subreaper
(prctl PR_SET_CHILD_SUBREAPER), so every process the program starts stays its descendant even
after its parent exits or it calls setsid: none can escape to init. Where a cgroup v2 is
writable it also puts the program in a cgroup of its own (`ranch-run-PID` under its own), so
that the tree can be found even if this launcher is SIGKILLed.

- The program ends: MODE `all` (health checks) kills whatever it left; MODE `detached` (power
  programs, whose ResumeProgram may legitimately start a daemon, as examples/resume.sh does)
  kills only what still holds the run's output pipe DETACH_GRACE after the end, and leaves
  fully detached daemons.
- SIGTERM (the caller's timeout or its own end), SIGINT, SIGHUP, or the caller's death
  (PR_SET_PDEATHSIG): the whole tree gets SIGTERM, then SIGKILL after GRACE seconds.

The exit status is the program's own (a signal is re-raised), so callers read it as before.
If the program cannot be executed, the first output line is `EXEC_FAILED` and the status 127.

Kept to the standard library and a few imports: its start-up is part of every run's cost.
"""

import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
else:
    import _signal as signal  # the C module: `signal` imports enum, a tenth of the start-up

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
EXEC_FAILED = "ranch-reaper: cannot run"
CGROUP_ROOT = "/sys/fs/cgroup"
DETACH_GRACE = 1.0  # seconds a child of a `detached` run may take to let go of its output
_HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def launcher_argv(mode: str, grace: float, argv: list) -> list:
    """The command line that runs `argv` under this launcher."""
    return [sys.executable, "-S", "-E", "-s", os.path.abspath(__file__), mode, repr(float(grace)),
            *argv]


class Stop(Exception):
    pass


def _stop(signum: int, frame: object) -> None:
    raise Stop(signum)


def _prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(root: int) -> list:
    """Every process below `root`, read from /proc/PID/task/TID/children (or, on a kernel
    without them, from the parent pid of every process)."""
    if not os.path.exists(f"/proc/{root}/task/{root}/children"):
        return _descendants_by_scan(root)
    out: list = []
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except (OSError, ValueError):
                continue
            out.extend(kids)
            todo.extend(kids)
    return out


def _descendants_by_scan(root: int) -> list:
    children: dict = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: list = []
    todo = [root]
    while todo:
        kids = children.get(todo.pop(), [])
        out.extend(kids)
        todo.extend(kids)
    return out


def _signal_all(pids: list, sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
            if sig == signal.SIGTERM:
                os.kill(pid, signal.SIGCONT)  # a stopped process cannot act on SIGTERM
        except OSError:
            pass


class Cgroup:
    """A cgroup v2 of the run's own, where one can be made (root or a delegated subtree)."""

    def __init__(self) -> None:
        self.path = None
        self.parent = None
        try:
            if not os.path.exists(os.path.join(CGROUP_ROOT, "cgroup.controllers")):
                return  # no cgroup v2 here
            with open("/proc/self/cgroup") as f:
                own = next((ln[3:].strip() for ln in f if ln.startswith("0::")), None)
            if own is None:
                return
            parent = os.path.normpath(CGROUP_ROOT + "/" + own)
            path = os.path.join(parent, f"ranch-run-{os.getpid()}")
            os.mkdir(path)
            self.path, self.parent = path, parent
        except OSError:
            pass

    def enter(self, pid: int) -> None:
        """In the program's child, before exec."""
        if self.path is None:
            return
        try:
            with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
                f.write(str(pid))
        except OSError:
            pass

    def pids(self) -> list:
        if self.path is None:
            return []
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as f:
                return [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            return []

    def kill(self) -> None:
        if self.path is None:
            return
        try:
            with open(os.path.join(self.path, "cgroup.kill"), "w") as f:
                f.write("1")
        except OSError:
            _signal_all(self.pids(), signal.SIGKILL)  # kernels before 5.14

    def keep(self, pids: list) -> None:
        """Detached survivors leave for our own cgroup, so that this one can go."""
        if self.parent is None:
            return
        for pid in pids:
            try:
                with open(os.path.join(self.parent, "cgroup.procs"), "w") as f:
                    f.write(str(pid))
            except OSError:
                pass

    def remove(self) -> None:
        if self.path is None:
            return
        for _ in range(100):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.01)  # the last processes are still being torn down


class Run:
    def __init__(self, mode: str, grace: float, argv: list) -> None:
        self.mode = mode
        self.grace = grace
        self.argv = argv
        self.me = os.getpid()
        self.child = 0
        self.status: int | None = None  # the program's wait status once reaped
        self.cgroup = Cgroup()

    def start(self) -> None:
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            os.close(err_r)
            try:
                os.setsid()
                self.cgroup.enter(os.getpid())
                for sig in (*_HANDLED, signal.SIGPIPE, signal.SIGXFSZ):
                    signal.signal(sig, signal.SIG_DFL)  # Python ignores SIGPIPE and SIGXFSZ
                os.execvp(self.argv[0], self.argv)
            except BaseException as exc:
                text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                os.write(err_w, text.encode(errors="replace")[:1000])
            os._exit(127)
        os.close(err_w)
        self.child = pid
        failure = b""
        while chunk := os.read(err_r, 4096):
            failure += chunk
        os.close(err_r)
        if failure:
            sys.stdout.write(f"{EXEC_FAILED} {self.argv[0]}: {failure.decode(errors='replace')}\n")
            sys.stdout.flush()

    def reap(self, block: bool) -> bool:
        """Reap children (adopted orphans too); False once there are none left."""
        while True:
            try:
                pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.child:
                self.status = status
                if block:
                    return True

    def wait_program(self, deadline: float | None) -> None:
        """Until the program itself ends (or `deadline`, monotonic), reaping adopted orphans."""
        while self.status is None:
            if deadline is None:
                if not self.reap(block=True):
                    return
                continue
            if not self.reap(block=False):
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(0.01)

    def kill_everything(self) -> None:
        """SIGKILL every descendant until none is left, and reap them all."""
        self.cgroup.kill()
        for _ in range(5000):
            pids = descendants(self.me)
            _signal_all(pids, signal.SIGKILL)
            if not self.reap(block=False) and not pids:
                break
            time.sleep(0.001)  # orphans re-parent to us as their parents die
        self.cgroup.remove()

    def end_leftovers(self) -> None:
        """The program exited by itself: what it left ends too (MODE detached: unless it let go
        of the run's output, as a daemon does)."""
        if self.mode == "detached":
            # A daemon being started may hold the output for a moment (a shell's `cmd >log &`
            # forks before it redirects): what still holds it after DETACH_GRACE is the run's.
            pipe = _fd_target(1)
            give_up = time.monotonic() + DETACH_GRACE
            while time.monotonic() < give_up + 1.0:  # bounded, even for the unkillable
                holding = [p for p in descendants(self.me) if pipe and _holds(p, pipe)]
                if not holding:
                    break
                if time.monotonic() >= give_up:
                    _signal_all(holding, signal.SIGKILL)
                self.reap(block=False)
                time.sleep(0.005)
            self.cgroup.keep(self.cgroup.pids())
            self.reap(block=False)
            self.cgroup.remove()
            return
        self.kill_everything()

    def stop(self) -> None:
        """Asked to stop: SIGTERM to the tree, SIGKILL after the grace (at once without one)."""
        if self.grace > 0:
            pids = descendants(self.me)
            if self.child:
                try:
                    os.killpg(self.child, signal.SIGTERM)
                except OSError:
                    pass
            _signal_all(pids, signal.SIGTERM)
            self.wait_program(time.monotonic() + self.grace)
        self.kill_everything()

    def exit_code(self) -> int:
        status = self.status
        if status is None:
            return 128 + signal.SIGKILL
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                import resource

                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core of ours for it
            except (ImportError, ValueError, OSError):
                pass
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(sig, signal.SIG_DFL)
            os.kill(self.me, sig)  # the caller sees the program's own death
            return 128 + sig
        return os.WEXITSTATUS(status)


def _fd_target(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def _holds(pid: int, target: str) -> bool:
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return True
            except OSError:
                continue
    except OSError:
        return False
    return False


def main() -> int:
    if len(sys.argv) < 4 or sys.argv[1] not in ("all", "detached"):
        sys.stderr.write("usage: reaper.py all|detached GRACE PROGRAM [ARGS...]\n")
        return 2
    mode, grace, argv = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    for sig in _HANDLED:
        signal.signal(sig, _stop)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # our caller died: take the tree down with us
    run = Run(mode, grace, argv)
    try:
        if os.getppid() == 1:
            raise Stop(signal.SIGTERM)  # the caller died before PDEATHSIG was set
        run.start()
        run.wait_program(None)
        for sig in _HANDLED:
            signal.signal(sig, signal.SIG_IGN)  # cleaning up now; a late SIGTERM changes nothing
        run.end_leftovers()
    except Stop:
        for sig in _HANDLED:
            signal.signal(sig, signal.SIG_IGN)
        run.stop()
    return run.exit_code()


if __name__ == "__main__":
    sys.exit(main())
