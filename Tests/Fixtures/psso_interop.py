#!/usr/bin/env python3
"""Independent Platform SSO counterpart for the interop tests, on jwcrypto and cryptography only
(no code shared with the gateway). Two commands, JSON on stdout, exit 1 with a reason on stderr:

  psso_interop.py decrypt JWE PRIVATE_KEY_PEM
      jwcrypto decrypts a compact JWE with the device's private encryption key;
      prints {"header": {...}, "plaintext": "..."}.
  psso_interop.py refresh-request SIGNING_KEY_PEM ENCRYPTION_PUBLIC_PEM SETTINGS_JSON
      builds and signs a refresh request the way a Mac does (pretty-printed JSON with " : ",
      kid in padded standard base64, iat/exp as strings, apv = len|"Apple"|len|key|len|nonce)
      with jwcrypto's ES256; SETTINGS_JSON has client_id, aud, now, nonce, server_nonce,
      refresh_token; prints {"jws": "..."}.
"""
import base64
import hashlib
import json
import struct
import sys

from cryptography.hazmat.primitives import serialization
from jwcrypto import jwe, jwk, jws


def pretty(value):
    # Apple's JSONSerialization style: two-space indent, "key" : value.
    return json.dumps(value, indent=2, separators=(",", " : "))


def x963(public_key):
    return public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)


def field(data):
    return struct.pack(">I", len(data)) + data


def decrypt(token, private_pem):
    key = jwk.JWK.from_pem(private_pem.encode())
    message = jwe.JWE()
    message.deserialize(token, key=key)
    header = json.loads(message.objects["protected"])
    print(json.dumps({"header": header, "plaintext": message.payload.decode()}))


def refresh_request(signing_pem, encryption_public_pem, settings_json):
    settings = json.loads(settings_json)
    signing = serialization.load_pem_private_key(signing_pem.encode(), password=None)
    encryption = serialization.load_pem_public_key(encryption_public_pem.encode())
    kid = base64.b64encode(hashlib.sha256(x963(signing.public_key())).digest()).decode()
    apv = field(b"Apple") + field(x963(encryption)) + field(settings["nonce"].encode())
    now = int(settings["now"])
    header = {"kid": kid, "typ": "platformsso-refresh-request+jwt", "alg": "ES256"}
    claims = {
        "iat": str(now),
        "jwe_crypto": {"alg": "ECDH-ES", "enc": "A256GCM",
                       "apv": base64.urlsafe_b64encode(apv).decode().rstrip("=")},
        "nonce": settings["nonce"],
        "request_nonce": settings["server_nonce"],
        "scope": "openid offline_access urn:apple:platformsso",
        "refresh_token": settings["refresh_token"],
        "grant_type": "refresh_token",
        "exp": str(now + 300),
        "aud": settings["aud"],
        "client_id": settings["client_id"],
        "iss": settings["client_id"],
    }
    token = jws.JWS(pretty(claims).encode())
    token.add_signature(jwk.JWK.from_pem(signing_pem.encode()), alg="ES256", protected=pretty(header))
    print(json.dumps({"jws": token.serialize(compact=True)}))


def main():
    command, arguments = sys.argv[1], sys.argv[2:]
    if command == "decrypt":
        decrypt(*arguments)
    elif command == "refresh-request":
        refresh_request(*arguments)
    else:
        sys.exit("unknown command " + command)


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception as error:  # any failure is a failed interop check
        sys.exit("failed: %r" % error)
