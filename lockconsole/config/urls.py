"""Database URLs: parse, check and mask, without importing SQLAlchemy (the run path stays fast)."""

from __future__ import annotations

import os
import re
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from lockconsole.model.jobs import DatabaseURL, Dialect

_SCHEMES: dict[str, Dialect] = {
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "postgresql+psycopg": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
    "mysql+pymysql": "mysql",
    "mariadb+pymysql": "mysql",
    "sqlite": "sqlite",
    "redis": "redis",  # redis:// and rediss:// (TLS): the redis strategy's lock store
    "rediss": "redis",
}
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

# Secrets in any rendering: a URL's user-info (ours, SQLAlchemy's postgresql+psycopg://,
# a driver's DSN), key=value pairs (URL queries, libpq conninfo) and quoted "password": "x".
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s:/@?#]*):[^\s/]*@")
_PAIR = re.compile(
    r"""(?i)\b((?:ssl)?pass(?:word|wd)?)(\s*=\s*)('(?:[^'\\]|\\.)*'|"[^"]*"|[^\s&;'",)]*)"""
)
_QUOTED = re.compile(r"""(?i)(["']?(?:ssl)?password["']?\s*:\s*)("(?:[^"\\]|\\.)*"|'[^']*')""")
MIN_SECRET = 4  # shorter passwords are masked by the patterns only (a literal would hit words)
_secrets: set[str] = set()
_version = 0  # grows with _secrets: cached redactions of an older version are stale


def secrets_version() -> int:
    return _version


def remember_secret(secret: str | None) -> None:
    """Have redact() mask `secret` wherever it appears (every URL parse calls this)."""
    global _version
    if secret and len(secret) >= MIN_SECRET and secret not in _secrets:
        _version += 1
        _secrets.add(secret)
        _secrets.add(quote(secret, safe=""))
        _secrets.add(repr(secret)[1:-1])


# Variables whose values are secrets: the clients' own password variables, and any whose name
# says PASSWORD, SECRET or TOKEN (any case). A job inherits them, and may print them.
_SECRET_VARIABLES = ("PGPASSWORD", "MYSQL_PWD")
_SECRET_NAME = re.compile(r"(?i)PASSWORD|SECRET|TOKEN")
_environ_seen: frozenset[tuple[str, str]] = frozenset()


def secret_variables(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables of `environ` (default os.environ) whose values are masked as secrets."""
    env = os.environ if environ is None else environ
    return {
        name: value
        for name, value in env.items()
        if name in _SECRET_VARIABLES or _SECRET_NAME.search(name)
    }


def remember_environment(environ: dict[str, str] | None = None) -> None:
    """Have redact() mask the values of the environment's secret variables (at least
    MIN_SECRET characters: shorter ones would mask ordinary words); cheap when nothing changed."""
    global _environ_seen
    found = secret_variables(environ)
    items = frozenset(found.items())
    if items <= _environ_seen:
        return
    _environ_seen |= items
    for value in found.values():
        remember_secret(value)


def redact(text: str) -> str:
    """`text` with every password masked: the one filter for all lockconsole shows or keeps."""
    if not text:
        return text
    text = _USERINFO.sub(r"\1:***@", text)
    text = _PAIR.sub(lambda m: f"{m.group(1)}{m.group(2)}***", text)
    text = _QUOTED.sub(lambda m: f'{m.group(1)}"***"', text)
    for secret in sorted(_secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "***")
    return text


def expand_env(text: str, environ: dict[str, str] | None = None) -> str:
    """Replace ${NAME} with the environment's value; a missing variable is an error."""
    env = os.environ if environ is None else environ

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in env:
            raise ValueError(f"environment variable {name} is not set")
        return env[name]

    return _ENV.sub(sub, text)


