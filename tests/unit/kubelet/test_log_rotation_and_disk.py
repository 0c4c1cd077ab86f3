"""SPEC AU10, pure logic: a log file rotated as Kubernetes' container log manager does
(size, file count, gzip, order, a writer that keeps its O_APPEND descriptor), a pod's disk
usage as `du` counts it, and the eviction message's wording."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from skiff.cluster.config import ClusterConfig
from skiff.kubelet.eviction import Threshold, disk_usage, eviction_message, parse_thresholds
from skiff.kubelet.logs import LogRotation, RotationTarget, drop_old_attempts, rotated_logs


async def test_au10_rotation_keeps_max_files_gzips_older_ones_and_the_writer_goes_on(
        tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    writer = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)  # as the container's
    rotation = LogRotation(max_size=1000, max_files=3, interval=1)
    try:
        written = []
        for i in range(6):
            chunk = f"{i}".encode() * 1200
            os.write(writer, chunk)
            written.append(chunk)
            assert await rotation.rotate(RotationTarget(path=log))
        os.write(writer, b"tail")
        assert not await rotation.rotate(RotationTarget(path=log))  # below the size
    finally:
        os.close(writer)
    rotated = rotated_logs(log)
    assert len(rotated) == 2  # + the current file: max_files
    assert rotated[0].suffix == ".gz" and rotated[1].suffix != ".gz"
    assert gzip.decompress(rotated[0].read_bytes()) == written[4]
    assert rotated[1].read_bytes() == written[5]
    assert log.read_bytes() == b"tail"  # the writer's descriptor writes at the new start


def test_au10_rotated_files_sort_by_time_then_by_their_count_within_a_second(
        tmp_path: Path) -> None:
    log = tmp_path / "2.log"
    for name in ("2.log.20260101-000001-10.gz", "2.log.20260101-000001-2",
                 "2.log.20260101-000001.gz", "2.log.20251231-235959.gz", "2.log.x",
                 "2.log.20260101-000002.tmp", "3.log.20260101-000000"):
        (tmp_path / name).write_text("")
    assert [p.name for p in rotated_logs(log)] == [
        "2.log.20251231-235959.gz", "2.log.20260101-000001.gz", "2.log.20260101-000001-2",
        "2.log.20260101-000001-10.gz"]


def test_au10_disk_usage_counts_blocks_and_inodes_without_following_links(
        tmp_path: Path) -> None:
    volume = tmp_path / "scratch"
    (volume / "d").mkdir(parents=True)
    (volume / "d" / "f").write_bytes(b"x" * 100_000)
    os.link(volume / "d" / "f", volume / "hard")  # counted once
    (volume / "link").symlink_to("/usr")  # not followed
    used, inodes = disk_usage([volume, tmp_path / "missing"])
    assert 100_000 <= used < 100_000 + 3 * 8192
    assert inodes == 3  # d, d/f, link


def test_au10_eviction_message_is_kubernetes() -> None:
    assert eviction_message("ephemeral-storage", 10 << 20, 3 << 20,
                            [("c", 5 << 20, 0), ("quiet", 0, 0)]) == (
        "The node was low on resource: ephemeral-storage. Threshold quantity: 10Mi, "
        "available: 3Mi. Container c was using 5Mi, request is 0, has larger consumption "
        "of ephemeral-storage. ")


def test_au10_only_the_current_and_the_previous_attempts_logs_stay(tmp_path: Path) -> None:
    for name in ("0.log", "1.log", "1.log.20260101-000000.gz", "2.log", "3.log",
                 "3.log.20260101-000001", "12.log"):
        (tmp_path / name).write_text("x")
    assert drop_old_attempts(tmp_path / "3.log") == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "12.log", "2.log", "3.log", "3.log.20260101-000001"]


def test_au10_eviction_hard_from_a_config_files_map_or_the_flag(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("kubelet:\n  evictionHard: {nodefs.available: 10%, "
                      "nodefs.inodesFree: 5%, memory.available: 100Mi}\n")
    [flag, value] = ClusterConfig.load(config).flags("kubelet", tmp_path)
    assert flag == "--eviction-hard"
    expected = [Threshold("nodefs.available", percentage=10.0),
                Threshold("nodefs.inodesFree", percentage=5.0),
                Threshold("memory.available", quantity=100 << 20)]
    assert parse_thresholds(value, flag=flag) == expected
    assert parse_thresholds("nodefs.available<10%,nodefs.inodesFree<5%,"
                            "memory.available<100Mi", flag=flag) == expected
