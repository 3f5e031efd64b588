import AGCrypto

/// A worker's parsed device public keys, so a refresh does not import the same key into
/// OpenSSL again on every call.
///
/// Keyed by keyId, and an entry is used only when the stored key bytes the store just returned
/// are exactly the ones it was parsed from: a re-import or a re-attestation with another key can
/// never be answered with a stale key, and a revoked device never gets this far (the store
/// refuses it first). Loop thread only.
final class DeviceKeyCache {
    private var keys: LRUCache<String, P256.PublicKey>
    private(set) var hits = 0
    private(set) var misses = 0

    init(capacity: Int = 10_000) {
        keys = LRUCache(capacity: capacity)
    }

    /// The key for `keyID` parsed from `x963` (65 bytes), from the cache when the bytes match.
    func key(keyID: String, x963: [UInt8]) throws(CryptoError) -> P256.PublicKey {
        if let cached = keys.value(for: keyID), cached.x963Representation == x963 {
            hits += 1
            return cached
        }
        misses += 1
        let key = try P256.PublicKey(x963Representation: x963)
        keys.set(key, for: keyID)
        return key
    }
}
