"""Credentials come from the environment, never from a URI: the URI part of the gate (nmt_core/gates/gate.py).

A storage or tracking URI is printed, logged as an MLflow param, written to `sweeper.json` and put on a Ray Job's
entrypoint; a secret inside one would land in all of them. So a URI is first split where its clients split it
(`urllib.parse.urlsplit` on the text as given: authority, path, query, fragment), and only then is each part
percent-decoded (repeatedly: `%2540` is an '@' to a client that decodes twice) and looked at. What carries a secret
is refused before anything reads or writes: userinfo (`user:pw@`, `token@`, `user%3Apw%40`), a query or fragment
key such as `secret_key` (in `;`-separated lists and inside an encoded value too), the userinfo of a URL given as a
parameter's value, and an '@' after the host (a password holding a raw '/', '?' or '#' that moved the authority's
end) or a port that is not a number (the same, or a broken URL a client would choke on). The refusal names the
environment variables to use and shows the URI through `redact`, which rebuilds it from the parsed parts with every
such part replaced by ***; every other line that shows a URI shows it through `redact` too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from nmt_core.gates.gate import HIDDEN, SHOWN_CHARS, ConfigError, clip, escape, shown

SHOWN = SHOWN_CHARS  # at most this many characters of a URI (secrets already hidden) in an error line
SHOWN_KEY = 40  # at most this many characters of a parameter's key in an error line
DECODINGS = 3  # percent-decoded at most this many times
SEPARATORS = "&;?"  # between parameters in a query or fragment (clients differ in which they read)
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
NAMED_PORTS = ("databricks",)  # databricks://scope:prefix names a secret scope, not a port
ENVIRONMENT = {
    "storage": "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), AWS_PROFILE or the "
    "provider's credential chain (GOOGLE_APPLICATION_CREDENTIALS for gs://)",
    "tracking": "set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, or MLFLOW_TRACKING_TOKEN (a database "
    "store: its driver's own, such as PGPASSWORD or ~/.pgpass)",
    "database": "give the password through the database driver's own environment (PGPASSWORD or ~/.pgpass for "
    "PostgreSQL, ~/.my.cnf for MySQL)",
    "ray": "set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token) to the cluster's token",
    "webhook": "set SWEEPER_WEBHOOK_URL to it (read by every run and resume, never stored)",
}
STRAY_AT = "an '@' after the host (percent-encode a password's '/', '?' or '#', and a path's '@' as %40)"


@dataclass
class Parameter:
    mark: str  # the separator before it: '?', '&', ';' or '#'
    key: str  # decoded
    value: str | None  # decoded; None without '='
    stray_at: bool  # an '@' in the key as written


@dataclass
class Uri:
    """A URI split as written, then each part decoded."""

    scheme: str
    authority: bool  # written with '//'
    userinfo: str | None
    host: str
    path: str
    parameters: list[Parameter] = field(default_factory=list)
    broken: str | None = None  # why a client could not use it (a port that is no number, a bad IPv6 host)
    stray_at: bool = False  # an '@' in the path or a parameter's key as written


def decoded(text: str) -> str:
    """`text` with its percent-encoding undone, repeatedly."""
    for _ in range(DECODINGS):
        plain = unquote(text)
        if plain == text:
            break
        text = plain
    return text


def _parameters(raw: str, first: str) -> list[Parameter]:
    """`key=value` pieces of a query or fragment as written, split at SEPARATORS, then decoded."""
    found, mark, piece = [], first, ""
    for char in raw + "&":
        if char not in SEPARATORS:
            piece += char
            continue
        if piece and found and found[-1].value is not None and "=" not in piece:  # a value's own '&', ';' or '?'
            found[-1].value += mark + decoded(piece)
        elif piece:
            key, eq, value = piece.partition("=")
            found.append(Parameter(mark, decoded(key), decoded(value) if eq else None, "@" in key))
        mark, piece = char, ""
    return found


def _broken_port(scheme: str, hosts: str) -> str | None:
    """Why the port of a host (or of any of a database's `h1:p1,h2:p2`) is not one."""
    if scheme in NAMED_PORTS:
        return None
    for host in hosts.split(","):
        name, colon, port = host.rpartition("]")[2].rpartition(":") if host.startswith("[") else host.rpartition(":")
        if colon and (":" in name or not (port == "" or (port.isdigit() and port.isascii() and int(port) < 65536))):
            return "its port is not a number in [0, 65535]"
    return None


def parse(uri: str, bare_address: bool = False) -> Uri | None:
    """`uri` split as its clients split it, or None for a plain path (no scheme). With bare_address, a value without
    '://' is an authority (Ray's `HOST:PORT`, which may carry `token@`)."""
    text = uri.strip()
    if bare_address and "://" not in text:
        text = "//" + text
    try:
        parts = urlsplit(text)
    except ValueError:  # an unbalanced IPv6 bracket, a host whose characters normalise to '/', '@', ...: its words
        # quote the host, which may hold a password; an '@' in such a URI is taken for one
        why = "its host is neither a name nor an IPv6 address in brackets"
        return Uri(text.partition(":")[0][:20].lower(), True, None, "", "", broken=why, stray_at="@" in text)
    if not parts.scheme and not bare_address or len(parts.scheme) == 1:  # a local path (or a Windows drive letter)
        return None
    host = decoded(parts.netloc)
    userinfo, at, host = host.rpartition("@") if "@" in host else (None, "", host)
    parameters = _parameters(parts.query, "?") + _parameters(parts.fragment, "#")
    return Uri(
        parts.scheme,
        text.removeprefix(parts.scheme + ":").startswith("//"),
        userinfo,
        host,
        decoded(parts.path),
        parameters,
        _broken_port(parts.scheme, host),
        "@" in parts.path or "@" in parts.fragment or any(p.stray_at for p in parameters),
    )


def _is_secret_key(key: str) -> bool:
    words = "".join(c if c.isalnum() else " " for c in key.lower()).split()
    return any(w in SECRET_WORDS for w in words) or any(k in "_".join(words) for k in SECRET_KEYS)


def _harmless_userinfo(scheme: str, userinfo: str) -> bool:
    """A database store's user name (the password comes from its driver's environment) or GCS' `anonymous@`."""
    if ":" in userinfo:
        return False
    base = scheme.split("+", 1)[0]
    return base in DATABASES or (base in ("gs", "gcs") and userinfo == "anonymous")


def _nested(value: str | None) -> str | None:
    """What a parameter's value carries: a URL with userinfo (`endpoint_override=http://key:secret@host`), pyarrow's
    bare `key:secret@host:port`, or a parameter list of its own with a secret key (ODBC's `...;PWD=...`)."""
    if not value:
        return None
    if "://" in value:
        inner = parse(value)
        if inner is not None and inner.broken and "@" in value:  # a URL no client parses, with an '@' in it
            return "user:password@"
        return "user:password@" if inner is not None and _found(inner, nested=False) else None
    if ":" in value.rpartition("@")[0]:
        return "user:password@"
    if "=" in value and any(_is_secret_key(p.key) for p in _parameters(value, "&")):
        return "a secret key"
    return None


def _found(uri: Uri, nested: bool = True) -> list[str]:
    found = []
    if uri.userinfo is not None and not _harmless_userinfo(uri.scheme, uri.userinfo):
        found.append("user:password@" if ":" in uri.userinfo else "token@")
    if uri.stray_at:
        found.append(STRAY_AT)
    for p in uri.parameters:
        if _is_secret_key(p.key):
            found.append(f"query key {clip(p.key, SHOWN_KEY)!r}")
        elif nested and (inner := _nested(p.value)):
            found.append(f"{inner} in query key {clip(p.key, SHOWN_KEY)!r}")
    return found


def secret_parts(uri: str, bare_address: bool = False) -> list[str]:
    """What in `uri` carries a credential, named without its value: 'user:password@', "query key 'secret_key'",
    "user:password@ in query key 'endpoint_override'"."""
    parsed = parse(uri, bare_address)
    return [] if parsed is None else _found(parsed)


def _shown_parameter(p: Parameter) -> str:
    if p.value is None:
        return p.mark + p.key
    if _is_secret_key(p.key):
        return f"{p.mark}{p.key}={HIDDEN}"
    value = p.value
    if "://" in value:
        value = _hidden(value, bare_address=False)
    elif "@" in value:
        value = f"{HIDDEN}@{value.rpartition('@')[2]}"
    elif _nested(value):
        value = HIDDEN
    return f"{p.mark}{p.key}={value}"


def _rebuilt(uri: Uri | str) -> str:
    """A parsed URI written out again with every secret part, userinfo and stray '@' hidden."""
    if isinstance(uri, str):
        return uri
    if uri.broken and not uri.host:
        return f"{uri.scheme}://{HIDDEN}"
    start = f"{uri.scheme}:" + "//" * uri.authority if uri.scheme else ""  # a bare address has neither
    start += f"{HIDDEN}@" if uri.userinfo is not None else ""
    host = uri.host.rpartition(":")[0] + f":{HIDDEN}" if uri.broken else uri.host
    parameters, hiding = [], False
    for p in uri.parameters:  # a secret's value ends at the next '&' or '#', whatever ';' or '?' it holds
        hiding = _is_secret_key(p.key) or (hiding and p.mark in ";?")
        if not (hiding and not _is_secret_key(p.key)):
            parameters.append(_shown_parameter(p))
    return start + host + uri.path + "".join(parameters)


def redact(uri: Any, bare_address: bool = False) -> str:
    """`uri`, percent-decoded, with its userinfo, every secret parameter value and every userinfo nested in a
    parameter replaced by ***, control characters escaped, cut to SHOWN characters: safe in an error line. A URI
    with an '@' after its host shows nothing before its last '@'."""
    if not isinstance(uri, str):
        return shown(uri)
    return _cut(_hidden(uri.strip(), bare_address))


def _hidden(text: str, bare_address: bool) -> str:
    """`text` rebuilt from its parsed parts with every secret part hidden (see redact), not yet cut."""
    parsed = parse(text, bare_address)
    if parsed is None:
        return text
    if parsed.stray_at:  # what follows the last '@' is the host a person meant, unless it is in a query or fragment
        authority = text.partition("://")[2] if parsed.scheme else text
        if any(mark in authority.rpartition("@")[0] for mark in "?#"):
            return f"{parsed.scheme}://{HIDDEN}"
        rest = text.rpartition("@")[2]
        again = parse(f"{parsed.scheme}://{rest}" if parsed.scheme else rest, bare_address)
        if again is None or again.stray_at:
            return f"{parsed.scheme}://{HIDDEN}"
        again.userinfo, parsed = HIDDEN, again
    return _rebuilt(parsed)


def _cut(text: str) -> str:
    """At most SHOWN characters, then '...'; escaped (a URI's own length is no news in an error line)."""
    return escape(text) if len(text) <= SHOWN else escape(text[:SHOWN]) + "..."


def check_uri(uri: Any, kind: str, key: str, source: str) -> str:
    """`uri` itself, or ConfigError (exit 2) if it is no usable URI or it carries a credential; kind is a key of
    ENVIRONMENT (`ray`: a bare HOST:PORT is an authority)."""
    bare = kind == "ray"
    if not isinstance(uri, str):
        raise ConfigError(key, f"must be a URI string (got {shown(uri)})", source)
    found = secret_parts(uri, bare)
    if found:
        raise ConfigError(
            key,
            f"{redact(uri, bare)}: a credential in a URI ({', '.join(found)}) is refused, as it would be "
            f"stored and shown; {ENVIRONMENT[kind]} instead",
            source,
        )
    parsed = parse(uri, bare)
    if not uri.isprintable() or uri != uri.strip():
        raise ConfigError(key, f"{redact(uri, bare)}: control characters or spaces around a URI are refused", source)
    if parsed is not None and parsed.broken:
        raise ConfigError(key, f"{redact(uri, bare)}: not a usable URI ({parsed.broken})", source)
    return uri
