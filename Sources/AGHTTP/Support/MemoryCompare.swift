#if canImport(Glibc)
import Glibc
#endif

/// Whether `storage[range]` and `other[offset..<offset + range.count]` hold the same bytes:
/// libc's `memcmp` over the two arrays' buffers (vectorized; a Swift loop over two spans pays a
/// bounds check per word). Both ranges are checked first (false when either is out of bounds);
/// nothing outside the two arrays is read.
func bytesEqual(_ storage: [UInt8], _ range: Range<Int>, _ other: [UInt8], at offset: Int = 0) -> Bool {
    guard range.lowerBound >= 0, range.upperBound <= storage.count,
          offset >= 0, offset + range.count <= other.count else { return false }
    guard !range.isEmpty else { return true }
    return storage.withUnsafeBufferPointer { mine in
        other.withUnsafeBufferPointer { theirs in
            memcmp(mine.baseAddress! + range.lowerBound, theirs.baseAddress! + offset, range.count) == 0
        }
    }
}
