internal import CEvent

/// Decodes a message body from an input `evbuffer` into an output `evbuffer`, without copying
/// payload bytes (chunks move between buffers by reference).
struct BodyDecoder {
    enum Result: Equatable {
        /// Some or no bytes moved; more input is needed.
        case needMore
        /// The body is complete; bytes after it stay in the input.
        case done
        case malformed(String)
    }

    private enum State {
        case length(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
        case untilClose
        case done
    }

    private var state: State
    private(set) var bytesDecoded = 0
    /// Trailer bytes read so far (lines with their CRLF): they count towards no body limit, so
    /// they have their own.
    private var trailerBytes = 0
    static let maxLineLength = 4096
    /// The most a chunked body's trailer section may hold, as much as a request head: without
    /// it a client trickling trailer fields above the minimum body rate held a request open for
    /// ever, past every body limit (an independent sweep, stop 36, sent 50 MB of them).
    static let maxTrailerBytes = 16 * 1024

    init(_ framing: BodyFraming) {
        switch framing {
        case .none: state = .done
        case .length(let n): state = .length(remaining: n)
        case .chunked: state = .chunkSize
        case .untilClose: state = .untilClose
        }
    }

    var isDone: Bool {
        if case .done = state { return true }
        return false
    }

    /// True when the body ends only when the peer closes.
    var endsAtClose: Bool {
        if case .untilClose = state { return true }
        return false
    }

    /// Counts `count` body bytes at hand (read, not put into an input) towards a Content-Length
    /// body: how many of them belong to it (the rest follow the body); nil for any other
    /// framing, or a body already decoding, whose bytes go through `decode`.
    mutating func takeLengthBytes(_ count: Int) -> Int? {
        guard case .length(let remaining) = state, bytesDecoded == 0 else { return nil }
        let taken = min(count, remaining)
        bytesDecoded += taken
        state = taken == remaining ? .done : .length(remaining: remaining - taken)
        return taken
    }

    /// Moves decoded body bytes from `input` to `output`, at most `budget` of them.
    mutating func decode(from input: OpaquePointer, into output: OpaquePointer, budget: Int = .max) -> Result {
        var budget = budget
        while true {
            switch state {
            case .done:
                return .done
            case .length(let remaining):
                let left = move(upTo: remaining, from: input, into: output, budget: &budget)
                if left == 0 {
                    state = .done
                    return .done
                }
                state = .length(remaining: left)
                return .needMore
            case .untilClose:
                let available = min(evbuffer_get_length(input), budget)
                if available > 0 {
                    evbuffer_remove_buffer(input, output, available)
                    bytesDecoded += available
                }
                return .needMore
            case .chunkSize:
                let line: [UInt8]
                switch readLine(input) {
                case .line(let found): line = found
                case .bareLineFeed: return .malformed("bare LF in chunked body")
                case .needMore:
                    return evbuffer_get_length(input) > Self.maxLineLength ? .malformed("chunk size line too long") : .needMore
                }
                guard let size = Self.parseChunkSize(line) else { return .malformed("malformed chunk size") }
                state = size == 0 ? .trailers : .chunkData(remaining: size)
            case .chunkData(let remaining):
                let left = move(upTo: remaining, from: input, into: output, budget: &budget)
                if left == 0 {
                    state = .chunkDataEnd
                } else {
                    state = .chunkData(remaining: left)
                    return .needMore
                }
            case .chunkDataEnd:
                // Exactly CRLF: the data's end is known, so any other byte here is an error
                // (a bare LF included), found as soon as it arrives.
                var end: (UInt8, UInt8) = (0, 0)
                let copied = withUnsafeMutableBytes(of: &end) { Int(evbuffer_copyout(input, $0.baseAddress, 2)) }
                if copied >= 1, end.0 != 0x0D { return .malformed("missing CRLF after chunk") }
                guard copied == 2 else { return .needMore }
                guard end.1 == 0x0A else { return .malformed("missing CRLF after chunk") }
                evbuffer_drain(input, 2)
                state = .chunkSize
            case .trailers:
                // Trailer fields are checked as field lines, then dropped: the proxy does not
                // forward them.
                let line: [UInt8]
                switch readLine(input) {
                case .line(let found): line = found
                case .bareLineFeed: return .malformed("bare LF in chunked body")
                case .needMore:
                    return evbuffer_get_length(input) > Self.maxLineLength ? .malformed("trailer line too long") : .needMore
                }
                if line.isEmpty {
                    state = .done
                    return .done
                }
                guard Self.isFieldLine(line) else { return .malformed("malformed trailer field") }
                trailerBytes += line.count + 2
                guard trailerBytes <= Self.maxTrailerBytes else { return .malformed("trailer section over \(Self.maxTrailerBytes) bytes") }
            }
        }
    }

    /// Moves up to `remaining` body bytes (within `budget`); returns how many are still due.
    private mutating func move(upTo remaining: Int, from input: OpaquePointer, into output: OpaquePointer,
                               budget: inout Int) -> Int {
        let available = min(evbuffer_get_length(input), remaining, budget)
        if available > 0 {
            evbuffer_remove_buffer(input, output, available)
            bytesDecoded += available
            budget -= available
        }
        return remaining - available
    }

