/// An address range such as `10.0.0.0/8` or `2001:db8::/32`.
public struct CIDRBlock: Sendable, Hashable, CustomStringConvertible {
    public let network: IPAddress
    public let prefixLength: Int

    /// Parses `address/length`, or a bare address as a single-host block. Refuses host bits set
    /// below the prefix (`10.0.0.1/8`), which usually means the operator meant something else.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let address = IPAddress(String(parts[0])) else { return nil }
        var length = address.bitWidth
        if parts.count == 2 {
            guard (1...3).contains(parts[1].count), parts[1].allSatisfy(\.isASCIIDigit),
                  let parsed = Int(parts[1]), parsed <= address.bitWidth
            else { return nil }
            length = parsed
        }
        guard Self.masked(address, length) == address else { return nil }
        network = address
        prefixLength = length
    }

    /// Whether `address` lies in this block; IPv4-mapped IPv6 addresses match IPv4 blocks.
    public func contains(_ address: IPAddress) -> Bool {
        let candidate = network.bitWidth == 32 ? address.unmappingIPv4 : address
        guard candidate.bitWidth == network.bitWidth else { return false }
        return Self.masked(candidate, prefixLength) == network
    }

    public var description: String { "\(network)/\(prefixLength)" }

    /// The block `text` would be if its host bits were cleared, for "did you mean" hints.
    static func networkHint(_ text: String) -> String? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let address = IPAddress(String(parts[0])),
              let length = Int(parts[1]), (0...address.bitWidth).contains(length)
        else { return nil }
        return "\(masked(address, length))/\(length)"
    }

    private static func masked(_ address: IPAddress, _ length: Int) -> IPAddress {
        switch address {
        case .v4(let value):
            return .v4(length == 0 ? 0 : value & ~UInt32(0) << (32 - length))
        case .v6(let value):
            return .v6(length == 0 ? 0 : value & ~UInt128(0) << (128 - length))
        }
    }
}
