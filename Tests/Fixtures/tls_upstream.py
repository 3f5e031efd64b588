#!/usr/bin/env python3
"""A small https upstream (Python's ssl module, i.e. OpenSSL through CPython) for the tests of
the gateway's https upstreams.

Usage: tls_upstream.py CERT_CHAIN KEY BIND_ADDRESS PORT_FILE EVENT_LOG

Listens on BIND_ADDRESS (port chosen by the kernel, written to PORT_FILE once listening) and
serves HTTP/1.1 with keep-alive over TLS: every request is answered 200 with the JSON
{"target", "connection", "sni", "received" (request body bytes)}, except …/big/N: N bytes "x",
and …/until-close/notify/N and …/until-close/cut/N: N bytes "x" in a body without framing (it
ends with the connection), the TLS session closed with close_notify, or the TCP connection cut
without it (RFC 9112 section 9.8: only the first is a complete response); …/short/N: a
Content-Length of 2N, N bytes, then the connection cut; …/stall/N: N bytes of a body without
framing, then nothing for a minute.
EVENT_LOG gets one JSON line per event, so a test can count what the gateway did on the wire:
  {"event": "accept", "connection": N}                       a TCP connection was accepted
  {"event": "handshake", "connection": N, "sni": name|null}  its TLS handshake completed
  {"event": "handshake_failed", "connection": N, "sni": …, "error": "…"}
  {"event": "request", "connection": N, "method", "target", "host", "received"}
"""
import json
import os
import signal
import socket
import ssl
import sys
import threading

lock = threading.Lock()


def log_event(log, **fields):
    with lock:
        log.write(json.dumps(fields) + "\n")


def remember_sni(ssl_socket, server_name, _context):
    # Called during the handshake with the connection's SSLSocket: the name rides on it.
    ssl_socket.sni = server_name


def serve(raw, number, context, log):
    tls = context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
    tls.sni = None
    try:
        tls.settimeout(30)
        tls.do_handshake()
    except (ssl.SSLError, OSError) as error:
        log_event(log, event="handshake_failed", connection=number, sni=tls.sni, error=str(error))
        tls.close()
        return
    log_event(log, event="handshake", connection=number, sni=tls.sni)
    reader = tls.makefile("rb")
    try:
        while True:
            line = reader.readline(65536)
            if not line:
                return
            method, target, _ = line.decode("latin-1").split(" ", 2)
            headers = {}
            while True:
                field = reader.readline(65536).decode("latin-1").rstrip("\r\n")
                if not field:
                    break
                name, _, value = field.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0") or "0")
            received = len(reader.read(length)) if length else 0
            log_event(log, event="request", connection=number, method=method, target=target,
                      host=headers.get("host"), received=received)
            if "/stall/" in target:
                count = int(target.rsplit("/stall/", 1)[1])
                tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + b"x" * count)
                threading.Event().wait(60)
                return
            if "/short/" in target:
                count = int(target.rsplit("/short/", 1)[1])
                tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "
                            + str(2 * count).encode() + b"\r\n\r\n" + b"x" * count)
                return
            if "/until-close/" in target:
                how, count = target.rsplit("/until-close/", 1)[1].split("/")
                tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + b"x" * int(count))
                if how == "notify":
                    try:
                        tls.unwrap()
                    except (ssl.SSLError, OSError):
                        pass
                return
            if "/big/" in target:
                body = b"x" * int(target.rsplit("/big/", 1)[1])
            else:
                body = json.dumps({"target": target, "connection": number, "sni": tls.sni,
                                   "received": received}).encode()
            tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                        + str(len(body)).encode() + b"\r\n\r\n" + body)
            if headers.get("connection", "").lower() == "close":
                return
    except (ssl.SSLError, OSError, ValueError):
        return
    finally:
        tls.close()


def main():
    # Spawned from a test process whose threads block signals: take SIGTERM back.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    chain, key, address, port_path, log_path = sys.argv[1:6]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain, key)
    context.set_alpn_protocols(["http/1.1"])
    context.sni_callback = remember_sni
    listener = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((address, 0))
    listener.listen(128)
    log = open(log_path, "a", buffering=1)
    with open(port_path + ".tmp", "w") as port_file:
        port_file.write(str(listener.getsockname()[1]))
    os.rename(port_path + ".tmp", port_path)
    number = 0
    while True:
        raw, _ = listener.accept()
        number += 1
        log_event(log, event="accept", connection=number)
        threading.Thread(target=serve, args=(raw, number, context, log), daemon=True).start()


if __name__ == "__main__":
    main()
