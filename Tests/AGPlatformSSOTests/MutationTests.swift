import AGCrypto
import AGFormats
import AGJOSE
import AGPlatformSSO
import Testing

/// SplitMix64, seeded: a failing case reproduces.
private struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// One to three random edits: bit flip, truncation, insertion or deletion of a token character,
/// or a run of random bytes.
private func mutate(_ seed: [UInt8], using generator: inout SeededGenerator) -> [UInt8] {
    let alphabet = Array("AQgw-_.=+/ \"{}".utf8)
    var bytes = seed
    for _ in 0..<Int.random(in: 1...3, using: &generator) {
        let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &generator)
        switch Int.random(in: 0..<5, using: &generator) {
        case 0 where !bytes.isEmpty: bytes[position] ^= 1 << UInt8.random(in: 0..<8, using: &generator)
        case 1: bytes.removeSubrange(position...)
        case 2: bytes.insert(alphabet.randomElement(using: &generator)!, at: position)
        case 3 where !bytes.isEmpty: bytes.remove(at: position)
        default: bytes.insert(contentsOf: (0..<Int.random(in: 1...6, using: &generator)).map { _ in
                UInt8.random(in: 0...255, using: &generator) }, at: position)
        }
    }
    return bytes
}

@Suite("Platform SSO parsers under mutation")
struct MutationTests {
    @Test("mutated refresh requests never crash the verifier and are never accepted")
    func refreshRequests() throws {
        let verifier = RefreshRequestVerifier(settings: .test)
        let original = Array(try MacRefreshRequest(device: Verification.device).compact().utf8)
        var generator = SeededGenerator(state: 0x9550_0001)
        var accepted = 0, refusedByStatus: [Int: Int] = [:]
        for _ in 0..<3_000 {
            let mutated = mutate(original, using: &generator)
            guard mutated != original else { continue }
            do {
                let unverified = try verifier.parse(String(decoding: mutated, as: UTF8.self))
                _ = try verifier.verify(unverified, device: Verification.device.keys, now: MacRefreshRequest.now)
                accepted += 1
            } catch {
                refusedByStatus[error.status, default: 0] += 1
                #expect([400, 401].contains(error.status))
            }
        }
        #expect(accepted == 0)
        #expect(refusedByStatus[400, default: 0] > 0 && refusedByStatus[401, default: 0] > 0)
    }

    @Test("mutated responses never crash the device side and never decrypt")
    func responses() throws {
        let verified = try ResponseFixture.verified()
        let original = Array(try ResponseFixture.response().utf8)
        var generator = SeededGenerator(state: 0x9550_0002)
        var decrypted = 0
        for _ in 0..<2_000 {
            let mutated = mutate(original, using: &generator)
            guard mutated != original,
                  let jwe = try? JWECompact(parsing: String(decoding: mutated, as: UTF8.self)) else { continue }
            if (try? jwe.decrypt(with: Verification.device.encryptionKey, expectedPartyVInfo: verified.partyVInfo)) != nil {
                decrypted += 1
            }
        }
        #expect(decrypted == 0)
    }

    @Test("mutated form bodies, apv values and device keys are refused or parsed, never crash")
    func smallParsers() throws {
        var generator = SeededGenerator(state: 0x9550_0003)
        let form = Array("platform_sso_version=1.0&grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=a.b.c".utf8)
        let apv = ApplePartyInfo.partyVInfo(encryptionKey: Verification.device.encryptionKey.publicKey, nonce: Array("n".utf8))
        let pem = Array(Verification.device.signingKey.publicKey.pemRepresentation.utf8)
        let key = Verification.device.signingKey.publicKey
        for _ in 0..<2_000 {
            _ = try? PlatformSSOTokenForm(body: mutate(form, using: &generator))
            let mutatedAPV = mutate(apv, using: &generator)
            if let parsed = try? ApplePartyInfo.parsePartyVInfo(mutatedAPV) {
                // Whatever parses re-encodes to exactly the bytes given: nothing was skipped.
                let rebuilt = PartyInfoCases.field(Array("Apple".utf8)) + PartyInfoCases.field(parsed.encryptionKey)
                    + PartyInfoCases.field(parsed.nonce)
                #expect(rebuilt == mutatedAPV)
            }
            if let parsed = try? DeviceKeyParser.parse(String(decoding: mutate(pem, using: &generator), as: UTF8.self)) {
                #expect(parsed == key)
            }
            if let kid = PlatformSSOKeyID(normalizing: String(decoding: mutate(Array(Verification.device.kid.utf8), using: &generator),
                                                             as: UTF8.self)) {
                #expect(kid.digest.count == 32)
            }
        }
    }
}
