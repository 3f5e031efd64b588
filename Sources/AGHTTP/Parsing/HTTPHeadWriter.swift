/// Builds an outbound message head as bytes in one buffer, so the whole head goes out with one
/// `evbuffer_add` and one write. Fields the proxy does not touch are appended as the byte
/// ranges they arrived as; nothing becomes a `String` on the way.
///
/// A writer kept by a connection or a pool is `reset()` and reused: its buffer keeps its
/// capacity, so a steady load writes heads without allocating.
public struct HTTPHeadWriter: Sendable {
    public private(set) var bytes: [UInt8] = []
    /// A `Host` field has been written (the pool adds one otherwise).
    public private(set) var wroteHost = false

    public init(capacity: Int = 1024) {
        bytes.reserveCapacity(capacity)
    }

    public mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        wroteHost = false
    }

    public mutating func append(_ text: String) {
        // Native strings hand out their UTF-8 storage directly: one memcpy, no per-byte loop.
        let copied = text.utf8.withContiguousStorageIfAvailable { bytes.append(contentsOf: $0) } != nil
        if !copied { bytes.append(contentsOf: text.utf8) }
    }

    public mutating func append(_ slice: ArraySlice<UInt8>) {
        bytes.append(contentsOf: slice)
    }

    /// Appends `value` in decimal.
    public mutating func append(decimal value: Int) {
        guard value != 0 else { return bytes.append(UInt8(ascii: "0")) }
        var digits = InlineArray<20, UInt8>(repeating: 0)
        var count = 0
        var rest = value.magnitude
        while rest > 0 {
            digits[count] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
            count += 1
        }
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        while count > 0 {
            count -= 1
            bytes.append(digits[count])
        }
    }

    /// Appends `"HTTP/1.1 <status> <reason>\r\n"`; the reason is RFC 9110's for the status.
    public mutating func appendStatusLine(_ status: Int) {
        append("HTTP/1.1 ")
        append(decimal: status)
        bytes.append(0x20)
        append(HTTPStatus.reason(status))
        appendCRLF()
    }

    public mutating func appendCRLF() {
        bytes.append(0x0D)
        bytes.append(0x0A)
    }

    public mutating func appendField(_ name: String, _ value: String) {
        append(name)
        bytes.append(UInt8(ascii: ":"))
        bytes.append(0x20)
        append(value)
        appendCRLF()
        if !wroteHost, name.utf8.count == 4, HTTPFieldName(name) == .host { wroteHost = true }
    }

    public mutating func appendField(_ name: HTTPFieldName, _ value: String) {
        append(name.text)
        bytes.append(UInt8(ascii: ":"))
        bytes.append(0x20)
        append(value)
        appendCRLF()
        if name == .host { wroteHost = true }
    }

    /// Appends a parsed field as received: its name bytes, `": "`, its value bytes.
    public mutating func appendField(_ field: HTTPField, of fields: HTTPFields) {
        bytes.append(contentsOf: fields.storage[field.nameRange])
        bytes.append(UInt8(ascii: ":"))
        bytes.append(0x20)
        bytes.append(contentsOf: fields.storage[field.valueRange])
        appendCRLF()
        if field.name == .host { wroteHost = true }
    }

    /// Appends `name: ` and leaves the value to the caller (values built from pieces, such as
    /// an extended `X-Forwarded-For`); finish with `appendCRLF()`.
    public mutating func appendFieldName(_ name: HTTPFieldName) {
        append(name.text)
        bytes.append(UInt8(ascii: ":"))
        bytes.append(0x20)
        if name == .host { wroteHost = true }
    }
}
