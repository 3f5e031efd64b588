import AGCrypto
import AGFormats
import AGJOSE
import Testing

/// SplitMix64: a seeded generator, so that a failing mutation reproduces from the seed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Bounded random mutations of a valid input: bit flips, truncations, insertions, deletions,
/// spliced random bytes, and segment-level edits of dot-separated tokens.
func mutations(of seed: [UInt8], count: Int, generator: inout SeededGenerator) -> [[UInt8]] {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ {}\":,".utf8)
    var results: [[UInt8]] = []
    results.reserveCapacity(count)
    for _ in 0..<count {
        var bytes = seed
        for _ in 0..<Int.random(in: 1...4, using: &generator) {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &generator)
            switch Int.random(in: 0..<7, using: &generator) {
            case 0 where !bytes.isEmpty: bytes[position] ^= 1 << UInt8.random(in: 0..<8, using: &generator)
            case 1: bytes = Array(bytes.prefix(position))
            case 2: bytes.insert(alphabet.randomElement(using: &generator)!, at: position)
            case 3 where !bytes.isEmpty: bytes.remove(at: position)
            case 4: bytes.insert(contentsOf: (0..<Int.random(in: 1...8, using: &generator)).map { _ in
                        UInt8.random(in: 0...255, using: &generator) }, at: position)
            case 5 where !bytes.isEmpty: bytes[position] = alphabet.randomElement(using: &generator)!
            default:
                // Duplicate or drop a whole segment.
                var segments = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).map(Array.init)
                let index = Int.random(in: 0..<segments.count, using: &generator)
                if Bool.random(using: &generator) { segments.insert(segments[index], at: index) } else { segments.remove(at: index) }
                bytes = Array(segments.joined(separator: [UInt8(ascii: ".")]))
            }
        }
        results.append(bytes)
    }
    return results
}

@Suite("JWS and JWE parsers under mutation")
struct ParserMutationTests {
    @Test("thousands of mutated JWS never crash and never verify")
    func jws() throws {
        let key = try P256.PrivateKey()
        let token = try JWSCompact.sign(payload: Array(#"{"iat":"1","nonce":"n","jwe_crypto":{"alg":"ECDH-ES"}}"#.utf8),
                                        key: .es256(key), keyID: "kid", type: "platformsso-refresh-request+jwt")
        var generator = SeededGenerator(seed: 0x5EED_0001)
        var verified = 0
        for mutated in mutations(of: Array(token.utf8), count: 3_000, generator: &generator) {
            let text = String(decoding: mutated, as: UTF8.self)
            guard let jws = try? JWSCompact(parsing: text) else { continue }
            _ = try? JSONValue(parsing: jws.payload)
            if (try? jws.verify(with: .es256(key.publicKey))) != nil, text != token { verified += 1 }
        }
        // A mutation may only verify if it decodes to the same signed bytes (a no-op edit).
        #expect(verified == 0)
    }

    @Test("thousands of mutated JWE never crash and never decrypt")
    func jwe() throws {
        let recipient = try P256.PrivateKey()
        let plaintext = Array(#"{"id_token":"a.b.c","refresh_token":"r"}"#.utf8)
        let token = try JWECompact.encrypt(plaintext, to: recipient.publicKey, ephemeralKey: try P256.PrivateKey(),
                                           partyUInfo: [1, 2, 3], partyVInfo: [4, 5, 6], keyID: "k", type: "JWT")
        var generator = SeededGenerator(seed: 0x5EED_0002)
        var decrypted = 0
        for mutated in mutations(of: Array(token.utf8), count: 3_000, generator: &generator) where mutated != Array(token.utf8) {
            guard let jwe = try? JWECompact(parsing: String(decoding: mutated, as: UTF8.self)),
                  (try? jwe.decrypt(with: recipient)) != nil else { continue }
            decrypted += 1
        }
        // Strict base64url gives every byte string one spelling, and GCM covers the header, IV,
        // ciphertext and tag: no edit of the text may still decrypt.
        #expect(decrypted == 0)
    }

    @Test("random bytes of every short length are refused by both parsers")
    func randomBytes() {
        var generator = SeededGenerator(seed: 0x5EED_0003)
        for length in 0..<600 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let text = String(decoding: bytes, as: UTF8.self)
            #expect((try? JWSCompact(parsing: text)) == nil)
            #expect((try? JWECompact(parsing: text)) == nil)
        }
    }
}
