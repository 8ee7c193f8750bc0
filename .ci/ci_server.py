"""What every CI check against the `outreach` binary needs: a fresh database, the admin CLI, a server.

Imported by `real_clients.py`, `browser_check.py` and `mcp_oauth_check.py`, so the three start and
stop the server and make and drop their databases the same way:

- `fresh_database(backend, work, postgres_url)`: a SQLite file in the work folder, or a PostgreSQL
  database `outreach_ci_<random>` made beside the administrative connection and dropped on exit;
- `admin(binary, database_url, ...)`: `outreach admin --json ...`, its JSON object;
- `Server(binary, database_url, log, extra_args)`: `outreach serve` on a free loopback port, healthy
  before it is used and stopped (SIGTERM, then SIGKILL) whatever happens;
- `Checks`: named checks run one after another, each counted as passed or failed, so a failure in one
  does not hide the others, and the counts go to `.ci/run` through a small file (`--counts`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path


class CheckFailed(Exception):
    pass


def section(title: str) -> None:
    print(f"\n--- {title}", flush=True)


def check(condition: object, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=False, text=True, **kwargs)


def admin(binary: str, database_url: str, *args: str) -> dict:
    """Runs `outreach admin --json ...` and returns its JSON object. Workspaces start with no
    starter credits, so each check grants exactly what it needs."""
    cmd = [binary, "admin", "--database-url", database_url, "--json", *args]
    env = {**os.environ, "OUTREACH_STARTER_CREDITS": "0"}
    done = run(cmd, capture_output=True, timeout=120, env=env)
    if done.returncode != 0:
        raise CheckFailed(f"`outreach admin {' '.join(args)}` failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return json.loads(done.stdout)


def http_get(url: str, key: str | None = None, timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url)
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def argument_parser(description: str | None, keep_help: str) -> argparse.ArgumentParser:
    """The options every check script takes: the binary, the backend, the administrative
    PostgreSQL connection and `--keep`; a script adds its own after."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True, help="the outreach binary to test")
    parser.add_argument("--database", choices=["sqlite", "postgres"], required=True)
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("CI_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
        help="an administrative connection; a fresh database is created beside it",
    )
    parser.add_argument("--keep", action="store_true", help=f"keep the work folder ({keep_help})")
    return parser


def executable(path: str) -> str | None:
    """The binary's absolute path, or None (with a message) when it cannot be run. Also makes
    SIGTERM (a CI time-out, a parent's kill) unwind like Ctrl-C, so servers and databases go too."""
    binary = str(Path(path).resolve())
    if not os.access(binary, os.X_OK):
        print(f"error: {binary} is not an executable; build it first", file=sys.stderr)
        return None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return binary


class BackgroundHTTPServer:
    """An `http.server` answering from a daemon thread for the duration of a `with` block (a
    loopback redirect URI, a metadata document). Subclasses build `self.httpd` and call
    `super().__init__()`."""

    httpd: ThreadingHTTPServer

    def __init__(self) -> None:
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class PostgresDatabase:
    """A fresh PostgreSQL database, dropped on exit."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.name = f"outreach_ci_{secrets.token_hex(6)}"
        base, _, _ = admin_url.rpartition("/")
        self.url = f"{base}/{self.name}"

    def psql(self, sql: str) -> None:
        done = run(["psql", self.admin_url, "-v", "ON_ERROR_STOP=1", "-qAtc", sql], capture_output=True, timeout=60)
        if done.returncode != 0:
            raise CheckFailed(f"psql `{sql}` failed:\n{done.stdout}{done.stderr}")

    def __enter__(self) -> PostgresDatabase:
        self.psql(f'create database "{self.name}"')
        print(f"created PostgreSQL database {self.name}")
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.psql(f'drop database if exists "{self.name}" with (force)')
            print(f"dropped PostgreSQL database {self.name}")
        except (CheckFailed, subprocess.TimeoutExpired) as error:
            print(f"warning: could not drop {self.name}: {error}", file=sys.stderr)


@contextlib.contextmanager
def fresh_database(backend: str, work: Path, postgres_url: str) -> Iterator[str]:
    """Yields the URL of a fresh database of `backend` (`sqlite` or `postgres`)."""
    if backend == "postgres":
        with PostgresDatabase(postgres_url) as database:
            yield database.url
    else:
        yield f"sqlite://{work / 'outreach.db'}"


class Server:
    """`outreach serve` on a free loopback port; stopped (SIGTERM, then SIGKILL) on exit."""

    def __init__(self, binary: str, database_url: str, log_path: Path, extra_args: list[str] | None = None) -> None:
        self.binary = binary
        self.database_url = database_url
        self.log_path = log_path
        self.extra_args = list(extra_args or [])
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log = None

    def __enter__(self) -> Server:
        env = dict(os.environ)
        # The key made by `admin` is a `pk_test_` key; a production server would refuse it.
        env.pop("OUTREACH_ENV", None)
        env.pop("OUTREACH_BASE_URL", None)
        env.setdefault("RUST_LOG", "info,sqlx=warn")
        # The log is a file: plain text, no terminal colours.
        env["NO_COLOR"] = "1"
        # The free port is only free when we looked; if another process takes it first, try another.
        for attempt in range(3):
            if attempt:
                self.port = free_port()
                self.base_url = f"http://127.0.0.1:{self.port}"
            self.log = open(self.log_path, "w")
            self.process = subprocess.Popen(
                [
                    self.binary,
                    "serve",
                    "--addr",
                    f"127.0.0.1:{self.port}",
                    "--database-url",
                    self.database_url,
                    *self.extra_args,
                ],
                stdout=self.log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )
            try:
                self.wait_healthy()
                break
            except CheckFailed:
                lost_port = self.process.poll() is not None and "could not listen" in self.log_path.read_text()
                if not lost_port or attempt == 2:
                    self.__exit__()
                    raise
                self.log.close()
            except BaseException:
                self.__exit__()
                raise
        print(f"server up at {self.base_url} (pid {self.process.pid}, log {self.log_path})")
        return self

    def wait_healthy(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise CheckFailed(f"the server exited with {self.process.returncode} before it was healthy")
            try:
                status, _, body = http_get(f"{self.base_url}/healthz", timeout=2.0)
                if status == 200:
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.2)
        raise CheckFailed(f"the server did not answer /healthz within {timeout:.0f}s")

    def __exit__(self, *exc) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                print("warning: the server did not stop within 15s of SIGTERM; killing it", file=sys.stderr)
                self.process.kill()
                self.process.wait()
            print(f"server stopped (exit {self.process.returncode})")
        if self.log:
            self.log.close()

    def print_log(self, last: int = 80) -> None:
        lines = self.log_path.read_text(errors="replace").splitlines()
        print(f"--- last {min(last, len(lines))} lines of the server log ({self.log_path})")
        for line in lines[-last:]:
            print(line)

    def internal_errors(self) -> list[str]:
        return [line for line in self.log_path.read_text(errors="replace").splitlines() if "internal error" in line]


def innermost(error: BaseException) -> BaseException:
    """The first leaf of an exception group (async clients wrap what went wrong in task groups)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


