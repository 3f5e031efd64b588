internal import COpenSSL

/// RSA keys for JOSE `RS256` (RSASSA-PKCS1-v1_5 with SHA-256).
public enum RSAKey {
    /// Smallest modulus accepted for parsing or generation.
    public static let minimumBits = 2048

    static func requireRSA(_ key: EVPKey, operation: String) throws(CryptoError) {
        guard key.baseID == EVP_PKEY_RSA else { throw .invalidInput(operation, "not an RSA key") }
        guard key.bits >= Int32(minimumBits) else {
            throw .invalidInput(operation, "RSA modulus shorter than \(minimumBits) bits")
        }
    }

    /// An RSA public key, parsed once and shareable across threads.
    public struct PublicKey: Sendable, Equatable {
        package let key: EVPKey
        /// The modulus, unsigned big-endian without leading zeros (JWK `n`).
        public let modulus: [UInt8]
        /// The public exponent, unsigned big-endian without leading zeros (JWK `e`).
        public let publicExponent: [UInt8]

        init(validated key: EVPKey, operation: String) throws(CryptoError) {
            try RSAKey.requireRSA(key, operation: operation)
            self.key = key
            self.modulus = try key.bigNumberParameter("n", operation: operation)
            self.publicExponent = try key.bigNumberParameter("e", operation: operation)
        }

        /// A key from a PEM `PUBLIC KEY` (SubjectPublicKeyInfo) block.
        public init(pemRepresentation pem: String) throws(CryptoError) {
            let operation = "RSAKey.PublicKey(pemRepresentation:)"
            try self.init(validated: EVPKey.publicKey(pem: pem, operation: operation), operation: operation)
        }

        /// A key from DER SubjectPublicKeyInfo.
        public init(derRepresentation der: [UInt8]) throws(CryptoError) {
            let operation = "RSAKey.PublicKey(derRepresentation:)"
            try self.init(validated: EVPKey.publicKey(der: der, operation: operation), operation: operation)
        }

        /// PEM `PUBLIC KEY` block.
        public func pemRepresentation() throws(CryptoError) -> String {
            try key.publicKeyPEM(operation: "RSAKey.PublicKey.pemRepresentation")
        }

        /// DER SubjectPublicKeyInfo.
        public func derRepresentation() throws(CryptoError) -> [UInt8] {
            try key.publicKeyDER(operation: "RSAKey.PublicKey.derRepresentation")
        }

        /// Whether `signature` is a valid RSASSA-PKCS1-v1_5 SHA-256 signature over `message`.
        public func isValidSignature<M: Sequence>(_ signature: [UInt8], for message: M) -> Bool
        where M.Element == UInt8 {
            key.verifySHA256(signature: signature, message: message)
        }

        public static func == (lhs: PublicKey, rhs: PublicKey) -> Bool {
            lhs.modulus == rhs.modulus && lhs.publicExponent == rhs.publicExponent
        }
    }

    /// An RSA private key, parsed once and shareable across threads.
    public struct PrivateKey: Sendable {
        package let key: EVPKey
        /// The matching public key.
        public let publicKey: PublicKey

        init(validated key: EVPKey, operation: String) throws(CryptoError) {
            try RSAKey.requireRSA(key, operation: operation)
            self.key = key
            self.publicKey = try PublicKey(derRepresentation: key.publicKeyDER(operation: operation))
        }

        /// A new random key with public exponent 65537.
        public init(bits: Int = 2048) throws(CryptoError) {
            let operation = "RSAKey.PrivateKey(bits:)"
            guard bits >= RSAKey.minimumBits, bits <= 16384 else {
                throw .invalidInput(operation, "unsupported key size \(bits)")
            }
            let key = try EVPKey.generate(algorithm: "RSA", operation: operation) { context in
                EVP_PKEY_CTX_set_rsa_keygen_bits(context, Int32(bits))
            }
            try self.init(validated: key, operation: operation)
        }

        /// A key from PEM: PKCS#8 `PRIVATE KEY` or PKCS#1 `RSA PRIVATE KEY`.
        public init(pemRepresentation pem: String) throws(CryptoError) {
            let operation = "RSAKey.PrivateKey(pemRepresentation:)"
            try self.init(validated: EVPKey.privateKey(pem: pem, operation: operation), operation: operation)
        }

        /// PKCS#8 `PRIVATE KEY` PEM.
        public func pemRepresentation() throws(CryptoError) -> String {
            try key.privateKeyPEM(operation: "RSAKey.PrivateKey.pemRepresentation")
        }

        /// RSASSA-PKCS1-v1_5 SHA-256 signature over `message`.
        public func signature<M: Sequence>(for message: M) throws(CryptoError) -> [UInt8] where M.Element == UInt8 {
            try key.signSHA256(message, operation: "RSAKey.PrivateKey.signature(for:)")
        }
    }
}
