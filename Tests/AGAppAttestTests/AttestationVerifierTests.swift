@testable import AGAppAttest
import AGCrypto
import AGFormats
import Foundation
import Testing

@Suite("App Attest attestations")
struct AttestationVerifierTests {
    static let root = try! X509Certificate(pemRepresentation: Vectors.appleRootPEM)

    static func verifier(at date: Date) -> AttestationVerifier {
        AttestationVerifier(trustedRoots: [root], now: { date })
    }

    static func verify(_ vector: Vectors.Attestation, object: [UInt8]? = nil, clientDataHash: [UInt8]? = nil,
                       keyID: [UInt8]? = nil, appID: String? = nil, environment: AppAttestEnvironment = .development,
                       at date: Date? = nil, roots: [X509Certificate]? = nil) throws(AppAttestError) -> AttestedKey {
        let verifier = AttestationVerifier(trustedRoots: roots ?? [root], now: { date ?? vector.verifyAt })
        return try verifier.verify(attestationObject: object ?? vector.attestationObject,
                                   clientDataHash: clientDataHash ?? vector.clientDataHash,
                                   keyID: keyID ?? vector.keyID, appID: appID ?? vector.appID, environment: environment)
    }

    @Test("every real-device attestation verifies at its verifyAt time", arguments: Vectors.attestations)
    func accepts(vector: Vectors.Attestation) throws {
        let key = try Self.verify(vector)
        #expect(key.publicKey == vector.publicKey)
        #expect(key.keyID == vector.keyID)
        #expect(key.environment == .development)
        #expect(key.counter == 0)
        #expect(!key.receipt.isEmpty)
    }

    @Test("negative variants of every real attestation are rejected", arguments: Vectors.attestations)
    func rejects(vector: Vectors.Attestation) throws {
        let object = try CBORDecoder().decode(vector.attestationObject)
        let statement = object["attStmt"]!
        let chain = statement["x5c"]!.arrayValue!
        let authData = object["authData"]!.bytesValue!
        func with(_ key: String, _ value: CBORValue?) -> [UInt8] { encodeCBOR(replacing(key, in: object, with: value)) }
        func withStatement(_ key: String, _ value: CBORValue?) -> [UInt8] {
            with("attStmt", replacing(key, in: statement, with: value))
        }
        let leaf = try X509Certificate(derRepresentation: chain[0].bytesValue!)
        let intermediate = try X509Certificate(derRepresentation: chain[1].bytesValue!)

        // The untouched re-encoding still verifies, so each variant below fails for its own reason.
        _ = try Self.verify(vector, object: with("fmt", .text("apple-appattest")))

        #expect(throws: AppAttestError.self, "leaf expired") { try Self.verify(vector, at: vector.verifyAt.addingTimeInterval(400 * 86_400)) }
        #expect(throws: AppAttestError.self, "before leaf validity") { try Self.verify(vector, at: vector.verifyAt.addingTimeInterval(-30 * 86_400)) }
        #expect(throws: AppAttestError.self, "intermediate as the only root") { try Self.verify(vector, roots: [intermediate]) }
        #expect(throws: AppAttestError.self, "leaf trusted directly") { try Self.verify(vector, roots: [leaf]) }
        #expect(throws: AppAttestError.nonceMismatch, "other clientDataHash") {
            try Self.verify(vector, clientDataHash: SHA256.hash(Array("other".utf8)))
        }
        #expect(throws: AppAttestError.nonceMismatch, "flipped clientDataHash bit") {
            try Self.verify(vector, clientDataHash: flippingBit(77, of: vector.clientDataHash))
        }
        #expect(throws: AppAttestError.invalidClientDataHash) { try Self.verify(vector, clientDataHash: [1, 2, 3]) }
        #expect(throws: AppAttestError.keyIDMismatch, "other keyID") { try Self.verify(vector, keyID: flippingBit(0, of: vector.keyID)) }
        #expect(throws: AppAttestError.rpIDHashMismatch, "other App ID") { try Self.verify(vector, appID: vector.appID + ".evil") }
        #expect(throws: AppAttestError.aaguidMismatch, "production tenant") { try Self.verify(vector, environment: .production) }
        #expect(throws: AppAttestError.unsupportedFormat("packed")) { try Self.verify(vector, object: with("fmt", .text("packed"))) }
        #expect(throws: AppAttestError.self, "fmt missing") { try Self.verify(vector, object: with("fmt", nil)) }
        #expect(throws: AppAttestError.self, "authData missing") { try Self.verify(vector, object: with("authData", nil)) }
        #expect(throws: AppAttestError.self, "receipt missing") { try Self.verify(vector, object: withStatement("receipt", nil)) }
        #expect(throws: AppAttestError.self, "leaf only") { try Self.verify(vector, object: withStatement("x5c", .array([chain[0]]))) }
        #expect(throws: AppAttestError.self, "chain reversed") { try Self.verify(vector, object: withStatement("x5c", .array(chain.reversed()))) }
        #expect(throws: AppAttestError.self, "garbage certificate") {
            try Self.verify(vector, object: withStatement("x5c", .array([.bytes([0x30, 0x00]), chain[1]])))
        }
        #expect(throws: AppAttestError.self, "flipped certificate bit") {
            try Self.verify(vector, object: withStatement("x5c", .array([.bytes(flippingBit(8 * 300, of: chain[0].bytesValue!)), chain[1]])))
        }
        for bit in stride(from: 0, to: authData.count * 8, by: 7) {
            #expect(throws: AppAttestError.self) { try Self.verify(vector, object: with("authData", .bytes(flippingBit(bit, of: authData)))) }
        }
        for length in stride(from: 0, to: vector.attestationObject.count, by: 97) {
            #expect(throws: AppAttestError.self) { try Self.verify(vector, object: Array(vector.attestationObject.prefix(length))) }
        }
    }

    @Test("the nonce extension is read from its exact DER shape", arguments: [
        ("30 06 a1 04 04 02 aa bb", [0xAA, 0xBB] as [UInt8]?),
        ("30 24 a1 22 04 20" + String(repeating: " 11", count: 32), [UInt8](repeating: 0x11, count: 32)),
        ("30 09 02 01 05 a1 04 04 02 aa bb", [0xAA, 0xBB]),
        ("", nil), ("30 00", nil), ("31 06 a1 04 04 02 aa bb", nil), ("30 06 a0 04 04 02 aa bb", nil),
        ("30 06 a1 04 03 02 aa bb", nil), ("30 07 a1 04 04 02 aa bb 00", nil), ("30 06 a1 04 04 02 aa bb 00", nil),
        ("30 06 a1 04 04 03 aa bb", nil), ("30 0c a1 04 04 02 aa bb a1 04 04 02 aa bb", nil), ("30 81 06 a1 04 04 02 aa bb", nil),
    ] as [(String, [UInt8]?)])
    func nonceExtension(der: String, expected: [UInt8]?) {
        let bytes = der.split(separator: " ").map { UInt8($0, radix: 16)! }
        #expect(AttestationVerifier.nonce(fromExtension: bytes) == expected)
    }
}
