"""The fourth hostile review's classes (issue #70 item 9) as generated cases: each a command against what a tracking
server, a shared storage folder or the environment names, and the contract it must keep (stored_cases.check's:
exit 2 or what `accept` allows, at most 3 short lines, no control character, nothing outside storage printed or
written, bounded time and memory), plus `after`: what the case's servers saw (no credential on another host).

Classes: credentials (artifact roots, registry sources and redirects on another host), stores (foreign, empty,
damaged, in-memory and device SQLite stores), schemes (tracking URIs and the environment), streams (encodings that
cannot write a character, closed or full streams), links (hard links and FIFOs where a command appends or prints),
stop (a held driver lock), from-data (hostile summary data), numbers (valid-looking extremes, odd CLI numbers),
records (one damaged sweep among good ones), secrets (encoded credentials in errors and logs), pickles (a
checkpoint whose pickle runs code) and dashboard (a hostile Ray dashboard).

Like stored_cases.py, it calls only the commands that the version before these gates had too, so that
`python tests/fuzz/measure_gates.py --cases trust --trees OLD NEW` runs the same cases against both trees; the
hostile servers are loaded from this file's tree (tests/hostile.py), whichever tree's code is measured.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import io
import json
import os
import pickle
import shutil
import socket
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import stored_cases
from stored_cases import SWEEP, Case, by_name, outside, plant_sweep, state, status

from tests.fuzz.study_damages import bleu, no_rows, sweep_json, trial

HERE = Path(__file__).resolve().parent
STUDY = HERE.parents[1] / "docs" / "results" / "sact_study_tatoeba_cpu_power" / "data"
STUDY_NAME = "sact-power"
RUN_ID = "a" * 32
PASSWORD = "pw/Qz7k#R?s3cr3t&x"  # the user's MLflow password in these cases: no form of it may be shown
USER, TOKEN = "fuzz", "tok-Wx8mT-Vp9nY-abc"
CREDENTIALS = {"MLFLOW_TRACKING_USERNAME": USER, "MLFLOW_TRACKING_PASSWORD": PASSWORD}


def _hostile() -> Any:
    """tests/hostile.py of this file's tree (the measured tree's may predate its servers)."""
    spec = importlib.util.spec_from_file_location("trust_hostile", HERE.parent / "hostile.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("trust_hostile", module)
    spec.loader.exec_module(module)
    return module


hostile = _hostile()


@dataclass
class TrustCase(Case):
    env: dict[str, str] = field(default_factory=dict)  # set for the case only
    serve: str | None = None  # a NamingServer's location, or "hostile:<behaviour>"
    streams: str | None = None  # "ascii", "latin-1", "no stdin", "stderr full", "stdout full"
    after: Callable[[Any], str | None] | None = None  # what the servers saw, judged


# ---- credentials: locations a server names ----


def nobody_else_asked(server: Any) -> str | None:
    if server.other.authorized():
        return f"the user's credentials reached another host ({len(server.other.authorized())} requests)"
    return None


def credential_cases() -> Iterator[TrustCase]:
    locations = {
        "mlflow-artifacts on another port": "mlflow-artifacts://{other}/1/x/artifacts",
        "http on another port": "http://{other}/api/2.0/mlflow-artifacts/artifacts/1/x",
        "https on another port": "https://{other}/api/2.0/mlflow-artifacts/artifacts/1/x",
        "ftp": "ftp://{other}/x",
        "sftp": "sftp://{other}/x",
        "file:///dev": "file:///dev",
        "file:///etc": "file:///etc",
        "a bare /proc path": "/proc/self",
        "redirect to another port": "redirect:{other}",
    }
    models = {"runs": f"runs:/{RUN_ID}/zero", "models version": "models:/m/1", "models alias": "models:/m@best"}
    for label, location in locations.items():
        for kind, model in models.items():
            yield TrustCase(
                "credentials",
                f"translate {kind}: {label}",
                lambda root: None,
                ("nmt", ["translate", "--model", model, "--tracking-uri", "{url}"]),
                env={**CREDENTIALS, "NMT_SWEEPER_TIMEOUT": "5"},
                serve=location,
                after=nobody_else_asked,
            )


# ---- stores: SQLite files that are no MLflow store ----


def foreign_database(root: Path) -> None:
    connection = sqlite3.connect(root / "outside" / "app.db")
    connection.execute("CREATE TABLE users (name TEXT)")
    connection.commit()
    connection.close()


def store_cases() -> Iterator[TrustCase]:
    stores = {
        "another program's database": ("sqlite:///{root}/outside/app.db", foreign_database),
        "an empty file": ("sqlite:///{root}/outside/empty.db", lambda r: (r / "outside" / "empty.db").write_bytes(b"")),
        "random bytes": ("sqlite:///{root}/outside/r.db", lambda r: (r / "outside" / "r.db").write_bytes(b"x" * 999)),
        "in memory": ("sqlite://", lambda r: None),
        "in memory, named": ("sqlite:///:memory:", lambda r: None),
        "/dev/zero": ("sqlite:////dev/zero", lambda r: None),
        "a folder": ("sqlite:///{root}/outside", lambda r: None),
    }
    for label, (uri, make) in stores.items():

        def plant(root: Path, make: Callable = make, uri: str = uri) -> None:
            outside(root)
            plant_sweep(root, json.dumps(state(tracking_uri=uri.replace("{root}", str(root)))))
            make(root)

        calls = {
            "summarize": ("sweeper", ["summarize", SWEEP, "--storage", "{}", "--tracking-uri", uri]),
            "promote": ("sweeper", ["promote", SWEEP, "abcde_00000", "--storage", "{}"]),
            "translate": ("nmt", ["translate", "--model", "models:/m/1", "--tracking-uri", uri]),
        }
        for command, call in calls.items():
            yield TrustCase("stores", f"{command}: {label}", plant, call)


# ---- schemes: tracking URIs and the environment ----


def one_line(code: int, out: str, err: str) -> bool:
    """A refusal of exactly one line: no library's warning ahead of it."""
    return code == 2 and err.count("\n") == 1 and err.startswith(("sweeper: error:", "nmt: error:"))


