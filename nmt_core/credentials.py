"""Credentials come from the environment, never from a URI.

A storage or tracking URI is printed, logged as an MLflow param, written to `sweeper.json` and put on a Ray Job's
entrypoint; a secret inside one would land in all of them. So a URI carrying one (userinfo such as `user:pw@` or
`token@`, or a query key such as `secret_key`; percent-encoded too, in the fragment, in `;`-separated parameters
or as the userinfo of a URL given as a parameter's value) is refused before anything reads or writes, in a line
that names the environment variables to use and shows the URI with its secret parts replaced; every other error
line that shows a URI shows it through `redact` too.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from nmt_core.config import ConfigError

HIDDEN = "***"
SHOWN = 100  # at most this many characters of a refused URI (secrets already hidden) in an error line
AUTHORITY = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://([^?#]*)@")  # userinfo: up to the last '@' before the query
PARAMS = re.compile(r"([?#&;])")  # what starts a parameter, where clients read parameters
SHOWN_KEY = 40  # at most this many characters of a parameter's key in an error line
DECODINGS = 3  # percent-decoded at most this many times
# query keys that carry a secret, matched as parts of a key, case-insensitive (pyarrow's S3 `access_key`,
# `secret_key`, `session_token`; signed URLs' `X-Amz-Signature`, `X-Amz-Security-Token`; GCS' access_token)
SECRET_KEYS = (
    "secret",
    "password",
    "passwd",
    "token",
    "credential",
    "signature",
    "access_key",
    "accesskey",
    "api_key",
    "apikey",
    "private_key",
)
# too short to match inside other keys: whole words only (Azure's shared access `sig`, an ODBC connection's `PWD`)
SECRET_WORDS = ("sig", "pwd")
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


def _decoded(uri: str) -> str:
    """`uri` with its percent-encoding undone, repeatedly (%2540 is an '@' to a client that decodes twice): an
    encoded `user%3Apw%40host` carries the same secret as `user:pw@host`."""
    for _ in range(DECODINGS):
        plain = unquote(uri)
        if plain == uri:
            break
        uri = plain
    return uri


def _userinfo(uri: str) -> str | None:
    match = AUTHORITY.match(uri)
    return match.group(2) if match else None


def _harmless_userinfo(scheme: str, userinfo: str) -> bool:
    """A database store's user name (the password comes from its driver's environment) or GCS' `anonymous@`."""
    if ":" in userinfo:
        return False
    return scheme in DATABASES or (scheme in ("gs", "gcs") and userinfo == "anonymous")


def _credential(uri: str) -> str | None:
    """How the userinfo of `uri` carries a credential ('user:password@' or 'token@'); None if it carries none."""
    userinfo = _userinfo(uri)
    scheme = uri.split(":", 1)[0].split("+", 1)[0].lower()
    if userinfo is None or _harmless_userinfo(scheme, userinfo):
        return None
    return "user:password@" if ":" in userinfo else "token@"


def _nested_credential(value: str) -> str | None:
    """A parameter's value that is a URL with userinfo (`endpoint_override=http://key:secret@host`), or pyarrow's
    bare `host:port` with `key:secret@` before it (there a bare `name@` may be an ordinary name)."""
    if "://" in value:
        return _credential(value)
    return "user:password@" if ":" in value.rpartition("@")[0] else None


def _params(uri: str) -> list[str]:
    """`uri` split before each parameter: its base, then every separator with the `key=value` after it, in the
    query, the fragment and `;`-separated lists alike (clients differ in which of them they read)."""
    parts = PARAMS.split(uri)
    return [parts[0]] + [mark + param for mark, param in zip(parts[1::2], parts[2::2])]


def secret_parts(uri: str) -> list[str]:
    """What in `uri` carries a credential, named without its value: 'user:password@', "query key 'secret_key'",
    "user:password@ in query key 'endpoint_override'"."""
    plain = _decoded(uri)
    found = [_credential(plain)]
    for param in _params(_hidden_userinfo(plain))[1:]:  # a password may hold '&' or ';'
        key, _, value = param[1:].partition("=")
        nested = _nested_credential(value)
        found.append(
            f"query key {key[:SHOWN_KEY]!r}"
            if _is_secret_key(key)
            else f"{nested} in query key {key[:SHOWN_KEY]!r}"
            if nested
            else None
        )
    return [part for part in found if part]


def _hidden_userinfo(uri: str) -> str:
    """`uri` with any userinfo replaced by *** (a database's user name too: it is shown, not refused)."""
    match = AUTHORITY.match(uri)
    return f"{match.group(1)}://{HIDDEN}@{uri[match.end() :]}" if match else uri


def _hidden_param(param: str) -> str:
    """One separator and `key=value` with a secret value, or the userinfo of a URL in it, replaced by ***."""
    mark, (key, eq, value) = param[0], param[1:].partition("=")
    if _is_secret_key(key):
        return f"{mark}{key}={HIDDEN}"
    if "://" in value:
        return f"{mark}{key}{eq}{_hidden_userinfo(value)}"
    return f"{mark}{key}{eq}{HIDDEN}@{value.rpartition('@')[2]}" if _nested_credential(value) else param


def redact(uri: str) -> str:
    """`uri`, percent-decoded, with its userinfo, every secret parameter value and every userinfo nested in a
    parameter replaced by ***, unprintable characters as '?', cut to SHOWN characters: safe in an error line."""
    base, *params = _params(_hidden_userinfo(_decoded(uri)))  # userinfo first: a password may hold '&' or ';'
    shown = base + "".join(_hidden_param(param) for param in params)
    shown = "".join(c if c.isprintable() else "?" for c in shown[: SHOWN + 1])
    return shown if len(shown) <= SHOWN else shown[:SHOWN] + "..."


def check_uri(uri: str, kind: str, key: str, source: str) -> str:
    """`uri` itself, or ConfigError (exit 2) if it carries a credential; kind is a key of ENVIRONMENT."""
    found = secret_parts(uri)
    if found:
        raise ConfigError(
            key,
            f"{redact(uri)}: a credential in a URI ({', '.join(found)}) is refused, as it would be "
            f"stored and shown; {ENVIRONMENT[kind]} instead",
            source,
        )
    return uri
