"""Hostile stored state and input forms (issue #61 items 1, 4-6): generated cases, each a command (or an API call)
against files it plants, and the contract every one must keep.

Classes: second doors around the read gate (links, FIFOs and devices where a sweep keeps its files), damaged stored
values (timestamps out of range, 400-digit numbers, NaN, surrogates), damaged results.parquet, storage forms
(`file:` URIs per RFC 8089, a file or an unsupported store as `--storage`), YAML merge keys and text written back
into a generated file, and decoders bounded on what they expand to (grids, parquet rows, a checkpoint's model).

This module uses only the commands and the API that the version before these gates had too, so that
tests/fuzz/measure_gates.py can run the same cases against both trees; tests/fuzz/test_fuzz_stored.py runs them
against this one.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fuzz.conftest import in_folder, snapshot  # the fuzz harness's own (a folder counts too)

SECRET = "SECRET-Qz7kR-outside-storage"  # what a file outside storage holds: never printed
SWEEP = "tiny"
CASE_SECONDS = 60  # a case that runs longer failed the contract (a FIFO that hangs, a bomb that expands)
CASE_MEMORY_KB = 1_000_000  # peak RSS growth a case may cause
CASE_ADDRESS_SPACE = 4 * 2**30  # virtual memory a case may add (see check)
MAX_LINES, MAX_BYTES = 3, 600  # what a refusal may print (issue #61's contract)
LARGE = "1" + "0" * 400  # a 401-digit number, written raw into JSON


@dataclass
class Case:
    kind: str  # its class, counted in the report
    name: str
    plant: Callable[[Path], None]  # writes the files under the case's folder (storage/, outside/, work/)
    call: tuple  # ("sweeper", argv) | ("nmt", argv) | ("api", function name, args, kwargs)
    accept: Callable[[int, str, str], bool] | None = None  # not a refusal: what the outcome must be instead


# ---- what gets planted ----


def state(**changes: Any) -> dict[str, Any]:
    """A sweeper.json as `run_sweep` writes it (the keys every version reads)."""
    return {
        "name": SWEEP,
        "tracking_uri": "sqlite:////nonexistent-fuzz-folder/mlflow.db",
        "parent_run_id": "0" * 32,
        "base": {},
        "cpu": 1.0,
        "gpu": 0.0,
        "metric": "bleu_dev",
        "mode": "max",
        "trials": 2,
        "mutable": [],
        **changes,
    }


def status(**changes: Any) -> dict[str, Any]:
    return {
        "state": "finished",
        "trials": 2,
        "done": 2,
        "running": 0,
        "failed": 0,
        "pending": 0,
        "best": 1.5,
        "updated": 1_700_000_000.0,
        "detail": "",
        "board": ["a line"],
        **changes,
    }


def raw_json(record: dict[str, Any], key: str, raw: str) -> str:
    """`record` as JSON with `key`'s value written as the raw token `raw` (a 401-digit number, NaN, 1e300)."""
    text = json.dumps({**record, key: "@@"})
    return text.replace('"@@"', raw)


def sweep_folder(root: Path) -> Path:
    folder = root / "storage" / SWEEP
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def plant_sweep(root: Path, state_text: str | None = None, status_text: str | None = None) -> Path:
    folder = sweep_folder(root)
    (folder / "sweeper.json").write_text(state_text or json.dumps(state()))
    if status_text is not None:
        (folder / "status.json").write_text(status_text)
    return folder


def outside(root: Path, name: str = "secret.txt", body: str = SECRET) -> Path:
    folder = root / "outside"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(body)
    return folder / name


