internal import Foundation
public import AGCrypto
internal import COpenSSL

/// One X.509v3 extension to put in an issued certificate: its OID, criticality and the DER
/// that goes inside `extnValue`.
public struct CertificateExtension: Sendable, Equatable {
    /// Dotted decimal, for example `"1.2.840.113635.100.8.2"`.
    public let oid: String
    public let isCritical: Bool
    /// The DER contents of the extension (what `X509Certificate.extensionValue(oid:)` returns).
    public let value: [UInt8]

    public init(oid: String, isCritical: Bool = false, value: [UInt8]) {
        self.oid = oid
        self.isCritical = isCritical
        self.value = value
    }

    /// `basicConstraints` CA:TRUE, critical.
    static let certificateAuthority = CertificateExtension(oid: "2.5.29.19", isCritical: true,
                                                           value: [0x30, 0x03, 0x01, 0x01, 0xFF])
    /// `keyUsage` keyCertSign and cRLSign, critical.
    static let certificateSigning = CertificateExtension(oid: "2.5.29.15", isCritical: true,
                                                         value: [0x03, 0x02, 0x01, 0x06])
}

/// Builds and signs one certificate (OpenSSL `X509`), owned until it is serialized.
///
/// Used only to issue test certificates: the gateway never issues certificates for production.
final class CertificateBuilder {
    private let pointer: OpaquePointer
    private let operation: String

    init(operation: String) throws(CryptoError) {
        self.operation = operation
        guard let made = X509_new() else { throw .openSSL(operation) }
        pointer = made
    }

    deinit { X509_free(pointer) }

    /// Version 3, a random positive 63-bit serial, and validity `notBefore ..< notAfter`.
    func setBasics(notBefore: Date, notAfter: Date) throws(CryptoError) {
        guard X509_set_version(pointer, 2) == 1 else { throw .openSSL(operation) }
        let serial = SecureRandom.bytes(count: 8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } & 0x7FFF_FFFF_FFFF_FFFF
        guard let serialField = X509_get_serialNumber(pointer),
              ASN1_INTEGER_set_uint64(serialField, max(serial, 1)) == 1 else { throw .openSSL(operation) }
        guard let start = X509_getm_notBefore(pointer),
              ASN1_TIME_set(start, time_t(notBefore.timeIntervalSince1970.rounded(.down))) != nil,
              let end = X509_getm_notAfter(pointer),
              ASN1_TIME_set(end, time_t(notAfter.timeIntervalSince1970.rounded(.down))) != nil else {
            throw .openSSL(operation)
        }
    }

    /// Sets the subject to `CN=commonName`, and the issuer to `issuer`'s subject (self-signed when nil).
    func setNames(subjectCommonName: String, issuer: X509Certificate?) throws(CryptoError) {
        let subject = try Self.name(commonName: subjectCommonName, operation: operation)
        defer { X509_NAME_free(subject) }
        guard X509_set_subject_name(pointer, subject) == 1 else { throw .openSSL(operation) }
        if let issuer {
            // X509_set_issuer_name copies the name; `issuer` keeps it alive during the call.
            let copied = withExtendedLifetime(issuer) { X509_set_issuer_name(pointer, X509_get_subject_name(issuer.pointer)) }
            guard copied == 1 else { throw .openSSL(operation) }
        } else {
            guard X509_set_issuer_name(pointer, subject) == 1 else { throw .openSSL(operation) }
        }
    }

    /// The certified public key (OpenSSL takes its own reference).
    func setPublicKey(_ key: EVPKey) throws(CryptoError) {
        guard X509_set_pubkey(pointer, key.pointer) == 1 else { throw .openSSL(operation) }
    }

    func add(_ certificateExtension: CertificateExtension) throws(CryptoError) {
        guard let object = OBJ_txt2obj(certificateExtension.oid, 1) else {
            throw .invalidInput(operation, "invalid OID \(certificateExtension.oid)")
        }
        defer { ASN1_OBJECT_free(object) }
        guard certificateExtension.value.count <= Int(Int32.max), let octets = ASN1_OCTET_STRING_new() else {
            throw .openSSL(operation)
        }
        defer { ASN1_OCTET_STRING_free(octets) }
        let stored = withCBytes(certificateExtension.value) { base, count in ASN1_OCTET_STRING_set(octets, base, Int32(count)) }
        guard stored == 1 else { throw .openSSL(operation) }
        // Both calls copy their inputs: the object and the octets are freed here either way.
        guard let made = X509_EXTENSION_create_by_OBJ(nil, object, certificateExtension.isCritical ? 1 : 0, octets) else {
            throw .openSSL(operation)
        }
        defer { X509_EXTENSION_free(made) }
        guard X509_add_ext(pointer, made, -1) == 1 else { throw .openSSL(operation) }
    }

    /// Signs with ECDSA-SHA256 and returns the certificate parsed back from its DER.
    func sign(with key: EVPKey) throws(CryptoError) -> X509Certificate {
        guard X509_sign(pointer, key.pointer, EVP_sha256()) > 0 else { throw .openSSL(operation) }
        let length = i2d_X509(pointer, nil)
        guard length > 0 else { throw .openSSL(operation) }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_X509(pointer, &cursor)
        }
        guard written == length else { throw .openSSL(operation) }
        return try X509Certificate(derRepresentation: der)
    }

    /// `CN=commonName` as a new `X509_NAME` the caller frees.
    private static func name(commonName: String, operation: String) throws(CryptoError) -> OpaquePointer {
        let bytes = Array(commonName.utf8)
        guard !bytes.isEmpty, bytes.count <= 64 else { throw .invalidInput(operation, "common name must be 1 to 64 bytes") }
        guard let name = X509_NAME_new() else { throw .openSSL(operation) }
        // The entry copies the bytes; nothing keeps a pointer into `bytes`.
        let added = withCBytes(bytes) { base, count in
            X509_NAME_add_entry_by_NID(name, NID_commonName, V_ASN1_UTF8STRING, base, Int32(count), -1, 0)
        }
        guard added == 1 else {
            X509_NAME_free(name)
            throw .openSSL(operation)
        }
        return name
    }
}

extension X509Certificate {
    /// PEM `CERTIFICATE` block.
    public var pemRepresentation: String {
        PEMEncoding.encode(label: "CERTIFICATE", der: derRepresentation)
    }
}
