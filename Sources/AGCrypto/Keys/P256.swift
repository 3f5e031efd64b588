internal import COpenSSL

/// ECDSA over NIST P-256 with SHA-256 (JOSE `ES256`, Apple App Attest device keys).
public enum P256 {
    /// Length of a raw (`r || s`) signature.
    public static let rawSignatureByteCount = 64
    /// Length of an uncompressed X9.63 point (`0x04 || X || Y`).
    public static let x963ByteCount = 65

    /// DER prefix of a P-256 SubjectPublicKeyInfo up to the BIT STRING content: appending a
    /// 65-byte uncompressed point gives the full SPKI.
    static let spkiPrefix: [UInt8] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08,
        0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ]

    /// Rejects any key that is not an EC key on P-256.
    static func requireP256(_ key: EVPKey, operation: String) throws(CryptoError) {
        guard key.baseID == EVP_PKEY_EC, key.groupName == "prime256v1" else {
            throw .invalidInput(operation, "not a P-256 key")
        }
    }

    /// The uncompressed point of a P-256 key, whatever form it was parsed from.
    static func x963(of key: EVPKey, operation: String) throws(CryptoError) -> [UInt8] {
        var point: [UInt8] = [0x04]
        point.reserveCapacity(x963ByteCount)
        point += try key.bigNumberParameter("qx", width: 32, operation: operation)
        point += try key.bigNumberParameter("qy", width: 32, operation: operation)
        return point
    }

    /// A P-256 public key, parsed once and shareable across threads.
    public struct PublicKey: Sendable, Equatable {
        package let key: EVPKey
        /// The uncompressed X9.63 point `0x04 || X || Y` (65 bytes).
        public let x963Representation: [UInt8]

        init(validated key: EVPKey, operation: String) throws(CryptoError) {
            try P256.requireP256(key, operation: operation)
            self.key = key
            self.x963Representation = try P256.x963(of: key, operation: operation)
        }

        /// A key from its 65-byte uncompressed point; points off the curve are rejected.
        public init(x963Representation point: [UInt8]) throws(CryptoError) {
            let operation = "P256.PublicKey(x963Representation:)"
            guard point.count == P256.x963ByteCount, point[0] == 0x04 else {
                throw .invalidInput(operation, "expected a 65-byte uncompressed point")
            }
            key = try EVPKey.p256PublicKey(point: point, operation: operation)
            x963Representation = point
        }

        /// A key from DER SubjectPublicKeyInfo.
        public init(derRepresentation der: [UInt8]) throws(CryptoError) {
            let operation = "P256.PublicKey(derRepresentation:)"
            try self.init(validated: EVPKey.publicKey(der: der, operation: operation), operation: operation)
        }

        /// A key from a PEM `PUBLIC KEY` block.
        public init(pemRepresentation pem: String) throws(CryptoError) {
            let operation = "P256.PublicKey(pemRepresentation:)"
            try self.init(validated: EVPKey.publicKey(pem: pem, operation: operation), operation: operation)
        }

        /// DER SubjectPublicKeyInfo.
        public var derRepresentation: [UInt8] { P256.spkiPrefix + x963Representation }

        /// PEM `PUBLIC KEY` block.
        public var pemRepresentation: String {
            PEMEncoding.encode(label: "PUBLIC KEY", der: derRepresentation)
        }

        /// Whether `derSignature` is a valid ECDSA signature over SHA-256(`message`).
        ///
        /// `message` is hashed here: pass the App Attest nonce itself, not a digest of it.
        public func isValidSignature<M: Sequence>(derSignature: [UInt8], for message: M) -> Bool
        where M.Element == UInt8 {
            key.verifySHA256(signature: derSignature, message: message)
        }

        /// Whether `rawSignature` (JWS form, `r || s`, 32 bytes each) is valid for `message`.
        public func isValidSignature<M: Sequence>(rawSignature: [UInt8], for message: M) -> Bool
        where M.Element == UInt8 {
            guard let der = try? P256.derSignature(fromRaw: rawSignature) else { return false }
            return key.verifySHA256(signature: der, message: message)
        }

        public static func == (lhs: PublicKey, rhs: PublicKey) -> Bool {
            lhs.x963Representation == rhs.x963Representation
        }
    }

    /// A P-256 private key, parsed once and shareable across threads.
    public struct PrivateKey: Sendable {
        package let key: EVPKey
        /// The matching public key.
        public let publicKey: PublicKey

        init(validated key: EVPKey, operation: String) throws(CryptoError) {
            try P256.requireP256(key, operation: operation)
            self.key = key
            // The public half gets its own EVP_PKEY so that verifying never touches private material;
            // built from the point, which skips OpenSSL's slower SubjectPublicKeyInfo decoder (one
            // ephemeral key is made per Platform SSO response).
            self.publicKey = try PublicKey(x963Representation: P256.x963(of: key, operation: operation))
        }

        /// A new random key.
        public init() throws(CryptoError) {
            let operation = "P256.PrivateKey()"
            let key = try EVPKey.generate(algorithm: "EC", operation: operation) { context in
                EVP_PKEY_CTX_set_group_name(context, "P-256")
            }
            try self.init(validated: key, operation: operation)
        }

        /// A key from PEM: PKCS#8 `PRIVATE KEY` or SEC1 `EC PRIVATE KEY`.
        public init(pemRepresentation pem: String) throws(CryptoError) {
            let operation = "P256.PrivateKey(pemRepresentation:)"
            try self.init(validated: EVPKey.privateKey(pem: pem, operation: operation), operation: operation)
        }

        /// PKCS#8 `PRIVATE KEY` PEM.
        public func pemRepresentation() throws(CryptoError) -> String {
            try key.privateKeyPEM(operation: "P256.PrivateKey.pemRepresentation")
        }

        /// ECDSA signature over SHA-256(`message`), DER encoded.
        public func signature<M: Sequence>(for message: M) throws(CryptoError) -> [UInt8] where M.Element == UInt8 {
            try key.signSHA256(message, operation: "P256.PrivateKey.signature(for:)")
        }

        /// ECDSA signature over SHA-256(`message`) in JWS form: `r || s`, 32 bytes each, always
        /// low-S (`s <= n/2`), so that a token this key signs has exactly one spelling.
        public func rawSignature<M: Sequence>(for message: M) throws(CryptoError) -> [UInt8] where M.Element == UInt8 {
            P256.lowSNormalized(rawSignature: try P256.rawSignature(fromDER: signature(for: message)))
        }
    }
}