def parse_url(raw: str) -> DatabaseURL:
    """Parse a postgresql://, mysql://, sqlite:/// or redis(s):// URL; ValueError says why not."""
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError("a database URL must be a non-empty string")
    scheme, sep, _ = raw.partition("://")
    if not sep and "=" in raw:  # a libpq conninfo string: host=db1 dbname=app user=lc
        raw = conninfo_url(raw)
        scheme, sep, _ = raw.partition("://")
    if not sep:
        raise ValueError(
            "not a URL (expected postgresql://, mysql://, sqlite:/// or a libpq conninfo "
            "such as 'host=db1 dbname=app')"
        )
    dialect = _SCHEMES.get(scheme.lower())
    if dialect is None:
        raise ValueError(
            f"unsupported URL scheme {scheme!r} "
            "(expected postgresql://, mysql://, sqlite:///, redis:// or rediss://)"
        )
    if dialect == "sqlite":
        path = raw.split("://", 1)[1]
        if not path.startswith("/"):
            raise ValueError("a SQLite URL is sqlite:///relative/path or sqlite:////absolute/path")
        return DatabaseURL("sqlite", raw, raw, database=path[1:] or ":memory:")
    if any(c.isspace() for c in raw):
        raise ValueError("a URL must not contain spaces or line breaks (percent-encode them)")
    try:
        parts = urlsplit(raw)
    except ValueError as exc:  # e.g. "Invalid IPv6 URL"; never echoes the URL
        raise ValueError(f"malformed URL: {exc}") from None
    hostport = parts.netloc.rpartition("@")[2]
    port_text = hostport.rpartition("]")[2] if hostport.startswith("[") else hostport
    port_text = port_text.partition(":")[2] if ":" in port_text else ""
    if port_text and (not port_text.isdigit() or not 0 < int(port_text) <= 65535):
        # the text after ':' is not repeated: a password with a '/' would land here
        raise ValueError(
            "the port must be a number from 1 to 65535 "
            "(percent-encode ':', '/', '@' in user names and passwords)"
        )
    port = int(port_text) if port_text else None
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    database = unquote(parts.path.lstrip("/")) or None
    query = tuple(parse_qsl(parts.query, keep_blank_values=True))
    for k, _v in query:
        if k.lower() == "password":
            password = password or _v
        if k.lower().endswith("password"):
            remember_secret(_v)
    remember_secret(password)
    if dialect == "mysql":  # every parameter reaches the driver, or the URL is refused
        from lockconsole.config.mysql_params import driver_options

        driver_options(query)
    return DatabaseURL(
        dialect,
        raw,
        mask(raw),
        host=parts.hostname,
        port=port,
        user=user,
        password=password,
        database=database,
        query=query,
    )


def conninfo_url(conninfo: str) -> str:
    """The postgresql:// URL of a libpq `key=value` conninfo string, parsed by psycopg's own
    conninfo module (quoting and escapes as libpq has them); ValueError says why not. A host
    that is not one plain name (a socket directory, a list of hosts) stays a parameter."""
    from urllib.parse import quote, urlencode

    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # pragma: no cover - psycopg is a core dependency
        raise ValueError("a libpq conninfo string needs psycopg") from None
    try:
        found = {k: str(v) for k, v in conninfo_to_dict(conninfo).items() if v is not None}
    except Exception:  # psycopg's text can quote a word of the string, a password perhaps
        raise ValueError(
            "not a libpq conninfo string (expected key=value pairs such as "
            "'host=db1 port=5432 dbname=app user=lockconsole')"
        ) from None
    remember_secret(found.get("password"))
    user, password = found.pop("user", None), found.pop("password", None)
    host, port = found.get("host", ""), found.get("port", "")
    plain = bool(host) and all(c.isalnum() or c in ".-_" for c in host)
    plain = plain and (port.isdigit() or not port)
    netloc = ""
    if user is not None:
        netloc = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "") + "@"
    elif password:
        found["password"] = password
    if plain:
        found.pop("host")
        found.pop("port", None)
        netloc += host + (f":{port}" if port else "")
    dbname = quote(found.pop("dbname", ""), safe="")
    query = urlencode(sorted(found.items()))
    return f"postgresql://{netloc}/{dbname}" + (f"?{query}" if query else "")


def mask(raw: str) -> str:
    """The URL with any password replaced by ***; safe for screens, logs and JSON."""
    try:
        parts = urlsplit(raw)
    except ValueError:
        return "<unparsable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, colon, password = userinfo.partition(":")
        if colon and password:
            userinfo = user + ":***"
        netloc = f"{userinfo}@{hostport}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = "&".join(
            f"{quote(k)}={'***' if k.lower().endswith('password') else quote(v, safe='/')}"
            for k, v in pairs
        )
    out = f"{parts.scheme}://{netloc}{parts.path}"
    return f"{out}?{query}" if query else out


def scrub(text: str, *urls: DatabaseURL) -> str:
    """Remove every password of `urls` from a message (driver errors may echo them)."""
    for url in urls:
        remember_secret(url.password)
        if url.password:
            text = text.replace(url.password, "***")
            text = text.replace(quote(url.password, safe=""), "***")
        if url.raw and url.raw != url.masked:
            text = text.replace(url.raw, url.masked)
    return redact(text)


def _redacting_record_factory() -> None:
    """Mask passwords in every log record of lockconsole's loggers, whatever the handler."""
    import logging

    previous = logging.getLogRecordFactory()
    if getattr(previous, "lockconsole_redacts", False):
        return

    class Factory:
        lockconsole_redacts = True  # installed once, even if this module is loaded again

        def __call__(self, *args: object, **kwargs: object) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            if record.name.startswith("lockconsole"):
                try:
                    message = record.getMessage()
                except Exception:  # a bad format string stays logging's own problem
                    return record
                masked = redact(message)
                if masked != message or record.args:
                    record.msg, record.args = masked, ()
            return record

    logging.setLogRecordFactory(Factory())


_redacting_record_factory()
