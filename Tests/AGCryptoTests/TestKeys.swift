/// Keys made once with the `openssl` command line, so parsing is tested against OpenSSL's own
/// encodings rather than only against this module's output.
enum TestKeys {
    /// SEC1 `EC PRIVATE KEY` (P-256).
    static let p256SEC1 = """
        -----BEGIN EC PRIVATE KEY-----
        MHcCAQEEIMaCX+Y2gdOAGgsuR58S6TPaeRaKsWy+Ujao+bZcww3CoAoGCCqGSM49
        AwEHoUQDQgAEQGCOqfAkeQWJnmxIeB9NYayewcbMQ3oSfskyffh5+SpuOv4YHE1u
        2zD+IuPzXoygNG+sVT8hYecGPLaI2YtcQg==
        -----END EC PRIVATE KEY-----
        """

    /// The public half of `p256SEC1`.
    static let p256PublicPEM = """
        -----BEGIN PUBLIC KEY-----
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEQGCOqfAkeQWJnmxIeB9NYayewcbM
        Q3oSfskyffh5+SpuOv4YHE1u2zD+IuPzXoygNG+sVT8hYecGPLaI2YtcQg==
        -----END PUBLIC KEY-----
        """

    /// The public half of `p256SEC1` as DER SubjectPublicKeyInfo, hex.
    static let p256PublicDERHex =
        "3059301306072a8648ce3d020106082a8648ce3d0301070342000440608ea9f0247905899e6c48781f4d61ac9e"
        + "c1c6cc437a127ec9327df879f92a6e3afe181c4d6edb30fe22e3f35e8ca0346fac553f2161e7063cb688d98b5c42"

    /// A P-384 public key: a valid EC key on the wrong curve.
    static let p384PublicPEM = """
        -----BEGIN PUBLIC KEY-----
        MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEiHhNU7mVitzQORfb30jaMMI+KAsxz49B
        mSdt6JWjl6MC1ZZemMMihAOnk1roWV5bD+duOw8aOKGtHRXeAGtRLCtEkeED2Gfb
        xqyaam5pygTx5toFP/GalW2zyjXg+FRi
        -----END PUBLIC KEY-----
        """

    /// A 1024-bit RSA public key: too short to accept.
    static let rsa1024PublicPEM = """
        -----BEGIN PUBLIC KEY-----
        MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQDNGOypVNl6sS1TqMZXIQ/uOPqO
        u0oJpmG/Ry+It75oyP8R2JWXYlKE5v2abeEQCvaWRGKJjCbykDXMvESU79GXfoln
        HRJbATzT9rIgCqW9kDrPrUvVWZgpqrWP0E55kokaAMnTI6LJ9vMmVBDO0GDLnlK1
        U522hB+RRek+Yuf5YQIDAQAB
        -----END PUBLIC KEY-----
        """

    /// A P-256 key in encrypted PKCS#8 (passphrase `x`): must be refused, never prompted for.
    static let p256EncryptedPKCS8 = """
        -----BEGIN ENCRYPTED PRIVATE KEY-----
        MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAj5keNZegVgcAICCAAw
        DAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEIoAOy/BSUsm+HHHjXd7YawEgZCw
        cWYVrhzqD46CMVIneoICcUlRoykAlMI4cwomCUJbZqOV61K64bEKR0nKwPTfmGx+
        N0KQmZPqGCYDg6mbBbZQb8XRfnoAWqnaOqr++hj52TsLt5FFwFWus8JpGXqG+7kZ
        ONfxNzW0+bNdlM+pNvgFb3SNgn+yphvEfb+Q5Oonrt1PxT0cCB/4mJ+fDfBX43c=
        -----END ENCRYPTED PRIVATE KEY-----
        """

