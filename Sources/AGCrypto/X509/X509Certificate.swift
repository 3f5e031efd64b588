internal import COpenSSL

/// A parsed X.509 certificate (OpenSSL `X509`).
///
/// `@unchecked Sendable` invariant: the `X509` is parsed in `init`, never modified and freed
/// only in `deinit`; OpenSSL only reads it during chain building and extension lookups (its
/// internal caches are filled under OpenSSL's own lock), so sharing it between threads is safe.
public final class X509Certificate: @unchecked Sendable {
    package let pointer: OpaquePointer
    /// The certificate's DER encoding exactly as given.
    public let derRepresentation: [UInt8]

    /// A certificate from DER; trailing bytes are rejected.
    public init(derRepresentation der: [UInt8]) throws(CryptoError) {
        let operation = "X509Certificate(derRepresentation:)"
        guard !der.isEmpty, der.count <= Int(Int32.max) else { throw .invalidInput(operation, "empty or oversized input") }
        let parsed: OpaquePointer?? = withCBytes(der) { base, count in
            var cursor: UnsafePointer<UInt8>? = base
            guard let certificate = d2i_X509(nil, &cursor, count) else { return .some(nil) }
            guard cursor == base + count else {
                X509_free(certificate)
                return .none
            }
            return .some(certificate)
        }
        switch parsed {
        case .none: throw .invalidInput(operation, "trailing bytes after the certificate")
        case .some(.none): throw .openSSL(operation)
        case .some(.some(let certificate)): pointer = certificate
        }
        derRepresentation = der
    }

    /// The first certificate of a PEM text (`-----BEGIN CERTIFICATE-----`).
    public convenience init(pemRepresentation pem: String) throws(CryptoError) {
        let operation = "X509Certificate(pemRepresentation:)"
        let bio = try MemoryBIO(reading: pem, operation: operation)
        guard let certificate = PEM_read_bio_X509(bio.pointer, nil, nil, nil) else { throw .openSSL(operation) }
        defer { X509_free(certificate) }
        let length = i2d_X509(certificate, nil)
        guard length > 0 else { throw .openSSL(operation) }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_X509(certificate, &cursor)
        }
        guard written == length else { throw .openSSL(operation) }
        try self.init(derRepresentation: der)
    }

    deinit { X509_free(pointer) }

    /// The DER contents of the extension `oid` (dotted decimal, e.g. `"1.2.840.113635.100.8.2"`),
    /// that is the inside of its `extnValue` OCTET STRING; nil when the certificate has none.
    public func extensionValue(oid: String) throws(CryptoError) -> [UInt8]? {
        let operation = "X509Certificate.extensionValue(oid:)"
        guard let object = OBJ_txt2obj(oid, 1) else { throw .invalidInput(operation, "invalid OID \(oid)") }
        defer { ASN1_OBJECT_free(object) }
        let index = X509_get_ext_by_OBJ(pointer, object, -1)
        guard index >= 0 else { return nil }
        // A repeated extension makes the certificate ambiguous (RFC 5280 §4.2).
        guard X509_get_ext_by_OBJ(pointer, object, index) < 0 else {
            throw .invalidInput(operation, "extension \(oid) appears more than once")
        }
        guard let ext = X509_get_ext(pointer, index), let data = X509_EXTENSION_get_data(ext) else {
            throw .openSSL(operation)
        }
        let length = Int(ASN1_STRING_length(data))
        guard length > 0, let bytes = ASN1_STRING_get0_data(data) else { return [] }
        return Array(UnsafeBufferPointer(start: bytes, count: length))
    }

    /// The subject public key as DER SubjectPublicKeyInfo.
    public func publicKeyDER() throws(CryptoError) -> [UInt8] {
        let operation = "X509Certificate.publicKeyDER()"
        guard let key = X509_get0_pubkey(pointer) else { throw .openSSL(operation) }
        let length = i2d_PUBKEY(key, nil)
        guard length > 0 else { throw .openSSL(operation) }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_PUBKEY(key, &cursor)
        }
        guard written == length else { throw .openSSL(operation) }
        return der
    }

    /// The subject public key, which must be a P-256 key.
    public func p256PublicKey() throws(CryptoError) -> P256.PublicKey {
        try P256.PublicKey(derRepresentation: publicKeyDER())
    }
}