class Checks:
    """Named checks, run in order and counted; a failed one is reported and the next one still runs.

    A check may depend on an earlier one (`needs`): when that one failed, it is counted as failed
    without running, since its precondition is missing. `finish` writes `passed failed` to the counts
    file `.ci/run` adds to its totals, and returns the exit status.
    """

    def __init__(self, label: str, counts_path: Path | None) -> None:
        self.label = label
        self.counts_path = counts_path
        self.results: dict[str, bool] = {}
        self.on_failure: Callable[[str], None] | None = None

    def run(self, name: str, fn: Callable[[], None], needs: tuple[str, ...] = ()) -> bool:
        section(f"{self.label}: {name}")
        missing = [need for need in needs if not self.results.get(need)]
        if missing:
            print(f"FAILED {name}: not run, it needs {', '.join(missing)} which failed", flush=True)
            self.results[name] = False
            return False
        started = time.monotonic()
        try:
            fn()
        except Exception as error:  # noqa: BLE001 - every failure of a check is reported the same way
            self.results[name] = False
            cause = innermost(error)
            if not isinstance(cause, CheckFailed):
                traceback.print_exc()
            print(f"FAILED {name}: {cause}", flush=True)
            if self.on_failure:
                try:
                    self.on_failure(name)
                except Exception as extra:  # noqa: BLE001 - the report of a failure must not fail
                    print(f"(could not save the failure's evidence: {extra})")
            return False
        self.results[name] = True
        print(f"ok {name} ({time.monotonic() - started:.1f}s)", flush=True)
        return True

    def fail_all(self, names: list[str], reason: str) -> None:
        """Counts checks that could not run at all (the server did not start, say) as failed."""
        for name in names:
            if name not in self.results:
                print(f"FAILED {name}: not run ({reason})")
                self.results[name] = False

    @property
    def passed(self) -> int:
        return sum(1 for ok in self.results.values() if ok)

    @property
    def failed(self) -> int:
        return sum(1 for ok in self.results.values() if not ok)

    def no_internal_errors(self, server: "Server") -> None:
        """A check that fails when the server logged an internal error while the others ran."""
        internal = server.internal_errors()
        if internal:
            print("\n".join(internal[:20]))
            self.run("no-internal-errors", lambda: check(False, f"the server logged {len(internal)} internal error(s)"))

    def finish(self) -> int:
        if self.counts_path:
            self.counts_path.write_text(f"{self.passed} {self.failed}\n")
        print(f"\n{self.label}: {self.passed} checks passed, {self.failed} failed")
        for name, ok in self.results.items():
            print(f"  {'ok    ' if ok else 'FAILED'} {name}")
        return 0 if self.failed == 0 and self.results else 1


class Guard:
    """What `guarded` needs to know of the run it guards: the server, once one is started."""

    server: "Server | None" = None


@contextlib.contextmanager
def guarded(checks: Checks, names: list[str], work: Path, keep: bool) -> Iterator[Guard]:
    """Runs a script's set-up and checks: a failure of the set-up counts every check not yet run
    as failed, and at the end the server log is printed and the work folder kept when anything
    failed (or `keep` asks for it), else the folder is removed."""
    guard = Guard()
    failed_setup = False
    try:
        yield guard
    except Exception as failure:  # noqa: BLE001 - whatever stops the set-up, the checks did not run
        failed_setup = True
        if not isinstance(failure, CheckFailed):
            traceback.print_exc()
        print(f"\nFAILED before or between the checks: {failure}", file=sys.stderr, flush=True)
        checks.fail_all(names, "the set-up failed")
    finally:
        if (checks.failed or failed_setup) and guard.server is not None and guard.server.log_path.exists():
            guard.server.print_log()
        if keep or checks.failed or failed_setup:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
