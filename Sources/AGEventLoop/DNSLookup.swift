internal import CEvent
internal import Glibc
import AGSync

/// One name being resolved: an `A` and an `AAAA` query whose answers are merged.
final class DNSLookup {
    let name: String
    var waiters: [(Result<[IPAddress], DNSError>) -> Void] = []
    /// Weak: evdns may run a query's callback after the resolver is gone (deferred shutdown).
    private weak var resolver: DNSResolver?
    private var v4: DNSAnswer?
    private var v6: DNSAnswer?
    /// The tokens evdns still holds as callback contexts, one per unanswered query: each is
    /// taken back by its callback, or by `abandon()` when the resolver goes first.
    private var unanswered: [UInt] = []

    init(name: String, resolver: DNSResolver) {
        self.name = name
        self.resolver = resolver
    }

    /// Sends both queries. A query evdns refuses at once counts as answered with an error.
    func start(on evdns: OpaquePointer) {
        for family in [IPAddress.Family.v4, .v6] {
            let token = DNSQueryTokens.add(DNSQuery(lookup: self, family: family))
            unanswered.append(token)
            let context = UnsafeMutableRawPointer(bitPattern: token)
            let request = switch family {
            case .v4: evdns_base_resolve_ipv4(evdns, name, 0, Self.onAnswer, context)
            case .v6: evdns_base_resolve_ipv6(evdns, name, 0, Self.onAnswer, context)
            }
            if request == nil {
                unanswered.removeAll { $0 == token }
                _ = DNSQueryTokens.take(token)
                record(family, .failure(DNS_ERR_UNKNOWN))
            }
        }
    }

    /// Lets go of the queries that never answered, once their evdns base was freed without
    /// failing them (`DNSResolver.shutDown`, its `deinit`). A callback evdns had already
    /// deferred for one of them (an answer that arrived in the same loop iteration) finds its
    /// token gone and does nothing.
    func abandon() {
        for token in unanswered { _ = DNSQueryTokens.take(token) }
        unanswered.removeAll()
    }

    private func record(_ family: IPAddress.Family, _ answer: DNSAnswer) {
        switch family {
        case .v4: v4 = answer
        case .v6: v6 = answer
        }
        guard let v4, let v6, let resolver else { return }
        resolver.finished(self, Self.merge(v4: v4, v6: v6, name: name))
    }

    /// Both families' addresses, the smaller TTL; an error only when neither gave an address
    /// (then the more telling of the two: "no records" yields to any other error).
    private static func merge(v4: DNSAnswer, v6: DNSAnswer, name: String) -> Result<(addresses: [IPAddress], ttl: Int), DNSError> {
        switch (v4, v6) {
        case (.success(let a), .success(let b)):
            return .success((a.addresses + b.addresses, min(a.ttl, b.ttl)))
        case (.success(let a), .failure), (.failure, .success(let a)):
            return .success(a)
        case (.failure(let a), .failure(let b)):
            let code = a.code == DNS_ERR_NODATA ? b.code : a.code
            return .failure(DNSError(host: name, code: code, reason: String(cString: evdns_err_to_string(code))))
        }
    }

    private static let onAnswer: @convention(c) (Int32, CChar, Int32, Int32, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = {
        result, type, count, ttl, addresses, argument in
        let token = UInt(bitPattern: argument)
        guard let query = DNSQueryTokens.take(token) else { return }
        query.lookup.unanswered.removeAll { $0 == token }
        if result == DNS_ERR_SHUTDOWN || result == DNS_ERR_CANCEL { return }
        guard result == DNS_ERR_NONE, count > 0, let addresses else {
            query.lookup.record(query.family, .failure(result == DNS_ERR_NONE ? DNS_ERR_NODATA : result))
            return
        }
        var found: [IPAddress] = []
        if type == CChar(DNS_IPv4_A) {
            let list = addresses.assumingMemoryBound(to: in_addr.self)
            found = (0..<Int(count)).map { IPAddress(v4: list[$0]) }
        } else if type == CChar(DNS_IPv6_AAAA) {
            let list = addresses.assumingMemoryBound(to: in6_addr.self)
            found = (0..<Int(count)).map { IPAddress(v6: list[$0]) }
        }
        query.lookup.record(query.family, found.isEmpty ? .failure(DNS_ERR_NODATA) : .success((found, Int(max(ttl, 0)))))
    }
}

/// One family's outcome: addresses and TTL in seconds, or a `DNS_ERR_*` code.
private typealias DNSAnswer = Result<(addresses: [IPAddress], ttl: Int), DNSErrorCode>

/// A bare evdns error code, so answers can be kept in a `Result`.
private struct DNSErrorCode: Error, Equatable {
    let code: Int32
}

extension Result where Failure == DNSErrorCode {
    fileprivate static func failure(_ code: Int32) -> Self { .failure(DNSErrorCode(code: code)) }
}

/// The queries evdns may still call back for, by the token passed as their callback context
/// (process-wide: a callback can come after its resolver is gone). Each token is taken once,
/// by the callback or by `DNSLookup.abandon()`, whichever comes first: the other finds nothing,
/// so a query is released exactly once and never used after. (A retained pointer as the context
/// could only be released by its callback; when freeing an evdns base deferred the callbacks to
/// an iteration the stopping loop never ran, the queries and their lookup stayed behind.)
private enum DNSQueryTokens {
    private static let table = Locked<(next: UInt, queries: [UInt: DNSQuery])>((1, [:]))

    static func add(_ query: DNSQuery) -> UInt {
        table.withLock { table in
            let token = table.next
            table.next += 1
            table.queries[token] = query
            return token
        }
    }

    static func take(_ token: UInt) -> DNSQuery? {
        table.withLock { $0.queries.removeValue(forKey: token) }
    }
}

/// The callback context of one query. Unchecked `Sendable` only to pass through the token
/// table's lock: it is made, called back and abandoned on its loop's thread (or once that loop
/// is gone), and never touched elsewhere.
private final class DNSQuery: @unchecked Sendable {
    let lookup: DNSLookup
    let family: IPAddress.Family

    init(lookup: DNSLookup, family: IPAddress.Family) {
        self.lookup = lookup
        self.family = family
    }
}
