"""MySQL URL parameters reach the driver, or the URL is refused: TLS against a real MariaDB TLS
listener of the test's own (certificates made here, `require_secure_transport=ON`), MySQL option
files, and one line with exit code 2 for a parameter lockconsole does not know.

Without TLS parameters the driver still tries TLS (PREFERRED), so what proves they are passed is
what they refuse: VERIFY_CA with the wrong CA fails, REQUIRED fails on a server without TLS, and
DISABLED fails on a server that requires it."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.helpers import unavailable

pytestmark = pytest.mark.mysql


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _certificates(folder: Path) -> None:
    """A CA, a server certificate it signs for 127.0.0.1, and a second CA that signs nothing."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key",
                "-out", f"{ca}.pem", "-days", "2", "-subj", f"/CN=test {ca}")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=127.0.0.1")  # fmt: skip
    (folder / "ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext")  # fmt: skip


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A MariaDB server of this module's own that accepts TLS connections only."""
    for tool in ("openssl", "mariadb-install-db"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} is not installed (apt-get install openssl mariadb-server)")
    mariadbd = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
    folder = tmp_path_factory.mktemp("mariadb-tls")
    _certificates(folder)
    data = folder / "data"
    subprocess.run(
        ["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
         "--auth-root-authentication-method=normal", "--skip-test-db"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    port = _free_port()
    server = subprocess.Popen(
        [mariadbd, "--no-defaults", f"--datadir={data}", "--user=root", f"--port={port}",
         "--bind-address=127.0.0.1", f"--socket={folder / 'sock'}", f"--pid-file={folder / 'pid'}",
         f"--log-error={folder / 'err.log'}", f"--ssl-ca={folder / 'ca.pem'}",
         f"--ssl-cert={folder / 'server.pem'}", f"--ssl-key={folder / 'server.key'}",
         "--require-secure-transport=ON", "--skip-log-bin", "--innodb-buffer-pool-size=16M"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        import pymysql

        deadline = time.monotonic() + 60
        while True:
            try:
                conn = pymysql.connect(
                    host="127.0.0.1", port=port, user="root", ssl_ca=str(folder / "ca.pem")
                )
                with conn.cursor() as cur:
                    cur.execute("create database app")
                conn.close()
                break
            except pymysql.MySQLError:
                assert server.poll() is None, (folder / "err.log").read_text()
                assert time.monotonic() < deadline, "the TLS server did not start"
                time.sleep(0.1)
        yield {"port": port, "folder": folder}
    finally:
        server.terminate()
        server.wait(timeout=60)


def config_for(write_config, url: str) -> Path:
    return write_config(
        f'[databases.main]\nurl = "{url}"\n[jobs.billing]\nstrategy = "mysql"\ncommand = ["true"]\n'
    )


def test_tls_parameters_are_passed_to_the_driver(tls_server, write_config, cli_env) -> None:
    folder, port = tls_server["folder"], tls_server["port"]
    base = f"mysql://root@127.0.0.1:{port}/app"
    good = f"{base}?ssl_mode=VERIFY_IDENTITY&ssl_ca={folder / 'ca.pem'}"
    config = config_for(write_config, good)
    ran = run_cli(config, "run", "billing", "--manual", "--json", env=cli_env)
    assert ran.returncode == 0, ran.stderr
    for view in (
        ["history", "--json"],
        ["locks", "--json"],
        ["check", "--json", "--no-duplicates"],
    ):
        seen = run_cli(config, *view, env=cli_env)  # the SQLAlchemy paths carry TLS too
        assert seen.returncode == 0, (view, seen.stdout, seen.stderr)
    assert json.loads(run_cli(config, "history", "--json", env=cli_env).stdout)["runs"]
    required = run_cli(
        config_for(write_config, f"{base}?ssl_mode=REQUIRED"), "run", "billing", env=cli_env
    )
    assert required.returncode == 0, required.stderr
    # what would pass if the parameters were dropped: each must fail
    wrong_ca = f"{base}?ssl_mode=VERIFY_CA&ssl_ca={folder / 'other-ca.pem'}"
    refused = run_cli(config_for(write_config, wrong_ca), "run", "billing", "--manual", env=cli_env)
    assert refused.returncode == 5 and "certificate" in refused.stderr.lower(), refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    disabled = run_cli(
        config_for(write_config, f"{base}?ssl_mode=DISABLED"), "run", "billing", env=cli_env
    )
    assert disabled.returncode == 5, disabled.stderr  # the server requires TLS


def test_required_fails_on_a_server_without_tls(mysql_url, write_config, cli_env) -> None:
    config = config_for(write_config, f"{mysql_url}?ssl_mode=REQUIRED")
    done = run_cli(config, "run", "billing", "--manual", env=cli_env)
    assert done.returncode == 5 and "ssl" in done.stderr.lower(), done.stderr


def test_an_option_file_is_read(tls_server, write_config, cli_env, tmp_path) -> None:
    folder, port = tls_server["folder"], tls_server["port"]
    for ca, expected in (("ca.pem", 0), ("other-ca.pem", 5)):
        options = tmp_path / f"{ca}.cnf"
        options.write_text(f"[client]\nssl-ca = {folder / ca}\n", encoding="utf-8")
        url = f"mysql://root@127.0.0.1:{port}/app?read_default_file={options}"
        done = run_cli(config_for(write_config, url), "run", "billing", "--manual", env=cli_env)
        assert done.returncode == expected, (ca, done.stderr)


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("sslmode=require", "unknown MySQL URL parameter 'sslmode'"),
        ("ssl_mode=bogus", "ssl_mode 'bogus' is not one of"),
        ("ssl_mode=VERIFY_CA", "needs ssl_ca"),
        ("ssl_mode=DISABLED&ssl_ca=/x.pem", "choose one"),
    ],
)
def test_a_parameter_not_passed_on_is_refused(query, said, write_config, cli_env) -> None:
    config = config_for(write_config, f"mysql://root@127.0.0.1:3306/test?{query}")
    done = run_cli(config, "run", "billing", "--manual", env=cli_env)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and said in lines[0], done.stderr
