"""Realistic sample events for all three sources, written into `landing/`.

Deterministic: the same arguments give byte-identical files. What it makes:

- `events` distinct events over `days` days from `start`: impressions (55%),
  clicks on about 4% of impressions (most within minutes; 8% after the
  attribution window, so they match no impression), the rest user actions in
  sessions (login, views, clicks, purchases; 60% end with logout; 5% of gaps
  exceed the session gap). The rules come from the catalog. Timestamps are
  UTC `Z` with milliseconds, 10% written with a `+02:00` offset.
- Arrival: every event arrives 0-30 s after it happened. Rates, each a
  fraction of events and adjustable by flag:
  - out_of_order_rate (10%): arrives up to half the source's watermark late,
    so it lands among later events but streaming still accepts it;
  - late_rate (0.5%): arrives 1.5-3x the source's watermark late; streaming
    drops it if newer events were processed first (backfills keep it);
  - duplicate_rate (2%): delivered a second time, identical, within half the
    watermark (silver keeps the first arrival);
  - malformed_rate (0.5%): an extra broken line (bad JSON, array, empty line,
    missing or null field, wrong type, epoch or unparsable timestamp, missing
    offset, unknown action, non-UTF-8), which bronze quarantines.
- Files: one per source per `file_minutes` of arrival time, named by that
  time, a `gzip_rate` share gzip-compressed, each written under a temporary
  name and renamed in (atomic, as the contract requires). Existing files are
  never overwritten.
"""

from __future__ import annotations

import datetime as dt
import gzip
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from lakehouse.catalog import ACTIONS, SOURCES, seconds
from lakehouse.storage.objects import Root, write_atomically

UTC = dt.UTC
MINUTE_MS = 60_000


@dataclass(frozen=True)
class GeneratorConfig:
    events: int
    seed: int
    start: dt.datetime = dt.datetime(2026, 11, 1, tzinfo=UTC)
    days: int = 1
    out_of_order_rate: float = 0.10
    late_rate: float = 0.005
    duplicate_rate: float = 0.02
    malformed_rate: float = 0.005
    gzip_rate: float = 0.10
    file_minutes: int = 60

    def __post_init__(self) -> None:
        if self.events < 0 or self.days < 1 or self.file_minutes < 1:
            raise ValueError("events must be >= 0, days and file_minutes >= 1")
        for name in (
            "out_of_order_rate",
            "late_rate",
            "duplicate_rate",
            "malformed_rate",
            "gzip_rate",
        ):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be between 0 and 1")
        if self.start.tzinfo is None:
            raise ValueError("start must be timezone-aware")


@dataclass
class GeneratedSummary:
    events: Counter[str] = field(default_factory=Counter)
    lines: Counter[str] = field(default_factory=Counter)
    duplicates: Counter[str] = field(default_factory=Counter)
    late: Counter[str] = field(default_factory=Counter)
    malformed: Counter[str] = field(default_factory=Counter)
    files_written: int = 0
    files_existing: int = 0
    # The event times written (ms since the epoch, UTC), first and last: clicks and
    # sessions run past the `days` asked for.
    first_event_ms: int | None = None
    last_event_ms: int | None = None

    def saw(self, event_ms: int) -> None:
        if self.first_event_ms is None or event_ms < self.first_event_ms:
            self.first_event_ms = event_ms
        if self.last_event_ms is None or event_ms > self.last_event_ms:
            self.last_event_ms = event_ms

    def span(self) -> str:
        """The event-time span, to the minute: what the next drop must start after, or
        streaming drops its events behind the watermark as late."""
        if self.first_event_ms is None or self.last_event_ms is None:
            return "event time: no events"
        first, last = (
            dt.datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%MZ")
            for ms in (self.first_event_ms, self.last_event_ms)
        )
        return f"event time {first} .. {last} (a later drop should start after {last})"

    def describe(self) -> str:
        rows = [
            f"{s:<13} {self.events[s]:>10,} events {self.lines[s]:>10,} lines "
            f"({self.duplicates[s]:,} duplicates, {self.late[s]:,} late, "
            f"{self.malformed[s]:,} malformed)"
            for s in SOURCES
        ]
        files = f"{self.files_written} files written"
        if self.files_existing:
            files += f", {self.files_existing} already present (left as they were)"
        return "\n".join([*rows, self.span(), files])


