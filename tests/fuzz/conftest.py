"""The fuzzing harness's budget and what every refusal must look like (issue #40 item 4).

A fixed seed (`derandomize`) and example budget keep CI's run to a couple of minutes on 2 cores; before a release,
run far more, newly drawn, examples with `NMT_FUZZ=release python -m pytest tests/fuzz` (docs/operations.md).
Each test runs its entry point in-process (`main(argv)` with stderr captured) and checks, for every generated
value: exit 2 (or SweeperError from the API), one line, no ESC byte or other control character, no piece of any
credential, nothing written in the working folder, and, for the whole session, a bounded memory peak
(`ru_maxrss`). pytest-timeout bounds time: a FIFO or device that hangs a read fails the test instead of hanging CI.
"""

from __future__ import annotations

import contextlib
import io
import os
import resource
from collections.abc import Iterator
from pathlib import Path
from unittest import mock
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

PROFILES = {"ci": 50, "long": 300, "release": 2000}  # examples per entry point
PROFILE = os.environ.get("NMT_FUZZ", "ci")
settings.register_profile(
    "fuzz",
    max_examples=PROFILES.get(PROFILE, PROFILES["ci"]),
    # CI: the same examples on every run, so that it never fails by chance; a long run draws new ones each time
    # (a failure prints the seed that reproduces it: pytest --hypothesis-seed=N)
    derandomize=PROFILE not in PROFILES or PROFILE == "ci",
    deadline=None,  # time is bounded by pytest-timeout, not per example (a loaded CI machine is slow)
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
FUZZ = settings.get_profile("fuzz")
MEMORY_GROWTH_KB = 2_000_000  # the peak RSS of the whole fuzz session may grow by at most 2 GB

# a credential is three marker pieces joined by characters that URI parsers treat specially: none may be shown
PIECES = ("Qz7kR", "Wx8mT", "Vp9nY")
SPECIALS = "#?/@:;&=%+ [].$!*'(),"
CONTROL = ["\x1b]0;pwned\x07", "\x1b[31m", "\x1b[2J", "\n", "\r", "\x00", "\x7f", "\u2028", "\x9b", "\t", "\udcff"]


def _with(text: str, control: str, where: int) -> str:
    where = min(where, len(text))
    return text[:where] + control + text[where:]


# ---- strategies ----

secrets = st.tuples(st.sampled_from(SPECIALS), st.sampled_from(SPECIALS)).map(
    lambda s: f"{PIECES[0]}{s[0]}{PIECES[1]}{s[1]}{PIECES[2]}"
)
hostile_text = st.one_of(
    st.text(max_size=60),  # any Unicode, surrogates and controls included
    st.sampled_from(CONTROL),
    st.tuples(st.text(min_size=1, max_size=20), st.sampled_from(CONTROL), st.integers(0, 20)).map(lambda t: _with(*t)),
    st.integers(1_000, 200_000).map(lambda n: "k" * n),  # huge: never echoed whole
    st.sampled_from(["..", "../..", "/etc", "a/b", "", " ", "-x", "local", "auto", "%2e%2e", "a@b", "1" * 5000]),
)


@st.composite
def credential_uris(draw) -> tuple[str, str]:
    """(uri, secret): a secret in every position a URI can carry one, written raw where that is a valid URI and
    percent-encoded once or twice."""
    secret = draw(secrets)
    once = quote(secret, safe="")
    encoded = draw(st.sampled_from([once, quote(once, safe=""), secret.replace("#", "%23").replace("?", "%3F")]))
    scheme = draw(st.sampled_from(["http", "https", "s3", "gs", "postgresql", "mysql+pymysql", "ray", "sqlite"]))
    host = draw(st.sampled_from(["127.0.0.1:5000", "host", "[::1]:9000", "bucket"]))
    position = draw(st.integers(0, 9))
    uri = [
        f"{scheme}://user:{encoded}@{host}/x",
        f"{scheme}://user:{secret}@{host}/x",  # raw: '/', '?', '#' or '@' inside move the authority's end
        f"{scheme}://{encoded}@{host}/x".replace("postgresql://", "https://").replace("mysql+pymysql://", "s3://"),
        # (a database's bare user name is no secret: the password comes from its driver's environment)
        f"{scheme}://{host}/x?secret_key={encoded}&region=x",
        f"{scheme}://{host}/x#token={encoded}",
        f"{scheme}://{host}/x?region=y;X-Amz-Signature={encoded}",
        f"{scheme}://{host}/x?endpoint_override=http://AK:{encoded}@127.0.0.1:9",
        f"{scheme}://{host}/x?endpoint_override={quote(f'http://AK:{once}@127.0.0.1:9', safe='')}",
        f" {scheme}://u:{encoded}@{host} ",  # spaces around it
        f"{scheme}://user%3A{encoded}%40{host}/x",  # the ':' and the '@' encoded too: userinfo only once decoded
    ][position]
    return uri, secret


# ---- what a refusal must look like ----


def assert_refused(code: int, err: str, out: str = "", secret: str | None = None, codes: tuple[int, ...] = (2,)):
    """Exit 2 (or what `codes` allow), one line on stderr, nothing a terminal would act on, no piece of the secret."""
    assert code in codes, (code, err[-500:])
    assert err.count("\n") == 1 and err.endswith("\n"), err[:1000]
    shown = err + out
    assert "\x1b" not in shown and "\x9b" not in shown and "\x07" not in shown, err[:300]
    assert all(c.isprintable() or c == "\n" for c in err), ascii(err[:300])
    assert len(err) < 2500, len(err)
    if secret is not None:
        assert not any(piece in shown for piece in PIECES), shown[:500]


def assert_clean_error(message: str, secret: str | None = None) -> None:
    """An exception's message from the API: one line, escaped, bounded, no credential."""
    assert_refused(2, message + "\n", secret=secret)


@contextlib.contextmanager
def captured() -> Iterator[io.StringIO]:
    """stderr (and stdout) of an in-process command, as a user's terminal would get them."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        yield err, out


def snapshot(folder: Path) -> dict[str, int]:
    return {
        str(p.relative_to(folder)): (p.lstat().st_size if not p.is_dir() else -1) for p in sorted(folder.rglob("*"))
    }


@contextlib.contextmanager
def in_folder(folder: Path) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


@pytest.fixture(scope="session", autouse=True)
def bounded_memory():
    start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - start
    assert grown < MEMORY_GROWTH_KB, f"the fuzz session's peak memory grew by {grown:,} kB"


@contextlib.contextmanager
def environment(**variables: str) -> Iterator[None]:
    """The variables a command reads, set for one example only (and the user's MLflow and Ray ones cleared)."""
    cleared = {name: "" for name in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS", "NMT_SWEEPER_TIMEOUT")}
    with mock.patch.dict(os.environ, {**cleared, **variables}):
        for name in cleared:
            if name not in variables:
                del os.environ[name]
        yield
