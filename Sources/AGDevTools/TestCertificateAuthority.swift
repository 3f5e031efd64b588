public import Foundation
public import AGCrypto

/// A self-signed P-256 certificate authority that stands in for Apple's App Attestation CA in
/// tests, CI and the iOS Simulator (`app_attest.test_ca`). Never trusted in production unless
/// the operator says so (`allow_test_ca`).
public struct TestCertificateAuthority: Sendable {
    public let certificate: X509Certificate
    public let privateKey: P256.PrivateKey

    /// A CA from its certificate and key; refuses a key that does not match the certificate.
    public init(certificate: X509Certificate, privateKey: P256.PrivateKey) throws(CryptoError) {
        guard try certificate.p256PublicKey() == privateKey.publicKey else {
            throw .invalidInput("TestCertificateAuthority(certificate:privateKey:)", "the key does not match the certificate")
        }
        self.certificate = certificate
        self.privateKey = privateKey
    }

    /// A CA from the PEM files `attestgate test-ca` writes.
    public init(certificatePEM: String, privateKeyPEM: String) throws(CryptoError) {
        try self.init(certificate: X509Certificate(pemRepresentation: certificatePEM),
                      privateKey: P256.PrivateKey(pemRepresentation: privateKeyPEM))
    }

    /// A new CA with a fresh key: `CN=commonName`, basicConstraints CA:TRUE (critical), keyUsage
    /// keyCertSign (critical), valid from an hour before `now` (clock skew) for `validDays`.
    public static func generate(commonName: String = "attestgate Test App Attestation CA", validDays: Int = 365,
                                now: Date = Date()) throws(CryptoError) -> TestCertificateAuthority {
        let operation = "TestCertificateAuthority.generate"
        guard validDays > 0, validDays <= 36_500 else { throw .invalidInput(operation, "validity must be 1 to 36500 days") }
        let key = try P256.PrivateKey()
        let builder = try CertificateBuilder(operation: operation)
        try builder.setBasics(notBefore: now.addingTimeInterval(-3600), notAfter: now.addingTimeInterval(Double(validDays) * 86_400))
        try builder.setNames(subjectCommonName: commonName, issuer: nil)
        try builder.setPublicKey(key.key)
        try builder.add(.certificateAuthority)
        try builder.add(.certificateSigning)
        return try TestCertificateAuthority(certificate: builder.sign(with: key.key), privateKey: key)
    }

    /// A leaf certificate for `publicKey` signed by this CA, carrying `extensions`, valid from an
    /// hour before `now` for `validDays`.
    public func issue(publicKey: P256.PublicKey, commonName: String, extensions: [CertificateExtension],
                      validDays: Int = 3, now: Date = Date()) throws(CryptoError) -> X509Certificate {
        let operation = "TestCertificateAuthority.issue"
        guard validDays > 0, validDays <= 36_500 else { throw .invalidInput(operation, "validity must be 1 to 36500 days") }
        let builder = try CertificateBuilder(operation: operation)
        try builder.setBasics(notBefore: now.addingTimeInterval(-3600), notAfter: now.addingTimeInterval(Double(validDays) * 86_400))
        try builder.setNames(subjectCommonName: commonName, issuer: certificate)
        try builder.setPublicKey(publicKey.key)
        for certificateExtension in extensions { try builder.add(certificateExtension) }
        return try builder.sign(with: privateKey.key)
    }
}