def scheme_cases() -> Iterator[TrustCase]:
    uris = (
        "databricks",
        "databricks://profile",
        "databricks-uc",
        "uc:databricks",
        "file:///tmp/mlruns",
        "ftp://127.0.0.1:1/x",
        "hdfs://127.0.0.1:1/x",
        "s3://bucket/x",
        "gs://bucket/x",
        "postgresql://127.0.0.1:1/x",
        "mysql://127.0.0.1:1/x",
        "mssql://127.0.0.1:1/x",
        "http://127.0.0.1:1",
        "https://127.0.0.1:1",
        "javascript:alert(1)",
        "mlflow-artifacts:/x",
        "sqlite:///nonexistent-fuzz-folder/x.db",
        "zz://x",
    )
    for uri in uris:
        for command, call in {
            "summarize": ("sweeper", ["summarize", SWEEP, "--storage", "{}"]),
            "translate": ("nmt", ["translate", "--model", "models:/m/1"]),
        }.items():
            yield TrustCase(
                "schemes",
                f"{command}: MLFLOW_TRACKING_URI={uri}",
                _planter(),
                call,
                one_line,
                env={"MLFLOW_TRACKING_URI": uri, "NMT_SWEEPER_TIMEOUT": "2"},
            )


def _planter() -> Callable[[Path], None]:
    return lambda root: plant_sweep(root) and None


# ---- streams ----


def stream_cases() -> Iterator[TrustCase]:
    def space(root: Path) -> None:
        folder = root / "work" / "λé"
        folder.mkdir()
        (folder / "q.yaml").write_text(stored_cases.SPACE)

    def escaped(code: int, out: str, err: str) -> bool:
        return code == 0 and "valid sweep" in out

    for encoding in ("ascii", "latin-1", "cp1252"):
        yield TrustCase(
            "streams", f"validate, stdout in {encoding}", space, ("sweeper", ["validate", "λé/q.yaml"]), escaped,
            streams=encoding,
        )  # fmt: skip
    yield TrustCase(
        "streams", "translate, stdin closed", lambda r: None, ("nmt", ["translate", "--checkpoint", "."]),
        streams="no stdin",
    )  # fmt: skip
    for command in (["validate", "nowhere.yaml"], ["status", SWEEP, "--storage", "{}"], ["--bogus"]):
        yield TrustCase(
            "streams", f"{command[0]}, stderr full", lambda r: None, ("sweeper", command), silent, streams="stderr full"
        )
    yield TrustCase(
        "streams", "validate, stdout full", space, ("sweeper", ["validate", "λé/q.yaml"]), streams="stdout full"
    )


def silent(code: int, out: str, err: str) -> bool:
    return code == 2


