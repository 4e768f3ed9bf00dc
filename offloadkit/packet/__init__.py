"""bytes <-> header fields: link types, the one decoder, TCP options, byte checksums."""
