"""Issue #61 item 1: one reader for what is read from storage or a local path. No module of the project opens or
decodes a file any other way than through nmt_core/gates/gate.py (regular files only, no link out, no FIFO, bounded
bytes) and nmt_core/gates/decoders.py (bounded on what the bytes expand to), or sweeper/storage/store.py's Storage,
which uses both. This walks the code for any other open; the few that remain are listed with why they may."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GATES = {"nmt_core/gates/gate.py", "nmt_core/gates/decoders.py", "sweeper/storage/store.py"}
# calls that open or decode a file without the gate's rules, by the name they are called by
RAW = {
    "open",  # builtins.open, os.open
    "read_table",
    "ParquetFile",
    "read_parquet",  # pandas' (Storage.read_parquet is a method of `experiment`, `storage`, `final`: see below)
    "read_csv",
    "loadtxt",
    "open_input_file",
    "open_input_stream",
    "load",  # torch.load, json.load, pickle.load, yaml.load (a module's own `load`, checkpoint.load, is not raw)
}
LOADERS = {"torch", "json", "pickle", "yaml", "np", "Model"}  # receivers whose `load` reads a file raw
STORAGE_NAMES = {"experiment", "storage", "final", "self"}  # receivers that are a Storage where they are called
ALLOWED = {
    (
        "nmt_core/training/checkpoint.py",
        "load",
    ): "torch.load of a descriptor the gate opened (open_regular), weights only",
    ("sweeper/running/console.py", "open"): "the sweep log's append (O_NOFOLLOW), and the console's own open()",
    ("sweeper/summary/report.py", "open"): "summary.md appended in the summary's own new folder",
    ("sweeper/running/driver_lock.py", "open"): "os.open of a new temporary file to write (O_EXCL, O_NOFOLLOW)",
    ("sweeper/tracking/runs.py", "load"): "MLflow's Model.load of the MLmodel file of a model this sweep logged",
    ("sweeper/summary/records.py", "loadtxt"): "parses a text that decoders.read_text_file read",
    ("nmt_core/gates/artifact_locations.py", "open"): "a bounded artifact copy's new file in MLflow's download folder",
    ("nmt_core/gates/streams.py", "open"): "the standard streams on their own descriptors, and /dev/null",
}


def raw_opens(root: Path = ROOT) -> list[tuple[str, str, int]]:
    """(module, call name, line) of every raw open outside the gates."""
    found = []
    for path in sorted([*root.glob("nmt_core/**/*.py"), *root.glob("sweeper/**/*.py")]):
        module = path.relative_to(root).as_posix()
        if module in GATES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            receiver = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            if (name == "read_parquet" and receiver in STORAGE_NAMES) or (name == "load" and receiver not in LOADERS):
                continue
            if name in RAW or _loads_a_file(node):
                found.append((module, name or "loads", node.lineno))
    return found


def _loads_a_file(node: ast.Call) -> bool:
    """json.loads(x.read_text()), json.loads(gzip.decompress(x.read_bytes())) and their kind: a file read whole and
    decoded (or expanded) without a bound on either, however deep the read sits in the decoder's argument."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr in ("loads", "decompress") and node.args):
        return False
    return any(
        isinstance(inner, ast.Call)
        and isinstance(inner.func, ast.Attribute)
        and inner.func.attr in ("read_text", "read_bytes")
        for inner in ast.walk(node.args[0])
    )


def test_no_module_opens_a_stored_file_around_the_gate():
    unexplained = [f"{m}:{line}: {name}(...)" for m, name, line in raw_opens() if (m, name) not in ALLOWED]
    assert not unexplained, "opened around nmt_core/gates/gate.py and nmt_core/gates/decoders.py:\n" + "\n".join(
        unexplained
    )


def test_the_walk_finds_a_raw_open(tmp_path):
    """Mutation: the walk reports a module that reads a stored Parquet file or a JSON file directly."""
    (tmp_path / "sweeper").mkdir()
    code = "import pyarrow.parquet as pq\npq.read_table('x')\njson.loads(p.read_text())\nexperiment.read_parquet()\n"
    code += "json.loads(gzip.decompress(path.read_bytes()))\n"  # the eflomal cache's read before issue #61's gaps
    (tmp_path / "sweeper" / "reads.py").write_text(code)
    assert [(m, n) for m, n, _ in raw_opens(tmp_path)] == [
        ("sweeper/reads.py", "read_table"),
        ("sweeper/reads.py", "loads"),
        ("sweeper/reads.py", "loads"),  # json.loads around gzip.decompress, and the decompress itself
        ("sweeper/reads.py", "decompress"),
    ]


# what renames a file into place outside the one atomic writer (nmt_core/gates/gate.py: write_with), by module and
# function
RENAMES = {("os", "replace"), ("os", "rename"), ("tempfile", "mkstemp"), ("tempfile", "NamedTemporaryFile")}
RENAMED = {
    ("nmt_core/data/corpora.py", "fetch_wheel"): "pip's finished download of a pinned wheel, moved into the cache"
}


def renames(root: Path = ROOT) -> list[tuple[str, str, int]]:
    """(module, function, line) of every rename into place outside gate.py."""
    found = []
    for path in sorted([*root.glob("nmt_core/**/*.py"), *root.glob("sweeper/**/*.py")]):
        module = path.relative_to(root).as_posix()
        functions = [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.FunctionDef)]
        for function in functions if module != "nmt_core/gates/gate.py" else []:
            for node in ast.walk(function):
                func = node.func if isinstance(node, ast.Call) else None
                named = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                if named and (func.value.id, func.attr) in RENAMES:
                    found.append((module, function.name, node.lineno))
    return found


def test_every_file_is_written_through_the_one_atomic_writer():
    """Issue #61's named gaps, item 4: checkpoint.save and the corpus cache had their own copies of the temporary
    file and rename (without fsync); both now go through gate.write_with."""
    found = [f"{m}:{line}: in {function}" for m, function, line in renames() if (m, function) not in RENAMED]
    assert not found, "a second atomic writer:\n" + "\n".join(found)
