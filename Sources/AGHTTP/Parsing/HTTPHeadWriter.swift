internal import CEvent

/// Builds an outbound message head as bytes in one buffer, so the whole head goes out with one
/// write: a `send` straight from here when nothing is queued on the connection (with a small
/// body appended behind it), else one `evbuffer_add`. Fields the proxy does not touch are
/// appended as the byte ranges they arrived as; nothing becomes a `String` on the way.
///
/// A writer kept by a connection or a pool is `reset()` and reused: its buffer keeps its
/// capacity, so a steady load writes heads without allocating. (A worker's access log batches
/// its lines in one too: nothing here is specific to heads but the field helpers.)
public struct HTTPHeadWriter: ~Copyable, @unchecked Sendable {
    // An owned buffer rather than a `[UInt8]`: an array append checks uniqueness and capacity
    // and goes through a generic copy (~100 instructions each, ~70 appends per proxied request);
    // here an append is a bounds check and a memcpy. Noncopyable, so the buffer has one owner;
    // unchecked Sendable because the pointer is only reached through that owner.
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    /// Bytes written so far.
    public private(set) var count = 0
    /// A `Host` field has been written (the pool adds one otherwise).
    public private(set) var wroteHost = false
    /// A `Date` field has been written (the server adds one otherwise).
    public private(set) var wroteDate = false

    public init(capacity: Int = 1024) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// A copy of the bytes written.
    public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    /// Appends the bytes written to `array`.
    public func appendBytes(to array: inout [UInt8]) {
        array.append(contentsOf: UnsafeBufferPointer(start: base, count: count))
    }

    /// The bytes written as text (UTF-8, invalid sequences repaired).
    public var text: String {
        String(decoding: UnsafeBufferPointer(start: base, count: count), as: UTF8.self)
    }

    /// The bytes written, for the time of `body`.
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    public mutating func reset() {
        count = 0
        wroteHost = false
        wroteDate = false
    }

    @inline(__always)
    private mutating func reserve(_ extra: Int) {
        if count + extra > capacity { grow(toAtLeast: count + extra) }
    }

    private mutating func grow(toAtLeast needed: Int) {
        let larger = max(capacity * 2, needed)
        let moved = UnsafeMutablePointer<UInt8>.allocate(capacity: larger)
        moved.initialize(from: base, count: count)
        base.deallocate()
        base = moved
        capacity = larger
    }

