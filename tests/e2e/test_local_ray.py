"""The local Ray a sweep starts listens on the loopback only (issue #26 item 6): read from /proc while it runs."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time

import pytest

from tests.e2e.test_sweep_e2e import SPACE, write_space

pytestmark = pytest.mark.slow
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column


def descendants(root: int) -> list[int]:
    """root and every process below it (Ray's GCS, raylet, agents and workers are children of the driver)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{entry}/stat").read() if entry.isdigit() else ""
        except OSError:
            continue
        if stat:
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def socket_owners(pids: list[int]) -> dict[str, str]:
    """socket inode -> the name of the process holding it."""
    owners = {}
    for pid in pids:
        try:
            name = open(f"/proc/{pid}/comm").read().strip()
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    owners[link[8:-1]] = name
        except OSError:
            continue
    return owners


def address(hex_address: str) -> str:
    """/proc/net/tcp{,6}'s little-endian hex address as text (IPv4-mapped IPv6 stays ::ffff:a.b.c.d)."""
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = struct.unpack("<4I", raw)
    return socket.inet_ntop(socket.AF_INET6, struct.pack(">4I", *words))


def listeners(root: int) -> set[tuple[str, str]]:
    """(process name, bound address) of every TCP socket listening in root's process tree."""
    owners = socket_owners(descendants(root))
    found = set()
    for table in ("tcp", "tcp6"):
        for line in open(f"/proc/net/{table}").read().splitlines()[1:]:
            cols = line.split()
            if cols[3] == LISTEN and cols[9] in owners:
                found.add((owners[cols[9]], address(cols[1].split(":")[0])))
    return found


def test_the_sweepers_local_ray_listens_on_127_0_0_1_only(tmp_path):
    space = write_space(
        tmp_path,
        name="loopback",
        parameters={"attention.temperature": {"grid": ["none"]}},
        data={**SPACE["data"], "train_subset": 2000},
        base={**SPACE["base"], "train": {"epochs": 3}},
    )
    log = tmp_path / "sweep.log"
    with open(log, "w") as out:  # a file, not a pipe: a pipe nobody reads while we poll could fill and stall it
        driver = subprocess.Popen(
            [sys.executable, "-m", "sweeper.cli", "run", str(space), "--storage", str(tmp_path / "sweeps")],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
        )
        seen: set[tuple[str, str]] = set()
        while driver.poll() is None:
            seen |= listeners(driver.pid)
            time.sleep(0.5)
    assert driver.returncode == 0, log.read_text()[-3000:]
    names = {name for name, _ in seen}
    assert {"gcs_server", "raylet"} <= names and any(n.startswith("ray::") for n in names), seen
    outside = {(name, ip) for name, ip in seen if ip not in ("127.0.0.1", "::ffff:127.0.0.1", "::1")}
    assert not outside, f"listening beyond the loopback: {sorted(outside)}"