    private enum Line {
        /// A line without its CRLF, removed from the input.
        case line([UInt8])
        /// No line feed yet within `maxLineLength` bytes and its CR (or the line is longer).
        case needMore
        /// A line feed without a carriage return before it: RFC 9112 section 7.1 ends every
        /// line of the chunked coding with CRLF, as the head's lines (section 2.2 lets a
        /// recipient take a bare LF; the head parser does not, so neither does this).
        case bareLineFeed
    }

    /// The next line of `input`, which must end in CRLF.
    private func readLine(_ input: OpaquePointer) -> Line {
        var eolLength = 0
        let found = evbuffer_search_eol(input, nil, &eolLength, EVBUFFER_EOL_LF)
        guard found.pos >= 0, found.pos <= Self.maxLineLength + 1 else { return .needMore }
        var line = [UInt8](repeating: 0, count: found.pos)
        if found.pos > 0 {
            line.withUnsafeMutableBytes { _ = evbuffer_copyout(input, $0.baseAddress, found.pos) }
        }
        guard line.last == 0x0D else { return .bareLineFeed }
        line.removeLast()
        evbuffer_drain(input, found.pos + eolLength)
        return .line(line)
    }

    /// A trailer line: `field-name ":" OWS field-value OWS`, a token name and value bytes
    /// that are visible, obs-text, space or tab (RFC 9110 section 5.5) — the head's rules.
    static func isFieldLine(_ line: [UInt8]) -> Bool {
        var index = 0
        while index < line.count, HTTPHeadParser.isTokenByte(line[index]) { index += 1 }
        guard index > 0, index < line.count, line[index] == UInt8(ascii: ":") else { return false }
        return line[(index + 1)...].allSatisfy(HTTPHeadParser.isFieldValueByte)
    }

    /// A chunk-size line: hex digits, then only chunk extensions (RFC 9112 section 7.1.1:
    /// `*( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] )`) and trailing
    /// whitespace. Anything else after the size is junk and refused, never skipped.
    static func parseChunkSize(_ line: [UInt8]) -> Int? {
        var size = 0
        var index = 0
        // Significant digits, at most 15 (below 2^60, no overflow); leading zeros are any number
        // (RFC 9112 section 7.1: `1*HEXDIG`; nginx and HAProxy take them too).
        var significant = 0
        while index < line.count, let value = hexValue(line[index]) {
            if size > 0 || value > 0 { significant += 1 }
            guard significant <= 15 else { return nil }
            size = size * 16 + value
            index += 1
        }
        guard index > 0, validExtensions(line, from: index) else { return nil }
        return size
    }

    private static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): Int(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): Int(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    private static func validExtensions(_ line: [UInt8], from start: Int) -> Bool {
        var index = start
        func skipWhitespace() { while index < line.count, line[index] == 0x20 || line[index] == 0x09 { index += 1 } }
        func token() -> Bool {
            let first = index
            while index < line.count, HTTPHeadParser.isTokenByte(line[index]) { index += 1 }
            return index > first
        }
        func quotedString() -> Bool {
            guard index < line.count, line[index] == UInt8(ascii: "\"") else { return false }
            index += 1
            while index < line.count {
                let byte = line[index]
                if byte == UInt8(ascii: "\"") { index += 1; return true }
                if byte == UInt8(ascii: "\\") {
                    index += 1
                    guard index < line.count, HTTPHeadParser.isFieldValueByte(line[index]) else { return false }
                } else if !HTTPHeadParser.isFieldValueByte(byte) {
                    return false
                }
                index += 1
            }
            return false
        }
        while true {
            skipWhitespace()
            guard index < line.count else { return true }
            guard line[index] == UInt8(ascii: ";") else { return false }
            index += 1
            skipWhitespace()
            guard token() else { return false }
            skipWhitespace()
            if index < line.count, line[index] == UInt8(ascii: "=") {
                index += 1
                skipWhitespace()
                guard token() || quotedString() else { return false }
            }
        }
    }
}

/// Encodes chunked transfer coding onto an output buffer.
enum ChunkedEncoder {
    static func writeChunk(from body: OpaquePointer, to output: OpaquePointer) {
        let length = evbuffer_get_length(body)
        guard length > 0 else { return }
        let sizeLine = String(length, radix: 16) + "\r\n"
        evbuffer_add_string(output, sizeLine)
        evbuffer_add_buffer(output, body)
        evbuffer_add_string(output, "\r\n")
    }

    static func writeEnd(to output: OpaquePointer) {
        evbuffer_add_string(output, "0\r\n\r\n")
    }
}

@inline(__always)
func evbuffer_add_string(_ buffer: OpaquePointer, _ string: String) {
    var string = string
    string.withUTF8 { _ = evbuffer_add(buffer, $0.baseAddress, $0.count) }
}
