import AGCrypto
import Dispatch
import AGSync
import Testing

/// Keys from the pooled keygen contexts: distinct, consistent halves, safe from many threads.
@Suite("P-256 key generation")
struct P256GenerationTests {
    @Test("a generated key's public half is its own point, verifies its signatures and agrees in ECDH")
    func halvesAgree() throws {
        let key = try P256.PrivateKey()
        let reparsed = try P256.PrivateKey(pemRepresentation: try key.pemRepresentation())
        #expect(key.publicKey == reparsed.publicKey)
        #expect(key.publicKey.x963Representation.count == 65 && key.publicKey.x963Representation[0] == 0x04)
        let message = Array("signed".utf8)
        #expect(key.publicKey.isValidSignature(rawSignature: try key.rawSignature(for: message), for: message))
        #expect(!key.publicKey.isValidSignature(rawSignature: try P256.PrivateKey().rawSignature(for: message), for: message))
        let peer = try P256.PrivateKey()
        #expect(try key.sharedSecretFromKeyAgreement(with: peer.publicKey) == peer.sharedSecretFromKeyAgreement(with: key.publicKey))
        // The public half rebuilt from its point is the same key.
        #expect(try P256.PublicKey(x963Representation: key.publicKey.x963Representation) == key.publicKey)
    }

    @Test("keys generated on many threads at once are all different and valid")
    func concurrentGeneration() throws {
        let points = Locked<[[UInt8]]>([])
        DispatchQueue.concurrentPerform(iterations: 64) { _ in
            guard let key = try? P256.PrivateKey(),
                  key.publicKey.isValidSignature(rawSignature: (try? key.rawSignature(for: [1, 2, 3])) ?? [], for: [1, 2, 3])
            else { return }
            points.withLock { $0.append(key.publicKey.x963Representation) }
        }
        let generated = points.withLock { $0 }
        #expect(generated.count == 64)
        #expect(Set(generated).count == 64)
    }
}
