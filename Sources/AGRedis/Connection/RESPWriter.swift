/// Writes commands in RESP as the request protocol wants them: an array of bulk strings,
/// `*<argc>\r\n` then `$<length>\r\n<bytes>\r\n` per argument — the same bytes hiredis's
/// `redisFormatCommandArgv` produces (`RESPWriterTests` compares the two).
///
/// One writer belongs to one connection and its buffer is reused for every command, so
/// sending allocates nothing once the buffer has grown, and no pointer/length arrays or
/// per-argument copies are built (what the argv path of hiredis needed, plus its `sdscatfmt`
/// per argument). hiredis copies the bytes into its output buffer before `send` returns.
struct RESPWriter: ~Copyable {
    // An owned buffer rather than a `[UInt8]`: an array append checks uniqueness and capacity
    // and goes through a generic copy (~100 instructions each, ~40 per challenge + refresh
    // cycle); here an append is a bounds check and a store or a memcpy. Noncopyable, so the
    // buffer has one owner. The same buffer as `HTTPHeadWriter`'s, grown the same way: AGRedis
    // sits below AGHTTP and cannot use that one.
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    /// Bytes of the last command, its terminator included.
    private var count = 0

    init() {
        capacity = 512
        base = .allocate(capacity: capacity)
    }

    deinit { base.deallocate() }

    /// The last command, followed by one NUL byte that is not part of it (a copy).
    var terminated: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    /// The last command's bytes (a copy).
    var bytes: ArraySlice<UInt8> { terminated.dropLast() }

    /// The last command and its terminator, for the time of `body`.
    func withTerminatedBytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result {
        try body(UnsafeBufferPointer(start: base, count: count))
    }

    /// Replaces the buffer's content with `arguments` encoded as one command.
    mutating func encode(_ arguments: RedisArguments) {
        count = 0
        switch arguments {
        case .strings(let items):
            header(count: items.count, marker: UInt8(ascii: "*"))
            for item in items {
                let copied: Void? = item.utf8.withContiguousStorageIfAvailable { bulk($0) }
                if copied == nil { Array(item.utf8).withUnsafeBufferPointer { bulk($0) } }
            }
        case .bytes(let items):
            header(count: items.count, marker: UInt8(ascii: "*"))
            for item in items {
                item.withUnsafeBufferPointer { bulk($0) }
            }
        }
        reserve(1)
        base[count] = 0
        count += 1
    }

    private mutating func bulk(_ argument: UnsafeBufferPointer<UInt8>) {
        header(count: argument.count, marker: UInt8(ascii: "$"))
        reserve(argument.count + 2)
        if let source = argument.baseAddress { (base + count).update(from: source, count: argument.count) }
        count += argument.count
        base[count] = 0x0D
        base[count + 1] = 0x0A
        count += 2
    }

    /// `<marker><count in decimal>\r\n`.
    private mutating func header(count value: Int, marker: UInt8) {
        reserve(24)  // the marker, at most 19 digits, CRLF
        base[count] = marker
        if value < 10 {
            base[count + 1] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value)
            base[count + 2] = 0x0D
            base[count + 3] = 0x0A
            count += 4
            return
        }
        var digits = 2
        var scale = 100
        while digits < 19, scale <= value {
            digits += 1
            scale &*= 10
        }
        var rest = value
        var at = count + digits
        repeat {
            base[at] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
            rest /= 10
            at -= 1
        } while rest > 0
        count += digits + 1
        base[count] = 0x0D
        base[count + 1] = 0x0A
        count += 2
    }

    /// Room for `more` bytes after `count`.
    @inline(__always)
    private mutating func reserve(_ more: Int) {
        if count + more > capacity { grow(toFit: more) }
    }

    private mutating func grow(toFit more: Int) {
        let grown = max(capacity * 2, count + more)
        let larger = UnsafeMutablePointer<UInt8>.allocate(capacity: grown)
        larger.initialize(from: base, count: count)
        base.deallocate()
        base = larger
        capacity = grown
    }
}
