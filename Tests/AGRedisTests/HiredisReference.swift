import CHiredis
@testable import AGRedis

/// hiredis's own encoding of `arguments` (`redisFormatCommandArgv`), the reference
/// `RESPWriterTests` checks `RESPWriter` against. Lives with the tests: the gateway sends only
/// what `RESPWriter` encodes.
func hiredisFormatted(_ arguments: RedisArguments) -> [UInt8] {
    let items: [[UInt8]] = switch arguments {
    case .strings(let strings): strings.map { Array($0.utf8) }
    case .bytes(let bytes): bytes
    }
    // One buffer with a trailing byte, so that every argument (empty ones too) has a pointer.
    let joined: [UInt8] = Array(items.joined()) + [0]
    return joined.withUnsafeBufferPointer { buffer in
        var starts: [UnsafePointer<CChar>?] = []
        var lengths: [Int] = []
        var offset = 0
        for item in items {
            starts.append(UnsafeRawPointer(buffer.baseAddress! + offset).assumingMemoryBound(to: CChar.self))
            lengths.append(item.count)
            offset += item.count
        }
        var target: UnsafeMutablePointer<CChar>?
        let length = redisFormatCommandArgv(&target, Int32(items.count), &starts, lengths)
        defer { redisFreeCommand(target) }
        guard length >= 0, let target else { return [] }
        return Array(UnsafeRawBufferPointer(start: target, count: Int(length)))
    }
}
