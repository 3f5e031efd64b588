import AGHTTP
import Foundation

/// A response as tests read it: status, headers in order, body, and the JSON helpers.
public struct TestResponse: Sendable {
    public let status: Int
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]

    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    public func headerValues(_ name: String) -> [String] {
        headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
    }

    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The body as a JSON object (empty when it is not one).
    public var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }

    public var code: String? { json["code"] as? String }
}

/// The tests' HTTP client: AGHTTP's `BlockingHTTPClient` (the one the device client uses) on one
/// kept-alive connection to 127.0.0.1, plus raw writes for malformed and smuggling requests.
public final class HTTPTestClient {
    private let client: BlockingHTTPClient

    public init(port: Int, host: String = "127.0.0.1", timeoutSeconds: Int = 10) throws {
        client = try BlockingHTTPClient(url: "http://\(host):\(port)", timeout: .seconds(timeoutSeconds))
        // Streaming tests download bodies far larger than a device ever would.
        client.maximumResponseBytes = 1 << 30
    }

    /// Sends raw bytes as they are; `readResponse` reads the answer.
    public func write(_ bytes: [UInt8]) throws { try client.send(raw: bytes) }

    public func write(_ text: String) throws { try write(Array(text.utf8)) }

    /// Sends a request (the client adds `Host`, `Content-Length` and `User-Agent`) and reads its response.
    public func request(_ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8]? = nil) throws -> TestResponse {
        TestResponse(try client.request(method: method, path: target, headers: headers.map { (name: $0.0, value: $0.1) }, body: body))
    }

    /// Reads one response on the connection (after `write`).
    public func readResponse(method: String = "GET") throws -> TestResponse {
        TestResponse(try client.readResponse(method: method))
    }
}

extension TestResponse {
    init(_ response: HTTPClientResponse) {
        self.init(status: response.status, headers: response.headers, body: response.body)
    }
}

extension HTTPTestClient {
    /// One request on a fresh connection.
    public static func send(port: Int, _ method: String, _ target: String, headers: [(String, String)] = [],
                            body: [UInt8]? = nil) throws -> TestResponse {
        try HTTPTestClient(port: port).request(method, target, headers: headers, body: body)
    }

    public static func send(port: Int, _ method: String, _ target: String, headers: [(String, String)] = [],
                            json: String) throws -> TestResponse {
        try HTTPTestClient(port: port).request(method, target, headers: headers + [("Content-Type", "application/json")],
                                               body: Array(json.utf8))
    }
}
