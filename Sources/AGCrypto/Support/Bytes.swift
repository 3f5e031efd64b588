/// Lends `bytes` to C as a pointer that is never NULL, even for an empty array: several
/// OpenSSL entry points treat a NULL buffer as an error even when the length is zero.
@inline(__always)
package func withCBytes<R>(_ bytes: [UInt8], _ body: (UnsafePointer<UInt8>, Int) throws -> R) rethrows -> R {
    try bytes.withUnsafeBufferPointer { buffer in
        if let base = buffer.baseAddress {
            return try body(base, buffer.count)
        }
        var placeholder: UInt8 = 0
        return try withUnsafePointer(to: &placeholder) { try body($0, 0) }
    }
}

/// Same as `withCBytes(_:_:)` for any contiguous collection of bytes, copying only when the
/// sequence has no contiguous storage.
@inline(__always)
package func withCBytes<D: Sequence, R>(_ data: D, _ body: (UnsafePointer<UInt8>, Int) throws -> R) rethrows -> R
where D.Element == UInt8 {
    if let result = try data.withContiguousStorageIfAvailable({ buffer -> R in
        if let base = buffer.baseAddress {
            return try body(base, buffer.count)
        }
        var placeholder: UInt8 = 0
        return try withUnsafePointer(to: &placeholder) { try body($0, 0) }
    }) {
        return result
    }
    return try withCBytes(Array(data), body)
}
