/// Reason phrases (RFC 9110 section 15), written for the gateway's own answers and for an
/// upstream's whose phrase is not clean.
public enum HTTPStatus {
    public static func reason(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 101: "Switching Protocols"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 203: "Non-Authoritative Information"
        case 204: "No Content"
        case 205: "Reset Content"
        case 206: "Partial Content"
        case 300: "Multiple Choices"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 402: "Payment Required"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 406: "Not Acceptable"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 411: "Length Required"
        case 412: "Precondition Failed"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 415: "Unsupported Media Type"
        case 416: "Range Not Satisfiable"
        case 417: "Expectation Failed"
        case 421: "Misdirected Request"
        case 422: "Unprocessable Content"
        case 426: "Upgrade Required"
        case 428: "Precondition Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Unknown"
        }
    }
}

/// A reply the HTTP layer makes on its own: a head it refused, or a head that did not arrive in
/// time. The server hands it to its owner's local-reply handler, so it carries the owner's
/// envelope, request id and access-log line like every other answer (Envoy's `local_reply`).
public struct HTTPLocalError: Error, Sendable, Equatable {
    public let status: Int
    /// Stable machine-readable code for the error envelope.
    public let code: String
    public let message: String

    public init(status: Int, code: String, message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    public init(_ error: HTTPParseError) {
        switch error {
        case .headTooLarge: self.init(status: 431, code: "header_too_large", message: error.message)
        case .requestLineTooLong: self.init(status: 414, code: "uri_too_long", message: error.message)
        case .malformed: self.init(status: 400, code: "bad_request", message: error.message)
        case .unsupportedTransferEncoding, .unsupportedMethod: self.init(status: 501, code: "not_implemented", message: error.message)
        case .unsupportedVersion: self.init(status: 505, code: "http_version_not_supported", message: error.message)
        }
    }

    /// The head did not arrive within the head deadline (`timeouts.header`).
    public static let headTimeout = HTTPLocalError(status: 408, code: "request_timeout",
                                                   message: "the request head did not arrive in time")

    /// The reply when the server's owner installed no handler: the same envelope, with a fresh
    /// random request id.
    func respondByDefault(_ request: HTTPServerRequest) {
        var id = ""
        var generator = SystemRandomNumberGenerator()
        for index in 0..<16 {
            let byte = UInt8.random(in: 0...255, using: &generator)
            if index == 4 || index == 6 || index == 8 || index == 10 { id += "-" }
            id += String(byte >> 4, radix: 16) + String(byte & 0xF, radix: 16)
        }
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        headers.add("X-Request-ID", id)
        let body = "{\"error\":\"\(message)\",\"code\":\"\(code)\",\"requestId\":\"\(id)\"}"
        request.respond(status: status, headers: headers, body: Array(body.utf8))
    }
}
