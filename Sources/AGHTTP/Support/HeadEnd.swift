internal import CEvent
#if canImport(Glibc)
import Glibc
#endif

/// Where the message head at the front of `buffer` ends: the offset just past its blank line
/// (`\r\n\r\n`), if that lies within the first `limit` bytes; nil when it does not (yet).
///
/// A head nearly always sits whole in the buffer's first chain, where `memchr` finds its end
/// without a copy (a hop per line, each `\r` checked for the `\n\r\n` behind it); libevent's
/// `evbuffer_search` (which walks chains through its own position arithmetic, ~700
/// instructions for a 700-byte head) is left for a head that spans chains. Nothing beyond the
/// first chain is made contiguous, so a large body behind the head is never moved for the
/// search. (`HTTPHeadParser.boundary` finds the same end byte by byte on a copied head and
/// tells a bare LF apart; the connection asks it only when this finds nothing.)
func headEnd(in buffer: OpaquePointer, limit: Int) -> Int? {
    let wanted = min(evbuffer_get_length(buffer), limit)
    guard wanted >= 4 else { return nil }
    let contiguous = min(evbuffer_get_contiguous_space(buffer), wanted)
    if contiguous >= 4, let start = evbuffer_pullup(buffer, contiguous) {
        if let end = blankLineEnd(UnsafeRawPointer(start), count: contiguous) { return end }
        // The terminator can still straddle the end of the chain (or lie in the next one).
        if contiguous == wanted { return nil }
    }
    let found = "\r\n\r\n".withCString { evbuffer_search(buffer, $0, 4, nil) }
    guard found.pos >= 0, found.pos + 4 <= limit else { return nil }
    return found.pos + 4
}

/// The offset just past the first `\r\n\r\n` in `count` bytes at `start`.
func blankLineEnd(_ start: UnsafeRawPointer, count: Int) -> Int? {
    var offset = 0
    while offset + 4 <= count {
        guard let hit = memchr(start + offset, 0x0D, count - 3 - offset) else { return nil }
        let at = UnsafeRawPointer(hit) - start
        if start.load(fromByteOffset: at + 1, as: UInt8.self) == 0x0A,
           start.load(fromByteOffset: at + 2, as: UInt8.self) == 0x0D,
           start.load(fromByteOffset: at + 3, as: UInt8.self) == 0x0A {
            return at + 4
        }
        offset = at + 1
    }
    return nil
}
