#!/usr/bin/env python3
"""A small authoritative DNS server on 127.0.0.1 (UDP) for the resolver tests.

Usage: dns_server.py ZONE_JSON PORT_FILE QUERY_LOG

ZONE_JSON is re-read on every query, so a test can change answers while the server runs:
  {"name.test": {"A": ["10.0.0.1"], "AAAA": ["::1"], "ttl": 5, "mode": "answer"}}
mode "drop" never answers (a black-holed server), "servfail" answers SERVFAIL. Names not in
the zone get NXDOMAIN; a listed name without records of the asked type gets NOERROR, no
answers (NODATA). Every query is appended to QUERY_LOG as "name TYPE" (lower-cased name).
"""
import ipaddress
import json
import os
import signal
import socket
import struct
import sys

TYPES = {1: "A", 28: "AAAA"}


def parse_question(packet):
    labels, offset = [], 12
    while packet[offset] != 0:
        length = packet[offset]
        labels.append(packet[offset + 1:offset + 1 + length].decode("ascii"))
        offset += 1 + length
    qtype, qclass = struct.unpack("!HH", packet[offset + 1:offset + 5])
    return ".".join(labels), qtype, packet[12:offset + 5]


def answer(packet, zone):
    (query_id, flags) = struct.unpack("!HH", packet[:4])
    name, qtype, question = parse_question(packet)
    entry = zone.get(name.lower())
    rd = flags & 0x0100
    if entry is None:
        return struct.pack("!HHHHHH", query_id, 0x8080 | rd | 3, 1, 0, 0, 0) + question, name, qtype
    mode = entry.get("mode", "answer")
    if mode == "drop":
        return None, name, qtype
    if mode == "servfail":
        return struct.pack("!HHHHHH", query_id, 0x8080 | rd | 2, 1, 0, 0, 0) + question, name, qtype
    records = entry.get(TYPES.get(qtype, ""), [])
    ttl = int(entry.get("ttl", 60))
    body = b""
    for text in records:
        data = ipaddress.ip_address(text).packed
        body += struct.pack("!HHHIH", 0xC00C, qtype, 1, ttl, len(data)) + data
    header = struct.pack("!HHHHHH", query_id, 0x8480 | rd, 1, len(records), 0, 0)
    return header + question + body, name, qtype


def main():
    # Spawned from a test process whose threads block signals: take SIGTERM back.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    zone_path, port_path, log_path = sys.argv[1:4]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    with open(port_path + ".tmp", "w") as port_file:
        port_file.write(str(sock.getsockname()[1]))
    os.rename(port_path + ".tmp", port_path)
    log = open(log_path, "a", buffering=1)
    while True:
        packet, peer = sock.recvfrom(4096)
        try:
            with open(zone_path) as zone_file:
                zone = json.load(zone_file)
            reply, name, qtype = answer(packet, zone)
            log.write("%s %s\n" % (name.lower(), TYPES.get(qtype, "?")))
            if reply is not None:
                sock.sendto(reply, peer)
        except Exception as error:  # a malformed query must not stop the server
            sys.stderr.write("dns_server: %r\n" % (error,))


if __name__ == "__main__":
    main()
