/// Writes commands in RESP as the request protocol wants them: an array of bulk strings,
/// `*<argc>\r\n` then `$<length>\r\n<bytes>\r\n` per argument — the same bytes hiredis's
/// `redisFormatCommandArgv` produces (`RESPWriterTests` compares the two).
///
/// One writer belongs to one connection and its buffer is reused for every command, so
/// sending allocates nothing once the buffer has grown, and no pointer/length arrays or
/// per-argument copies are built (what the argv path of hiredis needed, plus its `sdscatfmt`
/// per argument). hiredis copies the bytes into its output buffer before `send` returns.
struct RESPWriter {
    /// The last command, followed by one NUL byte that is not part of it.
    private(set) var terminated: [UInt8] = []

    init() {
        terminated.reserveCapacity(512)
    }

    /// The last command's bytes.
    var bytes: ArraySlice<UInt8> { terminated.dropLast() }

    /// Replaces the buffer's content with `arguments` encoded as one command.
    mutating func encode(_ arguments: RedisArguments) {
        terminated.removeAll(keepingCapacity: true)
        defer { terminated.append(0) }
        switch arguments {
        case .strings(let items):
            header(count: items.count, marker: UInt8(ascii: "*"))
            for item in items {
                let copied: Void? = item.utf8.withContiguousStorageIfAvailable { bulk($0) }
                if copied == nil { bulk(Array(item.utf8)) }
            }
        case .bytes(let items):
            header(count: items.count, marker: UInt8(ascii: "*"))
            for item in items {
                item.withUnsafeBufferPointer { bulk($0) }
            }
        }
    }

    private mutating func bulk(_ argument: UnsafeBufferPointer<UInt8>) {
        header(count: argument.count, marker: UInt8(ascii: "$"))
        terminated.append(contentsOf: argument)
        terminated.append(0x0D)
        terminated.append(0x0A)
    }

    private mutating func bulk(_ argument: [UInt8]) {
        argument.withUnsafeBufferPointer { bulk($0) }
    }

    /// `<marker><count in decimal>\r\n`.
    private mutating func header(count: Int, marker: UInt8) {
        terminated.append(marker)
        if count < 10 {
            terminated.append(UInt8(ascii: "0") + UInt8(count))
        } else {
            var divisor = 10
            while divisor <= count / 10 { divisor *= 10 }
            var rest = count
            while divisor > 0 {
                terminated.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        terminated.append(0x0D)
        terminated.append(0x0A)
    }
}
