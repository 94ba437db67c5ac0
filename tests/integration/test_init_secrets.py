"""`lockconsole init` never writes a password, in any URL form: the user-info (plain and
percent-encoded), `?password=`, libpq's `password=` and `sslpassword=` in the query, a
percent-encoded key, PyMySQL's `ssl_key_password=`. Each becomes a ${NAME} reference, and the
run says so; the written file, given those variables, names the same database."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from lockconsole.config.loader import load_config
from lockconsole.starter.template import url_line

from tests.integration.test_init import init

SECRET = "Sekr3t@pw/%x"  # a character of each kind that URLs encode
ENCODED = quote(SECRET, safe="")


def _pg(url: str, auth: str = "postgres", query: str = "") -> str:
    parts = urlsplit(url)
    return f"postgresql://{auth}@{parts.hostname}:{parts.port}{parts.path}{query}"


PG_FORMS = {
    "userinfo": lambda u: _pg(u, f"postgres:{ENCODED}"),
    "query password": lambda u: _pg(u, query=f"?password={ENCODED}"),
    "libpq user and password in the query": lambda u: _pg(
        u, "", f"?user=postgres&password={ENCODED}"
    ).replace("//@", "//"),
    "percent-encoded key": lambda u: _pg(u, query=f"?pass%77ord={ENCODED}"),
    "sslpassword and password": lambda u: _pg(
        u, f"postgres:{ENCODED}", f"?sslpassword={ENCODED}x&sslmode=disable"
    ),
}


def _leaks(text: str) -> list[str]:
    return [form for form in (SECRET, ENCODED, "Sekr3t") if form in text]


@pytest.mark.parametrize("form", sorted(PG_FORMS))
def test_init_writes_no_password_in_any_url_form(
    form: str, pg_url: str, cli_env, tmp_path: Path
) -> None:
    url = PG_FORMS[form](pg_url)  # trust auth: any password is accepted
    done = init(cli_env, tmp_path, "--url", url)
    assert done.returncode == 0, done.stderr
    path = tmp_path / "lockconsole.toml"
    text = path.read_text()
    assert not _leaks(text + done.stdout + done.stderr), (form, text)
    assert "${LOCKCONSOLE_DB_PASSWORD}" in text
    assert "replaced by ${LOCKCONSOLE_DB_PASSWORD}" in done.stdout  # and it says so
    assert os.stat(path).st_mode & 0o077 == 0
    # the variable holds the text the URL held (percent-encoded), as the file says
    assert "percent-encoded" in text
    env = {"LOCKCONSOLE_DB_PASSWORD": ENCODED, "LOCKCONSOLE_DB_SSLPASSWORD": ENCODED + "x"}
    database = load_config(str(path), env).databases["main"].url
    assert database.password == SECRET
    assert dict(database.query).get("sslpassword", SECRET + "x") == SECRET + "x"


@pytest.mark.parametrize(
    ("given", "written", "variables"),
    [
        (
            f"mysql://root:{ENCODED}@db:3306/app?ssl_key_password={ENCODED}&charset=utf8mb4",
            "mysql://root:${LOCKCONSOLE_DB_PASSWORD}@db:3306/app"
            "?ssl_key_password=${LOCKCONSOLE_DB_SSL_KEY_PASSWORD}&charset=utf8mb4",
            ["LOCKCONSOLE_DB_PASSWORD", "LOCKCONSOLE_DB_SSL_KEY_PASSWORD"],
        ),
        (
            f"mysql://root@db/app?PASSWORD={ENCODED}#frag",
            "mysql://root@db/app?PASSWORD=${LOCKCONSOLE_DB_PASSWORD}#frag",
            ["LOCKCONSOLE_DB_PASSWORD"],
        ),
        (  # already a reference: kept as given, nothing to say
            "postgresql://app:${APP_PW}@db/app?sslpassword=${KEY_PW}",
            "postgresql://app:${APP_PW}@db/app?sslpassword=${KEY_PW}",
            [],
        ),
        (  # a user without a password, an empty password value: nothing to hide
            "postgresql://app@db/app?password=&options=-c%20x%3Dy",
            "postgresql://app@db/app?password=&options=-c%20x%3Dy",
            [],
        ),
    ],
)
def test_url_line_replaces_every_secret(given: str, written: str, variables: list[str]) -> None:
    text, notes = url_line(given)
    assert text == written
    assert [n.rpartition("${")[2].rstrip("}") for n in notes] == variables
    assert not _leaks(text)
