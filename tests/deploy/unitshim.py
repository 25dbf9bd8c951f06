"""systemctl, reboot and scp on a lab host (tests/deploy/guidelab.py), where systemd is not PID 1
and there is no sshd: run the units as systemd would, from their files, with the standard library.

Each host's /usr/bin/systemctl (so /usr/sbin/reboot too) and /usr/local/sbin/scp are this script,
with RAG_LAB (the lab's folder) and RAG_HOST (this host) set. A unit starts as systemd starts it:
the unit file and its drop-ins read; its StateDirectory, RuntimeDirectory and LogsDirectory made
and owned by User=; its Environment= and systemd's own variables, nothing of the caller's; `$VAR`
in ExecStart expanded as systemd does; User=/Group= through setpriv; NoNewPrivileges, LimitNOFILE;
ProtectSystem=full (/usr and /etc read-only) and PrivateTmp in a mount namespace of its own;
Type=notify: `start` returns once READY=1 came, or fails if the daemon exits first. The main pid
lives in /run/rag-systemd (gone at a reboot, as /run is); the output goes to the lab's journal
folder. `reboot` only records the request: the test powers the host off and on.
"""

from __future__ import annotations

import os
import pwd
import re
import resource
import shlex
import signal
import socket
import subprocess
import sys
import time

UNIT_DIR = "/etc/systemd/system"
RUN = "/run/rag-systemd"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # systemd's default
LAB = os.environ.get("RAG_LAB", "")
HOST = os.environ.get("RAG_HOST", "")


def unit_name(word: str) -> str:
    return word if "." in word else f"{word}.service"


def load(name: str) -> dict[str, list[str]]:
    """[Service] and [Unit] keys of the unit file and its drop-ins, in systemd's order (an
    empty assignment resets a list, as `ExecStart=` does in a drop-in)."""
    path = os.path.join(UNIT_DIR, name)
    if not os.path.exists(path):
        raise SystemExit(f"Failed to start {name}: Unit {name} not found.")
    files = [path]
    drop = path + ".d"
    if os.path.isdir(drop):
        files += [os.path.join(drop, f) for f in sorted(os.listdir(drop)) if f.endswith(".conf")]
    keys: dict[str, list[str]] = {}
    for f in files:
        with open(f) as fh:
            lines = fh.read().replace("\\\n", " ").splitlines()
        for line in lines:
            line = line.strip()
            if not line or line[0] in "#;[" or "=" not in line:
                continue
            key, value = (s.strip() for s in line.split("=", 1))
            if value == "":
                keys[key] = []
            else:
                keys.setdefault(key, []).append(value)
    return keys


def one(unit: dict[str, list[str]], key: str, default: str = "") -> str:
    return unit[key][-1] if unit.get(key) else default


def environment(unit: dict[str, list[str]]) -> dict[str, str]:
    env = {"PATH": PATH}
    user = one(unit, "User")
    if user:
        pw = pwd.getpwnam(user)
        env.update(USER=user, LOGNAME=user, HOME=pw.pw_dir, SHELL=pw.pw_shell)
    for value in unit.get("Environment", []):
        for assignment in shlex.split(value):
            key, _, val = assignment.partition("=")
            env[key] = val
    return env


def expand(command: str, env: dict[str, str]) -> list[str]:
    """ExecStart's words: `$VAR` alone is split into words, `${VAR}` is one word."""
    argv: list[str] = []
    for word in shlex.split(command.lstrip("-@:+!")):
        whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if whole:
            argv += env.get(whole.group(1), "").split()
        else:
            argv.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                               lambda m: env.get(m.group(1), ""), word))
    return argv


