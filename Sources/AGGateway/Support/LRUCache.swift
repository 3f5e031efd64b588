
/// A dictionary that holds at most `capacity` entries and evicts the least recently used.
///
/// Entries live in one array linked into a recency list by index, so lookups, updates and
/// evictions are O(1) and allocate nothing once the array is full.
struct LRUCache<Key: Hashable, Value> {
    private struct Entry {
        var key: Key
        var value: Value
        var newer: Int?
        var older: Int?
    }

    let capacity: Int
    private var entries: [Entry] = []
    private var indexByKey: [Key: Int] = [:]
    private var newest: Int?
    private var oldest: Int?

    init(capacity: Int) {
        precondition(capacity > 0, "an LRU cache needs room for one entry")
        self.capacity = capacity
    }

    var count: Int { entries.count }

    /// The value for `key`, marking it most recently used.
    mutating func value(for key: Key) -> Value? {
        guard let index = indexByKey[key] else { return nil }
        moveToNewest(index)
        return entries[index].value
    }

    /// Whether `key` is present, without touching its recency.
    func contains(_ key: Key) -> Bool {
        indexByKey[key] != nil
    }

    /// Stores `value` as the most recently used entry, evicting the oldest when full.
    mutating func set(_ value: Value, for key: Key) {
        if let index = indexByKey[key] {
            entries[index].value = value
            moveToNewest(index)
            return
        }
        let index: Int
        if entries.count < capacity {
            index = entries.count
            entries.append(Entry(key: key, value: value))
        } else {
            index = oldest!
            unlink(index)
            indexByKey[entries[index].key] = nil
            entries[index] = Entry(key: key, value: value)
        }
        indexByKey[key] = index
        linkAsNewest(index)
    }

    private mutating func moveToNewest(_ index: Int) {
        guard newest != index else { return }
        unlink(index)
        linkAsNewest(index)
    }

    private mutating func unlink(_ index: Int) {
        let newer = entries[index].newer
        let older = entries[index].older
        if let newer { entries[newer].older = older } else { newest = older }
        if let older { entries[older].newer = newer } else { oldest = newer }
        entries[index].newer = nil
        entries[index].older = nil
    }

    private mutating func linkAsNewest(_ index: Int) {
        entries[index].older = newest
        entries[index].newer = nil
        if let newest { entries[newest].newer = index }
        newest = index
        if oldest == nil { oldest = index }
    }
}