    /// PKCS#1 `RSA PRIVATE KEY`, 2048 bits.
    static let rsa2048PKCS1 = """
        -----BEGIN RSA PRIVATE KEY-----
        MIIEowIBAAKCAQEAwjipsYyXBktQ0qZ0a444mmPJ9Mq8N5+X0pxQtwNPYgUgPJ8a
        akLlmxy2t161hU2Vh6ooqJUGHngVOeqhm00j+i9yxFVR5C434duwVg2oedeVhQNW
        QYRiSWrP3DddJO0gWezdSjyVgS7NLxXqjxZ3cdYV4sCWEmBuc0oqlri1SUJ7HCGd
        E8Voygn7a6BE0NYFWm+lLp1wi706TYVcQgaGDRXGCzoFlhym0jJFYN1TanvKbG8w
        NYviois9lOGgs3/EpCITskm026CqlFsdShOxXTy6eTV+V9bJGb2pinNrTZrhf3WX
        zf3Ey8w+KCm1EmAMWvxMVmI8I+5SVK23dNZtcQIDAQABAoIBAAUbYg2T2r0JKhYH
        X+4Kv4VXwXQubqqN5YxMpWfA8rprKUlf2rJtAI7b6hgs7dODTgMOv+bPca3QFzF1
        8G3IyJ8QgQBAN/KRL3wvv4SG84u/CSB0/DSlwcNUC76ALWGw2stiic2+hWk0QE6u
        DMhrWOGhE0odkAOUn0g1dWBLeVYwXarpgLNjD3l/zrUnNK5I9JzfjLRoOxPUGKV5
        0wXHHttC4bXVl7UA1eMRONhP2ZzPHQ83TMq8Bl8QhNbja9VKENzn0wcAiCidzM9o
        YuxQVLUu1szZSQ4+CjSHpxRO4uJqaRHTQXXuaRJSb8pQy5154KOBi8i16ghzA2J/
        FXmBdO0CgYEA4NQkSUcmaKsolSdPeOYOZUugonc00KcG+fNDrYX7oh4Cp3vBWiOg
        vxqh1kM7LfLXvhdkjmxHOI9OKuHLlDTpreDdMSB2gAmGB6mXL79QSzlgdJMlYBq9
        niWvwXA8/kLdLSSyVvSiR5mwfu0wV8AK8Sc2jC191b4EMW/tlawhCEsCgYEA3SYs
        RNJPww+B93hugy5TzBNM8u+4fDEXypof75+CNGdnUJEPe0vRlpSv5ChBfONfwI9N
        C3ka+9/n2kRxdiFjT1tJkc0f1j0KRYY2wF3NcCfUbozT/MFT7dooVAnWSD6cvgj4
        L4J4yJ9KSZd8hOz5c1ZjWCIQWdh+QK2Om6Z2Q7MCgYA1kJVsl/UArvamQo1eooD/
        hTsqOfhtVb4Fwv121BsVjszXFlcEoMRlg3TXVYE9+0OHWI9ul0GIqivXb6BPGSQr
        dw177N4OtzYlkTQh/hSlN3BRldUrxnMywIvVLGZ7tXZ4kOukZ/hZ0rYIJ36DCZAR
        0GPgld4LFJBvLtmN9UqRbQKBgQCogT2Z8uXzqw1Mkuch7VrMVKh9M0tO1dla9rT+
        0HtVkrSWHvG88LhyFDkxj7rWfimnf4klBNIauTDgjuYlLKuO++/CuJlZlIkPEIUH
        bnHq0256DbQ5EtXwlhnEbvpncc3cvtjc2n1N4JGqIVMvtaEc0OZBcTMkQmFwxs2y
        q9PRIQKBgDDZ5SlOXhRxx5b+/EBT4wPXbVcbxNvlB3ob54YHTgYaepcfLKLOE/Uc
        pLeoKuIRLsNwBBlO8a/Y3hQSLjC8WT6GMubRLnA18JdHame/6x6aaMVz5ZA4CAFl
        DF5pJsByNCBEMPAdA2sRs37dP5WRq6qW+UzP/mtHIePNNpzDs9Cm
        -----END RSA PRIVATE KEY-----
        """
}

/// Bytes from a hex string (test data only).
func hex(_ string: String) -> [UInt8] {
    var bytes = [UInt8]()
    var iterator = string.utf8.makeIterator()
    while let high = iterator.next(), let low = iterator.next() {
        bytes.append(UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)!)
    }
    return bytes
}

/// Flips one bit of `bytes`.
func flippingBit(_ bit: Int, of bytes: [UInt8]) -> [UInt8] {
    var copy = bytes
    copy[bit / 8] ^= UInt8(1 << (bit % 8))
    return copy
}
