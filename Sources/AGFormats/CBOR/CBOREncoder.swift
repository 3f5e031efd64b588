/// Encodes `CBORValue`s as RFC 8949 CBOR with preferred serialization.
///
/// Every integer argument (values, lengths, counts) is written in its shortest form and every
/// length is definite, so the output is what `CBORDecoder(requireShortestArguments: true)`
/// accepts. Map entries are written in the order given rather than sorted: App Attest devices
/// put `signature` before `authenticatorData`, and a client imitating them must too. Use
/// `sortingMapKeys` for RFC 8949 core deterministic encoding (section 4.2.1).
public struct CBOREncoder: Sendable {
    /// Sort map entries by the bytewise order of their encoded keys (deterministic encoding).
    public var sortingMapKeys: Bool

    public init(sortingMapKeys: Bool = false) {
        self.sortingMapKeys = sortingMapKeys
    }

    /// The encoding of `value`.
    public func encode(_ value: CBORValue) -> [UInt8] {
        var output = [UInt8]()
        output.reserveCapacity(128)
        write(value, to: &output)
        return output
    }

    private func write(_ value: CBORValue, to output: inout [UInt8]) {
        switch value {
        case .unsigned(let number):
            Self.writeHead(majorType: 0, argument: number, to: &output)
        case .negative(let number):
            Self.writeHead(majorType: 1, argument: number, to: &output)
        case .bytes(let bytes):
            Self.writeHead(majorType: 2, argument: UInt64(bytes.count), to: &output)
            output.append(contentsOf: bytes)
        case .text(let text):
            let utf8 = text.utf8
            Self.writeHead(majorType: 3, argument: UInt64(utf8.count), to: &output)
            output.append(contentsOf: utf8)
        case .array(let elements):
            Self.writeHead(majorType: 4, argument: UInt64(elements.count), to: &output)
            for element in elements {
                write(element, to: &output)
            }
        case .map(let entries):
            Self.writeHead(majorType: 5, argument: UInt64(entries.count), to: &output)
            if sortingMapKeys {
                let encoded = entries.map { (key: encode($0.key), value: encode($0.value)) }
                for entry in encoded.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
                    output.append(contentsOf: entry.key)
                    output.append(contentsOf: entry.value)
                }
            } else {
                for entry in entries {
                    write(entry.key, to: &output)
                    write(entry.value, to: &output)
                }
            }
        case .bool(let flag):
            output.append(flag ? 0xF5 : 0xF4)
        case .null:
            output.append(0xF6)
        case .undefined:
            output.append(0xF7)
        }
    }

    /// The initial byte and its argument in the shortest of the five forms.
    private static func writeHead(majorType: UInt8, argument: UInt64, to output: inout [UInt8]) {
        let type = majorType << 5
        let width: Int
        switch argument {
        case 0..<24:
            output.append(type | UInt8(argument))
            return
        case 24...0xFF:
            output.append(type | 24)
            width = 1
        case 0x100...0xFFFF:
            output.append(type | 25)
            width = 2
        case 0x1_0000...0xFFFF_FFFF:
            output.append(type | 26)
            width = 4
        default:
            output.append(type | 27)
            width = 8
        }
        for shift in stride(from: (width - 1) * 8, through: 0, by: -8) {
            output.append(UInt8(truncatingIfNeeded: argument >> UInt64(shift)))
        }
    }
}
