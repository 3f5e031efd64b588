import AGCrypto
import Testing

@testable import AGGateway

@Suite("device key cache")
struct DeviceKeyCacheTests {
    @Test func aKeyIsParsedOnceAndNeverServedForOtherBytes() throws {
        let cache = DeviceKeyCache(capacity: 2)
        let first = try P256.PrivateKey().publicKey
        let second = try P256.PrivateKey().publicKey
        #expect(try cache.key(keyID: "k", x963: first.x963Representation) == first)
        #expect(try cache.key(keyID: "k", x963: first.x963Representation) == first)
        #expect(cache.hits == 1 && cache.misses == 1)
        // The store now holds another key under the same keyId (re-attested): never the old one.
        #expect(try cache.key(keyID: "k", x963: second.x963Representation) == second)
        #expect(cache.misses == 2)
        #expect(throws: CryptoError.self) { try cache.key(keyID: "bad", x963: [4] + [UInt8](repeating: 0, count: 64)) }
    }
}
