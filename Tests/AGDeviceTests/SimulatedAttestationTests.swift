import AGDevTools
import AGAppAttest
import AGCrypto
import AGDevice
import AGFormats
import Foundation
import Testing

@Suite("Simulated attestations")
struct SimulatedAttestationTests {
    static let appleRootURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/Apple_App_Attestation_Root_CA.pem")

    @Test("a simulated attestation verifies against its test CA in its own environment only",
          arguments: [(SimulatedAttestationEnvironment.development, AppAttestEnvironment.development),
                      (.production, .production)])
    func verifies(simulated: SimulatedAttestationEnvironment, expected: AppAttestEnvironment) throws {
        let ca = try TestCertificateAuthority.generate(validDays: 1)
        let device = try SimulatedDevice(teamID: "ABCDE12345", bundleID: "com.example.app")
        let (object, clientDataHash) = try device.makeAttestation(challenge: "challenge-1", testCA: ca, environment: simulated)
        #expect(clientDataHash == SHA256.hash("challenge-1".utf8))
        let verifier = AttestationVerifier(trustedRoots: [ca.certificate])
        let key = try verifier.verify(attestationObject: object, clientDataHash: clientDataHash, keyID: device.keyIDBytes,
                                      appID: device.appID, environment: expected)
        #expect(key.publicKey.x963Representation == device.publicKeyX963)
        #expect(key.counter == 0)
        #expect(!key.receipt.isEmpty)
        let other: AppAttestEnvironment = expected == .development ? .production : .development
        #expect(throws: AppAttestError.aaguidMismatch) {
            try verifier.verify(attestationObject: object, clientDataHash: clientDataHash, keyID: device.keyIDBytes,
                                appID: device.appID, environment: other)
        }
    }

    @Test("a simulated attestation fails against Apple's root, another CA, another App ID or key, or other client data")
    func negativeCases() throws {
        let ca = try TestCertificateAuthority.generate(validDays: 1)
        let device = try SimulatedDevice(teamID: "ABCDE12345", bundleID: "com.example.app")
        let (object, clientDataHash) = try device.makeAttestation(challenge: "c", testCA: ca, environment: .development)
        let apple = try X509Certificate(pemRepresentation: String(contentsOf: Self.appleRootURL, encoding: .utf8))
        let otherCA = try TestCertificateAuthority.generate(validDays: 1)
        func verify(_ roots: [X509Certificate], clientDataHash hash: [UInt8] = clientDataHash, keyID: [UInt8] = device.keyIDBytes,
                    appID: String = device.appID) throws(AppAttestError) {
            _ = try AttestationVerifier(trustedRoots: roots).verify(attestationObject: object, clientDataHash: hash, keyID: keyID,
                                                                     appID: appID, environment: .development)
        }
        for roots in [[apple], [otherCA.certificate]] {
            #expect {
                try verify(roots)
            } throws: { error in
                if case .certificateChainInvalid = error as? AppAttestError { true } else { false }
            }
        }
        #expect(throws: AppAttestError.nonceMismatch) { try verify([ca.certificate], clientDataHash: SHA256.hash("d".utf8)) }
        #expect(throws: AppAttestError.keyIDMismatch) { try verify([ca.certificate], keyID: SHA256.hash("other".utf8)) }
        #expect(throws: AppAttestError.rpIDHashMismatch) { try verify([ca.certificate], appID: "ABCDE12345.other") }
    }
}