@contextlib.contextmanager
def streams_as(kind: str | None) -> Iterator[tuple[io.TextIOWrapper, io.TextIOWrapper]]:
    """stdout and stderr as the case's environment hands them over (what invoke reads back afterwards)."""
    encoding = kind if kind in ("ascii", "latin-1", "cp1252") else "utf-8"
    out, err = (
        io.TextIOWrapper(io.BytesIO(), encoding),
        io.TextIOWrapper(io.BytesIO(), "utf-8", errors="backslashreplace"),
    )
    if kind == "stderr full":
        err = Full(err)
    if kind == "stdout full":
        out = Full(out)
    stdin = sys.stdin
    sys.stdin = None if kind == "no stdin" else io.StringIO("a b\n")
    try:
        yield out, err
    finally:
        sys.stdin = stdin


class Full(io.TextIOWrapper):
    """A stream on a full disk: every write and flush fails as /dev/full's do."""

    def __init__(self, like: io.TextIOWrapper):
        super().__init__(io.BytesIO(), like.encoding)

    def write(self, text: str) -> int:
        raise OSError(28, "No space left on device")

    def flush(self) -> None:
        raise OSError(28, "No space left on device")


def invoke(call: tuple, root: Path, kind: str | None = None) -> tuple[int, str, str]:
    """stored_cases.invoke with the case's streams."""
    call = tuple(stored_cases._placed(part, root) for part in call)
    with streams_as(kind) as (out, err), contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = stored_cases._run(call)
    texts = [stored_cases._text(s) if not isinstance(s, Full) else "" for s in (out, err)]
    return code, texts[0], texts[1]


# ---- links, stop, records, secrets, pickles, numbers, dashboard ----


def link_cases() -> Iterator[TrustCase]:
    def hard_link(file: str) -> Callable[[Path], None]:
        def plant(root: Path) -> None:
            folder = plant_sweep(root)
            os.link(outside(root, "victim"), folder / file)

        return plant

    yield TrustCase("links", "logs: sweep.log is a hard link", hard_link("sweep.log"), by_name("logs"))
    yield TrustCase(
        "links", "logs --tail: sweep.log is a hard link", hard_link("sweep.log"),
        ("sweeper", ["logs", SWEEP, "--storage", "{}", "--tail", "3"]),
    )  # fmt: skip
    config = "data: {corpus: synthetic, train_subset: 64, eval_subset: 8}\nmodel: {emb_size: 8, hidden_size: 8}\n"
    config += "train: {epochs: 1, batch_size: 16}\ndecode: {beam_size: 1}\n"
    for what in ("hard link", "fifo"):

        def plant(root: Path, what: str = what) -> None:
            (root / "work" / "c.yaml").write_text(config)
            (root / "storage" / "out").mkdir(parents=True)  # what training writes there is not the case's concern
            target = root / "storage" / "out" / "metrics.jsonl"
            os.link(outside(root, "victim"), target) if what == "hard link" else os.mkfifo(target)

        yield TrustCase(
            "links", f"nmt train: metrics.jsonl is a {what}", plant, ("nmt", ["train", "c.yaml", "--out", "{}/out"])
        )


def stop_cases() -> Iterator[TrustCase]:
    for last in ("stopped", "finished", "failed"):

        def plant(root: Path, last: str = last) -> None:
            folder = plant_sweep(root, status_text=json.dumps(status(state=last)))
            me = {"host": socket.gethostname()[:100], "pid": os.getpid(), "since": _started()}
            (folder / "driver.lock").write_text(json.dumps(me))

        def asked(code: int, out: str, err: str) -> bool:
            return code == 0 and "stopping sweep" in out

        yield TrustCase("stop", f"stop: a held lock, status {last}", plant, by_name("stop"), asked)


def _started() -> float:
    import psutil

    return round(psutil.Process().create_time(), 2)


def record_cases() -> Iterator[TrustCase]:
    for label, raw in (
        ("a C1 character", "mallory\x9b31m"),
        ("a bidi override", "eve\u202egnp.exe"),
        ("a line separator", "a\u2028b"),
        ("an escape", "x\x1b[2J"),
    ):

        def plant(root: Path, raw: str = raw) -> None:
            for name in ("good-a", "good-b"):
                folder = root / "storage" / name
                folder.mkdir(parents=True)
                (folder / "sweeper.json").write_text(json.dumps(state(name=name)))
            bad = root / "storage" / "bad"
            bad.mkdir()
            (bad / "sweeper.json").write_text(json.dumps(state(name="bad", started_by=raw)))

        def both(code: int, out: str, err: str) -> bool:
            return code == 0 and "good-a" in out and "good-b" in out

        yield TrustCase("records", f"list: one sweep's started_by holds {label}", plant, by_name("list"), both)


