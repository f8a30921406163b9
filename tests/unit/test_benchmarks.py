"""The benchmarks run end to end (tiny sizes, a few steps) so they cannot rot; they are not timing tests."""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import COMPILES

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import throughput  # noqa: E402


def test_throughput_benchmark_smoke(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert (
        throughput.main(
            ["--size", "tiny", "--steps", "2", "--decode-batches", "1", "--device", "cpu", "--json", str(out)]
        )
        == 0
    )
    [results] = json.loads(out.read_text())
    assert set(results["variants"]) == set(throughput.VARIANTS)
    for row in results["variants"].values():
        assert row["train_tokens_per_s"] > 0 and row["greedy_sentences_per_s"] > 0 and row["beam10_sentences_per_s"] > 0
        assert row["greedy_tokens_per_sentence"] > 10 and row["beam10_tokens_per_sentence"] > 10  # </s> banned
    assert "| sact |" in capsys.readouterr().out


def test_transformer_throughput_benchmark_smoke(capsys):
    results = throughput.run(
        throughput.torch.device("cpu"),
        "tiny",
        1,
        1,
        ["none", "sact_first_pass", "sentinel"],
        input_feeding=True,
        amp=False,
        log=lambda _: None,
        arch="transformer",
        clock="cpu",
    )
    assert results["arch"] == "transformer" and results["clock"] == "cpu"
    assert set(results["variants"]) == {"none", "sact_first_pass", "sentinel"}
    for row in results["variants"].values():
        assert row["train_tokens_per_s"] > 0 and row["beam10_tokens_per_sentence"] > 10  # </s> banned
    if throughput.load_joeynmt("transformer") is not None:  # benchmarks/install_joeynmt.sh
        joeynmt = results["joeynmt"]
        assert joeynmt["train_tokens_per_s"] > 0 and joeynmt["beam10_sentences_per_s"] > 0
        assert joeynmt["beam10_tokens_per_sentence"] == results["variants"]["none"]["beam10_tokens_per_sentence"]
        assert "| joeynmt 2.3 |" in throughput.table(results)


def test_zero_rounds_times_decoding_alone(capsys):
    assert (
        throughput.main(
            [
                "--size",
                "tiny",
                "--rounds",
                "0",
                "--decode-batches",
                "1",
                "--device",
                "cpu",
                "--variants",
                "none",
                "sact",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "training not timed" in out and "round 1" not in out
    assert [line.split(" | ")[2] for line in out.splitlines() if line.startswith(("| none ", "| sact "))] == ["-", "-"]


def test_no_input_feeding_path_runs():
    results = throughput.run(
        throughput.torch.device("cpu"), "tiny", 1, 1, ["sact"], input_feeding=False, amp=False, log=lambda _: None
    )
    assert results["variants"]["sact"]["train_tokens_per_s"] > 0


def test_packing_benchmark_smoke(tmp_path):
    import packing

    out = tmp_path / "packing.json"
    assert (
        packing.main(["--device", "cpu", "--size", "tiny", "--trials", "2", "--seconds", "1", "--json", str(out)]) == 0
    )
    [row] = json.loads(out.read_text())["rows"]
    assert row["trials"] == 2 and len(row["per_trial"]) == 2 and all(rate > 0 for rate in row["per_trial"])


def test_profile_breakdown_smoke(capsys):
    import profile_step

    assert profile_step.main(["--size", "tiny", "--steps", "2", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "| matrix products |" in out and "| Python and dispatch overhead |" in out
    assert profile_step.bucket_of("aten::addmm") == "matrix products"
    assert profile_step.bucket_of("autograd::engine::evaluate_function: AddmmBackward0").startswith("autograd engine")
    assert profile_step.bucket_of("aten::_log_softmax") == "softmax and cross-entropy"
    assert profile_step.bucket_of("graph_2_cpp_fused__softmax_add_mul_sigmoid") == "fused kernels (Inductor)"


@pytest.mark.slow
def test_sweep_overhead_compares_the_same_trial_work_and_measures_both_drivers(tmp_path, capsys):
    import sweep_overhead

    out = tmp_path / "sizes.json"
    assert sweep_overhead.main(["--trials", "2", "--no-system-metrics", "--json", str(out)]) == 0
    [times, driver] = [line.split(" | ") for line in capsys.readouterr().out.splitlines() if line.startswith("| 2 |")]
    bare, ours = float(times[1]), float(times[2])  # per trial: bare, ours, the extra, the ratio
    assert bare > 0 and ours > 0 and abs(float(times[3].strip("*")) - (ours - bare)) <= 0.011 and times[4][-1] == "x"
    assert all(100 < float(mb) < 10_000 for mb in driver[1].split(" / "))  # driver resident MB, bare / ours
    assert all(float(cpu) > 0 for cpu in driver[3].split(" / "))  # driver CPU s/trial
    median_s, longest_s = map(float, driver[6].rstrip(" |").split(" / "))  # epoch-to-MLflow delay
    assert 0 <= median_s <= longest_s < 60
    [size] = json.loads(out.read_text())  # the same trial work: both evaluate alike and checkpoint each report
    bare, ours = size["bare"]["first_final"], size["ours"]["first_final"]
    evaluated = {"bleu_dev", "bleu_dev_final_beam", "bleu_test_avg", "epoch_time_s", "n_params"}
    assert evaluated <= set(bare["keys"]) and evaluated <= set(ours["keys"])
    assert bare["checkpoint"] == ours["checkpoint"] == "checkpoint_000001"
    assert size["bare"]["saves"] and size["ours"]["saves"]  # Tune's experiment-state saves, timed on both sides


def test_sweep_overhead_verdict_is_the_ratio_at_each_size_and_the_marginal_trials_extra():
    import sweep_overhead

    def size(trials: int, bare_s: float, ours_s: float):
        return sweep_overhead.Size(trials, trials * bare_s, {}, trials * ours_s, {})

    flat = sweep_overhead.verdict([size(24, 2.0, 2.6), size(96, 1.5, 2.0)])
    assert flat[0] == "within 1.5x of bare Tune per trial: yes (24: 1.30x, 96: 1.33x)"
    assert (
        flat[1].startswith("extra per trial from 24 to 96 trials: the marginal trial's +0.47 s") and "(flat)" in flat[1]
    )
    grows = sweep_overhead.verdict([size(24, 2.0, 2.4), size(96, 1.5, 2.4)])  # 0.4 s a trial at 24, 0.9 at 96
    assert grows[0].startswith("within 1.5x of bare Tune per trial: no") and "(grows)" in grows[1]
    assert abs(sweep_overhead.rss_slope_kb([(n, 500 + 0.25 * n) for n in range(1, 41)]) - 256) < 1e-6


def test_sweep_overhead_runs_the_bare_trials_settings_through_the_sweeper():
    """The YAML `sweeper run` gets holds the bare trainable's config, and --models reaches tracking.models."""
    import sweep_overhead
    import yaml

    from sweeper.space.spec import parse_spec

    spec = parse_spec(yaml.safe_dump(sweep_overhead.space(3, 2, False, None)), "sweep_overhead")
    assert {key: spec.base[key] for key in sweep_overhead.BASE} == sweep_overhead.BASE
    assert spec.search.max_concurrent == 2 and not spec.system_metrics
    assert spec.models == "best"  # the sweeper's default, as a lab runs it
    assert parse_spec(yaml.safe_dump(sweep_overhead.space(3, 2, False, "none")), "sweep_overhead").models == "none"


@COMPILES
@pytest.mark.slow
def test_compiled_rows_and_breakdown_smoke(capsys):
    """--compile: each variant eager and compiled in the same rounds, the compiled row with its compile seconds; the
    profile's compiled column beside the eager one."""
    import profile_step

    results = throughput.run(
        throughput.torch.device("cpu"),
        "tiny",
        1,
        1,
        ["sact"],
        input_feeding=True,
        amp=False,
        log=lambda _: None,
        compile_modes=("default",),
    )
    assert set(results["variants"]) == {"sact", "sact+compile"}
    assert results["variants"]["sact+compile"]["compile_time_s"] > 0 == results["variants"]["sact"]["compile_time_s"]
    assert "| sact+compile |" in throughput.table(results)
    assert profile_step.main(["--size", "tiny", "--steps", "1", "--threads", "1", "--compile"]) == 0
    out = capsys.readouterr().out
    assert "compiled ms per step" in out and "| fused kernels (Inductor) |" in out


def test_fingerprints_repeat_bit_for_bit_and_name_a_difference(tmp_path, capsys):
    """benchmarks/fingerprints.py: the same code gives the same fingerprints, and one changed number is reported."""
    import fingerprints

    out = tmp_path / "fingerprints.json"
    assert fingerprints.main(["--only", "extra: general+learned4", "--out", str(out)]) == 0
    assert fingerprints.main(["--only", "extra: general+learned4", "--compare", str(out)]) == 0
    assert "all 1 fingerprinted before equal" in capsys.readouterr().out
    saved = json.loads(out.read_text())
    key = next(iter(saved))
    saved[key]["loss"] = "0.0"
    out.write_text(json.dumps(saved))
    assert fingerprints.main(["--only", "extra: general+learned4", "--compare", str(out)]) == 1
    assert f"{key}: loss" in capsys.readouterr().out


def test_a_contender_that_fails_costs_its_own_row_and_the_others_are_measured(tmp_path, monkeypatch, capsys):
    """One contender whose step raises (a capture refused on the device, say) gets an error row naming the error;
    the rows before and after it are measured, written and reported, and the run exits 1."""
    out = tmp_path / "bench.json"
    real_step = throughput.train_step_fn

    def capture_refused(model, cfg, device):
        step = real_step(model, cfg, device)
        if cfg.attention.temperature != "sact":
            return step

        def refused(batch):
            raise RuntimeError("operation not permitted when stream is capturing\nsecond line")

        return refused

    monkeypatch.setattr(throughput, "train_step_fn", capture_refused)
    args = ["--size", "tiny", "--steps", "1", "--rounds", "2", "--decode-batches", "1", "--device", "cpu"]
    assert throughput.main(args + ["--variants", "none", "sact", "fixed", "--json", str(out)]) == 1
    [results] = json.loads(out.read_text())
    rows = results["variants"]
    assert rows["sact"]["error"] == "RuntimeError: operation not permitted when stream is capturing"
    assert rows["sact"]["train_rounds"] == [] and "greedy_sentences_per_s" not in rows["sact"]
    for name in ("none", "fixed"):
        assert len(rows[name]["train_rounds"]) == 2 and rows[name]["beam10_sentences_per_s"] > 0
    captured = capsys.readouterr()
    assert "| sact | - | - | - | - | failed: RuntimeError: operation not permitted" in captured.out
    assert "sact failed: RuntimeError" in captured.err

    import runbook_report

    summary = "\n".join(runbook_report.throughput_lines("rnn", results))
    assert "| rnn | sact | 0 |" in summary and "failed: RuntimeError: operation not permitted" in summary
    assert "| rnn | fixed |" in summary and "failed" not in summary.split("| rnn | fixed |")[1]


def test_a_contender_whose_decoding_fails_keeps_its_training_rounds(tmp_path, monkeypatch):
    out = tmp_path / "bench.json"

    def broken_decoding(*args):
        raise RuntimeError("decoding broke")

    monkeypatch.setattr(throughput, "decode_fn", broken_decoding)
    args = ["--size", "tiny", "--steps", "1", "--rounds", "1", "--device", "cpu", "--variants", "none"]
    assert throughput.main(args + ["--json", str(out)]) == 1
    [results] = json.loads(out.read_text())
    row = results["variants"]["none"]
    assert row["error"] == "RuntimeError: decoding broke" and row["train_tokens_per_s"] > 0


def test_the_runbook_reports_the_rounds_of_a_run_cut_short():
    """A throughput step killed by its time limit leaves rounds_done and no rows: the summary keeps the rounds."""
    import runbook_report

    run = {"arch": "rnn", "size": "paper", "rounds_done": {"joeynmt": [17000.0], "none": [19000.0, 19254.0]}}
    lines = runbook_report.throughput_lines("rnn", run)
    assert lines == [
        "| rnn | joeynmt | 17000 | | | | | | rnn paper, cut short: training rounds only |",
        "| rnn | none | 19254 | | | | | | rnn paper, cut short: training rounds only |",
    ]


@pytest.mark.skipif(throughput.torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_throughput_refuses_cuda_where_there_is_none(capsys):
    assert throughput.main(["--device", "cuda", "--size", "tiny", "--rounds", "0", "--variants", "none"]) == 2
    assert "--device cuda, but torch" in capsys.readouterr().err


def test_throughput_fails_loudly_when_joeynmt_does_not_import(tmp_path, monkeypatch, capsys):
    """A joeynmt installed for this Python that does not import (another Python's compiled packages shadowing this
    one's did, on the GPU image) is an error, and so is a missing one when --joeynmt asks for it."""
    broken = tmp_path / "py3x"
    (broken / "joeynmt").mkdir(parents=True)
    (broken / "joeynmt" / "__init__.py").write_text("import a_module_that_is_not_there\n")
    for name in [m for m in sys.modules if m == "joeynmt" or m.startswith("joeynmt.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(throughput, "joeynmt_folder", lambda: broken)
    assert throughput.main(["--size", "tiny", "--rounds", "0", "--device", "cpu", "--variants", "none"]) == 2
    assert "joeynmt does not import" in capsys.readouterr().err
    monkeypatch.setattr(throughput, "joeynmt_folder", lambda: tmp_path / "absent")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if ".joeynmt" not in p and p != str(broken)])
    for name in [m for m in sys.modules if m == "joeynmt" or m.startswith("joeynmt.")]:
        monkeypatch.delitem(sys.modules, name)
    if throughput.load_joeynmt() is None:  # not installed anywhere on this machine: only --joeynmt complains
        args = ["--size", "tiny", "--rounds", "0", "--device", "cpu", "--variants", "none", "--joeynmt"]
        assert throughput.main(args) == 2
        assert "install it for this Python" in capsys.readouterr().err


def test_packing_survives_a_crashing_trial():
    """A trial process that dies ends its measurement with the exit codes instead of waiting for it forever."""
    import packing

    setting = dict(device="cpu", size="tiny", variant="no-such-variant", mode="none", amp=False, buckets=None)
    with pytest.raises(packing.TrialFailed, match=r"2 trials: 0 reported; exit codes \[(1|-15), (1|-15)\]"):
        packing.packed(2, setting, 1.0)
    assert packing.row_line({"trials": 2, "mps": True, "error": "2 trials: 0 reported"}).startswith("| 2 | on | failed")


def test_packing_measures_the_mps_rows_before_the_time_sliced_ones():
    import packing

    assert packing.passes("both", [1, 8, 4]) == [(False, [1]), (True, [8, 4]), (False, [8, 4])]
    assert packing.passes("both", [8]) == [(True, [8]), (False, [8])]
    assert packing.passes("off", [1, 2]) == [(False, [1, 2])]


def test_a_packing_row_that_raises_is_an_error_row_and_the_next_rows_are_measured(monkeypatch):
    import packing

    def packed(k, setting, seconds):
        if k == 2:
            raise ValueError("no such thing")
        return [{"tokens_per_s": 10.0, "peak_mib": None}] * k

    monkeypatch.setattr(packing, "packed", packed)
    args = SimpleNamespace(mps="off", trials=[1, 2, 4], seconds=1.0)
    rows = packing.measure(args, {}, lambda rows, row: None)
    assert [row.get("error") for row in rows] == [None, "ValueError: no such thing", None]
    assert rows[2]["vs_one"] == 4.0


def test_the_runbook_counts_test_outcomes_from_plain_and_xdist_logs():
    """`pytest -v` puts the outcome after the test, under xdist (-n, as the runbook's CUDA tests run) before it."""
    import runbook_report

    log = """tests/t.py::a[x-y] PASSED [ 10%]
[gw1] [ 50%] FAILED tests/t.py::b[z]
[gw0] [100%] PASSED tests/t.py::c
tests/t.py::d SKIPPED (needs a CUDA device) [ 90%]
FAILED tests/t.py::b[z] - RuntimeError"""
    counts = runbook_report.test_outcomes(log)
    assert counts == {"passed": 2, "failed": 1, "skipped": 1, "not_passed": ["tests/t.py::b[z]"]}


RUNBOOK = Path(__file__).parents[2] / "benchmarks" / "gpu_runbook.sh"


@pytest.mark.timeout(3600)  # the runbook's own limits are 10x long in a dry run: a slow machine is no failure
def test_the_gpu_runbook_dry_run_runs_every_step_and_keeps_their_results(tmp_path):
    """benchmarks/gpu_runbook.sh --dry-run: every step at tiny sizes on the CPU, each recorded with its exit code,
    results.json and one markdown table in OUT after it. The CUDA tests are collected and skip without CUDA."""
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(RUNBOOK), "--dry-run"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "results.json").read_text())
    codes = {step["name"]: step["code"] for step in results["steps"]}
    assert list(codes) == ["environment", "joeynmt", "rnn", "packing", "transformer", "cuda_tests"]
    assert all(code == 0 for name, code in codes.items() if name != "joeynmt"), codes  # joeynmt may need PyPI
    assert results["env"]["torch"] and results["cuda_tests"]["skipped"] > 0 and not results["cuda_tests"]["not_passed"]
    [rnn] = results["rnn"]
    assert set(rnn["variants"]) == {"none", "sact", "none+graphs", "sact+graphs"} and rnn["buckets"] == [5]
    assert ("joeynmt" in rnn) == (codes["joeynmt"] == 0)
    assert [row["trials"] for row in results["packing"]["rows"]] == [1, 2] and results["packing"]["mode"] == "graphs"
    summary = (tmp_path / "summary.md").read_text()
    assert summary.count("\n|---") == 1 and "| rnn | sact+graphs |" in summary and "| packing | 2 trials" in summary
    assert (tmp_path / "runbook.log").stat().st_size > 0 and (tmp_path / "cuda_tests.log").stat().st_size > 0


@pytest.mark.timeout(600)
def test_a_test_step_stopped_by_its_limit_still_counts_the_tests_it_ran(tmp_path):
    """The CUDA tests' step: pytest's own limit ends a hanging test in time for the count, which the summary takes
    from the log pytest wrote into OUT as it went (the step's outer limit would kill the whole group)."""
    tests = tmp_path / "suite" / "test_hangs.py"
    tests.parent.mkdir()
    tests.write_text("import time\n\ndef test_cuda_quick():\n    pass\n\ndef test_cuda_hangs():\n    time.sleep(600)\n")
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "RUNBOOK_STEPS": "cuda_tests"}
    # RUNBOOK_SECONDS 30: pytest's limit about 15 s, which the hanging test waits out (40 s at 60, 85 s at 100):
    # pytest starts and passes the quick test in 0.4 s of CPU, so a machine loaded ten times over still counts it
    env.update(RUNBOOK_TESTS=str(tests), RUNBOOK_SECONDS="30")
    done = subprocess.run(["bash", str(RUNBOOK), "--dry-run"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    [step] = results["steps"]
    assert step["name"] == "cuda_tests" and step["code"] == 124 and step["seconds"] < step["limit"]
    assert results["cuda_tests"] == {"passed": 1, "not_passed": []}
    assert "stopped by its limit" in (out / "cuda_tests.log").read_text()
    assert "| cuda_tests | | | | | | | | timed out" in (out / "summary.md").read_text()


STUDY = Path(__file__).parents[2] / "benchmarks" / "gpu_study.sh"


@pytest.mark.skipif(throughput.torch.cuda.is_available(), reason="checks a machine without CUDA")
@pytest.mark.parametrize("script", [RUNBOOK, STUDY], ids=["runbook", "study"])
def test_the_gpu_scripts_stop_at_once_with_one_line_where_no_cuda_is_visible(tmp_path, script):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"{script.name}: no CUDA device is visible to") and "--dry-run" in line
    assert not (tmp_path / "results.json").exists() and line in next(tmp_path.glob("*.log")).read_text()


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_gpu_study_dry_run_sweeps_the_three_rows_and_writes_the_summary(tmp_path):
    """benchmarks/gpu_study.sh --dry-run: the paper-size study's command at tiny size on the CPU (one seed a row,
    one epoch, the synthetic corpus) through `sweeper run` on a local Ray, its summary copied into OUT."""
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(["bash", str(STUDY), "--dry-run"], env=env, capture_output=True, text=True, timeout=1700)
    assert done.returncode == 0, (tmp_path / "study.log").read_text()[-3000:]
    summary = (tmp_path / "summary.md").read_text()
    for row in ("none", "learned", "sact"):
        assert row in summary
    assert (tmp_path / "results.parquet").stat().st_size > 0


def test_mt_metrics_benchmark_smoke(capsys):
    """chrF's and TER's costs beside BLEU's on committed outputs (benchmarks/mt_metrics.py)."""
    import mt_metrics

    assert mt_metrics.main(["--sentences", "20", "--repeat", "1", "--resamples", "100"]) == 0
    printed = capsys.readouterr().out
    assert all(f"| {name} |" in printed for name in ("bleu", "chrf", "ter"))


def test_cpu_by_process_counts_a_grandchild_that_outlives_its_parent_and_passes_the_exit_code_on(tmp_path, capsys):
    """benchmarks/cpu_by_process.py: a process started by a child that has already ended still counts (as Ray's
    workers outlive the raylet that forked them), and the command's exit code is the benchmark's."""
    import cpu_by_process

    done = tmp_path / "burnt"
    burn = "import time\nend = time.process_time() + 0.8\nwhile time.process_time() < end: pass\n"
    burn += f"open({str(done)!r}, 'w')"
    # it ends before its child, not waiting for it, but lives long enough to be sampled with it
    orphaning = f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {burn!r}])\ntime.sleep(1.5)"
    waits_for_the_orphan = (
        f"import os, subprocess, sys, time\nsubprocess.run([sys.executable, '-c', {orphaning!r}])\n"
        f"while not os.path.exists({str(done)!r}): time.sleep(0.05)\nsys.exit(3)"
    )
    assert cpu_by_process.main(["--every", "0.05", "--", sys.executable, "-c", waits_for_the_orphan]) == 3
    printed = capsys.readouterr().err
    assert "over 3 processes" in printed and "cores busy of" in printed, printed
    done.unlink()
    code, _, tree = cpu_by_process.measure([sys.executable, "-c", waits_for_the_orphan], 0.05)
    assert code == 3 and len(tree.cpu_s) == 3
    assert max(tree.cpu_s.values()) >= 0.7  # the grandchild's 0.8 s burn, sampled every 0.05 s


def test_cpu_by_process_names_rays_actors_xdist_workers_and_commands():
    import cpu_by_process

    kinds = {
        "ray::ImplicitFunc.train": "ray::ImplicitFunc",
        "/v/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))": "pytest-xdist worker",
        "/v/bin/python -m sweeper.cli run /tmp/pytest-of-root/space.yaml": "sweeper.cli run",
        "/v/bin/python /v/bin/mlflow server --host 127.0.0.1": "mlflow server",
        "/v/bin/python -u /v/ray/_private/log_monitor.py --session-dir=/tmp/x": "log_monitor.py",
        "/v/bin/python -X importtime -c import torch": "python -c",
        "/v/lib/ray/core/src/ray/raylet/raylet --raylet_socket_name=x": "raylet",
        "/v/bin/python3.11": "python3.11",
    }
    assert {command: cpu_by_process.kind(command) for command in kinds} == kinds
