import AGCrypto
import AGFormats
import Foundation
import Testing

@Suite("X.509 certificates")
struct X509CertificateTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures")

    static func rootPEM() throws -> String {
        try String(contentsOf: fixtures.appendingPathComponent("Apple_App_Attestation_Root_CA.pem"), encoding: .utf8)
    }

    /// The leaf and intermediate of the first vector attestation.
    static func chain() throws -> (leaf: X509Certificate, intermediate: X509Certificate, verifyAt: Date) {
        let data = try Data(contentsOf: fixtures.appendingPathComponent("app-attest-real-devices.json"))
        let root = try JSONSerialization.jsonObject(with: data) as! [String: Any]
        let first = (root["attestations"] as! [[String: Any]])[0]
        let object = try CBORDecoder().decode(Base64.decode(first["attestationObject"] as! String)!)
        let x5c = object["attStmt"]!["x5c"]!.arrayValue!
        return (try X509Certificate(derRepresentation: x5c[0].bytesValue!),
                try X509Certificate(derRepresentation: x5c[1].bytesValue!),
                ISO8601DateFormatter().date(from: "2020-11-21T22:13:00Z")!)
    }

    @Test("a real chain verifies to the Apple root only inside its validity period")
    func chainVerification() throws {
        let root = try X509Certificate(pemRepresentation: Self.rootPEM())
        let (leaf, intermediate, date) = try Self.chain()
        try leaf.verifyChain(intermediates: [intermediate], trustedRoots: [root], at: date)
        try intermediate.verifyChain(intermediates: [], trustedRoots: [root], at: date)

        let failures: [(String, () throws -> Void)] = [
            ("expired", { try leaf.verifyChain(intermediates: [intermediate], trustedRoots: [root], at: date.addingTimeInterval(365 * 86_400)) }),
            ("not yet valid", { try leaf.verifyChain(intermediates: [intermediate], trustedRoots: [root], at: date.addingTimeInterval(-30 * 86_400)) }),
            ("missing intermediate", { try leaf.verifyChain(intermediates: [], trustedRoots: [root], at: date) }),
            ("leaf trusted directly (partial chains are not accepted)", { try leaf.verifyChain(intermediates: [], trustedRoots: [leaf], at: date) }),
            ("no roots", { try leaf.verifyChain(intermediates: [intermediate], trustedRoots: [], at: date) }),
        ]
        for (name, attempt) in failures {
            #expect(throws: CryptoError.self, "\(name)") { try attempt() }
        }
        do {
            try leaf.verifyChain(intermediates: [intermediate], trustedRoots: [root], at: date.addingTimeInterval(365 * 86_400))
        } catch {
            #expect(error.code == 10) // X509_V_ERR_CERT_HAS_EXPIRED
            #expect(error.reason.contains("expired"))
        }
    }

    @Test("extensions by OID, subject key, and malformed input")
    func extensionsAndKeys() throws {
        let (leaf, _, _) = try Self.chain()
        let nonce = try leaf.extensionValue(oid: "1.2.840.113635.100.8.2")
        #expect(nonce?.count == 38)
        #expect(nonce?.prefix(6) == [0x30, 0x24, 0xA1, 0x22, 0x04, 0x20])
        #expect(try leaf.extensionValue(oid: "1.2.3.4.5") == nil)
        #expect(throws: CryptoError.self) { try leaf.extensionValue(oid: "not an oid") }
        let key = try leaf.p256PublicKey()
        #expect(key.derRepresentation == (try leaf.publicKeyDER()))

        let root = try X509Certificate(pemRepresentation: Self.rootPEM())
        #expect(throws: CryptoError.self, "P-384 root key is not P-256") { try root.p256PublicKey() }
        #expect(throws: CryptoError.self) { try X509Certificate(derRepresentation: []) }
        #expect(throws: CryptoError.self) { try X509Certificate(derRepresentation: [0x30, 0x03, 0x02, 0x01, 0x01]) }
        #expect(throws: CryptoError.self) { try X509Certificate(derRepresentation: leaf.derRepresentation + [0]) }
        #expect(throws: CryptoError.self) { try X509Certificate(derRepresentation: Array(leaf.derRepresentation.dropLast())) }
        #expect(throws: CryptoError.self) { try X509Certificate(pemRepresentation: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n") }
        #expect(throws: CryptoError.self) { try X509Certificate(pemRepresentation: "") }
    }
}
