import CEvent
import Testing
@testable import AGHTTP

/// `headEnd` against a plain search of the same bytes, on random heads cut into chains at
/// random places (so the blank line may straddle chains or lie beyond the first one), with
/// limits below, at and above where it ends.
@Suite struct HeadEndTests {
    static func reference(_ bytes: [UInt8], limit: Int) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for start in 0...(bytes.count - 4) where bytes[start..<(start + 4)].elementsEqual([13, 10, 13, 10]) {
            return start + 4 <= limit ? start + 4 : nil
        }
        return nil
    }

    @Test func findsWhatAPlainSearchFindsAcrossChains() {
        let pieces: [[UInt8]] = [Array("GET / HTTP/1.1".utf8), [13, 10], [13], [10], Array("X: y".utf8), [13, 10, 13, 10],
                                 Array("body".utf8), [13, 13, 10], [10, 13]]
        var found = 0
        for _ in 0..<5_000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int.random(in: 0...8) { bytes += pieces.randomElement()! }
            let buffer = evbuffer_new()!
            defer { evbuffer_free(buffer) }
            // Separate chains: each cut is added as a reference to its own storage.
            var cuts = (0..<Int.random(in: 0...3)).map { _ in Int.random(in: 0...bytes.count) }.sorted()
            cuts.append(bytes.count)
            var from = 0
            var kept: [UnsafeMutableRawPointer] = []
            for cut in cuts where cut > from {
                let piece = UnsafeMutableRawPointer.allocate(byteCount: cut - from, alignment: 1)
                bytes[from..<cut].withUnsafeBytes { piece.copyMemory(from: $0.baseAddress!, byteCount: cut - from) }
                kept.append(piece)
                evbuffer_add_reference(buffer, piece, cut - from, nil, nil)
                from = cut
            }
            let limit = Int.random(in: 0...(bytes.count + 4))
            let expected = Self.reference(bytes, limit: limit)
            #expect(headEnd(in: buffer, limit: limit) == expected, "\(bytes) limit \(limit) cuts \(cuts)")
            if expected != nil { found += 1 }
            // The buffer still holds the same bytes, in order.
            var out = [UInt8](repeating: 0, count: bytes.count)
            out.withUnsafeMutableBytes { _ = evbuffer_copyout(buffer, $0.baseAddress, bytes.count) }
            #expect(out == bytes)
            evbuffer_drain(buffer, bytes.count)
            for piece in kept { piece.deallocate() }
        }
        #expect(found > 500, "heads are found often enough to test both outcomes")
    }
}
