"""A MySQL/MariaDB URL's query parameters as PyMySQL's connect arguments; any other is refused.

    mysql://app@db:3306/billing?ssl_mode=VERIFY_IDENTITY&ssl_ca=/etc/ssl/db-ca.pem

`ssl_mode` follows the mysql client's: DISABLED (no TLS), PREFERRED (TLS when the server offers
it: the driver's default), REQUIRED (TLS or no connection; the certificate is checked when
`ssl_ca` is given), VERIFY_CA (checked against `ssl_ca`), VERIFY_IDENTITY (and the host name).
`ssl_cert`, `ssl_key` and `ssl_key_password` give a client certificate. `read_default_file`
reads a MySQL option file (`[client]`, or `read_default_group`); what it sets wins over the URL,
as the driver reads it. A parameter lockconsole does not pass on is an error, never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SSL_MODES = ("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")
_PATHS = ("ssl_ca", "ssl_cert", "ssl_key", "read_default_file")
_TEXTS = ("ssl_key_password", "read_default_group")
# handled where the connection is made (charset, socket) or by the URL parser (the password)
_ELSEWHERE = ("charset", "unix_socket", "password")
KNOWN = (*_ELSEWHERE, "ssl_mode", *_PATHS, *_TEXTS)


def driver_options(query: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """PyMySQL's connect arguments for the URL's TLS and option-file parameters.

    Raises ValueError (one line, naming the parameter) for one it does not know or a bad value.
    """
    given: dict[str, str] = {}
    for key, value in query:
        if key not in KNOWN:
            raise ValueError(
                f"unknown MySQL URL parameter {key!r} (known: {', '.join(sorted(KNOWN))})"
            )
        given[key] = value
    out: dict[str, Any] = {k: given[k] for k in (*_PATHS, *_TEXTS) if given.get(k)}
    mode = given.get("ssl_mode", "").upper()
    if "ssl_mode" in given and mode not in SSL_MODES:
        raise ValueError(f"ssl_mode {given['ssl_mode']!r} is not one of {', '.join(SSL_MODES)}")
    if mode in ("VERIFY_CA", "VERIFY_IDENTITY") and "ssl_ca" not in out:
        raise ValueError(f"ssl_mode={mode} needs ssl_ca (the CA certificate to check against)")
    if mode == "DISABLED":
        if any(k.startswith("ssl_") for k in out):
            raise ValueError("ssl_mode=DISABLED with ssl_ca, ssl_cert or ssl_key: choose one")
        return {**out, "ssl_disabled": True}
    if mode == "REQUIRED" and not any(k in out for k in ("ssl_ca", "ssl_cert", "ssl_key")):
        # TLS or nothing, the server's certificate unchecked (no CA to check it against)
        return {**out, "ssl": {"check_hostname": False, "verify_mode": False}}
    if mode == "REQUIRED":
        out["ssl_verify_cert"] = "ssl_ca" in out
    elif mode in ("VERIFY_CA", "VERIFY_IDENTITY"):
        out["ssl_verify_cert"] = True
        out["ssl_verify_identity"] = mode == "VERIFY_IDENTITY"
    return out
