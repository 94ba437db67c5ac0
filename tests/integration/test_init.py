"""`lockconsole init` against real servers: PostgreSQL directly, through a real PgBouncer in
transaction pooling (it suggests pg-xact), and MariaDB; with accounts that lack the viewing and
releasing privileges (the file names the missing grants). The written file is valid (`lockconsole
config` reads it), it is never overwritten, and a bad URL is one line with nothing written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from lockconsole.config.loader import load_config
from lockconsole.config.urls import parse_url

from tests.support.cli import CliResult, run_cli
from tests.support.pgbouncer_fixture import PGBOUNCER_VIEWER


def init(env: dict[str, str], cwd: Path, *args: str) -> CliResult:
    return run_cli(None, "init", *args, env=env, cwd=cwd)


def _with_user(url: str, user: str, password: str | None = None) -> str:
    parts = urlsplit(url)
    auth = user if password is None else f"{user}:{password}"
    return urlunsplit(parts._replace(netloc=f"{auth}@{parts.hostname}:{parts.port}"))


def _database(request: pytest.FixtureRequest, pg_url: str) -> str:
    """The test's database: its own when it asks for one. init offers at most 20 held keys as
    jobs, and the shared database holds other tests' locks (another worker's, another run's)."""
    if "own_database" in request.fixturenames:
        return str(request.getfixturevalue("own_database"))
    return pg_url


@pytest.fixture
def held_lock(request: pytest.FixtureRequest, pg_url: str, uid: str) -> Iterator[int]:
    """A session of the test holding an advisory lock, as an app would, named billing-web."""
    key = int(uid, 16) % (2**62)
    url = _database(request, pg_url)
    conn = psycopg.connect(url, autocommit=True, application_name="billing-web")
    conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    yield key
    conn.close()


@pytest.fixture
def shedlock_table(request: pytest.FixtureRequest, pg_url: str, uid: str) -> Iterator[str]:
    """A ShedLock-shaped table whose name is hostile (a quote, a newline, a bracket)."""
    name = f'shedlock_{uid}"\n[jobs.evil]'
    pg_conn = psycopg.connect(_database(request, pg_url), autocommit=True)
    pg_conn.execute(
        sql.SQL(
            "CREATE TABLE {} (name varchar(64) PRIMARY KEY, lock_until timestamp, "
            "locked_at timestamp, locked_by varchar(255))"
        ).format(sql.Identifier(name))
    )
    yield name
    pg_conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(name)))
    pg_conn.close()


def test_postgres_direct(
    own_database: str, held_lock: int, shedlock_table: str, cli_env, tmp_path: Path
) -> None:
    pg_url = own_database
    done = init(cli_env, tmp_path, "--url", pg_url)
    assert done.returncode == 0, done.stderr
    path = tmp_path / "lockconsole.toml"
    text = path.read_text()
    assert "#   server: PostgreSQL " in text
    assert "#   pooler in front: no (direct connection" in text
    assert "#   viewing every holder's session: yes" in text
    assert "#   releasing (ending) other sessions: yes" in text
    assert "# Suggested strategy: pg-session" in text
    # the lock held now, offered as a job with its key and who holds it
    assert f"# key = {held_lock}" in text and "(billing-web)" in text
    # the ShedLock table, hostile name and all, as a TOML string (no new table, no new job)
    assert f"# lease_table = {json.dumps(shedlock_table)}" in text
    config = load_config(str(path))
    assert list(config.databases) == ["main"] and config.jobs == {}
    assert config.databases["main"].url.raw == pg_url
    assert "wrote " in done.stdout and "server: PostgreSQL" in done.stdout
    # never overwrites
    again = init(cli_env, tmp_path, "--url", pg_url)
    assert again.returncode == 2 and "exists; nothing was written" in again.stderr
    assert path.read_text() == text


