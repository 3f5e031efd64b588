import AGDevTools
import AGCrypto
import Foundation
import Testing

@Suite("Test certificate authority")
struct TestCertificateAuthorityTests {
    static let nonceOID = "1.2.840.113635.100.8.2"

    @Test("an issued leaf verifies to its CA and carries its extension")
    func issueAndVerify() throws {
        let ca = try TestCertificateAuthority.generate(validDays: 2)
        let device = try P256.PrivateKey()
        let value: [UInt8] = [0x30, 0x24, 0xA1, 0x22, 0x04, 0x20] + [UInt8](repeating: 7, count: 32)
        let leaf = try ca.issue(publicKey: device.publicKey, commonName: "device",
                                extensions: [CertificateExtension(oid: Self.nonceOID, value: value)])
        try leaf.verifyChain(intermediates: [ca.certificate], trustedRoots: [ca.certificate], at: Date())
        try leaf.verifyChain(intermediates: [], trustedRoots: [ca.certificate], at: Date())
        #expect(try leaf.extensionValue(oid: Self.nonceOID) == value)
        #expect(try leaf.p256PublicKey() == device.publicKey)
        #expect(try ca.certificate.extensionValue(oid: "2.5.29.19") == [0x30, 0x03, 0x01, 0x01, 0xFF])
    }

    @Test("a leaf does not verify outside its validity, or to another CA")
    func negativeCases() throws {
        let ca = try TestCertificateAuthority.generate(validDays: 2)
        let other = try TestCertificateAuthority.generate(validDays: 2)
        let leaf = try ca.issue(publicKey: P256.PrivateKey().publicKey, commonName: "device", extensions: [], validDays: 1)
        #expect(throws: CryptoError.self) {
            try leaf.verifyChain(intermediates: [], trustedRoots: [other.certificate], at: Date())
        }
        #expect(throws: CryptoError.self) {
            try leaf.verifyChain(intermediates: [], trustedRoots: [ca.certificate], at: Date().addingTimeInterval(3 * 86_400))
        }
        #expect(throws: CryptoError.self) {
            try leaf.verifyChain(intermediates: [], trustedRoots: [ca.certificate], at: Date().addingTimeInterval(-2 * 3600))
        }
    }

    @Test("PEM round trip, and a mismatched key is refused")
    func pemRoundTrip() throws {
        let ca = try TestCertificateAuthority.generate()
        let reloaded = try TestCertificateAuthority(certificatePEM: ca.certificate.pemRepresentation,
                                                    privateKeyPEM: ca.privateKey.pemRepresentation())
        #expect(reloaded.certificate.derRepresentation == ca.certificate.derRepresentation)
        #expect(throws: CryptoError.self) {
            try TestCertificateAuthority(certificate: ca.certificate, privateKey: P256.PrivateKey())
        }
    }
}
