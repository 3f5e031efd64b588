public import AGCrypto
public import AGDevTools
import AGFormats
import Foundation

/// The App Attest environment a simulated attestation claims, told apart by its AAGUID.
public enum SimulatedAttestationEnvironment: String, Sendable, CaseIterable {
    case development
    case production

    /// `appattestdevelop`, or `appattest` followed by seven zero bytes.
    var aaguid: [UInt8] {
        switch self {
        case .development: Array("appattestdevelop".utf8)
        case .production: Array("appattest".utf8) + [UInt8](repeating: 0, count: 7)
        }
    }
}

extension SimulatedDevice {
    /// OID of the leaf-certificate extension that carries the attestation nonce.
    static let nonceExtensionOID = "1.2.840.113635.100.8.2"
    /// Flags of an attestation's authenticator data: attested credential data present (as real devices send).
    static let attestationFlags: UInt8 = 0x40

    /// An attestation of this device's key over the challenge string, shaped exactly like
    /// `DCAppAttestService.attestKey` output but certified by `testCA` instead of Apple: only a
    /// gateway that trusts the test CA (`app_attest.test_ca`) accepts it.
    public func makeAttestation(challenge: String, testCA: TestCertificateAuthority,
                                environment: SimulatedAttestationEnvironment,
                                now: Date = Date()) throws(DeviceError) -> (attestationObject: [UInt8], clientDataHash: [UInt8]) {
        let clientDataHash = SHA256.hash(challenge.utf8)
        let publicKey = publicKeyX963
        // authData = rpIdHash · flags · counter 0 · AAGUID · credentialId length · credentialId · COSE key
        var authenticatorData = SHA256.hash(appID.utf8)
        authenticatorData.append(Self.attestationFlags)
        authenticatorData += [0, 0, 0, 0]
        authenticatorData += environment.aaguid
        let credentialID = keyIDBytes
        authenticatorData += [UInt8(credentialID.count >> 8), UInt8(credentialID.count & 0xFF)]
        authenticatorData += credentialID
        authenticatorData += CBOREncoder().encode(.map([
            (.unsigned(1), .unsigned(2)),            // kty: EC2
            (.unsigned(3), .negative(6)),            // alg: ES256 (-7)
            (.negative(0), .unsigned(1)),            // crv: P-256
            (.negative(1), .bytes(Array(publicKey[1..<33]))),   // x
            (.negative(2), .bytes(Array(publicKey[33..<65]))),  // y
        ]))
        let nonce = SHA256.hash(authenticatorData, clientDataHash)
        // DER SEQUENCE { [1] EXPLICIT OCTET STRING nonce }
        let nonceExtension: [UInt8] = [0x30, 0x24, 0xA1, 0x22, 0x04, 0x20] + nonce
        let leaf: X509Certificate
        do {
            leaf = try testCA.issue(publicKey: privateKey.publicKey, commonName: "attestgate simulated device",
                                    extensions: [CertificateExtension(oid: Self.nonceExtensionOID, value: nonceExtension)],
                                    now: now)
        } catch {
            throw .crypto(error)
        }
        let attestationObject = CBOREncoder().encode(.map([
            (.text("fmt"), .text("apple-appattest")),
            (.text("attStmt"), .map([
                (.text("x5c"), .array([.bytes(leaf.derRepresentation), .bytes(testCA.certificate.derRepresentation)])),
                (.text("receipt"), .bytes(Array("simulated receipt".utf8))),
            ])),
            (.text("authData"), .bytes(authenticatorData)),
        ]))
        return (attestationObject, clientDataHash)
    }
}