def _iso(ms: int, rng: random.Random) -> str:
    moment = dt.datetime.fromtimestamp(ms / 1000, UTC)
    if rng.random() < 0.10:
        local = moment.astimezone(dt.timezone(dt.timedelta(hours=2)))
        return local.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}+02:00"
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _record(source: str, values: dict[str, str]) -> str:
    body = ",".join(f'"{name}":"{values[name]}"' for name in SOURCES[source].fields)
    return "{" + body + "}"


class _Generator:
    def __init__(self, config: GeneratorConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.span_start = int(config.start.timestamp() * 1000)
        self.span_ms = config.days * 24 * 60 * MINUTE_MS
        # (arrival ms, sequence, line bytes) per source
        self.lines: dict[str, list[tuple[int, int, bytes]]] = defaultdict(list)
        self.summary = GeneratedSummary()
        self._sequence = 0
        n = max(config.events, 1)
        self.users = [f"u{config.seed}-{i:06d}" for i in range(max(20, n // 100))]
        self.ads = [f"ad-{i:05d}" for i in range(max(10, n // 2000))]

    def _id(self, prefix: str) -> str:
        self._sequence += 1
        return f"{prefix}-{self.config.seed}-{self._sequence:09d}"

    def _emit(self, source: str, event_ms: int, values: dict[str, str]) -> None:
        cfg, rng = self.config, self.rng
        watermark_ms = seconds(SOURCES[source].delay_rule) * 1000
        arrival = event_ms + rng.randint(0, 30_000)
        roll = rng.random()
        if roll < cfg.late_rate:
            arrival += int(watermark_ms * rng.uniform(1.5, 3.0))
            self.summary.late[source] += 1
        elif roll < cfg.late_rate + cfg.out_of_order_rate:
            arrival += rng.randint(0, watermark_ms // 2)
        values = {**values, "event_time": _iso(event_ms, rng)}
        line = _record(source, values).encode()
        self._add_line(source, arrival, line)
        self.summary.events[source] += 1
        self.summary.saw(event_ms)
        if rng.random() < cfg.duplicate_rate:
            self._add_line(source, arrival + rng.randint(1, watermark_ms // 2), line)
            self.summary.duplicates[source] += 1

    def _add_line(self, source: str, arrival: int, line: bytes) -> None:
        self._sequence += 1
        self.lines[source].append((arrival, self._sequence, line))
        self.summary.lines[source] += 1

    def _random_time(self) -> int:
        return self.span_start + self.rng.randrange(self.span_ms)

    def impressions_and_clicks(self, count: int) -> None:
        rng = self.rng
        window_ms = seconds("attribution_window") * 1000
        for _ in range(count):
            t = self._random_time()
            ad = rng.choice(self.ads)
            user = rng.choice(self.users)
            impression = self._id("imp")
            campaign = f"camp-{int(ad[3:]) % max(3, len(self.ads) // 8):04d}"
            self._emit(
                "impressions",
                t,
                {
                    "impression_id": impression,
                    "ad_id": ad,
                    "campaign_id": campaign,
                    "user_id": user,
                },
            )
            if rng.random() < 0.04:
                if rng.random() < 0.08:
                    delay = rng.randint(window_ms + MINUTE_MS, 2 * window_ms)
                else:
                    delay = min(int(rng.expovariate(1 / (4 * MINUTE_MS))), window_ms - MINUTE_MS)
                self._emit(
                    "clicks",
                    t + delay,
                    {
                        "click_id": self._id("clk"),
                        "impression_id": impression,
                        "ad_id": ad,
                        "user_id": user,
                    },
                )

    def user_actions(self, count: int) -> None:
        rng = self.rng
        gap_minutes = seconds("session_gap") / 60
        remaining = count
        while remaining > 0:
            length = min(remaining, 1 + int(rng.expovariate(1 / 6)))
            user = rng.choice(self.users)
            t = self._random_time()
            for position in range(length):
                if position == 0:
                    action = "login" if rng.random() < 0.9 else "view"
                elif position == length - 1 and rng.random() < 0.6:
                    action = "logout"
                else:
                    action = rng.choices(("view", "click", "purchase"), (70, 20, 10))[0]
                self._emit(
                    "user_actions",
                    t,
                    {"event_id": self._id("evt"), "user_id": user, "action": action},
                )
                gap = (
                    rng.uniform(gap_minutes + 1, 3 * gap_minutes)
                    if rng.random() < 0.05
                    else rng.expovariate(1 / 2)
                )
                t += int(gap * MINUTE_MS)
            remaining -= length

    def malformed(self) -> None:
        rng = self.rng
        for source, spec in SOURCES.items():
            total = self.summary.events[source]
            for _ in range(sum(rng.random() < self.config.malformed_rate for _ in range(total))):
                good = {name: self._id("bad") for name in spec.string_fields}
                if "action" in good:
                    good["action"] = rng.choice(ACTIONS)
                good["event_time"] = _iso(self._random_time(), rng)
                self._add_line(source, self._random_time(), self._broken(source, good))
                self.summary.malformed[source] += 1

    def _broken(self, source: str, good: dict[str, str]) -> bytes:
        rng = self.rng
        fields = SOURCES[source].string_fields
        kind = rng.choice(
            [
                "truncated",
                "array",
                "empty",
                "missing",
                "null",
                "wrong_type",
                "epoch",
                "bad_time",
                "no_offset",
                "non_utf8",
            ]
            + (["unknown_action"] if source == "user_actions" else [])
        )
        line = _record(source, good)
        if kind == "truncated":
            return line[: len(line) // 2].encode()
        if kind == "array":
            return b"[" + line.encode() + b"]"
        if kind == "empty":
            return b""
        if kind == "missing":
            return line.replace(f'"{rng.choice(fields)}":', '"unexpected":').encode()
        if kind == "null":
            name = rng.choice(fields)
            return line.replace(f'"{name}":"{good[name]}"', f'"{name}":null').encode()
        if kind == "wrong_type":
            name = rng.choice(fields)
            return line.replace(
                f'"{name}":"{good[name]}"', f'"{name}":{rng.randint(1, 10**6)}'
            ).encode()
        if kind == "epoch":
            return line.replace(
                f'"{good["event_time"]}"', str(1_793_000_000 + rng.randint(0, 10**6))
            ).encode()
        if kind == "bad_time":
            return line.replace(good["event_time"], "2026-13-45T25:61:00Z").encode()
        if kind == "no_offset":
            return line.replace(good["event_time"], good["event_time"][:19]).encode()
        if kind == "unknown_action":
            return line.replace(f'"action":"{good["action"]}"', '"action":"teleport"').encode()
        return line.encode()[:-2] + b"\xff\xfe" + line.encode()[-2:]

    def write(self, landing: Root) -> None:
        slot_ms = self.config.file_minutes * MINUTE_MS
        for source, lines in self.lines.items():
            folder = landing / source
            folder.mkdir(parents=True, exist_ok=True)
            slots: dict[int, list[bytes]] = defaultdict(list)
            for arrival, _, line in sorted(lines):
                slots[arrival // slot_ms].append(line)
            for slot, slot_lines in sorted(slots.items()):
                self._write_file(folder, source, slot * slot_ms, slot_lines)

    def _write_file(
        self, folder: Root, source: str, slot_start_ms: int, lines: list[bytes]
    ) -> None:
        stamp = dt.datetime.fromtimestamp(slot_start_ms / 1000, UTC).strftime("%Y%m%dT%H%M")
        compressed = self.rng.random() < self.config.gzip_rate
        name = f"{source}-{stamp}-seed{self.config.seed}.jsonl" + (".gz" if compressed else "")
        target = folder / name
        if target.exists():
            self.summary.files_existing += 1
            return
        payload = b"\n".join(lines) + b"\n"
        if compressed:
            payload = gzip.compress(payload, mtime=0)
        write_atomically(target, payload)
        self.summary.files_written += 1


def generate(config: GeneratorConfig, landing: Root) -> GeneratedSummary:
    generator = _Generator(config)
    impressions = int(config.events * 0.55 / 1.04)
    generator.impressions_and_clicks(impressions)
    generator.user_actions(config.events - sum(generator.summary.events.values()))
    generator.malformed()
    generator.write(landing)
    return generator.summary


def landing_is_empty(landing: Root) -> bool:
    return not any(
        path.is_file() and not path.name.startswith((".", "_"))
        for source in SOURCES
        for path in (landing / source).glob("*")
    )