    @inline(__always)
    private mutating func appendByte(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    @inline(__always)
    private mutating func appendTwo(_ first: UInt8, _ second: UInt8) {
        reserve(2)
        base[count] = first
        base[count + 1] = second
        count += 2
    }

    mutating func append(_ buffer: UnsafeRawBufferPointer) {
        guard let source = buffer.baseAddress, !buffer.isEmpty else { return }
        reserve(buffer.count)
        UnsafeMutableRawPointer(base + count).copyMemory(from: source, byteCount: buffer.count)
        count += buffer.count
    }

    public mutating func append(_ text: String) {
        // Native and small strings hand out their UTF-8 directly (no copy of the string, so
        // no retain): one memcpy.
        let copied = text.utf8.withContiguousStorageIfAvailable { append(UnsafeRawBufferPointer($0)) } != nil
        if !copied {
            for byte in text.utf8 { appendByte(byte) }
        }
    }

    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    public mutating func append(_ slice: ArraySlice<UInt8>) {
        slice.withUnsafeBytes { append($0) }
    }

    public mutating func append(_ text: Substring) {
        let copied = text.utf8.withContiguousStorageIfAvailable { append(UnsafeRawBufferPointer($0)) } != nil
        if !copied {
            for byte in text.utf8 { appendByte(byte) }
        }
    }

    public mutating func append(_ text: StaticString) {
        append(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Moves `length` bytes from the front of `buffer` to the end of the writer.
    mutating func appendRemoving(_ length: Int, from buffer: OpaquePointer) {
        reserve(length)
        let moved = evbuffer_remove(buffer, base + count, length)
        if moved > 0 { count += Int(moved) }
    }

    public mutating func append(byte: UInt8) {
        appendByte(byte)
    }

    /// Appends `value` in decimal (`writeDecimal`; five go into each proxied answer).
    public mutating func append(decimal value: Int) {
        reserve(Self.maxDecimalLength)
        count += Self.writeDecimal(value, at: base + count)
    }

    /// The most bytes `writeDecimal` writes: a sign and 19 digits.
    static let maxDecimalLength = 20

    /// Writes `value` in decimal at `out` (room for `maxDecimalLength` bytes) and returns how
    /// many bytes it wrote: the digits are counted first, then written in place from the last,
    /// two at a time from a table of the pairs "00" to "99" (a digit at a time, as before, cost
    /// ~170 instructions for a ten-digit number).
    @usableFromInline
    static func writeDecimal(_ value: Int, at out: UnsafeMutablePointer<UInt8>) -> Int {
        var rest = value.magnitude
        var digitCount = 1
        var scale: UInt = 10
        while digitCount < 20, rest >= scale {
            digitCount += 1
            scale &*= 10
        }
        var start = out
        if value < 0 {
            out.pointee = UInt8(ascii: "-")
            start += 1
        }
        var at = digitCount
        let pairs = digitPairs.utf8Start
        while rest >= 100 {
            let pair = Int(truncatingIfNeeded: rest % 100) &* 2
            rest /= 100
            at -= 2
            start[at] = pairs[pair]
            start[at + 1] = pairs[pair + 1]
        }
        if rest >= 10 {
            let pair = Int(truncatingIfNeeded: rest) &* 2
            start[at - 2] = pairs[pair]
            start[at - 1] = pairs[pair + 1]
        } else {
            start[at - 1] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest)
        }
        return digitCount + (value < 0 ? 1 : 0)
    }

    /// Lets `body` write up to `limit` bytes through a `ByteCursor` straight into the buffer:
    /// the room is reserved first, so a line of many small pieces needs one capacity check, not
    /// one per piece. The caller counts the room; writing past it traps when `body` returns.
    public mutating func appendWriting(upTo limit: Int, _ body: (inout ByteCursor) -> Void) {
        reserve(limit)
        var cursor = ByteCursor(base + count)
        body(&cursor)
        let written = cursor.written
        precondition(written >= 0 && written <= limit, "wrote past the reserved room")
        count += written
    }

    private static let digitPairs: StaticString = """
        00010203040506070809101112131415161718192021222324252627282930313233343536373839\
        40414243444546474849505152535455565758596061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899
        """

    /// Appends `"HTTP/1.1 <status> <reason>\r\n"`; the reason is RFC 9110's for the status.
    public mutating func appendStatusLine(_ status: Int) {
        append("HTTP/1.1 ")
        append(decimal: status)
        appendByte(0x20)
        append(HTTPStatus.reason(status))
        appendCRLF()
    }

    public mutating func appendCRLF() {
        appendTwo(0x0D, 0x0A)
    }

    public mutating func appendField(_ name: String, _ value: String) {
        append(name)
        appendTwo(UInt8(ascii: ":"), 0x20)
        append(value)
        appendCRLF()
        if name.utf8.count == 4 { noteWritten(HTTPFieldName(name)) }
    }

    public mutating func appendField(_ name: HTTPFieldName, _ value: String) {
        append(name.spelling)
        appendTwo(UInt8(ascii: ":"), 0x20)
        append(value)
        appendCRLF()
        noteWritten(name)
    }

    /// Appends a parsed field as received: its name bytes, `": "`, its value bytes.
    public mutating func appendField(_ field: HTTPField, of fields: HTTPFields) {
        fields.storage.withUnsafeBytes { storage in
            append(UnsafeRawBufferPointer(rebasing: storage[field.nameRange]))
            appendTwo(UInt8(ascii: ":"), 0x20)
            append(UnsafeRawBufferPointer(rebasing: storage[field.valueRange]))
        }
        appendCRLF()
        noteWritten(field.name)
    }

    /// Appends `name: ` and leaves the value to the caller (values built from pieces, such as
    /// an extended `X-Forwarded-For`); finish with `appendCRLF()`.
    public mutating func appendFieldName(_ name: HTTPFieldName) {
        append(name.spelling)
        appendTwo(UInt8(ascii: ":"), 0x20)
        noteWritten(name)
    }

    @inline(__always)
    private mutating func noteWritten(_ name: HTTPFieldName) {
        switch name {
        case .host: wroteHost = true
        case .date: wroteDate = true
        default: break
        }
    }
}

/// Plain stores into room that `HTTPHeadWriter.appendWriting(upTo:)` reserved: no capacity
/// check per piece (a line's thirty-odd pieces through the writer's checked appends cost ~2.4 k
/// instructions per access line). Inlined into its callers; it exists only inside that call.
public struct ByteCursor {
    @usableFromInline var at: UnsafeMutablePointer<UInt8>
    @usableFromInline let start: UnsafeMutablePointer<UInt8>

    @usableFromInline
    init(_ start: UnsafeMutablePointer<UInt8>) {
        self.start = start
        at = start
    }

    /// Bytes written so far.
    @inlinable public var written: Int { at - start }

    @inlinable @inline(__always) public mutating func put(_ byte: UInt8) {
        at.pointee = byte
        at += 1
    }

    @inlinable @inline(__always) public mutating func put(_ text: StaticString) {
        let count = text.utf8CodeUnitCount
        at.update(from: text.utf8Start, count: count)
        at += count
    }

    @inlinable @inline(__always) public mutating func put(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { buffer in
            guard let source = buffer.baseAddress else { return }
            at.update(from: source, count: buffer.count)
            at += buffer.count
        }
    }

    @inlinable @inline(__always) public mutating func put(_ text: String) {
        if text.utf8.withContiguousStorageIfAvailable({ put($0) }) == nil {
            for byte in text.utf8 { put(byte) }
        }
    }

    @inlinable @inline(__always) public mutating func put(_ text: Substring) {
        if text.utf8.withContiguousStorageIfAvailable({ put($0) }) == nil {
            for byte in text.utf8 { put(byte) }
        }
    }

    /// The first `count` (1–8) bytes of `word`, least significant first (the room must hold 8).
    @inlinable @inline(__always) public mutating func put(word: UInt64, count: Int) {
        UnsafeMutableRawPointer(at).storeBytes(of: word.littleEndian, as: UInt64.self)
        at += min(max(count, 0), 8)
    }

    /// `value` in decimal (at most 20 bytes).
    @inlinable @inline(__always) public mutating func putDecimal(_ value: Int) {
        at += HTTPHeadWriter.writeDecimal(value, at: at)
    }

    @usableFromInline mutating func put(_ buffer: UnsafeBufferPointer<UInt8>) {
        guard let source = buffer.baseAddress else { return }
        at.update(from: source, count: buffer.count)
        at += buffer.count
    }
}
