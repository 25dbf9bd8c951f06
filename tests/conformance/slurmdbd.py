"""Accounting for the private Slurm: its own MariaDB (a fresh data directory, 127.0.0.1 on a free
port, its socket in the cluster's directory) and its own slurmdbd, so that sacct answers from
the database as on a real cluster, steps included. Up in about 5 s here (mariadb-install-db
~2 s, slurmdbd's first table creation ~2 s, `sacctmgr add cluster` ~1 s).

    SlurmCluster(SHAPE, accounting=True)   # starts these before slurmctld

slurmdbd reads slurmdbd.conf beside SLURM_CONF's slurm.conf; it serves only where DbdHost
is this host's name. The commands reach it with the munge socket named in
AccountingStoragePass (auth for slurmdbd connections does not read AuthInfo).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

PROGRAMS = ("mariadb-install-db", "mariadbd", "mariadb", "slurmdbd", "sacctmgr")


def accounting_missing() -> str | None:
    """Why the private accounting cannot start here, or None."""
    path = "/usr/sbin:/usr/bin:/sbin:/bin"
    missing = [p for p in PROGRAMS if shutil.which(p) is None and shutil.which(p, path=path)
               is None]
    if missing:
        return (f"slurmdbd/MariaDB not installed (missing {', '.join(missing)}); on Debian: "
                "apt-get install slurmdbd mariadb-server")
    return None


def slurm_conf_lines(dbd_port: int, munge_socket: Path) -> str:
    """slurm.conf's accounting lines (they replace accounting_storage/none)."""
    return ("AccountingStorageType=accounting_storage/slurmdbd\n"
            "AccountingStorageHost=127.0.0.1\n"
            f"AccountingStoragePort={dbd_port}\n"
            f"AccountingStoragePass={munge_socket}\n")


def _which(program: str) -> str:
    return shutil.which(program) or shutil.which(program, path="/usr/sbin:/usr/bin") or program


class Accounting:
    """MariaDB and slurmdbd for one SlurmCluster (its directory, munged and spawn)."""

    def __init__(self, cluster, db_port: int, dbd_port: int) -> None:
        self.c = cluster
        self.db_port, self.dbd_port = db_port, dbd_port

    def start(self, timeout: float = 30.0) -> None:
        c = self.c
        data = c.dir / "db"
        data.mkdir()
        subprocess.run([_which("mariadb-install-db"), "--no-defaults", f"--datadir={data}",
                        "--user=root", "--skip-test-db",
                        "--auth-root-authentication-method=socket"],
                       check=True, capture_output=True, timeout=timeout)
        sock = c.dir / "run" / "mysql.sock"
        c._spawn("mariadbd", [_which("mariadbd"), "--no-defaults", f"--datadir={data}",
                              "--user=root", f"--socket={sock}", f"--port={self.db_port}",
                              "--bind-address=127.0.0.1", f"--pid-file={c.dir}/run/db.pid",
                              "--innodb-buffer-pool-size=16M", "--skip-log-bin"])
        c._wait(sock.exists, timeout, "MariaDB's socket")
        subprocess.run([_which("mariadb"), f"--socket={sock}", "-e",
                        "CREATE DATABASE slurm_acct_db; "
                        "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm'; "
                        "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"],
                       check=True, capture_output=True, timeout=timeout)
        conf = c.dir / "slurmdbd.conf"  # beside slurm.conf: where slurmdbd looks for it
        conf.write_text(
            f"AuthType=auth/munge\nAuthInfo=socket={c.munge_socket}\n"
            f"DbdHost={socket.gethostname()}\nDbdAddr=127.0.0.1\nDbdPort={self.dbd_port}\n"
            "SlurmUser=root\nStorageType=accounting_storage/mysql\n"
            f"StorageHost=127.0.0.1\nStoragePort={self.db_port}\nStorageUser=slurm\n"
            f"StoragePass=slurm\nStorageLoc=slurm_acct_db\nPidFile={c.dir}/run/slurmdbd.pid\n"
            f"LogFile={c.dir}/log/slurmdbd.log\nDebugLevel=info\n")
        conf.chmod(0o600)  # slurmdbd refuses a readable one (it holds the password)
        c._spawn("slurmdbd", [_which("slurmdbd"), "-D"])
        c._wait(lambda: c.run("sacctmgr", "-n", "list", "cluster").returncode == 0, timeout,
                "slurmdbd to answer sacctmgr")
        done = c.run("sacctmgr", "-i", "add", "cluster", c.shape.cluster)
        if done.returncode != 0:
            raise RuntimeError(f"sacctmgr add cluster: {done.stderr.strip()}")