def parquet_bytes(table: Any) -> bytes:
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def results(kind: str) -> bytes:
    """A damaged results.parquet."""
    import pyarrow as pa

    good = parquet_bytes(pa.table({"status": ["TERMINATED", "ERROR"]}))
    return {
        "random bytes": os.urandom(2000),
        "empty": b"",
        "magic only": b"PAR1",
        "truncated": good[: len(good) // 2],
        "no columns": parquet_bytes(pa.table({})),
        "no status column": parquet_bytes(pa.table({"other": [1, 2]})),
        "status of integers": parquet_bytes(pa.table({"status": [1, 2]})),
        "status of nulls": parquet_bytes(pa.table({"status": pa.nulls(2, pa.string())})),
        # a few kB that expand to 10^8 rows (nulls are run-length encoded)
        "row bomb": parquet_bytes(pa.table({"status": pa.nulls(100_000_000, pa.string())})),
    }[kind]


# ---- the cases ----


def by_name(command: str) -> tuple:
    return ("sweeper", [command, SWEEP, "--storage", "{}"] if command != "list" else ["list", "--storage", "{}"])


def door_cases() -> Iterator[Case]:
    """A link out of storage, a FIFO or a device where a sweep keeps a file: refused, nothing of it printed."""

    def link_out(file: str, body: str = SECRET) -> Callable[[Path], None]:
        def plant(root: Path) -> None:
            folder = plant_sweep(root)
            (folder / file).unlink(missing_ok=True)
            (folder / file).symlink_to(outside(root, "target", body))

        return plant

    def special(file: str, what: str) -> Callable[[Path], None]:
        def plant(root: Path) -> None:
            folder = plant_sweep(root)
            (folder / file).unlink(missing_ok=True)
            if what == "fifo":
                os.mkfifo(folder / file)
            elif what == "folder":
                (folder / file).mkdir()
            else:
                (folder / file).symlink_to(what)

        return plant

    for what in ("fifo", "folder", "/dev/zero", "/dev/null/x"):
        yield Case("door", f"logs: sweep.log is {what}", special("sweep.log", what), by_name("logs"))
    yield Case("door", "logs: sweep.log links out", link_out("sweep.log"), by_name("logs"))
    yield Case(
        "door",
        "logs --tail: sweep.log links out",
        link_out("sweep.log"),
        ("sweeper", ["logs", SWEEP, "--storage", "storage", "--tail", "5"]),
    )
    secret_status = json.dumps(status(detail=SECRET))
    for command in ("status", "list"):
        yield Case(
            "door", f"{command}: status.json links out", link_out("status.json", secret_status), by_name(command)
        )
        yield Case("door", f"{command}: status.json is a fifo", special("status.json", "fifo"), by_name(command))
        yield Case(
            "door", f"{command}: results.parquet is a fifo", special("results.parquet", "fifo"), by_name(command)
        )
        yield Case(
            "door",
            f"{command}: results.parquet is /dev/zero",
            special("results.parquet", "/dev/zero"),
            by_name(command),
        )

    def running_elsewhere_with_a_fifo(root: Path) -> None:
        driver = {"host": "elsewhere", "pid": 1, "since": 1.0}
        plant_sweep(root, status_text=json.dumps(status(state="running", updated=time.time(), driver=driver)))
        os.mkfifo(sweep_folder(root) / "stop.json")

    yield Case("door", "stop: stop.json is a fifo", running_elsewhere_with_a_fifo, by_name("stop"))


def damaged_cases() -> Iterator[Case]:
    """Stored values out of range or of the wrong kind: one line naming the file, never a traceback."""
    values = {"1e300": "1e300", "-1e300": "-1e300", "401 digits": LARGE, "NaN": "NaN", "Infinity": "Infinity"}
    for key in ("updated", "best", "done"):
        for label, raw in values.items():
            text = raw_json(status(state="running"), key, raw)
            for command in ("status", "list"):
                yield Case(
                    "damaged",
                    f"{command}: status.json {key}={label}",
                    _planter(status_text=text),
                    by_name(command),
                    None if key == "updated" else tolerated,
                )
    for key, raw in (("pid", LARGE), ("since", "1e300"), ("host", '"\\udcff"')):
        driver = {"host": "h", "pid": 1, "since": 1.0}
        text = json.dumps(status(state="running")).replace(
            '"running"', '"running", "driver": ' + raw_json(driver, key, raw)
        )
        yield Case("damaged", f"status: status.json driver.{key}", _planter(status_text=text), by_name("status"))
    for key, raw in (("detail", '"\\udcff"'), ("board", '["\\ud800 line"]'), ("state", '"\\udcff"')):
        text = raw_json(status(), key, raw)
        yield Case(
            "damaged", f"status: status.json {key} with a surrogate", _planter(status_text=text), by_name("status")
        )
    for label, raw in (("1e300", "1e300"), ("401 digits", LARGE), ("1e20", "1e20")):
        text = raw_json(state(), "started_at", raw)
        for command in ("status", "list"):
            yield Case("damaged", f"{command}: sweeper.json started_at={label}", _planter(text), by_name(command))
    for label, raw in (
        ("a lone surrogate", '"\\udcff"'),
        ("a line separator", '"a\\u2028b"'),
        ("a lone high surrogate", '"\\ud83d"'),
    ):
        text = raw_json(state(), "started_by", raw)
        for command in ("status", "list"):
            yield Case("damaged", f"{command}: sweeper.json started_by {label}", _planter(text), by_name(command))
    for label, raw in (("a 401-digit number", LARGE), ("a string", '"x"')):
        text = raw_json(state(), "trials", raw)
        yield Case("damaged", f"status: sweeper.json trials {label}", _planter(text), by_name("status"))
    text = raw_json(status(), "updated", "1e300")
    for function in ("list_sweeps", "sweep_status"):
        arguments = ((), {"storage": "{}"}) if function == "list_sweeps" else ((SWEEP,), {"storage": "{}"})
        yield Case(
            "damaged", f"api.{function}: updated=1e300", _planter(status_text=text), ("api", function, *arguments)
        )


def tolerated(code: int, out: str, err: str) -> bool:
    """A heartbeat's count or best that is no usable number may be shown as unknown (exit 0), or refused as damage
    in one bounded line."""
    return code == 0 or (code == 2 and err.count("\n") <= MAX_LINES and len(err.encode()) <= MAX_BYTES)


def _planter(state_text: str | None = None, status_text: str | None = None) -> Callable[[Path], None]:
    return lambda root: plant_sweep(root, state_text, status_text) and None


def parquet_cases() -> Iterator[Case]:
    """results.parquet (a sweep from before status.json) damaged, or a few kB that expand to gigabytes."""
    kinds = (
        "random bytes",
        "empty",
        "magic only",
        "truncated",
        "no columns",
        "no status column",
        "status of integers",
        "status of nulls",
        "row bomb",
    )
    for kind in kinds:
        for command in ("status", "list"):

            def plant(root: Path, kind: str = kind) -> None:
                (plant_sweep(root) / "results.parquet").write_bytes(results(kind))

            yield Case("parquet", f"{command}: results.parquet {kind}", plant, by_name(command))


def storage_cases() -> Iterator[Case]:
    """`--storage` forms: RFC 8089's file URIs read the folder they name (and make nothing in the working folder);
    a file, or a store this version cannot open, is one line."""

    def lists_it(code: int, out: str, err: str) -> bool:
        return code == 0 and SWEEP in out

    for form in ("file://localhost{}", "FILE://{}", "File://localhost{}", "file:{}", "file://{}"):
        yield Case("storage", f"list --storage {form}", _planter(), ("sweeper", ["list", "--storage", form]), lists_it)
    for form in ("file://elsewhere.example{}", "hdfs://namenode{}", "abfs://container{}", "file://localhost:99{}"):
        yield Case("storage", f"list --storage {form}", _planter(), ("sweeper", ["list", "--storage", form]))

    def a_file(root: Path) -> None:
        plant_sweep(root)
        (root / "storage-file").write_text("not a folder")

    yield Case("storage", "list --storage a file", a_file, ("sweeper", ["list", "--storage", "{root}/storage-file"]))
    yield Case(
        "storage", "status --storage a file", a_file, ("sweeper", ["status", SWEEP, "--storage", "{root}/storage-file"])
    )


SPACE = """name: fuzz
description: a space
data: {corpus: synthetic}
base: {model: {emb_size: 8, hidden_size: 8}, train: {epochs: 1}}
parameters:
  attention.temperature: {grid: [none, fixed]}
"""


def form_cases() -> Iterator[Case]:
    """YAML merge keys restating a key, and text written back into a generated YAML file."""

    def space(text: str) -> Callable[[Path], None]:
        return lambda root: (root / "work" / "space.yaml").write_text(text) and None

    merges = {
        "in base": SPACE.replace("base: {", "base: {<<: {train: {epochs: 3}}, "),
        "at the top": SPACE.replace("name: fuzz", "<<: {name: other}\nname: fuzz"),
        "restating a grid": SPACE.replace("{grid: [none, fixed]}", "{<<: {grid: [none]}, grid: [none, fixed]}"),
        "a list of maps": SPACE.replace("base: {", "base: {<<: [{train: {epochs: 3}}, {model: {}}], "),
    }
    for label, text in merges.items():
        yield Case("forms", f"validate: a merge key {label}", space(text), ("sweeper", ["validate", "space.yaml"]))

    def one_description(code: int, out: str, err: str) -> bool:
        return code in (0, 2) and "train_loss" not in out + err

    for value in (
        '"x\\nobjective: {metric: train_loss, mode: min}"',
        "x\nobjective: {metric: train_loss, mode: min}",
        '"x\\robjective: {metric: train_loss, mode: min}"',
        '"x\\u2028objective: {metric: train_loss}"',
    ):
        yield Case(
            "forms",
            f"validate --set description={value[:12]!r}...",
            space(SPACE),
            ("sweeper", ["validate", "space.yaml", "--set", f"description={value}"]),
            one_description,
        )
    overrides = {"description": "x\nobjective: {metric: train_loss, mode: min}"}
    yield Case(
        "forms",
        "api.validate overrides description with a newline",
        space(SPACE),
        ("api", "validate", ("space.yaml",), {"overrides": overrides}),
        one_description,
    )


def grid_space(*sizes: int) -> str:
    keys = ("train.lr", "train.clip_norm", "attention.tau")
    lines = [f"  {key}: {{grid: [{', '.join(str(1 + i / 10_000) for i in range(n))}]}}" for key, n in zip(keys, sizes)]
    return SPACE.split("parameters:")[0] + "parameters:\n" + "\n".join(lines) + "\n"


def expansion_cases() -> Iterator[Case]:
    """Decoders bounded on what they expand to: grid assignments, a checkpoint's model before it is built."""
    for sizes in ((10_000, 10_000), (3_000, 3_000), (500, 500, 500), (10_000, 2)):

        def plant(root: Path, sizes: tuple[int, ...] = sizes) -> None:
            (root / "work" / "space.yaml").write_text(grid_space(*sizes))

        yield Case(
            "expand",
            f"validate: grids of {' x '.join(map(str, sizes))}",
            plant,
            ("sweeper", ["validate", "space.yaml"]),
        )
    for label, model in (
        (
            "a 16-layer 8192-unit RNN",
            {"hidden_size": 8192, "emb_size": 8192, "encoder_layers": 16, "decoder_layers": 16},
        ),
        (
            "a 64-layer Transformer",
            {"arch": "transformer", "layers": 64, "emb_size": 8192, "hidden_size": 8192, "ff_size": 65536, "heads": 8},
        ),
        ("a model the weights do not fit", {"emb_size": 16}),
    ):

        def plant(root: Path, model: dict = model) -> None:
            tiny_checkpoint(root / "work" / "model.pt", model)

        yield Case(
            "expand",
            f"nmt translate: a small checkpoint of {label}",
            plant,
            ("nmt", ["translate", "--checkpoint", "model.pt"]),
        )


def tiny_checkpoint(path: Path, model: dict[str, Any]) -> None:
    """A checkpoint of a few kB: an 8-unit RNN's weights under a config that names `model`."""
    import torch

    from nmt_core.config import build_config
    from nmt_core.models.rnn import Seq2Seq
    from nmt_core.training import checkpoint

    words = ["<pad>", "<unk>", "<s>", "</s>", "a", "b"]
    small = build_config({"model": {"emb_size": 8, "hidden_size": 8}})
    weights = Seq2Seq(small.model, small.attention, len(words), len(words)).state_dict()
    config = small.to_dict()
    config["model"].update(model)
    torch.save(
        {
            "format": checkpoint.FORMAT,
            "model": weights,
            "config": config,
            "vocab": {"src": words, "tgt": words},
            "epoch": 1,
        },
        path,
    )


def all_cases() -> list[Case]:
    return [
        *door_cases(),
        *damaged_cases(),
        *parquet_cases(),
        *storage_cases(),
        *form_cases(),
        *expansion_cases(),
    ]


# ---- running one ----


def invoke(call: tuple, root: Path) -> tuple[int, str, str]:
    """The call as a user's terminal would see it: stdout and stderr encoded as UTF-8 (a surrogate that cannot be
    written fails as it would there), stdin one line."""
    err, out = io.TextIOWrapper(io.BytesIO(), "utf-8"), io.TextIOWrapper(io.BytesIO(), "utf-8")
    call = tuple(_placed(part, root) for part in call)
    stdin = sys.stdin
    sys.stdin = io.StringIO("a b\n")
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = _run(call)
    finally:
        sys.stdin = stdin
    return code, _text(out), _text(err)


def _placed(value: Any, root: Path) -> Any:
    """{root} and {} (the storage folder) in a call's strings, at the case's folder."""
    if isinstance(value, str):
        return value.replace("{root}", str(root)).replace("{}", str(root / "storage"))
    if isinstance(value, (list, tuple)):
        return type(value)(_placed(item, root) for item in value)
    if isinstance(value, dict):
        return {key: _placed(item, root) for key, item in value.items()}
    return value


def _run(call: tuple) -> int:
    if call[0] == "sweeper":
        from sweeper.cli import main
    elif call[0] == "nmt":
        from nmt_core.cli import main
    else:
        from sweeper import api

        try:
            getattr(api, call[1])(*call[2], **call[3])
        except api.SweeperError as err:
            print(f"sweeper: error: {err}", file=sys.stderr)
            return err.exit_code
        return 0
    try:
        return main(call[1])
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else 1


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8", errors="replace")


def check(case: Case, root: Path) -> str | None:
    """None if the case keeps the contract, else why not. Run it in a process of its own that a caller kills past
    CASE_SECONDS (tests/fuzz/measure_gates.py): a read blocked inside a C library never returns to Python."""
    for name in ("storage", "outside", "work"):
        (root / name).mkdir(exist_ok=True)
    case.plant(root)
    before = {name: snapshot(root / name) for name in ("outside", "work")}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        with in_folder(root / "work"):
            code, out, err = invoke(case.call, root)
    except BaseException as error:  # the traceback a user would get
        return f"a traceback: {type(error).__name__}: {str(error)[:100]}"
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak
    why = _outcome(case, code, out, err)
    if why is None and grown > CASE_MEMORY_KB:
        why = f"memory grew by {grown:,} kB"
    if why is None and any(before[name] != snapshot(root / name) for name in before):
        why = "wrote outside storage"
    return why


def bound_address_space() -> None:
    """This process may map CASE_ADDRESS_SPACE more than it has now: a bomb fails as MemoryError instead of taking
    a shared machine's memory."""
    status = Path("/proc/self/status").read_text()
    now = int(status.split("VmSize:")[1].split()[0]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (now + CASE_ADDRESS_SPACE, resource.getrlimit(resource.RLIMIT_AS)[1]))


def _outcome(case: Case, code: int, out: str, err: str) -> str | None:
    if SECRET in out + err:
        return "printed a file outside storage"
    if "Traceback" in err:
        return "a traceback: " + err.strip().splitlines()[-1][:100]
    if case.accept is not None:
        return None if case.accept(code, out, err) else f"exit {code}: {(err or out)[-200:]!r}"
    if code != 2:
        return f"exit {code} (not 2): {(err or out)[-150:]!r}"
    if err.count("\n") > MAX_LINES or len(err.encode("utf-8")) > MAX_BYTES:
        return f"{err.count(chr(10))} lines, {len(err.encode())} bytes"
    if not all(c.isprintable() or c == "\n" for c in err):
        return f"a control character: {ascii(err[:100])}"
    return None