def make_dirs(unit: dict[str, list[str]]) -> dict[str, str]:
    """The unit's directories, owned by User=/Group= (recursively where the owner changed)."""
    user, group = one(unit, "User", "root"), one(unit, "Group")
    pw = pwd.getpwnam(user)
    uid = pw.pw_uid
    gid = pw.pw_gid if not group else int(subprocess.run(
        ["getent", "group", group], capture_output=True, text=True, check=True
    ).stdout.split(":")[2])
    made = {}
    for key, base, var in (("StateDirectory", "/var/lib", "STATE_DIRECTORY"),
                           ("RuntimeDirectory", "/run", "RUNTIME_DIRECTORY"),
                           ("LogsDirectory", "/var/log", "LOGS_DIRECTORY")):
        names = " ".join(unit.get(key, [])).split()
        mode = int(one(unit, key + "Mode", "0755"), 8)
        for name in names:
            path = os.path.join(base, name)
            os.makedirs(path, exist_ok=True)
            os.chmod(path, mode)
            if os.stat(path).st_uid != uid:
                for root, dirs, files in os.walk(path):
                    for entry in (root, *(os.path.join(root, d) for d in dirs),
                                  *(os.path.join(root, f) for f in files)):
                        os.lchown(entry, uid, gid)
            made[var] = path
    return made


def pidfile(name: str) -> str:
    return os.path.join(RUN, name + ".pid")


def main_pid(name: str) -> int | None:
    try:
        with open(pidfile(name)) as fh:
            pid = int(fh.read())
    except FileNotFoundError:
        return None
    return pid if alive(pid) else None


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def start(name: str) -> int:
    if main_pid(name) is not None:
        return 0
    unit = load(name)
    env = environment(unit)
    env.update(make_dirs(unit))
    os.makedirs(RUN, exist_ok=True)
    notify = os.path.join(RUN, name + ".notify")
    if os.path.exists(notify):
        os.unlink(notify)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(notify)
    os.chmod(notify, 0o666)  # NotifyAccess=main from a daemon that is not root
    env["NOTIFY_SOCKET"] = notify
    env["INVOCATION_ID"] = os.urandom(16).hex()
    os.makedirs(os.path.join(LAB, "journal"), exist_ok=True)
    with open(os.path.join(LAB, "journal", f"{HOST}.{name}.log"), "ab") as journal:
        proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--", sys.executable, "-I",
             os.path.abspath(__file__), "--exec", name],
            env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=journal,
            stderr=subprocess.STDOUT, start_new_session=True)
    with open(pidfile(name), "w") as fh:
        fh.write(str(proc.pid))
    sock.settimeout(0.5)
    deadline = time.monotonic() + 90
    ready = one(unit, "Type", "simple") != "notify"
    while not ready:
        if proc.poll() is not None:
            print(f"Job for {name} failed: the daemon exited with {proc.returncode} before "
                  f"READY=1 (see {HOST}.{name}.log in the lab's journal)", file=sys.stderr)
            return 1
        if time.monotonic() > deadline:
            proc.kill()
            print(f"Job for {name} failed: no READY=1 within 90 s", file=sys.stderr)
            return 1
        try:
            ready = b"READY=1" in sock.recv(4096).split(b"\n")
        except TimeoutError:
            pass
    sock.close()
    return 0


def exec_unit(name: str) -> None:
    """In the unit's own mount namespace: its protections, then become User= and exec."""
    unit = load(name)
    if one(unit, "ProtectSystem") in ("yes", "full", "strict", "true"):
        tops = ["/usr", "/boot", "/efi"] + (["/etc"] if one(unit, "ProtectSystem") != "yes"
                                             else [])
        for top in filter(os.path.isdir, tops):
            subprocess.run(["mount", "--rbind", top, top], check=True)
            with open("/proc/self/mounts") as fh:
                points = [line.split()[1] for line in fh]
            for point in points:
                if point == top or point.startswith(top + "/"):
                    subprocess.run(["mount", "-o", "remount,bind,ro", point], check=False)
    if one(unit, "PrivateTmp") in ("yes", "true"):
        for tmp in ("/tmp", "/var/tmp"):
            subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", tmp], check=True)
    limit = one(unit, "LimitNOFILE")
    if limit:
        # capped at what this machine allows us (a container's hard limit may be lower)
        cap = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        value = int(limit) if cap == resource.RLIM_INFINITY else min(int(limit), cap)
        resource.setrlimit(resource.RLIMIT_NOFILE, (value, value))
    argv = expand(one(unit, "ExecStart"), dict(os.environ))
    user = one(unit, "User")
    wrap = ["setpriv"]
    if one(unit, "NoNewPrivileges") in ("yes", "true"):
        wrap.append("--no-new-privs")
    if user:
        wrap += ["--reuid", user, "--regid", one(unit, "Group", user), "--init-groups"]
    os.execvp("setpriv", [*wrap, "--", *argv])


