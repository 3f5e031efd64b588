/// Which primary serves each of the 16384 hash slots, from `CLUSTER SLOTS`.
public struct SlotMap: Sendable, Equatable, CustomStringConvertible {
    /// Index into `primaries` per slot; -1 where no node serves the slot.
    private var owners: [Int16]
    private(set) var primaries: [RedisURL.Endpoint]

    /// Parses a `CLUSTER SLOTS` reply: `[[start, end, [host, port, id, …], replica…], …]`.
    /// An empty host means the node that was asked (`queried`), as Redis documents; a `?`
    /// host (endpoint unknown) leaves the range unserved.
    public init(clusterSlots reply: RedisValue, queried: String) throws(RedisError) {
        owners = Array(repeating: -1, count: HashSlot.count)
        primaries = []
        guard let ranges = reply.array else { throw .server("ERR unexpected CLUSTER SLOTS reply") }
        for range in ranges {
            guard let parts = range.array, parts.count >= 3, let start = parts[0].int, let end = parts[1].int,
                  0 <= start, start <= end, end < HashSlot.count, let node = parts[2].array, node.count >= 2,
                  let host = node[0].string, let port = node[1].int, (1...65535).contains(port) else {
                throw .server("ERR unexpected CLUSTER SLOTS entry")
            }
            guard host != "?" else { continue }
            let endpoint = RedisURL.Endpoint.tcp(host: host.isEmpty ? queried : host, port: Int(port))
            let index = primaries.firstIndex(of: endpoint) ?? {
                primaries.append(endpoint)
                return primaries.count - 1
            }()
            for slot in Int(start)...Int(end) { owners[slot] = Int16(index) }
        }
    }

    /// `start-end=host:port` per contiguous range, for logs and test failures.
    public var description: String {
        var ranges: [String] = []
        var start = 0
        for slot in 1...HashSlot.count where slot == HashSlot.count || owners[slot] != owners[start] {
            let owner = owners[start] < 0 ? "none" : primaries[Int(owners[start])].description
            ranges.append("\(start)-\(slot - 1)=\(owner)")
            start = slot
        }
        return ranges.joined(separator: " ")
    }

    /// The primary serving `slot`, if any.
    public func owner(of slot: UInt16) -> RedisURL.Endpoint? {
        let index = owners[Int(slot)]
        return index < 0 ? nil : primaries[Int(index)]
    }

    /// The lowest slot `primary` serves, if it serves any.
    public func firstSlot(of primary: RedisURL.Endpoint) -> UInt16? {
        guard let index = primaries.firstIndex(of: primary) else { return nil }
        return owners.firstIndex(of: Int16(index)).map(UInt16.init)
    }

    /// Records a `MOVED` redirect until the next refresh confirms it.
    mutating func assign(_ slot: UInt16, to endpoint: RedisURL.Endpoint) {
        let index = primaries.firstIndex(of: endpoint) ?? {
            primaries.append(endpoint)
            return primaries.count - 1
        }()
        owners[Int(slot)] = Int16(index)
    }

    /// True when every slot has a primary: the cluster can serve any key.
    public var coversAllSlots: Bool { !owners.contains(-1) }

    /// Primaries that own at least one slot (a MOVED may have emptied one until the refresh).
    public var servingPrimaries: [RedisURL.Endpoint] {
        var used = Array(repeating: false, count: primaries.count)
        for index in owners where index >= 0 { used[Int(index)] = true }
        return primaries.indices.filter { used[$0] }.map { primaries[$0] }
    }
}

/// A `MOVED <slot> <host:port>` or `ASK <slot> <host:port>` error reply.
struct ClusterRedirect: Equatable {
    enum Kind { case moved, ask }
    let kind: Kind
    let slot: UInt16
    let target: RedisURL.Endpoint

    /// Parses the error text; `nil` for any other error. The host part may be empty (Redis 7:
    /// "the node you asked"), which then stands for `queried`.
    init?(_ message: String, queried: String) {
        let parts = message.split(separator: " ")
        guard parts.count == 3, let slot = UInt16(parts[1]), Int(slot) < HashSlot.count,
              let colon = parts[2].lastIndex(of: ":"), let port = Int(parts[2][parts[2].index(after: colon)...]),
              (1...65535).contains(port) else { return nil }
        switch parts[0] {
        case "MOVED": kind = .moved
        case "ASK": kind = .ask
        default: return nil
        }
        var host = String(parts[2][..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        self.slot = slot
        target = .tcp(host: host.isEmpty ? queried : host, port: port)
    }
}
