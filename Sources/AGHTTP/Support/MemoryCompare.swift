#if canImport(Glibc)
import Glibc
#endif

/// Whether `storage[range]` and `other` hold the same bytes: libc's `memcmp` over the two
/// arrays' buffers (vectorized; a Swift loop over two spans pays a bounds check per word). The
/// range is checked against `storage` first; nothing outside the two arrays is read.
func bytesEqual(_ storage: [UInt8], _ range: Range<Int>, _ other: [UInt8]) -> Bool {
    guard range.count == other.count, range.lowerBound >= 0, range.upperBound <= storage.count else { return false }
    guard !other.isEmpty else { return true }
    return storage.withUnsafeBufferPointer { mine in
        other.withUnsafeBufferPointer { theirs in
            memcmp(mine.baseAddress! + range.lowerBound, theirs.baseAddress!, other.count) == 0
        }
    }
}

extension HTTPFields {
    /// Whether the field bytes `storage[range]` equal `other[offset..<offset + range.count]`:
    /// `memcmp`, both ranges checked first (false when either is out of bounds).
    public func bytes(in range: Range<Int>, equal other: [UInt8], at offset: Int) -> Bool {
        guard range.lowerBound >= 0, range.upperBound <= storage.count,
              offset >= 0, offset + range.count <= other.count else { return false }
        guard !range.isEmpty else { return true }
        return storage.withUnsafeBufferPointer { mine in
            other.withUnsafeBufferPointer { theirs in
                memcmp(mine.baseAddress! + range.lowerBound, theirs.baseAddress! + offset, range.count) == 0
            }
        }
    }
}