def secret_forms() -> dict[str, str]:
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    encoded = quote(PASSWORD, safe="")
    return {
        "raw": PASSWORD,
        "percent-encoded": encoded,
        "percent-encoded, lower-case": encoded.lower(),
        "base64 of user:password": b64(f"{USER}:{PASSWORD}"),
        "base64 of the token": b64(TOKEN),
        "an environment line": f"MLFLOW_TRACKING_PASSWORD={PASSWORD}",
    }


def secret_cases() -> Iterator[TrustCase]:
    forms = secret_forms()
    env = {**CREDENTIALS, "MLFLOW_TRACKING_TOKEN": TOKEN}
    for label, form in forms.items():

        def plant(root: Path, form: str = form) -> None:
            (plant_sweep(root) / "sweep.log").write_text(f"start\nsent {form}\ndone\n")

        def hidden(code: int, out: str, err: str, form: str = form) -> bool:
            return code == 0 and form.rstrip("=") not in out + err

        yield TrustCase("secrets", f"logs: a line with {label}", plant, by_name("logs"), hidden, env=env)

    def none_shown(code: int, out: str, err: str) -> bool:
        return code == 2 and not any(form.rstrip("=") in out + err for form in forms.values())

    yield TrustCase(
        "secrets", "translate: a server echoes encoded credentials", lambda r: None,
        ("nmt", ["translate", "--model", "models:/m/1", "--tracking-uri", "{url}"]), none_shown,
        env={**env, "NMT_SWEEPER_TIMEOUT": "5"}, serve="hostile:encoded",
    )  # fmt: skip


class Evil:
    """A pickle that runs code where it is loaded (it would create outside/pwned)."""

    def __init__(self, target: str):
        self.target = target

    def __reduce__(self):
        return (os.system, (f"touch {self.target}",))


def pickle_cases() -> Iterator[TrustCase]:
    def torch_evil(root: Path) -> None:
        import torch

        torch.save({"format": 1, "model": Evil(str(root / "outside" / "pwned"))}, root / "work" / "model.pt")

    def raw_evil(root: Path) -> None:
        (root / "work" / "model.pt").write_bytes(pickle.dumps(Evil(str(root / "outside" / "pwned"))))

    for label, plant in (("torch.save of a code-running object", torch_evil), ("a raw pickle", raw_evil)):
        for command in (["translate", "--checkpoint", "model.pt"], ["evaluate", "--checkpoint", "model.pt"]):
            yield TrustCase("pickles", f"{command[0]}: {label}", plant, ("nmt", [*command, "--src", "s", "--ref", "r"]
                            if command[0] == "evaluate" else command))  # fmt: skip


def number_cases() -> Iterator[TrustCase]:
    for tail in ("-1", "99999999999999999999999", "1e3", "nan", "0x10"):
        yield TrustCase(
            "numbers",
            f"logs --tail {tail}",
            _planter(),
            ("sweeper", ["logs", SWEEP, "--storage", "{}", "--tail", tail]),
        )
    for resamples in ("0", "-5", "1e400", "10000000000"):
        yield TrustCase(
            "numbers", f"summarize --resamples {resamples}", _planter(),
            ("sweeper", ["summarize", SWEEP, "--storage", "{}", "--resamples", resamples]),
        )  # fmt: skip
    for beam in ("0", "-1", "1000000000"):
        yield TrustCase(
            "numbers",
            f"translate --beam {beam}",
            lambda r: None,
            ("nmt", ["translate", "--beam", beam, "--checkpoint", "."]),
        )


def dashboard_cases() -> Iterator[TrustCase]:
    for behaviour in ("escapes", "secrets", "garbage"):
        for command in ("list", "status"):
            argv = ["list", "--storage", "{}", "--address", "{url}"] if command == "list" else [
                "status", SWEEP, "--storage", "{}", "--address", "{url}"]  # fmt: skip
            yield TrustCase(
                "dashboard", f"{command}: a dashboard that answers {behaviour}", _planter(), ("sweeper", argv),
                env={"NMT_SWEEPER_TIMEOUT": "3"}, serve=f"hostile:{behaviour}",
            )  # fmt: skip


