"""Database URLs: parsing, and passwords that never reach a screen."""

from __future__ import annotations

import pytest

from lockconsole.config.urls import expand_env, mask, parse_url, scrub
from lockconsole.model.jobs import DatabaseURL

from tests.support.cli import run_cli
from tests.support.config import config_toml


def test_parse_postgresql() -> None:
    u = parse_url("postgresql://billing:pw@db.internal:6432/billing?sslmode=require")
    assert (u.dialect, u.host, u.port, u.user, u.password, u.database) == (
        "postgresql",
        "db.internal",
        6432,
        "billing",
        "pw",
        "billing",
    )
    assert u.query == (("sslmode", "require"),)
    assert u.masked == "postgresql://billing:***@db.internal:6432/billing?sslmode=require"


@pytest.mark.parametrize(
    ("raw", "dialect"),
    [
        ("postgres://h/db", "postgresql"),
        ("postgresql+psycopg://h/db", "postgresql"),
        ("mysql://root@127.0.0.1:3306/test", "mysql"),
        ("mariadb+pymysql://root@h/test", "mysql"),
        ("sqlite:///jobs.db", "sqlite"),
        ("sqlite:////var/lib/jobs.db", "sqlite"),
    ],
)
def test_dialects(raw: str, dialect: str) -> None:
    assert parse_url(raw).dialect == dialect


def test_socket_url() -> None:
    u = parse_url("postgresql://postgres:@/postgres?host=/tmp/x")
    assert u.host is None and u.port is None
    assert u.user == "postgres" and not u.password
    assert u.database == "postgres"
    assert ("host", "/tmp/x") in u.query
    assert u.masked == "postgresql://postgres:@/postgres?host=/tmp/x"


def test_ipv6_host() -> None:
    u = parse_url("postgresql://u:pw@[::1]:5433/db")
    assert u.host == "::1" and u.port == 5433 and "pw" not in u.masked


def test_percent_encoded_password() -> None:
    u = parse_url("postgresql://u:p%40ss%2Fw%3Ard@h/db")
    assert u.password == "p@ss/w:rd"
    assert u.masked == "postgresql://u:***@h/db"
    assert "p%40ss" not in repr(u) and "p@ss" not in repr(u)


def test_password_in_query_is_masked() -> None:
    u = parse_url("postgresql://u@h/db?sslmode=require&password=hunter2&application_name=x")
    assert u.password == "hunter2"
    assert "hunter2" not in u.masked
    assert "password=***" in u.masked and "sslmode=require" in u.masked
    assert "hunter2" not in mask("mysql://u@h/db?PASSWORD=hunter2")


def test_unencoded_at_in_password_is_masked() -> None:
    assert mask("postgresql://u:p@ss@h/db") == "postgresql://u:***@h/db"


def test_repr_and_str_never_show_the_password() -> None:
    u = parse_url("postgresql://u:topsecret@h/db?password=topsecret")
    for text in (repr(u), str(u), repr([u]), f"{u}"):
        assert "topsecret" not in text
    assert "topsecret" not in repr(DatabaseURL("postgresql", "x", "y", password="topsecret"))


def test_scrub() -> None:
    u = parse_url("postgresql://u:p%40ss@h/db")
    message = f'connection to "{u.raw}" failed: password p@ss / p%40ss rejected'
    cleaned = scrub(message, u)
    assert "p@ss" not in cleaned and "p%40ss" not in cleaned
    assert u.masked in cleaned
    assert scrub("nothing to hide", parse_url("postgresql://h/db")) == "nothing to hide"


def test_expand_env() -> None:
    assert expand_env("postgresql://u:${PW}@h/db", {"PW": "x"}) == "postgresql://u:x@h/db"
    assert expand_env("no vars $PW here", {}) == "no vars $PW here"
    with pytest.raises(ValueError, match="environment variable NOPE is not set"):
        expand_env("postgresql://u:${NOPE}@h/db", {})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "non-empty"),
        ("db.internal/billing", "not a URL"),
        ("oracle://h/db", "unsupported URL scheme 'oracle'"),
        ("://h/db", "unsupported URL scheme"),
        ("postgresql://h:99999/db", "port must be a number"),
        ("postgresql://h:0/db", "port must be a number"),
        ("postgresql://h:abc/db", "port must be a number"),
        ("postgresql://u@my host/db", "spaces"),
        ("postgresql://u@h/db\n", "spaces"),
        ("postgresql://u@[::1/db", "malformed URL"),
        ("sqlite://relative.db", "SQLite URL"),
    ],
)
def test_bad_urls(raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        parse_url(raw)
    assert "\n" not in str(info.value)


def test_error_never_echoes_a_password() -> None:
    # an unencoded '/' in the password makes the rest look like a port: not repeated back
    with pytest.raises(ValueError) as info:
        parse_url("postgresql://u:pa/ss@host/db")
    assert "pa" not in str(info.value).replace("password", "").replace("passwords", "")


# -- libpq conninfo strings ---------------------------------------------------------------


def test_a_libpq_conninfo_string_is_a_postgresql_url() -> None:
    url = parse_url("host=db1.internal port=6432 dbname=app user=lockconsole password='s3 cr=t'")
    assert (url.dialect, url.host, url.port, url.database, url.user) == (
        "postgresql",
        "db1.internal",
        6432,
        "app",
        "lockconsole",
    )
    assert url.password == "s3 cr=t" and "s3 cr=t" not in url.masked and "***" in url.masked


def test_a_conninfo_socket_directory_or_host_list_stays_a_parameter() -> None:
    sock = parse_url("host=/var/run/postgresql dbname='my db'")
    assert sock.host is None and sock.database == "my db"
    assert ("host", "/var/run/postgresql") in sock.query
    many = parse_url("host=a,b port=5432,5433 dbname=x target_session_attrs=read-write")
    assert dict(many.query) == {
        "host": "a,b",
        "port": "5432,5433",
        "target_session_attrs": "read-write",
    }


def test_a_bad_conninfo_string_is_refused_without_echoing_it() -> None:
    with pytest.raises(ValueError) as refused:
        parse_url("host=db1 password hunter2")
    assert "conninfo" in str(refused.value) and "hunter2" not in str(refused.value)
    with pytest.raises(ValueError, match="conninfo"):
        parse_url("nosuchoption=1")


def test_a_bad_conninfo_in_the_config_is_one_line_and_exit_2(write_config, cli_env):
    job = {"strategy": "pg-session", "command": ["true"]}
    config = write_config(
        config_toml(databases={"main": "host=db1 password hunter2"}, jobs={"j": job})
    )
    out = run_cli(config, "run", "j", env=cli_env, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "conninfo" in out.stderr and "hunter2" not in out.stderr + out.stdout
