internal import COpenSSL

extension P256.PublicKey {
    /// The affine `x` coordinate, always 32 bytes (left-padded with zeros when the number is
    /// shorter: about one key in 128 has a leading zero byte in each coordinate).
    public var x: [UInt8] { Array(x963Representation[1..<33]) }

    /// The affine `y` coordinate, always 32 bytes, left-padded like `x`.
    public var y: [UInt8] { Array(x963Representation[33..<65]) }

    /// A key from its affine coordinates, each exactly 32 bytes; points off the curve are rejected.
    public init(x: [UInt8], y: [UInt8]) throws(CryptoError) {
        guard x.count == 32, y.count == 32 else {
            throw .invalidInput("P256.PublicKey(x:y:)", "each coordinate must be exactly 32 bytes")
        }
        var point: [UInt8] = [0x04]
        point.reserveCapacity(P256.x963ByteCount)
        point += x
        point += y
        try self.init(x963Representation: point)
    }
}

extension P256.PrivateKey {
    /// A key from its raw private scalar `d` (32 bytes, big-endian, `1 <= d < n`); the public
    /// point is computed as `d·G`. Meant for published test vectors and tests: serving code
    /// loads keys from PEM.
    public init(rawRepresentation d: [UInt8]) throws(CryptoError) {
        let operation = "P256.PrivateKey(rawRepresentation:)"
        guard d.count == 32 else { throw .invalidInput(operation, "expected a 32-byte private scalar") }
        guard d.contains(where: { $0 != 0 }), d.lexicographicallyPrecedes(P256.order) else {
            throw .invalidInput(operation, "private scalar out of range")
        }
        let point = try P256.publicPoint(multiplying: d, operation: operation)
        try self.init(validated: EVPKey.p256PrivateKey(scalar: d, point: point, operation: operation),
                      operation: operation)
    }
}

extension P256 {
    /// `d·G` as an uncompressed point.
    static func publicPoint(multiplying d: [UInt8], operation: String) throws(CryptoError) -> [UInt8] {
        guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1) else { throw .openSSL(operation) }
        defer { EC_GROUP_free(group) }
        guard let point = EC_POINT_new(group) else { throw .openSSL(operation) }
        defer { EC_POINT_free(point) }
        guard let scalar = withCBytes(d, { BN_bin2bn($0, Int32($1), nil) }) else { throw .openSSL(operation) }
        defer { BN_clear_free(scalar) }
        guard EC_POINT_mul(group, point, scalar, nil, nil, nil) == 1 else { throw .openSSL(operation) }
        var encoded = [UInt8](repeating: 0, count: x963ByteCount)
        let written = encoded.withUnsafeMutableBufferPointer { buffer in
            EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, buffer.baseAddress, buffer.count, nil)
        }
        guard written == x963ByteCount else { throw .openSSL(operation) }
        return encoded
    }
}

extension EVPKey {
    /// A P-256 key pair from its private scalar and the matching uncompressed public point.
    static func p256PrivateKey(scalar: [UInt8], point: [UInt8], operation: String) throws(CryptoError) -> EVPKey {
        guard let number = withCBytes(scalar, { BN_bin2bn($0, Int32($1), nil) }) else { throw .openSSL(operation) }
        defer { BN_clear_free(number) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw .openSSL(operation) }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_fromdata_init(context) == 1 else { throw .openSSL(operation) }
        var key: OpaquePointer?
        // The parameter array points at its key names (the builder copies values, not names), so
        // every C string must outlive EVP_PKEY_fromdata: all of it happens inside their scope.
        let status = OSSL_PKEY_PARAM_GROUP_NAME.withCString { groupKey in
            OSSL_PKEY_PARAM_PRIV_KEY.withCString { privateKey in
                OSSL_PKEY_PARAM_PUB_KEY.withCString { publicKey in
                    "prime256v1".withCString { group in
                        withCBytes(point) { base, count -> Int32 in
                            guard let builder = OSSL_PARAM_BLD_new() else { return 0 }
                            defer { OSSL_PARAM_BLD_free(builder) }
                            guard OSSL_PARAM_BLD_push_utf8_string(builder, groupKey, group, 0) == 1,
                                  OSSL_PARAM_BLD_push_BN(builder, privateKey, number) == 1,
                                  OSSL_PARAM_BLD_push_octet_string(builder, publicKey, base, count) == 1,
                                  let params = OSSL_PARAM_BLD_to_param(builder) else { return 0 }
                            defer { OSSL_PARAM_free(params) }  // OpenSSL 3.0 has no OSSL_PARAM_clear_free.
                            // EVP_PKEY_KEYPAIR is a compound macro Swift cannot import.
                            let selection = Int32(OSSL_KEYMGMT_SELECT_PRIVATE_KEY | OSSL_KEYMGMT_SELECT_PUBLIC_KEY
                                                  | OSSL_KEYMGMT_SELECT_DOMAIN_PARAMETERS
                                                  | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS)
                            return EVP_PKEY_fromdata(context, &key, selection, params)
                        }
                    }
                }
            }
        }
        guard status == 1, let key else { throw .openSSL(operation) }
        return EVPKey(taking: key)
    }
}
