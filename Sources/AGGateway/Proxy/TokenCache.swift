import AGConfig
import AGPolicy

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
    private var entries: [String: Slot] = [:]
    /// Insertion order: `ring[next]` is the oldest slot once the ring is full.
    private var ring: [String?]
    private var next = 0

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
        guard generation == self.generation, let slot = entries[token] else { return nil }
        guard now < slot.token.expiresAt + leeway else {
            entries[token] = nil
            return nil
        }
        return slot.token
    }

    /// Keeps `entry`; a request still running on an older snapshot does not insert.
    func insert(_ token: String, _ entry: VerifiedToken, generation: Int) {
        adopt(generation)
        guard generation == self.generation, entries[token] == nil else { return }
        if let oldest = ring[next], entries[oldest]?.position == next {
            entries[oldest] = nil
        }
        ring[next] = token
        entries[token] = Slot(token: entry, position: next)
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
