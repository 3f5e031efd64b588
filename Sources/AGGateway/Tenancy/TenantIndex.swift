import AGHTTP

/// The snapshot's tenants found from a request's `X-Team-ID` and `X-Bundle-ID` field bytes,
/// without building the App ID as a `String` per request: each App ID's bytes are hashed
/// (FNV-1a) once per snapshot into an open-addressed table (linear probing, at most half
/// full); a request hashes its two values joined by `.`, probes from that slot, and compares
/// the App ID of a slot with the same hash by `memcmp` (`HTTPFields.bytes(in:equal:at:)`).
/// Parallel arrays, so a probe reads plain words and retains nothing until it returns the
/// tenant.
struct TenantIndex: Sendable {
    /// Each slot's App ID hash, 0 for an empty slot (a hash of 0 is stored as 1).
    private let hashes: [UInt64]
    private let appIDs: [[UInt8]]
    private let tenants: [Tenant?]
    private let mask: Int

    init(_ tenants: some Sequence<Tenant>) {
        let list = Array(tenants)
        var capacity = 8
        while capacity < list.count * 2 { capacity *= 2 }
        var hashes = [UInt64](repeating: 0, count: capacity)
        var appIDs = [[UInt8]](repeating: [], count: capacity)
        var slots = [Tenant?](repeating: nil, count: capacity)
        for tenant in list {
            let appID = Array(tenant.appID.utf8)
            var hash = FNV1a()
            hash.add(appID.span, 0..<appID.count)
            let stored = Self.stored(hash.value)
            var index = Int(truncatingIfNeeded: stored) & (capacity - 1)
            while hashes[index] != 0 { index = (index + 1) & (capacity - 1) }
            hashes[index] = stored
            appIDs[index] = appID
            slots[index] = tenant
        }
        self.hashes = hashes
        self.appIDs = appIDs
        self.tenants = slots
        mask = capacity - 1
    }

    private static func stored(_ hash: UInt64) -> UInt64 { hash == 0 ? 1 : hash }

    /// Tenant selectors the request is refused for. A selector sent more than once: the copy
    /// the gateway would take and the one an upstream (which gets both) reads could differ.
    /// One sent without the other: it would select nothing, yet reach the upstream beside the
    /// claims of the tenant the token named.
    enum FieldProblem: Error, Equatable {
        case repeated(String)
        case alone(String)

        var message: String {
            switch self {
            case .repeated(let name): "\(name) is sent more than once"
            case .alone(let name): "\(name) is sent without \(name == "X-Team-ID" ? "X-Bundle-ID" : "X-Team-ID"): send both or neither"
            }
        }
    }

    /// The value ranges of the `X-Team-ID` and the `X-Bundle-ID` field, when both are present;
    /// nil when neither is; either one sent twice, or one without the other, throws.
    static func tenantFields(_ fields: HTTPFields) throws(FieldProblem) -> (team: Range<Int>, bundle: Range<Int>)? {
        var team: Range<Int>?
        var bundle: Range<Int>?
        for field in fields {
            if field.name == .xTeamID {
                guard team == nil else { throw .repeated("X-Team-ID") }
                team = field.valueRange
            } else if field.name == .xBundleID {
                guard bundle == nil else { throw .repeated("X-Bundle-ID") }
                bundle = field.valueRange
            }
        }
        switch (team, bundle) {
        case (let team?, let bundle?): return (team, bundle)
        case (nil, nil): return nil
        case (_?, nil): throw .alone("X-Team-ID")
        case (nil, _?): throw .alone("X-Bundle-ID")
        }
    }

    /// The tenant whose App ID is `team` + `.` + `bundle` (byte ranges of `fields`).
    func tenant(team: Range<Int>, bundle: Range<Int>, in fields: HTTPFields) -> Tenant? {
        let storage = fields.storage
        var hash = FNV1a()
        hash.add(storage.span, team)
        hash.add(UInt8(ascii: "."))
        hash.add(storage.span, bundle)
        let wanted = Self.stored(hash.value)
        var index = Int(truncatingIfNeeded: wanted) & mask
        while true {
            let slot = hashes[index]
            if slot == 0 { return nil }
            if slot == wanted, Self.appID(appIDs[index], is: fields, team, bundle) { return tenants[index] }
            index = (index + 1) & mask
        }
    }

    private static func appID(_ appID: [UInt8], is fields: HTTPFields, _ team: Range<Int>, _ bundle: Range<Int>) -> Bool {
        guard appID.count == team.count + 1 + bundle.count, appID[team.count] == UInt8(ascii: ".") else { return false }
        return fields.bytes(in: team, equal: appID, at: 0) && fields.bytes(in: bundle, equal: appID, at: team.count + 1)
    }
}

/// 64-bit FNV-1a: a quick hash of short byte strings. Not for untrusted keys an attacker could
/// collide on purpose to slow a table down; here a collision only adds a comparison against
/// one of the configured tenants.
struct FNV1a {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func add(_ byte: UInt8) {
        value = (value ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
    }

    mutating func add(_ bytes: Span<UInt8>, _ range: Range<Int>) {
        for index in range { add(bytes[index]) }
    }
}
