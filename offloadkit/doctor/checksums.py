"""TCP checksums: wrong on packets the capturing host sends (TX offload: expected) or on
packets it receives (real corruption)."""
from __future__ import annotations

import numpy as np

from .context import RECEIVER, SENDER, UNKNOWN, Context
from .findings import Finding


def checksum_findings(ctx: Context) -> list[Finding]:
    if ctx.packets == 0:
        return []
    s = ctx.s
    F = ctx.nflows
    # per group: is it sent by the host the capture was taken on, received by it, or unknown?
    side = np.repeat(ctx.side, 2)
    d = np.tile([0, 1], F)
    out_g = np.flatnonzero(((side == SENDER) & (d == 0)) | ((side == RECEIVER) & (d == 1)))
    in_g = np.flatnonzero(((side == SENDER) & (d == 1)) | ((side == RECEIVER) & (d == 0)))
    unk_g = np.flatnonzero(side == UNKNOWN)
    partial, bad = s["partial"], s["bad"]     # bad: wrong, not CHECKSUM_PARTIAL, not over the MTU
    fr = ctx.firsts
    out = []
    n_out = int(partial[out_g].sum() + bad[out_g].sum())
    if n_out:
        out.append(Finding("checksum-offload", "info",
                           f"{n_out} packets sent by the host the capture was taken on (or next to) have a TCP checksum "
                           f"that does not verify "
                           f"({int(partial[out_g].sum())} hold just the pseudo-header sum, "
                           f"CHECKSUM_PARTIAL): TX checksum offload - the NIC fills the checksum in after "
                           f"tcpdump saw the packet. Expected, not an error.",
                           {"packets": n_out, "partial": int(partial[out_g].sum()),
                            "other_wrong": int(bad[out_g].sum()), "frames": fr["cs"].of(out_g)}))
    n_in_p = int(partial[in_g].sum())
    if n_in_p:
        out.append(Finding("checksum-partial-received", "info",
                           f"{n_in_p} packets from the far side carry only the pseudo-header sum (CHECKSUM_PARTIAL): they "
                           f"came over a virtual link (veth, tap, a VM's virtio) that hands over packets whose "
                           f"checksum nobody computed, because nothing needs it. On a physical wire this would "
                           f"mean the sender's NIC did not fill the checksum in.",
                           {"packets": n_in_p, "frames": fr["partial"].of(in_g)}))
    n_in_b = int(bad[in_g].sum())
    if n_in_b:
        frames = fr["bad"].of(in_g)
        n_in = int(s["notrunc"][in_g].sum())
        out.append(Finding("checksum-corruption", "error",
                           f"{n_in_b} of {n_in} packets from the far side have a wrong TCP checksum (not an offload "
                           f"pseudo-header value), e.g. packet #{frames[0]}: the bytes changed on "
                           f"the way - real corruption (a bad link, NIC or middlebox). The receiver drops them "
                           f"and the sender must resend.",
                           {"packets": n_in_b, "received": n_in, "frames": frames}))
    n_unk = int(partial[unk_g].sum() + bad[unk_g].sum())
    if n_unk:
        out.append(Finding("checksum-unverified", "info",
                           f"{n_unk} packets have a TCP checksum that does not verify "
                           f"({int(partial[unk_g].sum())} hold just the pseudo-header sum, the mark of TX "
                           f"checksum offload). On the sending host that is expected; on the receiving host a "
                           f"non-offload value would be corruption. The capture does not say which side it was "
                           f"taken on: rerun with --side sender|receiver.",
                           {"packets": n_unk, "partial": int(partial[unk_g].sum()),
                            "other_wrong": int(bad[unk_g].sum()), "frames": fr["cs"].of(unk_g)}))
    return out
