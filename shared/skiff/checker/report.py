"""Reading heartbeats: overlapping executions of one identity, and time to recovery.

Each pod UID of an identity was alive at least over [first, last] of its heartbeats. Two
UIDs of one identity overlap when those spans intersect by more than `tolerance` (by
default the heartbeat interval: a replacement that starts exactly as the old one dies may
share one beat period through clock granularity, never more). `python -m
skiff.checker.report FILE` prints a summary and exits 1 on any overlap.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Heartbeat", "Overlap", "Span", "main", "overlaps", "parse_lines", "spans",
           "time_to_first_heartbeat"]

DEFAULT_TOLERANCE = 0.1


@dataclass(frozen=True)
class Heartbeat:
    identity: str
    uid: str
    pid: int
    mono: float
    wall: float


@dataclass(frozen=True)
class Span:
    identity: str
    uid: str
    first: float
    last: float
    beats: int


@dataclass(frozen=True)
class Overlap:
    identity: str
    uids: tuple[str, str]
    start: float  # monotonic seconds
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def parse_lines(lines: Iterable[str]) -> list[Heartbeat]:
    """Heartbeats from JSON lines; a torn last line (a writer killed mid-write) is skipped."""
    out: list[Heartbeat] = []
    for line in lines:
        try:
            raw = json.loads(line)
            out.append(Heartbeat(identity=str(raw["identity"]), uid=str(raw["uid"]),
                                 pid=int(raw["pid"]), mono=float(raw["mono"]),
                                 wall=float(raw["wall"])))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def spans(beats: Iterable[Heartbeat]) -> list[Span]:
    """Each (identity, uid)'s [first, last] heartbeat, in order of first."""
    acc: dict[tuple[str, str], list[float]] = {}
    for b in beats:
        acc.setdefault((b.identity, b.uid), []).append(b.mono)
    return sorted((Span(identity=i, uid=u, first=min(t), last=max(t), beats=len(t))
                   for (i, u), t in acc.items()), key=lambda s: (s.identity, s.first))


def overlaps(lines: Iterable[str] | Iterable[Heartbeat], *,
             tolerance: float = DEFAULT_TOLERANCE) -> list[Overlap]:
    """Every interval during which two different UIDs of one identity were both alive."""
    items = list(lines)
    beats = [b for b in items if isinstance(b, Heartbeat)] + parse_lines(
        b for b in items if isinstance(b, str))
    found: list[Overlap] = []
    by_identity: dict[str, list[Span]] = {}
    for span in spans(beats):
        by_identity.setdefault(span.identity, []).append(span)
    for identity, group in by_identity.items():
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                start, end = max(a.first, b.first), min(a.last, b.last)
                if end - start > tolerance:
                    found.append(Overlap(identity=identity, uids=(a.uid, b.uid),
                                         start=start, end=end))
    return found


def time_to_first_heartbeat(lines: Iterable[str] | Iterable[Heartbeat], identity: str,
                            after_mono: float) -> float | None:
    """Seconds from `after_mono` (e.g. the partition) to the first heartbeat of `identity`
    by a UID that had not beaten before it (the replacement); None if there is none yet."""
    items = list(lines)
    beats = [b for b in items if isinstance(b, Heartbeat)] + parse_lines(
        b for b in items if isinstance(b, str))
    before = {b.uid for b in beats if b.identity == identity and b.mono <= after_mono}
    later = [b.mono for b in beats
             if b.identity == identity and b.mono > after_mono and b.uid not in before]
    return min(later) - after_mono if later else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m skiff.checker.report",
                                     description="check heartbeats for overlapping pets")
    parser.add_argument("log")
    parser.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                        help="seconds of overlap forgiven (the heartbeat interval)")
    args = parser.parse_args(argv)
    try:
        with open(args.log) as f:
            beats = parse_lines(f)
    except OSError as err:
        sys.exit(f"cannot read {args.log}: {err.strerror}")
    found = overlaps(beats, tolerance=args.tolerance)
    for span in spans(beats):
        print(f"{span.identity:<24} uid {span.uid:<38} {span.beats:>6} beats "
              f"[{span.first:.3f}, {span.last:.3f}]")
    for o in found:
        print(f"OVERLAP {o.identity}: {o.uids[0]} and {o.uids[1]} both alive for "
              f"{o.seconds:.3f}s [{o.start:.3f}, {o.end:.3f}]")
    print(f"{len(beats)} heartbeats, {len(found)} overlapping execution(s)")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
