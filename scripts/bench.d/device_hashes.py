#!/usr/bin/env python3
"""Writes N device records in the documented Redis schema (DESIGN section 10) as RESP
commands on stdout, for `redis-cli --pipe`:

    HSET ag:{APPID}:dev:<keyId> pk <base64 X9.63> ctr 0 rev 0 env development created <ms>

keyId = base64(SHA-256(X9.63 key)) exactly like a real App Attest key id; the public keys are
random 65-byte strings shaped like uncompressed P-256 points (0x04 || x || y), which is
enough for memory figures (they are never used to verify). Used by scripts/bench."""
import base64
import hashlib
import os
import sys
import time

app_id, count = sys.argv[1], int(sys.argv[2])
env = sys.argv[3] if len(sys.argv) > 3 else "development"
now = str(int(time.time() * 1000)).encode()
out = sys.stdout.buffer


def resp(*parts):
    chunks = [b"*%d\r\n" % len(parts)]
    for part in parts:
        chunks.append(b"$%d\r\n%s\r\n" % (len(part), part))
    return b"".join(chunks)


buffer = []
for index in range(count):
    pk = b"\x04" + os.urandom(64)
    key_id = base64.b64encode(hashlib.sha256(pk).digest())
    key = b"ag:{" + app_id.encode() + b"}:dev:" + key_id
    buffer.append(resp(b"HSET", key, b"pk", base64.b64encode(pk), b"ctr", b"0", b"rev", b"0",
                       b"env", env.encode(), b"created", now))
    if len(buffer) >= 10000:
        out.write(b"".join(buffer))
        buffer.clear()
out.write(b"".join(buffer))
# The last key id, so the caller can check the gateway reads the record.
sys.stderr.write(key_id.decode() + "\n")
