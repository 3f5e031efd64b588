import AGHTTP

/// The snapshot's tenants found from a request's `X-Team-ID` and `X-Bundle-ID` field bytes,
/// without building the App ID as a `String` per request: tenants are filed under a hash of
/// their App ID's bytes (FNV-1a, computed once per snapshot), a request hashes its two values
/// joined by `.`, and the few candidates are compared byte for byte.
struct TenantIndex: Sendable {
    private let buckets: [UInt64: [Tenant]]

    init(_ tenants: some Sequence<Tenant>) {
        var buckets: [UInt64: [Tenant]] = [:]
        for tenant in tenants {
            var hash = FNV1a()
            let appID = tenant.appID.utf8.span
            hash.add(appID, 0..<appID.count)
            buckets[hash.value, default: []].append(tenant)
        }
        self.buckets = buckets
    }

    /// The value ranges of the first `X-Team-ID` and the first `X-Bundle-ID` field, when both
    /// are present (what `headers[.xTeamID]` and `headers[.xBundleID]` would read).
    static func tenantFields(_ fields: HTTPFields) -> (team: Range<Int>, bundle: Range<Int>)? {
        var team: Range<Int>?
        var bundle: Range<Int>?
        for field in fields {
            if field.name == .xTeamID, team == nil { team = field.valueRange }
            if field.name == .xBundleID, bundle == nil { bundle = field.valueRange }
        }
        guard let team, let bundle else { return nil }
        return (team, bundle)
    }

    /// The tenant whose App ID is `team` + `.` + `bundle` (byte ranges of `fields`).
    func tenant(team: Range<Int>, bundle: Range<Int>, in fields: HTTPFields) -> Tenant? {
        let bytes = fields.storage.span
        var hash = FNV1a()
        hash.add(bytes, team)
        hash.add(UInt8(ascii: "."))
        hash.add(bytes, bundle)
        guard let candidates = buckets[hash.value] else { return nil }
        for tenant in candidates where Self.appID(of: tenant, is: bytes, team, bundle) { return tenant }
        return nil
    }

    private static func appID(of tenant: Tenant, is bytes: Span<UInt8>, _ team: Range<Int>, _ bundle: Range<Int>) -> Bool {
        let appID = tenant.appID.utf8.span
        guard appID.count == team.count + 1 + bundle.count, appID[team.count] == UInt8(ascii: ".") else { return false }
        for offset in 0..<team.count where appID[offset] != bytes[team.lowerBound + offset] { return false }
        for offset in 0..<bundle.count where appID[team.count + 1 + offset] != bytes[bundle.lowerBound + offset] { return false }
        return true
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