def test_through_pgbouncer_suggests_pg_xact(pgbouncer: str, cli_env, tmp_path: Path) -> None:
    done = init(cli_env, tmp_path, "--url", pgbouncer, "through-pgbouncer.toml")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "through-pgbouncer.toml").read_text()
    assert "#   pooler in front: yes (" in text
    assert "# Suggested strategy: pg-xact (a pooler (pgbouncer, transaction pooling)" in text
    assert '# strategy = "pg-xact"' in text
    load_config(str(tmp_path / "through-pgbouncer.toml"))
    print(done.stdout)  # what a user sees (pytest -s)


@pytest.fixture
def plain_role(pg_conn, uid: str) -> Iterator[str]:
    """A login role with no monitoring or signalling grants."""
    role = f"lc_init_{uid}"
    pg_conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    yield role
    pg_conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_postgres_viewer_without_grants(
    own_database: str, plain_role: str, held_lock: int, cli_env, tmp_path: Path
) -> None:
    url = _with_user(own_database, plain_role, "s3cret-pw")  # trust auth: any password is accepted
    done = init(cli_env, tmp_path, "--url", url)
    assert done.returncode == 0, done.stderr
    path = tmp_path / "lockconsole.toml"
    text = path.read_text()
    assert (
        f"#   viewing every holder's session: no, other sessions are hidden; "
        f"run: GRANT pg_read_all_stats TO {plain_role};" in text
    )
    assert (
        f"#   releasing (ending) other sessions: no; "
        f"run: GRANT pg_signal_backend, pg_read_all_stats TO {plain_role};" in text
    )
    assert "session details hidden" in text  # the inspector's note, as the console shows it
    assert f"# key = {held_lock}" in text  # pg_locks is readable by every role
    # the password stays out of the file and the output
    assert "s3cret-pw" not in text + done.stdout + done.stderr
    assert "${LOCKCONSOLE_DB_PASSWORD}" in text
    assert path.stat().st_mode & 0o777 == 0o600
    config = load_config(str(path), {"LOCKCONSOLE_DB_PASSWORD": "s3cret-pw"})
    assert config.databases["main"].url.password == "s3cret-pw"


@pytest.fixture
def pgbouncer_viewer(pg_conn) -> Iterator[str]:
    """PGBOUNCER_VIEWER as a login role with no monitoring or signalling grants; its sessions
    (PgBouncer's server connections among them) are ended before it is dropped."""
    role = PGBOUNCER_VIEWER
    pg_conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    yield role
    pg_conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,)
    )
    pg_conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_a_viewer_through_pgbouncer_is_told_its_missing_grants(
    pgbouncer: str,
    pgbouncer_viewer: str,
    held_lock: int,
    cli_env,
    tmp_path: Path,
) -> None:
    url = pgbouncer.replace("postgres@", f"{pgbouncer_viewer}:s3cret-pw@", 1)
    done = init(cli_env, tmp_path, "--url", url)
    assert done.returncode == 0, done.stderr
    path = tmp_path / "lockconsole.toml"
    text = path.read_text()
    # the viewer may not read PgBouncer's admin console: the refusal is the evidence, the pool
    # mode stays unknown, and pg-xact is still the suggestion
    assert "#   pooler in front: yes (" in text
    assert "the admin console refused us (FATAL:  not allowed), which only PgBouncer does" in text
    assert "# Suggested strategy: pg-xact (a pooler (pgbouncer, unknown pooling)" in text
    assert f"#   account: {pgbouncer_viewer}" in text
    assert (
        f"#   viewing every holder's session: no, other sessions are hidden; "
        f"run: GRANT pg_read_all_stats TO {pgbouncer_viewer};" in text
    )
    assert (
        f"#   releasing (ending) other sessions: no; "
        f"run: GRANT pg_signal_backend, pg_read_all_stats TO {pgbouncer_viewer};" in text
    )
    assert f"# key = {held_lock}" in text  # pg_locks is readable through the pooler too
    out = done.stdout
    assert "viewing every holder's session: no" in out and f"TO {pgbouncer_viewer};" in out
    assert "s3cret-pw" not in text + done.stdout + done.stderr
    load_config(str(path), {"LOCKCONSOLE_DB_PASSWORD": "s3cret-pw"})


