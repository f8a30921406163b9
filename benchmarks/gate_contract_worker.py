"""benchmarks/gate_contract.py's worker: run in the tree under test (PYTHONPATH), one case a line on stdin, its
result a JSON line on the descriptor GATE_REPORT_FD; the case's stdout and stderr go to out.txt and err.txt at the
file descriptors."""

import io
import json
import os
import resource
import sys
import time
import traceback

MEMORY, SECRET, CASE_S = int(os.environ["GATE_MEMORY"]), os.environ["GATE_SECRET"], float(os.environ["GATE_CASE_S"])
resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
report = os.fdopen(int(os.environ["GATE_REPORT_FD"]), "w")
import mlflow.store.tracking.rest_store  # noqa: E402, F401
import mlflow.tracking  # noqa: E402, F401
import ray.job_submission  # noqa: E402, F401

import nmt_core.cli  # noqa: E402, F401 - imported before the first case: a case's time is its own, not imports'
import nmt_core.mlflow_model  # noqa: E402, F401
import sweeper.api  # noqa: E402, F401
import sweeper.cli  # noqa: E402, F401
import sweeper.running.submit  # noqa: E402, F401
import sweeper.running.sweeps  # noqa: E402, F401
import sweeper.summary  # noqa: E402, F401
import sweeper.tracking.runs  # noqa: E402, F401

report.write("ready\n")
report.flush()


class Hostile:
    def __init__(self, what):
        self.what = what

    def _raise(self, *a):
        raise RuntimeError("\x1b]0;pwned\x07 " + SECRET)

    def __fspath__(self):
        return self._raise() if self.what == "fspath" else "space.yaml"

    def __repr__(self):
        return self._raise() if self.what == "repr" else "Hostile()"

    def __str__(self):
        return self._raise() if self.what == "str" else "fuzz"

    def __eq__(self, other):
        return self._raise() if self.what == "eq" else False

    def __hash__(self):
        return 1

    def __iter__(self):
        return self._raise() if self.what == "iter" else iter(["fuzz"])

    def __len__(self):
        return self._raise() if self.what == "len" else 1


def value(text, obj):
    if text == "OBJ":
        return obj
    if text.startswith("LIST:"):
        return [text[5:]]
    return text


def run_api(argv, obj):
    from sweeper import api

    function = getattr(api, argv[0][4:])
    args = [value(a, obj) for a in argv[1:] if "=" not in a or a.startswith("LIST:")]
    kwargs = {
        k: value(v, obj) for k, _, v in (a.partition("=") for a in argv[1:] if "=" in a and not a.startswith("LIST:"))
    }
    try:
        function(*args, **kwargs)
        return 0, ""
    except api.SweeperError as err:
        return (2 if err.exit_code == 2 else 100 + err.exit_code), str(err)
    except BaseException as err:
        return 99, "".join(traceback.format_exception(err))


def run_cli(argv):
    if argv[0] == "nmt":
        from nmt_core.cli import main
    else:
        from sweeper.cli import main
    sys.stdin = io.TextIOWrapper(io.BytesIO(b"hi\n"))
    try:
        return main(argv[1:]), ""
    except SystemExit as exit:
        return exit.code, ""
    except BaseException:
        traceback.print_exc()
        return 98, ""


def run_case(case):
    """In a forked child: the case, its stdout and stderr at the descriptors, its result on the report."""
    os.chdir(case["work"])
    for key in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS"):
        os.environ.pop(key, None)
    os.environ.update({"NMT_SWEEPER_TIMEOUT": "2", "AWS_SECRET_ACCESS_KEY": SECRET, "NMT_SWEEPER_AGENT_WAIT": "2"})
    os.dup2(os.open("out.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
    os.dup2(os.open("err.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
    start, peak = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    argv = [a.replace("URL", case.get("url", "")) for a in case["argv"]]
    try:
        if argv[0].startswith("api:"):
            code, message = run_api(argv, Hostile(case.get("object")))
        else:
            code, message = run_cli(argv)
    except BaseException as error:
        code, message = 97, repr(error)
    sys.stdout.flush()
    sys.stderr.flush()
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak
    result = {"code": code, "message": message, "seconds": time.monotonic() - start, "grown_kb": grown}
    report.write(json.dumps(result) + "\n")
    report.flush()


# each case in a child forked from this process, its imports done: a case that hangs is killed, not the worker
for line in sys.stdin:
    case = json.loads(line)
    child = os.fork()
    if child == 0:
        try:
            run_case(case)
        finally:
            os._exit(0)
    deadline = time.monotonic() + CASE_S
    while os.waitpid(child, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(child, 9)
            os.waitpid(child, 0)
            report.write("null\n")
            report.flush()
            break
        time.sleep(0.05)
