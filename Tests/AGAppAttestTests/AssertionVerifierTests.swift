import AGAppAttest
import AGCrypto
import AGFormats
import Testing

@Suite("App Attest assertions")
struct AssertionVerifierTests {
    @Test("every real-device assertion verifies with its previous counter", arguments: Vectors.assertions)
    func accepts(vector: Vectors.Assertion) throws {
        let counter = try AssertionVerifier.verify(
            assertion: vector.assertion, clientDataHash: vector.clientDataHash, publicKey: vector.publicKey,
            appID: vector.appID, previousCounter: vector.previousCounter)
        #expect(counter == vector.counter)
        #expect(AppAttest.keyID(for: vector.publicKey) == vector.keyID)
    }

    @Test("replays, wrong inputs and tampering are rejected", arguments: Vectors.assertions)
    func rejects(vector: Vectors.Assertion) throws {
        let object = try CBORDecoder().decode(vector.assertion)
        let signature = object["signature"]!.bytesValue!
        let authenticatorData = object["authenticatorData"]!.bytesValue!
        let otherKey = try P256.PrivateKey().publicKey
        func verify(assertion: [UInt8] = vector.assertion, clientDataHash: [UInt8] = vector.clientDataHash,
                    publicKey: P256.PublicKey = vector.publicKey, appID: String = vector.appID,
                    previousCounter: UInt32 = vector.previousCounter) throws(AppAttestError) -> UInt32 {
            try AssertionVerifier.verify(assertion: assertion, clientDataHash: clientDataHash, publicKey: publicKey,
                                         appID: appID, previousCounter: previousCounter)
        }
        func with(_ key: String, _ value: CBORValue?) -> [UInt8] {
            encodeCBOR(replacing(key, in: object, with: value))
        }

        #expect(throws: AppAttestError.counterNotIncreased(stored: vector.counter, received: vector.counter), "replay") {
            try verify(previousCounter: vector.counter)
        }
        #expect(throws: AppAttestError.counterNotIncreased(stored: vector.counter + 1, received: vector.counter), "lower") {
            try verify(previousCounter: vector.counter + 1)
        }
        #expect(throws: AppAttestError.counterNotIncreased(stored: .max, received: vector.counter)) {
            try verify(previousCounter: .max)
        }
        #expect(throws: AppAttestError.rpIDHashMismatch, "wrong App ID") { try verify(appID: vector.appID + "x") }
        #expect(throws: AppAttestError.rpIDHashMismatch, "bundle ID only") {
            try verify(appID: String(vector.appID.split(separator: ".", maxSplits: 1)[1]))
        }
        #expect(throws: AppAttestError.invalidSignature, "wrong key") { try verify(publicKey: otherKey) }
        #expect(throws: AppAttestError.invalidClientDataHash) { try verify(clientDataHash: Array(vector.clientDataHash.dropLast())) }
        #expect(throws: AppAttestError.invalidClientDataHash) { try verify(clientDataHash: []) }
        #expect(throws: AppAttestError.authenticatorDataTooShort) {
            try verify(assertion: with("authenticatorData", .bytes(Array(authenticatorData.prefix(36)))))
        }
        #expect(throws: AppAttestError.self, "signature missing") { try verify(assertion: with("signature", nil)) }
        #expect(throws: AppAttestError.self, "authenticatorData missing") { try verify(assertion: with("authenticatorData", nil)) }
        #expect(throws: AppAttestError.self, "signature as text") { try verify(assertion: with("signature", .text("x"))) }
        #expect(throws: AppAttestError.self, "not a map") { try verify(assertion: encodeCBOR(.array([]))) }

        // Re-encoding the untouched object must still verify (guards the variant builder itself).
        #expect(try verify(assertion: with("signature", .bytes(signature))) == vector.counter)

        // One flipped bit anywhere in the signature, the authenticator data or the client data hash.
        for bit in 0..<(signature.count * 8) {
            #expect(throws: AppAttestError.self) { try verify(assertion: with("signature", .bytes(flippingBit(bit, of: signature)))) }
        }
        for bit in 0..<(authenticatorData.count * 8) {
            #expect(throws: AppAttestError.self) {
                try verify(assertion: with("authenticatorData", .bytes(flippingBit(bit, of: authenticatorData))))
            }
        }
        for bit in 0..<(vector.clientDataHash.count * 8) {
            #expect(throws: AppAttestError.invalidSignature) { try verify(clientDataHash: flippingBit(bit, of: vector.clientDataHash)) }
        }
        // Every truncation of the CBOR.
        for length in 0..<vector.assertion.count {
            #expect(throws: AppAttestError.self) { try verify(assertion: Array(vector.assertion.prefix(length))) }
        }
    }

    @Test("authenticator data: flags are not checked, trailing extension data is allowed")
    func authenticatorDataLayout() throws {
        let device = try P256.PrivateKey()
        let appID = "ABCDE12345.com.example.app"
        let clientDataHash = SHA256.hash(Array("challenge".utf8))
        func assertion(flags: UInt8, counter: UInt32, extra: [UInt8]) throws -> [UInt8] {
            let authenticatorData = AppAttest.rpIDHash(appID: appID) + [flags]
                + withUnsafeBytes(of: counter.bigEndian, Array.init) + extra
            let nonce = SHA256.hash(authenticatorData + clientDataHash)
            return encodeCBOR(.map([(.text("signature"), .bytes(try device.signature(for: nonce))),
                                    (.text("authenticatorData"), .bytes(authenticatorData))]))
        }
        let cases: [(UInt8, UInt32, [UInt8])] = [(0x40, 1, []), (0x00, 7, []), (0xFF, 0x0102_0304, [0xA1, 0x01, 0x02]),
                                                 (0x41, UInt32.max, [UInt8](repeating: 9, count: 100))]
        for (flags, counter, extra) in cases {
            #expect(try AssertionVerifier.verify(assertion: assertion(flags: flags, counter: counter, extra: extra),
                                                 clientDataHash: clientDataHash, publicKey: device.publicKey,
                                                 appID: appID, previousCounter: counter - 1) == counter)
        }
        // The nonce is the signed message, not a prehash: a device signing SHA256(nonce) as a
        // digest would produce a signature over a different value.
        let authenticatorData = AppAttest.rpIDHash(appID: appID) + [0x40, 0, 0, 0, 1]
        let prehashSigned = encodeCBOR(.map([
            (.text("signature"), .bytes(try device.signature(for: authenticatorData + clientDataHash))),
            (.text("authenticatorData"), .bytes(authenticatorData)),
        ]))
        #expect(throws: AppAttestError.invalidSignature) {
            try AssertionVerifier.verify(assertion: prehashSigned, clientDataHash: clientDataHash,
                                         publicKey: device.publicKey, appID: appID, previousCounter: 0)
        }
    }
}
