"""Reading and writing packets: tcpdump text and pcap files."""