def stop(name: str) -> int:
    pid = main_pid(name)
    if pid is None:
        return 0
    unit = load(name)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + float(one(unit, "TimeoutStopSec", "90"))
    while alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    os.unlink(pidfile(name))
    return 0


def kill(sig: str, names: list[str]) -> int:
    rc = 0
    number = getattr(signal, sig if sig.startswith("SIG") else "SIG" + sig)
    for name in names:
        pid = main_pid(name)
        if pid is None:
            print(f"Failed to kill unit {name}: not loaded or not active", file=sys.stderr)
            rc = 1
        else:
            os.kill(pid, number)
    return rc


def reboot() -> int:
    with open(os.path.join(LAB, f"reboot-requested.{HOST}"), "w") as fh:
        fh.write(str(time.time()))
    return 0


def systemctl(args: list[str]) -> int:
    now = "--now" in args
    args = [a for a in args if a not in ("--now", "--no-pager", "-q", "--quiet")]
    sig = "TERM"
    if "-s" in args:
        i = args.index("-s")
        sig = args[i + 1]
        del args[i:i + 2]
    verb, names = args[0], [unit_name(a) for a in args[1:]]
    if verb == "daemon-reload":
        return 0
    if verb == "reboot":
        return reboot()
    if verb == "enable":
        wants = os.path.join(UNIT_DIR, "multi-user.target.wants")
        os.makedirs(wants, exist_ok=True)
        for name in names:
            link = os.path.join(wants, name)
            if not os.path.islink(link):
                os.symlink(os.path.join(UNIT_DIR, name), link)
        return max((start(n) for n in names), default=0) if now else 0
    if verb == "start":
        return max(start(n) for n in names)
    if verb == "stop":
        return max(stop(n) for n in names)
    if verb == "restart":
        return max(stop(n) or start(n) for n in names)
    if verb == "reload":
        return kill("HUP", names)
    if verb == "kill":
        return kill(sig, names)
    if verb == "is-active":
        active = [main_pid(n) is not None for n in names]
        print("\n".join("active" if a else "inactive" for a in active))
        return 0 if all(active) else 3
    if verb == "boot":  # the lab's own: what systemd starts at boot, of what the host enabled
        # (the units this machine enabled are below the host's /etc, not its own changes)
        wants = os.path.join(LAB, "hosts", HOST, "etc.up", "systemd", "system",
                             "multi-user.target.wants")
        names = sorted(os.listdir(wants)) if os.path.isdir(wants) else []
        return max((start(n) for n in names), default=0)
    if verb == "shutdown":  # the lab's own: what systemd stops before a reboot
        names = [f[:-4] for f in os.listdir(RUN) if f.endswith(".pid")] \
            if os.path.isdir(RUN) else []
        return max((stop(n) for n in names), default=0)
    print(f"systemctl {verb}: not emulated in the lab (tests/deploy/unitshim.py)",
          file=sys.stderr)
    return 1


def scp(args: list[str]) -> int:
    """`scp [-p] FILE root@HOST:PATH`: written on HOST as root (mode kept with -p)."""
    keep = "-p" in args
    src, dest = [a for a in args if not a.startswith("-")]
    target, path = dest.split(":", 1)
    host = target.split("@")[-1]
    with open(os.path.join(LAB, "holders", host)) as fh:
        holder = fh.read().strip()
    with open(src, "rb") as fh:
        data = fh.read()
    mode = oct(os.stat(src).st_mode & 0o7777 if keep else 0o644)[2:]
    script = f'cat > {shlex.quote(path)} && chmod {mode} {shlex.quote(path)}'
    done = subprocess.run(["nsenter", "-t", holder, "-m", "-u", "-n", "--", "sh", "-c",
                           script], input=data)
    return done.returncode


def main() -> int:
    if sys.argv[1] == "--exec":
        exec_unit(sys.argv[2])
    program = os.path.basename(sys.argv[1])
    args = sys.argv[2:]
    if program == "scp":
        return scp(args)
    if program in ("reboot", "poweroff"):
        return reboot()
    return systemctl(args)


if __name__ == "__main__":
    sys.exit(main())
