#!/usr/bin/env python3
"""Make the committed real-kernel oracle captures (root, network namespaces).

For every case of ``offloadkit.lab.grid.COMMITTED`` this builds three
namespaces -- sender (TSO on) -> router (egress ``tso off gso on``) ->
receiver (GRO on unless the case says off) -- runs iperf3 and captures with
``tcpdump -s 128`` at router ingress (super-packets), router egress (software
GSO segments) and the receiver (after GRO). Output: ``<out>/<case>/`` with
``router-in.pcap``, ``router-out.pcap``, ``rcv.pcap`` and ``settings.json``
(the IPv6 and BIG TCP cases, ``COMMITTED_IPV6``, in ``<out>/ipv6/<case>/``; VXLAN in ``<out>/vxlan/``;
VXLAN/GENEVE over IPv6 and GENEVE in ``<out>/tunnel/``;
IPv6 inside VXLAN in ``<out>/overlay6/``).

    sudo .venv/bin/python data/captures/make_captures.py            # all cases, here
    sudo .venv/bin/python data/captures/make_captures.py --only ts-mss536 --out /tmp/caps
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from offloadkit.lab import LabUnavailable  # noqa: E402
from offloadkit.lab.grid import (COMMITTED, COMMITTED_IPV6, COMMITTED_OVERLAY6, COMMITTED_TUNNEL,  # noqa: E402
                                 COMMITTED_VXLAN, capture_case, load_case)
from offloadkit.lab.packets import read_headers  # noqa: E402

GRIDS = {"": COMMITTED, "ipv6": COMMITTED_IPV6, "vxlan": COMMITTED_VXLAN,         # sub-folder -> cases
         "tunnel": COMMITTED_TUNNEL, "overlay6": COMMITTED_OVERLAY6}


def jumbo_packets(case_dir) -> int:
    """Router-ingress packets of a case that carry the IPv6 jumbo option (BIG TCP)."""
    c = load_case(case_dir)
    return int(read_headers(c["paths"]["router-in"], "router-in", c["sender_ip"])[0].hbh_jumbo.sum())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(Path(__file__).resolve().parent))
    p.add_argument("--only", nargs="*", choices=sorted(name for grid in GRIDS.values() for name in grid),
                   help="cases to (re)make")
    p.add_argument("--until-jumbo", type=int, default=0, metavar="N",
                   help="BIG TCP cases: run again (up to 10 times) until router-in holds N jumbo packets")
    args = p.parse_args(argv)
    total = 0
    cases = [(sub, name, grid[name]) for sub, grid in GRIDS.items() for name in grid
             if not args.only or name in args.only]
    try:
        for sub, name, settings in cases:
            root = Path(args.out) / sub
            for _ in range(10):
                info = capture_case(name, settings, root)
                if not settings.gso_max_size or jumbo_packets(root / name) >= args.until_jumbo:
                    break
            size = sum(f.stat().st_size for f in (root / name).glob("*.pcap"))
            total += size
            stats = "complete" if all(s.get("captured") == s.get("received") and not s.get("dropped")
                                      for s in info["capture_stats"].values()) else "INCOMPLETE"
            print(f"{name:24} gso_size {info['expected_gso_size']:5}  "
                  f"{info['goodput_bps'] / 1e9:6.2f} Gbit/s  retrans {info['retransmits']:3}  "
                  f"{size / 1024:6.0f} KiB  capture {stats}")
    except LabUnavailable as e:
        print(e, file=sys.stderr)
        return 2
    print(f"total {total / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
