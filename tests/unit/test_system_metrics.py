"""A trial's system metrics: MLflow's own monitors, sampled in the trial, under MLflow's names."""

import time

from sweeper.tracking.system_metrics import SystemSampler


def test_the_sampler_averages_mlflows_system_metrics_between_reports():
    sampler = SystemSampler(interval_s=0.05)
    try:
        time.sleep(0.3)
        first = sampler.take()
        assert {
            "system/cpu_utilization_percentage",
            "system/system_memory_usage_megabytes",
            "system/system_memory_usage_percentage",
            "system/disk_usage_percentage",
        } <= first.keys()
        assert 0 <= first["system/cpu_utilization_percentage"] <= 100
        assert first["system/system_memory_usage_megabytes"] > 0
        again = sampler.take()  # right after: one fresh sample, never an empty report
        assert again.keys() == first.keys()
    finally:
        sampler.stop()
