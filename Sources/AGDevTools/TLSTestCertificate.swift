public import Foundation
public import AGCrypto
internal import Glibc

/// A TLS server certificate issued by a test CA, with its fresh P-256 key: for tests and local
/// https setups (never for production, and never committed: generate it where it is used).
public struct TLSTestCertificate: Sendable {
    public let certificate: X509Certificate
    public let privateKey: P256.PrivateKey
    /// The CA that signed it (what a client must trust).
    public let issuer: X509Certificate

    /// The leaf followed by the issuing CA, as `server.tls.cert` expects a chain.
    public var chainPEM: String { certificate.pemRepresentation + issuer.pemRepresentation }
}

extension TestCertificateAuthority {
    /// Issues a TLS server certificate for a new key: subjectAltName with `dnsNames` and
    /// `ipAddresses` (what clients check the host against), extendedKeyUsage serverAuth,
    /// keyUsage digitalSignature (critical), basicConstraints CA:FALSE; valid from an hour
    /// before `now` for `validDays`. The common name defaults to the first name or address.
    public func issueTLSServerCertificate(dnsNames: [String], ipAddresses: [String] = [], commonName: String? = nil,
                                          validDays: Int = 3, now: Date = Date()) throws(CryptoError) -> TLSTestCertificate {
        let operation = "TestCertificateAuthority.issueTLSServerCertificate"
        var names: [[UInt8]] = []
        for name in dnsNames {
            guard !name.isEmpty, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw .invalidInput(operation, "not a DNS name: \(name)")
            }
            names.append(DER.element(tag: 0x82, Array(name.utf8)))
        }
        for address in ipAddresses {
            guard let bytes = Self.addressBytes(address) else { throw .invalidInput(operation, "not an IP address: \(address)") }
            names.append(DER.element(tag: 0x87, bytes))
        }
        guard let first = commonName ?? dnsNames.first ?? ipAddresses.first else {
            throw .invalidInput(operation, "a TLS server certificate needs at least one name or address")
        }
        let key = try P256.PrivateKey()
        let extensions = [
            CertificateExtension(oid: "2.5.29.17", value: DER.element(tag: 0x30, names.flatMap { $0 })),
            CertificateExtension(oid: "2.5.29.37", value: DER.element(tag: 0x30, DER.objectIdentifier([1, 3, 6, 1, 5, 5, 7, 3, 1]))),
            CertificateExtension(oid: "2.5.29.15", isCritical: true, value: [0x03, 0x02, 0x07, 0x80]),
            CertificateExtension(oid: "2.5.29.19", isCritical: true, value: [0x30, 0x00]),
        ]
        let certificate = try issue(publicKey: key.publicKey, commonName: first, extensions: extensions,
                                    validDays: validDays, now: now)
        return TLSTestCertificate(certificate: certificate, privateKey: key, issuer: self.certificate)
    }

    /// The 4 or 16 network-order bytes of an IP literal.
    private static func addressBytes(_ text: String) -> [UInt8]? {
        if text.contains(":") {
            var address = in6_addr()
            guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
            return withUnsafeBytes(of: address) { Array($0) }
        }
        var address = in_addr()
        guard inet_pton(AF_INET, text, &address) == 1 else { return nil }
        return withUnsafeBytes(of: address) { Array($0) }
    }
}

/// The little DER the certificate extensions above need.
enum DER {
    /// Tag, definite length, contents.
    static func element(tag: UInt8, _ contents: [UInt8]) -> [UInt8] {
        let count = contents.count
        let length: [UInt8]
        if count < 0x80 {
            length = [UInt8(count)]
        } else if count < 0x100 {
            length = [0x81, UInt8(count)]
        } else {
            length = [0x82, UInt8(count >> 8), UInt8(count & 0xFF)]
        }
        return [tag] + length + contents
    }

    /// An OBJECT IDENTIFIER from its arcs (first two packed, the rest base-128).
    static func objectIdentifier(_ arcs: [UInt]) -> [UInt8] {
        var body: [UInt8] = [UInt8(arcs[0] * 40 + arcs[1])]
        for arc in arcs.dropFirst(2) {
            var chunk: [UInt8] = [UInt8(arc & 0x7F)]
            var rest = arc >> 7
            while rest > 0 {
                chunk.insert(UInt8(rest & 0x7F) | 0x80, at: 0)
                rest >>= 7
            }
            body += chunk
        }
        return element(tag: 0x06, body)
    }
}

extension TLSTestCertificate {
    /// Paths of the files `write(to:name:)` wrote.
    public struct Files: Sendable {
        /// The leaf and the CA, PEM (`server.tls.cert`).
        public let chain: String
        /// The private key, PEM, owner-only (`server.tls.key`).
        public let key: String
        /// The issuing CA alone, PEM (what clients trust: `upstream_ca`, `curl --cacert`).
        public let ca: String
    }

    /// Writes `<name>.pem`, `<name>-key.pem` (mode 0600) and `<name>-ca.pem` into `directory`,
    /// replacing files of the same names (certificate rotation writes over the old ones).
    public func write(to directory: String, name: String) throws(PrivateFileError) -> Files {
        let base = (directory as NSString).appendingPathComponent(name)
        let files = Files(chain: base + ".pem", key: base + "-key.pem", ca: base + "-ca.pem")
        let keyPEM: String
        do {
            keyPEM = try privateKey.pemRepresentation()
        } catch {
            throw PrivateFileError(path: files.key, reason: String(describing: error), alreadyExists: false)
        }
        try PrivateFile.write(Array(keyPEM.utf8), to: files.key)
        try PrivateFile.write(Array(chainPEM.utf8), to: files.chain, mode: 0o644)
        try PrivateFile.write(Array(issuer.pemRepresentation.utf8), to: files.ca, mode: 0o644)
        return files
    }

    /// Hex SHA-256 of the leaf's DER (what `tls_client.py` reports as `peer_sha256`).
    public var sha256: String {
        SHA256.hash(certificate.derRepresentation).map { String(format: "%02x", $0) }.joined()
    }
}
