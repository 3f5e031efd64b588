#!/usr/bin/env python3
"""A real TLS client (Python's ssl module, i.e. OpenSSL through CPython) for the TLS tests.

Usage: tls_client.py OPTIONS_FILE

OPTIONS_FILE holds JSON (a file, since bodies may exceed the argument limit):
  {"port": 8443, "host": "127.0.0.1", "server_hostname": "localhost", "ca_file": "/path/ca.pem",
   "min_version": "TLSv1_2", "max_version": "TLSv1_3", "alpn": ["http/1.1"], "ciphers": "...",
   "requests": [{"method": "GET", "target": "/healthz", "headers": {"X": "1"}, "body": "..."}]}
ca_file null skips verification. All requests go over ONE connection (HTTP/1.1 keep-alive).
With "paused_file" and "resume_file", the client creates paused_file after the first response
and waits (up to 20 s) for resume_file to exist before the next request.

Prints one JSON object: {"ok": true, "version", "alpn", "cipher", "peer_sha256" (of the
certificate's DER), "same_socket" (every request used the first connection), "responses":
[{"status", "headers": {lower-case name: value}, "body"}]} or {"ok": false, "stage":
"handshake"|"request", "error": "..."}.
"""
import hashlib
import http.client
import json
import os
import socket
import ssl
import sys
import time


def context(options):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if options.get("ca_file"):
        ctx.load_verify_locations(options["ca_file"])
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if options.get("ciphers"):
        ctx.set_ciphers(options["ciphers"])
    if options.get("min_version"):
        ctx.minimum_version = getattr(ssl.TLSVersion, options["min_version"])
    if options.get("max_version"):
        ctx.maximum_version = getattr(ssl.TLSVersion, options["max_version"])
    if options.get("alpn") is not None:
        ctx.set_alpn_protocols(options["alpn"])
    return ctx


def main():
    with open(sys.argv[1]) as file:
        options = json.load(file)
    host = options.get("host", "127.0.0.1")
    connection = http.client.HTTPSConnection(host, options["port"], timeout=options.get("timeout", 10),
                                             context=context(options))
    if options.get("server_hostname"):
        # http.client sends the connection host as SNI and checks it; aim both at the name.
        connection._create_connection = lambda address, *args: socket.create_connection(
            (host, options["port"]), *args)
        connection.host = options["server_hostname"]
    try:
        connection.connect()
    except (ssl.SSLError, OSError) as error:
        print(json.dumps({"ok": False, "stage": "handshake", "error": str(error)}))
        return
    sock = connection.sock
    result = {
        "ok": True,
        "version": sock.version(),
        "alpn": sock.selected_alpn_protocol(),
        "cipher": sock.cipher()[0],
        "peer_sha256": hashlib.sha256(sock.getpeercert(binary_form=True)).hexdigest(),
        "responses": [],
    }
    same = True
    for index, request in enumerate(options.get("requests", [])):
        if index == 1 and options.get("paused_file"):
            open(options["paused_file"], "w").close()
            deadline = time.monotonic() + 20
            while not os.path.exists(options["resume_file"]) and time.monotonic() < deadline:
                time.sleep(0.01)
        try:
            body = request.get("body")
            connection.request(request.get("method", "GET"), request["target"],
                               body=body.encode() if body is not None else None,
                               headers=request.get("headers", {}))
            response = connection.getresponse()
            data = response.read()
        except (ssl.SSLError, OSError, http.client.HTTPException) as error:
            result.update({"ok": False, "stage": "request", "error": str(error)})
            break
        same = same and connection.sock is sock
        result["responses"].append({
            "status": response.status,
            "headers": {name.lower(): value for name, value in response.getheaders()},
            "body": data.decode("utf-8", "replace"),
        })
    result["same_socket"] = same
    connection.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
