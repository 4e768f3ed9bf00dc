"""Named integer codes shared by the numba kernels and the Python layers.

Kernels work on plain integers; everything a person reads goes through the
name tables here (``DROP_NAMES``, ``GRO_REASON_NAMES``, ...).
"""

# TCP flag bits as in the 16-bit flag word (tcp_flag_word without doff/window).
FIN, SYN, RST, PSH, ACK, URG, ECE, CWR, AE = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x100

# tcpdump's flag letters, in the order tcpdump prints them.
FLAG_LETTERS = ((FIN, "F"), (SYN, "S"), (RST, "R"), (PSH, "P"), (URG, "U"),
                (ECE, "E"), (CWR, "W"), (AE, "e"), (ACK, "."))

# skb->ip_summed (include/linux/skbuff.h).
CSUM_NONE, CSUM_UNNECESSARY, CSUM_COMPLETE, CSUM_PARTIAL = 0, 1, 2, 3
CSUM_NAMES = {CSUM_NONE: "NONE", CSUM_UNNECESSARY: "UNNECESSARY",
              CSUM_COMPLETE: "COMPLETE", CSUM_PARTIAL: "PARTIAL"}
SKB_MAX_CSUM_LEVEL = 3

# skb_shinfo(skb)->gso_type bits that the engine models.
GSO_TCPV4, GSO_TCP_FIXEDID, GSO_TCP_ECN, GSO_TCP_ACCECN, GSO_PARTIAL = 0x1, 0x2, 0x4, 0x8, 0x10
GSO_UDP_TUNNEL, GSO_UDP_TUNNEL_CSUM, GSO_DODGY = 0x20, 0x40, 0x80
GSO_TCPV6 = 0x200               # set by tcp6_gro_complete on merged IPv6 packets

# Encapsulation bits of a packet (Trace.encap).
ENC_VLAN, ENC_MPLS, ENC_PPPOE, ENC_VXLAN = 0x1, 0x2, 0x4, 0x8
ENC_BYTES = {ENC_VLAN: 4, ENC_MPLS: 4, ENC_PPPOE: 8, ENC_VXLAN: 50}

# Why a packet was dropped (Trace.drop). 0 = delivered.
DROP_NONE = 0
DROP_MTU_SILENT = 1          # DF packet over a hop's MTU, no ICMP (black hole)
DROP_MTU_ICMP = 2            # DF packet over a hop's MTU, ICMP "fragmentation needed" sent
DROP_GSO_EPROTONOSUPPORT = 3 # skb_mac_gso_segment: no packet_offload for the protocol (report 001)
DROP_GSO_EINVAL = 4          # skb_network_protocol() == 0 inside mpls_gso_segment (report 001)
DROP_QUEUE_FULL = 5          # tail drop at a hop's queue
DROP_RANDOM_LOSS = 6         # the path's random loss
DROP_BAD_CSUM = 7            # checksum validation failed in the stack
DROP_LRO_FORWARD = 8         # LRO packets cannot be forwarded
DROP_NAMES = {
    DROP_NONE: "delivered",
    DROP_MTU_SILENT: "over MTU, dropped silently",
    DROP_MTU_ICMP: "over MTU, ICMP frag-needed",
    DROP_GSO_EPROTONOSUPPORT: "GSO: -EPROTONOSUPPORT",
    DROP_GSO_EINVAL: "GSO: -EINVAL",
    DROP_QUEUE_FULL: "queue full",
    DROP_RANDOM_LOSS: "random loss",
    DROP_BAD_CSUM: "bad checksum",
    DROP_LRO_FORWARD: "LRO packet not forwardable",
}

# Why GRO did not merge a packet into the held one (Trace.gro_reason).
GRO_MERGED = 0
GRO_NOT_SAME_FLOW = 1
GRO_SEQ_GAP = 2
GRO_FLAGS = 3
GRO_SIZE = 4
GRO_CHECKSUM = 5
GRO_IP_RULE = 6
GRO_TABLE_FULL = 7
GRO_END_OF_POLL = 8
GRO_ACK_DIFFERS = 9
GRO_OPTIONS_DIFFER = 10
GRO_PURE_ACK = 11
GRO_FIRST = 12              # started a new held packet
GRO_OFF = 13                # GRO disabled on the device
GRO_REASON_NAMES = {
    GRO_MERGED: "merged",
    GRO_NOT_SAME_FLOW: "not same flow",
    GRO_SEQ_GAP: "sequence gap",
    GRO_FLAGS: "flags",
    GRO_SIZE: "size",
    GRO_CHECKSUM: "checksum",
    GRO_IP_RULE: "IP rule",
    GRO_TABLE_FULL: "table full",
    GRO_END_OF_POLL: "end of poll",
    GRO_ACK_DIFFERS: "ack differs",
    GRO_OPTIONS_DIFFER: "options differ",
    GRO_PURE_ACK: "pure ACK",
    GRO_FIRST: "first of a flow",
    GRO_OFF: "GRO off",
}

# Where a software checksum pass happened (engine/checksum.py events).
PASS_GRO_VALIDATE = 1        # skb_gro_checksum_validate -> __skb_gro_checksum_complete
PASS_CONNTRACK = 2           # nf_conntrack_checksum -> nf_ip_checksum
PASS_CSUM_HELP = 3           # skb_checksum_help in a driver without TX checksum
PASS_SW_GSO = 4              # software GSO without checksum offload (gso_make_checksum)
PASS_TCP_TX = 5              # TCP computing the checksum in software at send time
PASS_STACK_RX = 6            # tcp_v4_rcv validating a NONE packet GRO did not see
PASS_NAMES = {
    PASS_GRO_VALIDATE: "GRO validation",
    PASS_CONNTRACK: "conntrack nf_conntrack_checksum",
    PASS_CSUM_HELP: "skb_checksum_help",
    PASS_SW_GSO: "software GSO checksum",
    PASS_TCP_TX: "TCP transmit checksum",
    PASS_STACK_RX: "TCP receive validation",
}

# NIC models of the segmentation engine (engine.segment): code per model, then
# name -> (code, MSS mask bits, status bits clobbered)
NIC_SW_GSO = 0
NIC_HW_TSO = 1
NIC_RTL8139_LEGACY = 2
NIC_RTL8139_MASK12 = 3
NIC_RTL8139_CLOBBERED = 4
NIC_RTL8139_FIXED = 5
NIC_DROP_GSO = 6

NIC_MODELS: dict[str, tuple[int, int, int]] = {
    "sw-gso": (NIC_SW_GSO, 11, 0),
    "hw-tso": (NIC_HW_TSO, 11, 0),
    "rtl8139-legacy": (NIC_RTL8139_LEGACY, 12, 1),
    "rtl8139-legacy-mask12": (NIC_RTL8139_MASK12, 12, 1),
    "rtl8139-clobbered": (NIC_RTL8139_CLOBBERED, 11, 1),
    "rtl8139-fixed": (NIC_RTL8139_FIXED, 11, 0),
    "drop-gso": (NIC_DROP_GSO, 11, 0),
}

# Linux releases whose TCP rules the model knows (sim.scenario.kernel_rules), oldest first
KERNELS = ("4.4", "4.7", "4.9", "4.10", "4.11", "4.14", "4.18", "4.19", "5.4", "5.10", "5.12", "5.15",
           "6.1", "6.6", "6.12", "6.18")
NEWEST_KERNEL = KERNELS[-1]
