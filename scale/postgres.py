"""A throwaway PostgreSQL cluster on loopback for the scale test.

Uses Debian's server binaries (`apt-get install postgresql`; `make scale-test` installs them
when missing), found under `/usr/lib/postgresql/<version>/bin` or on PATH. PostgreSQL refuses
to run as root, so as root the cluster belongs to the `postgres` user the Debian package
creates (commands run through `runuser`); as anyone else it belongs to that user. The cluster
lives in a fresh temporary folder, listens on 127.0.0.1 on a free port (its Unix socket in
the same folder), trusts local connections (a test cluster: never expose it), and is stopped
and deleted by `stop()`.

    with throwaway_cluster() as pg:
        pg.create_database("prefect")
        pg.url("prefect", driver="asyncpg")   # postgresql+asyncpg://postgres@127.0.0.1:PORT/prefect
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SUPERUSER = "postgres"


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL server binaries are missing or the cluster would not start."""


def server_bin_dir() -> Path:
    """The folder holding `initdb` and `pg_ctl` (newest Debian version first, then PATH)."""
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0,
        reverse=True,
    )
    if versions:
        return versions[0].parent
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise PostgresUnavailable(
        "PostgreSQL server binaries not found: apt-get install postgresql (make scale-test does)"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Cluster:
    root: Path
    port: int
    bin_dir: Path
    owner: str | None  # run the server's commands as this user (root cannot)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def _run(self, *cmd: str) -> subprocess.CompletedProcess[str]:
        argv = [str(self.bin_dir / cmd[0]), *cmd[1:]]
        if self.owner:
            argv = ["runuser", "-u", self.owner, "--", *argv]
        result = subprocess.run(argv, capture_output=True, text=True, cwd=self.root, check=False)
        if result.returncode != 0:
            raise PostgresUnavailable(
                f"{' '.join(cmd[:2])} failed ({result.returncode}): {result.stderr.strip()}"
                + (f"\n{self.log.read_text()[-2000:]}" if self.log.exists() else "")
            )
        return result

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data), "--auth=trust", f"--username={SUPERUSER}",
                  "--encoding=UTF8", "--no-instructions")  # fmt: skip
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c max_connections=200 -c fsync=off -c synchronous_commit=off"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w",
                  "-t", "60", "start")  # fmt: skip

    @property
    def pid(self) -> int:
        """The postmaster's process id (its backends are its children)."""
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def create_database(self, name: str) -> None:
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, name)

    def url(self, database: str, *, driver: str) -> str:
        return f"postgresql+{driver}://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
            except PostgresUnavailable:
                pid = int((self.data / "postmaster.pid").read_text().split()[0])
                os.kill(pid, 9)
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def throwaway_cluster() -> Iterator[Cluster]:
    """Start a fresh cluster; stop and delete it on exit, whatever happened."""
    bin_dir = server_bin_dir()
    root = Path(tempfile.mkdtemp(prefix="canary-pg-"))
    owner = None
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam(SUPERUSER)
        except KeyError:
            shutil.rmtree(root)
            raise PostgresUnavailable(
                "running as root and there is no 'postgres' user to own the cluster "
                "(Debian's postgresql package creates it)"
            ) from None
        os.chown(root, user.pw_uid, user.pw_gid)
        owner = SUPERUSER
    cluster = Cluster(root=root, port=_free_port(), bin_dir=bin_dir, owner=owner)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
