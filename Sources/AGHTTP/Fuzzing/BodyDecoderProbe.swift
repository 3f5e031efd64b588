internal import CEvent

/// The body decoder on real `evbuffer`s, for the fuzz targets (`AGFuzzTargets`): it reads
/// attacker-controlled bytes as they arrive, in pieces of any size.
package enum BodyDecoderProbe {
    /// What decoding a whole input produced.
    package struct Outcome: Equatable {
        package let body: [UInt8]
        /// `done`, `needMore` or `malformed`.
        package let verdict: String
        /// Input bytes left after the body (the next pipelined request's).
        package let leftover: Int
    }

    /// Decodes a chunked body from `input`, fed in pieces of `pieceSizes` (cycled; 0 is read as 1).
    package static func chunked(_ input: [UInt8], pieceSizes: [Int]) -> Outcome {
        guard let source = evbuffer_new(), let output = evbuffer_new() else { return Outcome(body: [], verdict: "no buffers", leftover: 0) }
        defer {
            evbuffer_free(source)
            evbuffer_free(output)
        }
        var decoder = BodyDecoder(.chunked)
        var offset = 0
        var piece = 0
        var verdict = "needMore"
        repeat {
            let size = pieceSizes.isEmpty ? input.count : max(1, pieceSizes[piece % pieceSizes.count])
            piece += 1
            let end = min(input.count, offset + size)
            if end > offset { input[offset..<end].withUnsafeBytes { _ = evbuffer_add(source, $0.baseAddress, $0.count) } }
            offset = end
            switch decoder.decode(from: source, into: output) {
            case .needMore: verdict = "needMore"
            case .done: verdict = "done"
            case .malformed: verdict = "malformed"
            }
        } while offset < input.count && verdict == "needMore"
        var body = [UInt8](repeating: 0, count: evbuffer_get_length(output))
        if !body.isEmpty { body.withUnsafeMutableBytes { _ = evbuffer_remove(output, $0.baseAddress, $0.count) } }
        return Outcome(body: body, verdict: verdict, leftover: verdict == "done" ? input.count - offset + evbuffer_get_length(source) : 0)
    }
}
