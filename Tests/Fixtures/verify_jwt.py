#!/usr/bin/env python3
"""Independent JWT check for the end-to-end tests: verifies a compact JWS against a JWKS with
the `cryptography` package only (no code shared with the gateway) and prints the claims.
Usage: verify_jwt.py JWKS_JSON TOKEN   (exit 1 and a reason on stderr when invalid)"""
import base64, json, sys
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def main():
    jwks, token = json.loads(sys.argv[1]), sys.argv[2]
    header_b64, payload_b64, signature_b64 = token.split(".")
    header = json.loads(b64url(header_b64))
    key = next(k for k in jwks["keys"] if k["kid"] == header["kid"])
    if header["alg"] != key["alg"] or header.get("typ") != "JWT":
        sys.exit("alg/typ mismatch")
    signed = (header_b64 + "." + payload_b64).encode()
    signature = b64url(signature_b64)
    if key["kty"] == "EC":
        public = ec.EllipticCurvePublicNumbers(int.from_bytes(b64url(key["x"]), "big"),
                                               int.from_bytes(b64url(key["y"]), "big"), ec.SECP256R1()).public_key()
        der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
        public.verify(der, signed, ec.ECDSA(hashes.SHA256()))
    else:
        public = rsa.RSAPublicNumbers(int.from_bytes(b64url(key["e"]), "big"),
                                      int.from_bytes(b64url(key["n"]), "big")).public_key()
        public.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
    print(json.dumps({"header": header, "claims": json.loads(b64url(payload_b64))}))


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # any failure is a failed verification
        sys.exit("invalid: %r" % error)
