"""System metrics of a trial (CPU, memory, disk, network, GPUs), sampled with MLflow's own monitors.

MLflow's `SystemMetricsMonitor` samples in a thread of the training process and writes to the run itself.
Here the driver is the only writer to the tracking store, so the trial samples with the same monitor classes
(in the process that carries the load) and hands the averages since its last report to Tune with each epoch's
report, under MLflow's names (`system/cpu_utilization_percentage`, `system/gpu_0_utilization_percentage`, ...);
the driver's tracking callback logs them with the epoch's metrics. The sampling interval is MLflow's setting,
`MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL` (seconds), else INTERVAL_S.
"""

from __future__ import annotations

import threading

from mlflow.environment_variables import MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL
from mlflow.system_metrics.metrics.base_metrics_monitor import BaseMetricsMonitor
from mlflow.system_metrics.metrics.cpu_monitor import CPUMonitor
from mlflow.system_metrics.metrics.disk_monitor import DiskMonitor
from mlflow.system_metrics.metrics.gpu_monitor import GPUMonitor
from mlflow.system_metrics.metrics.network_monitor import NetworkMonitor
from mlflow.system_metrics.metrics.rocm_monitor import ROCMMonitor

from sweeper.tracking.metrics import SYSTEM_PREFIX as PREFIX

INTERVAL_S = 2.0  # shorter than MLflow's 10 s: a small trial's epoch takes seconds


def gpu_monitor() -> BaseMetricsMonitor | None:
    """NVIDIA's (nvidia-ml-py), else AMD's (pyrsmi), else none: the order MLflow tries them in."""
    for monitor in (GPUMonitor, ROCMMonitor):
        try:
            return monitor()
        except Exception:  # noqa: BLE001 - no such GPU or no driver library: no GPU metrics
            continue
    return None


class SystemSampler:
    """Samples every `interval_s` in a daemon thread; `take()` returns the averages since the last `take()`."""

    def __init__(self, interval_s: float | None = None):
        self.interval_s = float(interval_s or MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL.get() or INTERVAL_S)
        self.monitors: list[BaseMetricsMonitor] = [CPUMonitor(), DiskMonitor(), NetworkMonitor()]
        if gpu := gpu_monitor():
            self.monitors.append(gpu)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._collect()  # psutil's first CPU reading is against nothing: read once and drop it
        self._clear()
        threading.Thread(target=self._sample_forever, name="system-metrics", daemon=True).start()

    def _collect(self) -> None:
        with self._lock:
            for monitor in self.monitors:
                monitor.collect_metrics()

    def _clear(self) -> None:
        with self._lock:
            for monitor in self.monitors:
                monitor.clear_metrics()

    def _sample_forever(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._collect()

    def take(self) -> dict[str, float]:
        """`system/<name>` averages of the samples since the last call (one is taken now: never empty)."""
        self._collect()
        with self._lock:
            metrics = {
                f"{PREFIX}{key}": float(value)
                for monitor in self.monitors
                for key, value in monitor.aggregate_metrics().items()
            }
            for monitor in self.monitors:
                monitor.clear_metrics()
        return metrics

    def stop(self) -> None:
        self._stop.set()
