"""Credentials come from the environment, never from a URI.

A storage or tracking URI is printed, logged as an MLflow param, written to `sweeper.json` and put on a Ray Job's
entrypoint; a secret inside one would land in all of them. So a URI carrying one (userinfo such as `user:pw@` or
`token@`, or a query key such as `secret_key`) is refused before anything reads or writes, in a line that names the
environment variables to use and shows the URI with its secret parts replaced.
"""
from __future__ import annotations

import re
from urllib.parse import unquote

from nmt_core.config import ConfigError

HIDDEN = "***"
SHOWN = 100  # at most this many characters of a refused URI (secrets already hidden) in an error line
AUTHORITY = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://([^?#]*)@")  # userinfo: up to the last '@' before the query
# query keys that carry a secret, matched as parts of a key, case-insensitive (pyarrow's S3 `access_key`,
# `secret_key`, `session_token`; signed URLs' `X-Amz-Signature`, `X-Amz-Security-Token`; GCS' access_token)
SECRET_KEYS = ("secret", "password", "passwd", "token", "credential", "signature", "access_key", "accesskey",
               "api_key", "apikey", "private_key")
SECRET_WORDS = ("sig",)  # too short to match inside other keys: whole words only (Azure's shared access `sig`)
DATABASES = ("postgresql", "postgres", "mysql", "mssql", "oracle")  # SQLAlchemy store URIs: a user name is no secret
ENVIRONMENT = {
    "storage": "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), AWS_PROFILE or the "
               "provider's credential chain (GOOGLE_APPLICATION_CREDENTIALS for gs://)",
    "tracking": "set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, or MLFLOW_TRACKING_TOKEN (a database "
                "store: its driver's own, such as PGPASSWORD or ~/.pgpass)",
    "database": "give the password through the database driver's own environment (PGPASSWORD or ~/.pgpass for "
                "PostgreSQL, ~/.my.cnf for MySQL)",
    "ray": "set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token) to the cluster's token",
}


def _is_secret_key(key: str) -> bool:
    words = [w for w in re.split(r"[^a-z0-9]+", unquote(key).lower()) if w]
    return any(w in SECRET_WORDS for w in words) or any(k in "_".join(words) for k in SECRET_KEYS)


def _userinfo(uri: str) -> str | None:
    match = AUTHORITY.match(uri)
    return match.group(2) if match else None


def _harmless_userinfo(scheme: str, userinfo: str) -> bool:
    """A database store's user name (the password comes from its driver's environment) or GCS' `anonymous@`."""
    if ":" in userinfo:
        return False
    return scheme in DATABASES or (scheme in ("gs", "gcs") and userinfo == "anonymous")


def secret_parts(uri: str) -> list[str]:
    """What in `uri` carries a credential, named without its value: 'user:password@', "query key 'secret_key'"."""
    found = []
    userinfo = _userinfo(uri)
    scheme = uri.split(":", 1)[0].split("+", 1)[0].lower()
    if userinfo is not None and not _harmless_userinfo(scheme, userinfo):
        found.append("user:password@" if ":" in userinfo else "token@")
    query = uri.partition("?")[2].partition("#")[0]
    found += [f"query key {key!r}" for key, _, _ in (p.partition("=") for p in query.split("&")) if _is_secret_key(key)]
    return found


def redact(uri: str) -> str:
    """`uri` with its userinfo and every secret query value replaced by ***, cut to SHOWN characters."""
    if _userinfo(uri) is not None:
        scheme, _, rest = uri.partition("://")
        uri = f"{scheme}://{HIDDEN}@{rest.partition('?')[0].rpartition('@')[2]}" + (
            f"?{rest.partition('?')[2]}" if "?" in rest else "")
    base, mark, query = uri.partition("?")
    if mark:
        pairs = (p.partition("=") for p in query.split("&"))
        query = "&".join(f"{k}={HIDDEN}" if _is_secret_key(k) else f"{k}{eq}{v}" for k, eq, v in pairs)
    shown = base + mark + query
    return shown if len(shown) <= SHOWN else shown[:SHOWN] + "..."


def check_uri(uri: str, kind: str, key: str, source: str) -> str:
    """`uri` itself, or ConfigError (exit 2) if it carries a credential; kind is a key of ENVIRONMENT."""
    found = secret_parts(uri)
    if found:
        raise ConfigError(key, f"{redact(uri)}: a credential in a URI ({', '.join(found)}) is refused, as it would be "
                          f"stored and shown; {ENVIRONMENT[kind]} instead", source)
    return uri
