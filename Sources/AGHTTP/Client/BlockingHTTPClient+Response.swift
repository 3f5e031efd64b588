#if canImport(Glibc)
import Glibc
#endif

/// Reading a response: head, then a body framed by `Content-Length`, chunked coding or the
/// connection's end (RFC 9112 section 6.3).
extension BlockingHTTPClient {
    func readResponse(from connection: TCPConnection, method: String,
                      deadline: ContinuousClock.Instant) throws(HTTPClientError) -> (HTTPClientResponse, Bool) {
        while true {
            let head = try readHead(from: connection, deadline: deadline)
            // Interim responses (100 Continue, 103 Early Hints) precede the real one.
            if (100..<200).contains(head.status) && head.status != 101 { continue }
            let response: HTTPClientResponse
            if method == "HEAD" || (100..<200).contains(head.status) || head.status == 204 || head.status == 304 {
                response = HTTPClientResponse(status: head.status, headers: head.headers, body: [])
            } else if let codings = head.transferEncoding {
                guard codings.last == "chunked" else {
                    // Not chunked last: the body runs to the end of the connection (RFC 9112 §6.3).
                    let body = try readToEnd(from: connection, deadline: deadline)
                    return (HTTPClientResponse(status: head.status, headers: head.headers, body: body), false)
                }
                let body = try readChunkedBody(from: connection, deadline: deadline)
                response = HTTPClientResponse(status: head.status, headers: head.headers, body: body)
            } else if let length = head.contentLength {
                guard length <= maximumResponseBytes else { throw .responseTooLarge(limit: maximumResponseBytes) }
                try fill(length, from: connection, deadline: deadline)
                let body = Array(buffer[readOffset..<(readOffset + length)])
                readOffset += length
                response = HTTPClientResponse(status: head.status, headers: head.headers, body: body)
            } else {
                let body = try readToEnd(from: connection, deadline: deadline)
                return (HTTPClientResponse(status: head.status, headers: head.headers, body: body), false)
            }
            return (response, head.keepAlive)
        }
    }

    private struct Head {
        var status: Int
        var headers: [(name: String, value: String)]
        var keepAlive: Bool
        var contentLength: Int?
        var transferEncoding: [String]?
    }

    private static let crlf: [UInt8] = [0x0D, 0x0A]
    private static let headTerminator: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A]

    private func readHead(from connection: TCPConnection, deadline: ContinuousClock.Instant) throws(HTTPClientError) -> Head {
        let end = try readUntil(Self.headTerminator, limit: min(maximumResponseBytes, 64 * 1024),
                                from: connection, deadline: deadline)
        let text = String(decoding: buffer[readOffset..<end], as: UTF8.self)
        readOffset = end + Self.headTerminator.count
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)[...]
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[0].count == 8,
              parts[1].count == 3, parts[1].allSatisfy({ $0.isASCII && $0.isNumber }), let status = Int(parts[1]) else {
            throw .malformedResponse("status line \(statusLine.prefix(80))")
        }
        var head = Head(status: status, headers: [], keepAlive: parts[0] == "HTTP/1.1")
        for line in lines {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex,
                  !line.first!.isWhitespace else {
                throw .malformedResponse("header line \(line.prefix(80))")
            }
            let name = String(line[..<colon])
            let value = String(line[line.index(after: colon)...].trimmingSpacesAndTabs())
            head.headers.append((name, value))
            switch name.lowercased() {
            case "content-length":
                guard !value.isEmpty, value.allSatisfy({ $0.isASCII && $0.isNumber }), let length = Int(value),
                      head.contentLength == nil || head.contentLength == length else {
                    throw .malformedResponse("Content-Length \(value)")
                }
                head.contentLength = length
            case "transfer-encoding":
                let codings = value.lowercased().split(separator: ",").map { String($0.trimmingSpacesAndTabs()) }
                head.transferEncoding = (head.transferEncoding ?? []) + codings
            case "connection":
                let options = value.lowercased().split(separator: ",").map { $0.trimmingSpacesAndTabs() }
                if options.contains("close") { head.keepAlive = false }
                if options.contains("keep-alive") && parts[0] == "HTTP/1.0" { head.keepAlive = true }
            default:
                break
            }
        }
        return head
    }

    private func readChunkedBody(from connection: TCPConnection, deadline: ContinuousClock.Instant) throws(HTTPClientError) -> [UInt8] {
        var body = [UInt8]()
        while true {
            let lineEnd = try readUntil(Self.crlf, limit: 1024, from: connection, deadline: deadline)
            let line = String(decoding: buffer[readOffset..<lineEnd], as: UTF8.self)
            readOffset = lineEnd + 2
            let sizeText = line.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0]
                .trimmingSpacesAndTabs()
            guard !sizeText.isEmpty, sizeText.count <= 15, sizeText.allSatisfy(\.isHexDigit),
                  let size = Int(sizeText, radix: 16) else {
                throw .malformedResponse("chunk size \(line.prefix(40))")
            }
            if size == 0 { break }
            guard body.count + size <= maximumResponseBytes else { throw .responseTooLarge(limit: maximumResponseBytes) }
            try fill(size + 2, from: connection, deadline: deadline)
            body.append(contentsOf: buffer[readOffset..<(readOffset + size)])
            guard buffer[readOffset + size] == 0x0D, buffer[readOffset + size + 1] == 0x0A else {
                throw .malformedResponse("chunk not followed by CRLF")
            }
            readOffset += size + 2
        }
        // Trailer fields, ignored, up to the empty line.
        while true {
            let lineEnd = try readUntil(Self.crlf, limit: 8 * 1024, from: connection, deadline: deadline)
            let empty = lineEnd == readOffset
            readOffset = lineEnd + 2
            if empty { return body }
        }
    }

    private func readToEnd(from connection: TCPConnection, deadline: ContinuousClock.Instant) throws(HTTPClientError) -> [UInt8] {
        while try connection.receive(into: &buffer, deadline: deadline) > 0 {
            guard buffer.count - readOffset <= maximumResponseBytes else {
                throw .responseTooLarge(limit: maximumResponseBytes)
            }
        }
        defer { readOffset = buffer.count }
        return Array(buffer[readOffset...])
    }

    /// Reads until `count` unread bytes are buffered.
    private func fill(_ count: Int, from connection: TCPConnection, deadline: ContinuousClock.Instant) throws(HTTPClientError) {
        while buffer.count - readOffset < count {
            guard try connection.receive(into: &buffer, deadline: deadline) > 0 else { throw .connectionClosed }
        }
    }

    /// Reads until `marker` appears among the unread bytes within `limit` bytes; returns its index.
    private func readUntil(_ marker: [UInt8], limit: Int, from connection: TCPConnection,
                           deadline: ContinuousClock.Instant) throws(HTTPClientError) -> Int {
        var searchFrom = readOffset
        while true {
            if buffer.count - searchFrom >= marker.count {
                var index = searchFrom
                while index <= buffer.count - marker.count {
                    if buffer[index] == marker[0] && buffer[index..<(index + marker.count)].elementsEqual(marker) {
                        return index
                    }
                    index += 1
                }
                searchFrom = buffer.count - marker.count + 1
            }
            guard buffer.count - readOffset <= limit else { throw .responseTooLarge(limit: limit) }
            guard try connection.receive(into: &buffer, deadline: deadline) > 0 else { throw .connectionClosed }
        }
    }
}
