"""argparse ``type`` functions shared by the commands (one-line errors for bad numbers), and the
width tables are printed to."""

from __future__ import annotations

import argparse
import shutil
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from rpcbench.reports import ReportOptions
from rpcbench.reports.capacity import DEFAULT_CCU, DEFAULT_EGRESS_PRICE, GOALS
from rpcbench.reports.coverage import DEFAULT_MIN_COVERAGE
from rpcbench.reports.reference import BASELINE_KEY
from rpcbench.errors import BenchError
from rpcbench.wire import TRANSPORTS, parse_policies


def table_width() -> int:
    """Columns the terminal table may use: the terminal's (or $COLUMNS), 100 when stdout is not a terminal."""
    return shutil.get_terminal_size((100, 24)).columns


def whole_number(minimum: int, maximum: Optional[int] = None) -> Callable[[str], int]:
    """An argparse ``type`` accepting whole numbers from ``minimum`` to ``maximum``, with a one-line error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum:,}, not {value:,}")
        return value

    return parse


def seconds(maximum: float) -> Callable[[str], float]:
    """An argparse ``type`` accepting a finite number of seconds above 0 and at most ``maximum``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of seconds") from None
        if not 0 < value <= maximum:  # NaN fails both comparisons
            raise argparse.ArgumentTypeError(f"must be above 0 and at most {maximum:g} seconds, not {text[:40]}")
        return value

    return parse


def fraction(text: str) -> float:
    """An argparse ``type`` accepting a number strictly between 0 and 1 (a share of a trace)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
    if not 0 < value < 1:  # NaN fails both comparisons
        raise argparse.ArgumentTypeError(f"must be above 0 and below 1, not {text[:40]}")
    return value


def coverage_percent(text: str) -> float:
    """An argparse ``type`` for ``--min-coverage``: a percentage from 0 to 100, returned as a share (0 to 1)."""
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
    if not 0 <= value <= 100:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be a percentage from 0 to 100, not {text[:40]}")
    return value / 100


def loss_percent(text: str) -> float:
    """An argparse ``type`` for ``--decide-loss``: a loss rate in % from 0 to 100."""
    return coverage_percent(text) * 100


def dask_address(text: str) -> str:
    """An argparse ``type`` for ``--dask``: ``local``, ``local:N`` or a scheduler address."""
    from rpcbench.executors import parse_dask

    try:
        return parse_dask(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def money(text: str) -> float:
    """An argparse ``type`` accepting a finite price of at least 0 (``--egress-price``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
    if not 0 <= value < float("inf"):  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be a finite number of at least 0, not {text[:40]}")
    return value


def finite_number(text: str) -> float:
    """An argparse ``type`` for a number (what range it may take is the option's owner's to say)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None


def loss_rates(text: str) -> Tuple[float, ...]:
    """``--loss``: comma-separated loss rates in percent per datagram (checked by ``LinkSettings.check``)."""
    return tuple(finite_number(part.strip().rstrip("%")) for part in text.split(","))


def wire_policies(text: str) -> Any:
    """``--wire``: comma-separated policies (per-call, tick:MS, tick:MS+mtu:BYTES, tick:auto)."""
    try:
        return parse_policies(text)
    except BenchError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix(f"--wire {text!r}: ")) from None


def add_report_options(p: argparse.ArgumentParser) -> None:
    """The verdict's and capacity planner's options, shared by the run and ``report``."""
    g = p.add_argument_group("verdict and capacity plan")
    g.add_argument("--goal", choices=GOALS, default="balanced",
                   help="what the verdict optimizes: bandwidth (fewest bytes on the wire), cpu (least encode + decode "
                   "CPU) or balanced (least $/month of egress + serialization cores + stream state at --ccu; "
                   "default)")
    g.add_argument("--baseline", metavar="CODEC",
                   help=f"codec the verdict compares with (default: the trace header's {BASELINE_KEY!r} if it names "
                   "a codec of the run, else json)")
    g.add_argument("--ccu", type=whole_number(1, 10**9), default=DEFAULT_CCU, metavar="N",
                   help="concurrent players the capacity plan is for (default: %(default)s)")
    g.add_argument("--egress-price", type=money, default=DEFAULT_EGRESS_PRICE, metavar="USD_PER_GB",
                   help="$ per GB of server egress (default: %(default)s, a typical cloud price)")
    g.add_argument("--transport", choices=tuple(TRANSPORTS), default="none",
                   help="headers added to each packet (each call under --wire per-call): none, udp (IPv4 + UDP "
                   "28 B; stream codecs needing ordered delivery are not recommended), tcp (IPv4 + TCP 40 B), "
                   "websocket (TCP + 2-10 B frame header, +4 B client mask) or wss (websocket + 22 B TLS 1.3 "
                   "record); sources in docs/wire.md (default: none)")
    g.add_argument("--packet-overhead", type=whole_number(0, 65_535), default=0, metavar="N",
                   help="the game's own bytes per packet (a reliability layer, a sequence number; default: 0)")
    g.add_argument("--decide-wire", metavar="POLICY",
                   help="the --wire policy the verdict and capacity plan use (default: the run's first batched "
                   "policy, else per-call)")
    g.add_argument("--decide-loss", type=loss_percent, metavar="PCT",
                   help="the --loss rate the verdict and capacity plan decide at, on the lossy link's figures (wire "
                   "bytes with resends and acks; calls lost, added latency) (default: the lowest nonzero rate the "
                   "run measured)")
    g.add_argument("--min-coverage", type=coverage_percent, default=DEFAULT_MIN_COVERAGE, metavar="PCT",
                   help="share of the trace's calls a codec must be able to send to be recommended or ranked "
                   "(declared value changes such as tuple -> list do not count against it; calls it fails to "
                   "encode do, declared or not) (default: 100)")
    p.add_argument("--charts", metavar="DIR", help="also write each chart as DIR/<chart>.png and .svg (for slides)")


def run_report_defaults(command: Sequence[str]) -> Dict[str, Any]:
    """The verdict's and planner's options a saved run was given on its command line (``--transport``, ``--goal``,
    ``--ccu``...), so that ``report DIR`` rebuilds the run's own decision unless told otherwise; ``--charts`` is
    not carried over. A command that no longer parses (an older version's values) gives today's defaults."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    add_report_options(parser)
    try:
        known, _ = parser.parse_known_args(list(command))
    except argparse.ArgumentError:
        return {}
    return {name: value for name, value in vars(known).items() if name != "charts"}


def report_options(args: argparse.Namespace) -> ReportOptions:
    """The verdict's and planner's options as parsed by :func:`add_report_options`."""
    return ReportOptions(goal=args.goal, baseline=args.baseline, ccu=args.ccu, egress_price=args.egress_price,
                         transport=args.transport, packet_overhead=args.packet_overhead, wire=args.decide_wire,
                         min_coverage=args.min_coverage, loss=args.decide_loss)
