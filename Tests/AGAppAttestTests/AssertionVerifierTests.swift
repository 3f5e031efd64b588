@testable import AGAppAttest
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
        // The precomputed-hash form (the gateway's) agrees, and the hash is really compared.
        let rpIDHash = AppAttest.rpIDHash(appID: vector.appID)
        #expect(try AssertionVerifier.verify(assertion: vector.assertion, clientDataHash: vector.clientDataHash,
                                             publicKey: vector.publicKey, rpIDHash: rpIDHash,
                                             previousCounter: vector.previousCounter) == vector.counter)
        #expect(throws: AssertionError.rpIDHashMismatch) {
            try AssertionVerifier.verify(assertion: vector.assertion, clientDataHash: vector.clientDataHash,
                                         publicKey: vector.publicKey, rpIDHash: SHA256.hash(Array((vector.appID + "x").utf8)),
                                         previousCounter: vector.previousCounter)
        }
    }

    @Test("replays, wrong inputs and tampering are rejected", arguments: Vectors.assertions)
    func rejects(vector: Vectors.Assertion) throws {
        let object = try CBORDecoder().decode(vector.assertion)
        let signature = object["signature"]!.bytesValue!
        let authenticatorData = object["authenticatorData"]!.bytesValue!
        let otherKey = try P256.PrivateKey().publicKey
        func verify(assertion: [UInt8] = vector.assertion, clientDataHash: [UInt8] = vector.clientDataHash,
                    publicKey: P256.PublicKey = vector.publicKey, appID: String = vector.appID,
                    previousCounter: UInt32 = vector.previousCounter) throws(AssertionError) -> UInt32 {
            try AssertionVerifier.verify(assertion: assertion, clientDataHash: clientDataHash, publicKey: publicKey,
                                         appID: appID, previousCounter: previousCounter)
        }
        func with(_ key: String, _ value: CBORValue?) -> [UInt8] {
            encodeCBOR(replacing(key, in: object, with: value))
        }

        #expect(throws: AssertionError.counterNotIncreased(stored: vector.counter, received: vector.counter), "replay") {
            try verify(previousCounter: vector.counter)
        }
        #expect(throws: AssertionError.counterNotIncreased(stored: vector.counter + 1, received: vector.counter), "lower") {
            try verify(previousCounter: vector.counter + 1)
        }
        #expect(throws: AssertionError.counterNotIncreased(stored: .max, received: vector.counter)) {
            try verify(previousCounter: .max)
        }
        #expect(throws: AssertionError.rpIDHashMismatch, "wrong App ID") { try verify(appID: vector.appID + "x") }
        #expect(throws: AssertionError.rpIDHashMismatch, "bundle ID only") {
            try verify(appID: String(vector.appID.split(separator: ".", maxSplits: 1)[1]))
        }
        #expect(throws: AssertionError.signatureInvalid, "wrong key") { try verify(publicKey: otherKey) }
        #expect(throws: AssertionError.invalidClientDataHash) { try verify(clientDataHash: Array(vector.clientDataHash.dropLast())) }
        #expect(throws: AssertionError.invalidClientDataHash) { try verify(clientDataHash: []) }
        #expect(throws: AssertionError.authenticatorDataTooShort) {
            try verify(assertion: with("authenticatorData", .bytes(Array(authenticatorData.prefix(36)))))
        }
        #expect(throws: AssertionError.self, "signature missing") { try verify(assertion: with("signature", nil)) }
        #expect(throws: AssertionError.self, "authenticatorData missing") { try verify(assertion: with("authenticatorData", nil)) }
        #expect(throws: AssertionError.self, "signature as text") { try verify(assertion: with("signature", .text("x"))) }
        #expect(throws: AssertionError.self, "not a map") { try verify(assertion: encodeCBOR(.array([]))) }

        // Re-encoding the untouched object must still verify (guards the variant builder itself).
        #expect(try verify(assertion: with("signature", .bytes(signature))) == vector.counter)

        // One flipped bit anywhere in the signature, the authenticator data or the client data
        // hash, and every truncation of the CBOR: refused, and never as signed by the stored key
        // (an outsider can send any of these; they must not cost the device its record).
        func expectUnsigned(_ comment: Comment, _ body: () throws(AssertionError) -> UInt32) {
            do {
                let counter = try body()
                Issue.record("\(comment): accepted with counter \(counter)")
            } catch {
                #expect(!error.isSignedByStoredKey, "\(comment): \(error)")
            }
        }
        for bit in 0..<(signature.count * 8) {
            expectUnsigned("signature bit \(bit)") { () throws(AssertionError) in
                try verify(assertion: with("signature", .bytes(flippingBit(bit, of: signature))))
            }
        }
        for bit in 0..<(authenticatorData.count * 8) {
            expectUnsigned("authenticator data bit \(bit)") { () throws(AssertionError) in
                try verify(assertion: with("authenticatorData", .bytes(flippingBit(bit, of: authenticatorData))))
            }
        }
        for bit in 0..<(vector.clientDataHash.count * 8) {
            #expect(throws: AssertionError.signatureInvalid) { try verify(clientDataHash: flippingBit(bit, of: vector.clientDataHash)) }
        }
        for length in 0..<vector.assertion.count {
            expectUnsigned("truncated to \(length)") { () throws(AssertionError) in
                try verify(assertion: Array(vector.assertion.prefix(length)))
            }
        }
    }

    @Test("each refusal says whether the stored key signed it", arguments: Vectors.assertions)
    func refusalKinds(vector: Vectors.Assertion) throws {
        let object = try CBORDecoder().decode(vector.assertion)
        func verify(assertion: [UInt8] = vector.assertion, clientDataHash: [UInt8] = vector.clientDataHash,
                    publicKey: P256.PublicKey = vector.publicKey, appID: String = vector.appID,
                    previousCounter: UInt32 = vector.previousCounter) -> AssertionError? {
            do {
                _ = try AssertionVerifier.verify(assertion: assertion, clientDataHash: clientDataHash, publicKey: publicKey,
                                                 appID: appID, previousCounter: previousCounter)
                return nil
            } catch {
                return error
            }
        }
        func with(_ key: String, _ value: CBORValue?) -> [UInt8] { encodeCBOR(replacing(key, in: object, with: value)) }
        // A structurally valid DER signature that the key never made (r = s = 1), and bytes that are no DER at all.
        let foreignDER: [UInt8] = [0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01]
        let cases: [(String, AssertionError?, Bool)] = [
            ("genuine", verify(), false),
            ("garbage signature bytes", verify(assertion: with("signature", .bytes([UInt8](repeating: 0xAB, count: 71)))), false),
            ("DER signature the key never made", verify(assertion: with("signature", .bytes(foreignDER))), false),
            ("empty signature", verify(assertion: with("signature", .bytes([]))), false),
            ("another key", verify(publicKey: try P256.PrivateKey().publicKey), false),
            ("client data hash of another challenge", verify(clientDataHash: [UInt8](repeating: 7, count: 32)), false),
            ("short client data hash", verify(clientDataHash: [1, 2, 3]), false),
            ("not CBOR", verify(assertion: [0xFF, 0x00]), false),
            ("no signature", verify(assertion: with("signature", nil)), false),
            ("wrong App ID", verify(appID: vector.appID + ".other"), true),
            ("replayed counter", verify(previousCounter: vector.counter), true),
            ("counter from the past", verify(previousCounter: .max), true),
        ]
        let expected: [String: AssertionError?] = [
            "genuine": nil,
            "garbage signature bytes": .signatureMalformed,
            "DER signature the key never made": .signatureInvalid,
            "empty signature": .signatureMalformed,
            "another key": .signatureInvalid,
            "client data hash of another challenge": .signatureInvalid,
            "short client data hash": .invalidClientDataHash,
            "wrong App ID": .rpIDHashMismatch,
            "replayed counter": .counterNotIncreased(stored: vector.counter, received: vector.counter),
            "counter from the past": .counterNotIncreased(stored: .max, received: vector.counter),
        ]
        for (name, error, signed) in cases {
            if let want = expected[name] { #expect(error == want, "\(name)") }
            if name != "genuine" { #expect(error != nil, "\(name) was accepted") }
            #expect((error?.isSignedByStoredKey ?? false) == signed, "\(name): \(String(describing: error))")
        }
        #expect(verify(assertion: [0xFF, 0x00]).map { if case .malformedAssertion = $0 { true } else { false } } == true)
        #expect(AssertionError.signatureInvalid.reason == "signature_invalid")
        #expect(AssertionError.counterNotIncreased(stored: 1, received: 1).reason == "counter_not_increased")
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
        #expect(throws: AssertionError.signatureInvalid) {
            try AssertionVerifier.verify(assertion: prehashSigned, clientDataHash: clientDataHash,
                                         publicKey: device.publicKey, appID: appID, previousCounter: 0)
        }
    }
}

