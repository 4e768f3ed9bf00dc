"""ns-3's bulk scenario (the peer of ``bench_tcp``'s bulk line): BulkSend over one point-to-point link.

100 Mbit/s, 10 ms each way (20 ms RTT), 0.1 % random packet loss at the receiver
(RateErrorModel), TcpNewReno, MSS 1448, 20 s simulated; the default 100-packet
DropTail queue. ``python -m benchmarks.ns3_bulk`` prints one JSON object: CPU
seconds of ``Simulator::Run`` and the bytes the sink received. Needs pip ``ns3``
(its cppyy bindings take about a minute to import); ``bench_tcp`` runs it in a
child process so that cppyy stays out of the kit's process.
"""
from __future__ import annotations

import json
import time

from ns import ns

def ns3_bulk(rate="100Mbps", one_way="10ms", loss=0.001, seconds=20.0, mss=1448):
    """Run the scenario; returns (CPU seconds of the run, bytes received by the sink)."""
    ns.Config.SetDefault("ns3::TcpL4Protocol::SocketType", ns.StringValue("ns3::TcpNewReno"))
    ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", ns.UintegerValue(mss))
    ns.Config.SetDefault("ns3::TcpSocket::SndBufSize", ns.UintegerValue(1 << 23))
    ns.Config.SetDefault("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(1 << 23))
    nodes = ns.NodeContainer()
    nodes.Create(2)
    p2p = ns.PointToPointHelper()
    p2p.SetDeviceAttribute("DataRate", ns.StringValue(rate))
    p2p.SetChannelAttribute("Delay", ns.StringValue(one_way))
    devs = p2p.Install(nodes)
    em = ns.CreateObject[ns.RateErrorModel]()
    em.SetAttribute("ErrorRate", ns.DoubleValue(loss))
    em.SetAttribute("ErrorUnit", ns.StringValue("ERROR_UNIT_PACKET"))
    devs.Get(1).SetAttribute("ReceiveErrorModel", ns.PointerValue(em))
    ns.InternetStackHelper().Install(nodes)
    addr = ns.Ipv4AddressHelper()
    addr.SetBase(ns.Ipv4Address("10.1.1.0"), ns.Ipv4Mask("255.255.255.0"))
    ifs = addr.Assign(devs)
    sink = ns.PacketSinkHelper("ns3::TcpSocketFactory",
                               ns.InetSocketAddress(ns.Ipv4Address.GetAny(), 5000).ConvertTo())
    sapps = sink.Install(nodes.Get(1))
    sapps.Start(ns.Seconds(0.0))
    bulk = ns.BulkSendHelper("ns3::TcpSocketFactory", ns.InetSocketAddress(ifs.GetAddress(1), 5000).ConvertTo())
    bulk.SetAttribute("MaxBytes", ns.UintegerValue(0))
    bapps = bulk.Install(nodes.Get(0))
    bapps.Start(ns.Seconds(0.0))
    ns.Simulator.Stop(ns.Seconds(seconds))
    t0 = time.process_time()
    ns.Simulator.Run()
    cpu = time.process_time() - t0
    rx = int(ns.DynamicCast[ns.PacketSink](sapps.Get(0)).GetTotalRx())
    ns.Simulator.Destroy()
    return cpu, rx

if __name__ == "__main__":
    cpu, rx = ns3_bulk()
    print(json.dumps({"cpu_s": cpu, "rx_bytes": rx, "seconds": 20.0, "mss": 1448}))
