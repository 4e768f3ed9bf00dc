"""TCP checksums: wrong on packets the capturing host sends (TX offload: expected) or on
packets it receives (real corruption)."""
from __future__ import annotations

import numpy as np

from .. import codes
from .context import RECEIVER, SENDER, UNKNOWN, Context
from .findings import Finding, frames


def checksum_findings(ctx: Context) -> list[Finding]:
    c = ctx.c
    if ctx.n == 0:
        return []
    partial = c["csum_state"] == codes.CSUM_PARTIAL
    # an aggregate's (GRO/LRO) or super-packet's checksum field is not what any wire packet carried
    bad = c["csum_bad"].astype(bool) & ~partial & ~ctx.over_mtu()
    side = ctx.side[c["flow"]]
    d = c["direction"]
    outgoing = ((side == SENDER) & (d == 0)) | ((side == RECEIVER) & (d == 1))
    incoming = ((side == SENDER) & (d == 1)) | ((side == RECEIVER) & (d == 0))
    unknown = side == UNKNOWN
    out = []
    n_out = int(((partial | bad) & outgoing).sum())
    if n_out:
        rows = np.flatnonzero((partial | bad) & outgoing)
        out.append(Finding("checksum-offload", "info",
                           f"{n_out} packets sent by the host the capture was taken on (or next to) have a TCP checksum "
                           f"that does not verify "
                           f"({int((partial & outgoing).sum())} hold just the pseudo-header sum, "
                           f"CHECKSUM_PARTIAL): TX checksum offload - the NIC fills the checksum in after "
                           f"tcpdump saw the packet. Expected, not an error.",
                           {"packets": n_out, "partial": int((partial & outgoing).sum()),
                            "other_wrong": int((bad & outgoing).sum()), "frames": frames(c["frame"][rows])}))
    n_in_p = int((partial & incoming).sum())
    if n_in_p:
        rows = np.flatnonzero(partial & incoming)
        out.append(Finding("checksum-partial-received", "info",
                           f"{n_in_p} packets from the far side carry only the pseudo-header sum (CHECKSUM_PARTIAL): they "
                           f"came over a virtual link (veth, tap, a VM's virtio) that hands over packets whose "
                           f"checksum nobody computed, because nothing needs it. On a physical wire this would "
                           f"mean the sender's NIC did not fill the checksum in.",
                           {"packets": n_in_p, "frames": frames(c["frame"][rows])}))
    n_in_b = int((bad & incoming).sum())
    if n_in_b:
        rows = np.flatnonzero(bad & incoming)
        n_in = int((incoming & ~c["truncated"].astype(bool)).sum())
        out.append(Finding("checksum-corruption", "error",
                           f"{n_in_b} of {n_in} packets from the far side have a wrong TCP checksum (not an offload "
                           f"pseudo-header value), e.g. packet #{int(c['frame'][rows[0]])}: the bytes changed on "
                           f"the way - real corruption (a bad link, NIC or middlebox). The receiver drops them "
                           f"and the sender must resend.",
                           {"packets": n_in_b, "received": n_in, "frames": frames(c["frame"][rows])}))
    n_unk = int(((partial | bad) & unknown).sum())
    if n_unk:
        rows = np.flatnonzero((partial | bad) & unknown)
        out.append(Finding("checksum-unverified", "info",
                           f"{n_unk} packets have a TCP checksum that does not verify "
                           f"({int((partial & unknown).sum())} hold just the pseudo-header sum, the mark of TX "
                           f"checksum offload). On the sending host that is expected; on the receiving host a "
                           f"non-offload value would be corruption. The capture does not say which side it was "
                           f"taken on: rerun with --side sender|receiver.",
                           {"packets": n_unk, "partial": int((partial & unknown).sum()),
                            "other_wrong": int((bad & unknown).sum()), "frames": frames(c["frame"][rows])}))
    return out
