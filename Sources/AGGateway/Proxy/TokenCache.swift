import AGHTTP

/// A worker's bounded cache of signature-verified tokens, keyed by the token's bytes.
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
    private var entries: [Fingerprint: Slot] = [:]
    /// Insertion order: `ring[next]` is the oldest slot once the ring is full.
    private var ring: [Fingerprint?]
    private var next = 0

    /// A token's length and last 8 bytes: those lie in the signature, which differs between
    /// any two tokens the keys signed, so hashing the whole 300-byte token (String hashing was
    /// 4 % of a proxied request) buys nothing. Read straight off the request head's bytes, so
    /// a hit makes no `String` of the token; the whole token is then compared with the slot's.
    /// Only verified tokens are stored, so crafted look-alikes cannot pile up; a second token
    /// with the same fingerprint is simply not cached (it is verified on each use).
    private struct Fingerprint: Hashable {
        let count: Int
        let tail: UInt64

        init(_ bytes: Span<UInt8>, _ range: Range<Int>) {
            count = range.count
            var tail: UInt64 = 0
            for index in max(range.lowerBound, range.upperBound - 8)..<range.upperBound { tail = tail << 8 | UInt64(bytes[index]) }
            self.tail = tail
        }
    }

    private struct Slot {
        let token: VerifiedToken
        let bytes: [UInt8]
        let position: Int
    }

    init(capacity: Int = 10_000) {
        precondition(capacity > 0)
        self.capacity = capacity
        ring = Array(repeating: nil, count: capacity)
    }

    var count: Int { entries.count }

    /// The cached entry for the token at `bytes[range]` (a request head's bytes), unless it
    /// expired by `now` (Unix seconds, leeway included) or was verified under another snapshot.
    func lookup(_ range: Range<Int>, of bytes: [UInt8], generation: Int, now: Double, leeway: Double) -> VerifiedToken? {
        adopt(generation)
        let key = Fingerprint(bytes.span, range)
        guard generation == self.generation, let slot = entries[key], HTTPFields.bytes(bytes, range, equal: slot.bytes) else {
            return nil
        }
        guard now < slot.token.expiresAt + leeway else {
            entries[key] = nil
            return nil
        }
        return slot.token
    }

    /// Keeps `entry` for the token at `bytes[range]`; a request still running on an older
    /// snapshot does not insert.
    func insert(_ range: Range<Int>, of bytes: [UInt8], _ entry: VerifiedToken, generation: Int) {
        adopt(generation)
        let key = Fingerprint(bytes.span, range)
        guard generation == self.generation, entries[key] == nil else { return }
        if let oldest = ring[next], entries[oldest]?.position == next {
            entries[oldest] = nil
        }
        ring[next] = key
        entries[key] = Slot(token: entry, bytes: Array(bytes[range]), position: next)
        next = (next + 1) % capacity
    }

    /// `lookup` for a token given as text (tests).
    func lookup(_ token: String, generation: Int, now: Double, leeway: Double) -> VerifiedToken? {
        let bytes = Array(token.utf8)
        return lookup(bytes.indices, of: bytes, generation: generation, now: now, leeway: leeway)
    }

    /// `insert` for a token given as text (tests).
    func insert(_ token: String, _ entry: VerifiedToken, generation: Int) {
        let bytes = Array(token.utf8)
        insert(bytes.indices, of: bytes, entry, generation: generation)
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
