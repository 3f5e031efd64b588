
/// A worker's bounded cache of signature-verified tokens, keyed by the token string.
///
/// A hit skips the signature check (the dominant cost of a proxied request); everything that
/// depends on the time or the request is still checked on every use. Entries are dropped when
/// they expire, when the cache is full (oldest insertion first: tokens are short-lived, so
/// first-in-first-out evicts about what LRU would, without reordering on every hit), and all
/// at once when a request arrives with a newer snapshot, since a reload may have removed the
/// key that verified them. Loop thread only.
final class TokenCache {
    let capacity: Int
    /// The snapshot generation the entries were verified under.
    private(set) var generation = 0
    private var entries: [Key: Slot] = [:]
    /// Insertion order: `ring[next]` is the oldest slot once the ring is full.
    private var ring: [Key?]
    private var next = 0

    /// A token as a dictionary key, hashed on its length and last 8 bytes only: those lie in
    /// the signature, which differs between any two tokens the keys signed, so hashing the
    /// whole 300-byte string (String hashing was 4 % of a proxied request) buys nothing. Only
    /// verified tokens are stored, so crafted look-alikes cannot pile up in one bucket.
    private struct Key: Hashable {
        let text: String

        func hash(into hasher: inout Hasher) {
            let utf8 = text.utf8
            let tail = utf8.withContiguousStorageIfAvailable { bytes in
                bytes.suffix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            } ?? utf8.suffix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            hasher.combine(utf8.count)
            hasher.combine(tail)
        }

        static func == (a: Key, b: Key) -> Bool { a.text == b.text }
    }

    private struct Slot {
        let token: VerifiedToken
        let position: Int
    }

    init(capacity: Int = 10_000) {
        precondition(capacity > 0)
        self.capacity = capacity
        ring = Array(repeating: nil, count: capacity)
    }

    var count: Int { entries.count }

    /// The cached entry for `token`, unless it expired by `now` (Unix seconds, leeway included)
    /// or was verified under another snapshot.
    func lookup(_ token: String, generation: Int, now: Double, leeway: Double) -> VerifiedToken? {
        adopt(generation)
        let key = Key(text: token)
        guard generation == self.generation, let slot = entries[key] else { return nil }
        guard now < slot.token.expiresAt + leeway else {
            entries[key] = nil
            return nil
        }
        return slot.token
    }

    /// Keeps `entry`; a request still running on an older snapshot does not insert.
    func insert(_ token: String, _ entry: VerifiedToken, generation: Int) {
        adopt(generation)
        let key = Key(text: token)
        guard generation == self.generation, entries[key] == nil else { return }
        if let oldest = ring[next], entries[oldest]?.position == next {
            entries[oldest] = nil
        }
        ring[next] = key
        entries[key] = Slot(token: entry, position: next)
        next = (next + 1) % capacity
    }

    /// Empties the cache when a newer snapshot shows up.
    private func adopt(_ generation: Int) {
        guard generation > self.generation else { return }
        self.generation = generation
        entries.removeAll(keepingCapacity: true)
        for index in ring.indices { ring[index] = nil }
        next = 0
    }
}