@pytest.fixture
def mysql_viewer(mysql_conn, mysql_url: str, uid: str) -> Iterator[str]:
    """A MariaDB account with SELECT on the test schema only (no PROCESS, no CONNECTION ADMIN)."""
    user = f"lc_init_{uid}"
    schema = parse_url(mysql_url).database
    hosts = ("%", "localhost")  # 'localhost' too: an anonymous ''@localhost would win
    with mysql_conn.cursor() as cur:
        for host in hosts:
            cur.execute(f"CREATE USER '{user}'@'{host}' IDENTIFIED BY 'pw-{uid}'")
            cur.execute(f"GRANT SELECT ON `{schema}`.* TO '{user}'@'{host}'")
    yield user
    with mysql_conn.cursor() as cur:
        for host in hosts:
            cur.execute(f"DROP USER '{user}'@'{host}'")


@pytest.mark.mysql
def test_mariadb_root_and_viewer(
    mysql_url: str, mysql_conn, mysql_viewer: str, uid: str, cli_env, tmp_path: Path
) -> None:
    name = f"billing_{uid}"
    with mysql_conn.cursor() as cur:
        # every holder is listed through MariaDB's plugin (global, harmless; left installed)
        cur.execute("INSTALL SONAME 'metadata_lock_info'")
        cur.execute("SELECT GET_LOCK(%s, 0)", (name,))
        assert cur.fetchone() == (1,)
    try:
        root = init(cli_env, tmp_path, "--url", mysql_url, "root.toml")
        parts = urlsplit(mysql_url)
        viewer_url = urlunsplit(
            parts._replace(netloc=f"{mysql_viewer}:pw-{uid}@{parts.hostname}:{parts.port}")
        )
        viewer = init(cli_env, tmp_path, "--url", viewer_url, "viewer.toml")
    finally:
        with mysql_conn.cursor() as cur:
            cur.execute("SELECT RELEASE_LOCK(%s)", (name,))
    assert root.returncode == 0, root.stderr
    text = (tmp_path / "root.toml").read_text()
    assert "#   server: MariaDB " in text
    assert "# Suggested strategy: mysql" in text
    assert f'# key = "{name}"' in text
    assert "#   viewing every holder's session: yes" in text
    load_config(str(tmp_path / "root.toml"))
    assert viewer.returncode == 0, viewer.stderr
    text = (tmp_path / "viewer.toml").read_text()
    assert f"run: GRANT PROCESS ON *.* TO '{mysql_viewer}'@'" in text
    assert f"run: GRANT CONNECTION ADMIN ON *.* TO '{mysql_viewer}'@'" in text
    assert f"pw-{uid}" not in text + viewer.stdout + viewer.stderr


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgres:/nowhere", "init: --url: not a URL"),
        ("redis://127.0.0.1:6379/0", "init: --url must be a postgresql:// or mysql:// URL"),
        ("postgresql://u:${NO_SUCH_VARIABLE_H20}@h/d", "NO_SUCH_VARIABLE_H20 is not set"),
    ],
)
def test_bad_url_is_one_line_and_writes_nothing(
    url: str, expected: str, cli_env, tmp_path: Path
) -> None:
    done = init(cli_env, tmp_path, "--url", url)
    assert done.returncode == 2
    assert expected in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.glob("*.toml"))


def test_unreachable_database_writes_nothing(cli_env, tmp_path: Path) -> None:
    done = init(cli_env, tmp_path, "--url", "postgresql://postgres:pw@127.0.0.1:1/nothing")
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1 and "pw@" not in done.stderr
    assert not (tmp_path / "lockconsole.toml").exists()


def test_without_url_writes_an_unprobed_starter(cli_env, tmp_path: Path) -> None:
    done = init(cli_env, tmp_path)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "lockconsole.toml").read_text()
    assert "What the database said" not in text and "# edit me" in text