@Suite("App Attest assertions: the device layout read without the general CBOR decoder")
struct AssertionLayoutTests {
    @Test("a device's assertion is read by the short path, with the general decoder's result", arguments: Vectors.assertions)
    func devicesTakeTheShortPath(vector: Vectors.Assertion) throws {
        let object = try CBORDecoder().decode(vector.assertion)
        let read = try #require(AssertionVerifier.devicePattern(vector.assertion))
        #expect(read.signature == object["signature"]?.bytesValue)
        #expect(read.authenticatorData == object["authenticatorData"]?.bytesValue)
    }

    @Test("other layouts are left to the general decoder, which judges them as before", arguments: Vectors.assertions)
    func otherLayoutsTakeTheGeneralPath(vector: Vectors.Assertion) throws {
        let object = try CBORDecoder().decode(vector.assertion)
        let signature = try #require(object["signature"]?.bytesValue)
        let authenticatorData = try #require(object["authenticatorData"]?.bytesValue)
        func verify(_ assertion: [UInt8]) throws(AssertionError) -> UInt32 {
            try AssertionVerifier.verify(assertion: assertion, clientDataHash: vector.clientDataHash, publicKey: vector.publicKey,
                                         appID: vector.appID, previousCounter: vector.previousCounter)
        }
        let reversed = encodeCBOR(.map([(.text("authenticatorData"), .bytes(authenticatorData)), (.text("signature"), .bytes(signature))]))
        // The signature's length in two bytes instead of one: valid CBOR, not the shortest form.
        var wideLength = [UInt8]([0xA2, 0x69]) + Array("signature".utf8) + [0x59, 0x00, UInt8(signature.count)] + signature
        wideLength += [0x71] + Array("authenticatorData".utf8) + [0x58, UInt8(authenticatorData.count)] + authenticatorData
        let extraEntry = encodeCBOR(.map([(.text("signature"), .bytes(signature)), (.text("authenticatorData"), .bytes(authenticatorData)),
                                          (.text("x"), .bytes([]))]))
        for accepted in [reversed, wideLength, extraEntry] {
            #expect(AssertionVerifier.devicePattern(accepted) == nil)
            #expect(try verify(accepted) == vector.counter)
        }
        let trailing = vector.assertion + [0x00]
        #expect(AssertionVerifier.devicePattern(trailing) == nil)
        #expect(throws: AssertionError.self) { try verify(trailing) }
        let shortLength = Array(vector.assertion.dropLast())
        #expect(AssertionVerifier.devicePattern(shortLength) == nil)
        #expect(throws: AssertionError.self) { try verify(shortLength) }
    }
}