# ---- from-data ----


def from_data_cases() -> Iterator[TrustCase]:
    def damaged(change: Callable[[Path], None]) -> Callable[[Path], None]:
        def plant(root: Path) -> None:
            shutil.copytree(STUDY, root / "work" / "data")
            change(root / "work" / "data")

        return plant

    for label, change in _data_damages().items():
        yield TrustCase(
            "from-data",
            label,
            damaged(change),
            ("sweeper", ["summarize", STUDY_NAME, "--from-data", "data", "--out", "o"]),
        )


def _data_damages() -> dict[str, Callable[[Path], None]]:
    def traces_out(data: Path) -> None:
        shutil.move(data / "traces", data.parent.parent / "outside" / "traces")
        (data / "traces").symlink_to(data.parent.parent / "outside" / "traces")

    damages = {
        "sweep.json resamples 1e12": sweep_json(lambda f: f["space"]["significance"].update(resamples=1e12)),
        "sweep.json resamples -1": sweep_json(lambda f: f["space"]["significance"].update(resamples=-1)),
        "sweep.json an unknown key": sweep_json(lambda f: f["space"]["objective"].update(shell="x")),
        "sweep.json a name with an escape": sweep_json(lambda f: f.update(name="x\x1b[2J")),
        "no trial": no_rows,
        "data/traces links out": traces_out,
    }
    for row in (0, -1):
        for label, value in (("text", "high"), ("1e308", 1e308), ("-1e308", -1e308), ("NaN", float("nan"))):
            damages[f"trials row {row}: bleu {label}"] = trial(row, "metrics", bleu(value))
        damages[f"trials row {row}: a bidi variant"] = trial(row, "variant", lambda v: "\u202egnp.exe")
        damages[f"trials row {row}: an escape in variant_name"] = trial(
            row, "tags", lambda t: t.update({"sweeper.variant_name": "\x1b]0;x"})
        )
    return damages


# ---- running one ----


def all_cases() -> list[TrustCase]:
    return [
        *credential_cases(),
        *store_cases(),
        *scheme_cases(),
        *stream_cases(),
        *link_cases(),
        *stop_cases(),
        *record_cases(),
        *secret_cases(),
        *pickle_cases(),
        *number_cases(),
        *dashboard_cases(),
        *from_data_cases(),
    ]


@contextlib.contextmanager
def served(case: TrustCase) -> Iterator[Any]:
    if case.serve is None:
        yield None
    elif case.serve.startswith("hostile:"):
        with hostile.hostile_server(case.serve.removeprefix("hostile:")) as server:
            yield server
    else:
        with hostile.naming_server(case.serve) as server:
            yield server


FILE_BYTES = 2**30  # no file a case writes is larger: a copy of /dev/zero (file:///dev) fails at it, not at a full disk


def bound_file_size() -> None:
    """This process writes no file over FILE_BYTES: a write past it fails (EFBIG) instead of filling a shared disk
    (on main, a server naming file:///dev made MLflow copy /dev/zero into TMPDIR: 8 GB in 30 s)."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    resource.setrlimit(
        resource.RLIMIT_FSIZE, (FILE_BYTES if hard == resource.RLIM_INFINITY else min(FILE_BYTES, hard), hard)
    )


def check(case: TrustCase, root: Path) -> str | None:
    """stored_cases.check, with the case's environment, servers and streams; then what the servers saw."""
    from tests.fuzz.conftest import environment

    bound_file_size()
    (root / "tmp").mkdir(exist_ok=True)
    saved, saved_tmp = stored_cases.invoke, tempfile.tempdir
    tempfile.tempdir = str(root / "tmp")  # a download's copy lands in the case's folder, removed with it
    with environment(**case.env), served(case) as server:
        url = server.url if server is not None else ""
        placed = replace(case, call=_with_url(case.call, url))
        stored_cases.invoke = lambda call, root: invoke(call, root, case.streams)
        try:
            why = stored_cases.check(placed, root)
        finally:
            stored_cases.invoke, tempfile.tempdir = saved, saved_tmp
        if why is None and case.after is not None:
            why = case.after(server)
    return why


def _with_url(value: Any, url: str) -> Any:
    if isinstance(value, str):
        return value.replace("{url}", url)
    if isinstance(value, (list, tuple)):
        return type(value)(_with_url(item, url) for item in value)
    return value
