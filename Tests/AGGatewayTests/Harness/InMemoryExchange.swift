import AGHTTP

@testable import AGGateway

/// A request handed to a router in process, and the answer it got: no socket, no loop.
final class InMemoryExchange: ServerExchange {
    let method: String
    let target: String
    /// Parsed from the given pairs as a real head would be (`HTTPFields(parsing:)`).
    let headers: HTTPFields
    let remoteAddress: String
    let startedAt = ContinuousClock.now
    private let body: [UInt8]
    private(set) var response: (status: Int, headers: HTTPHeaders, body: [UInt8])?

    init(_ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8] = [],
         remoteAddress: String = "198.51.100.7") {
        self.method = method
        self.target = target
        let section = headers.map { "\($0.0): \($0.1)\r\n" }.joined() + "\r\n"
        self.headers = try! HTTPFields(parsing: Array(section.utf8))
        self.body = body
        self.remoteAddress = remoteAddress
    }

    var path: Substring { target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0] }
    /// An in-memory client never leaves.
    var isFinished: Bool { false }

    func collectBody(limit: Int, _ completion: @escaping (Result<[UInt8], HTTPBodyError>) -> Void) {
        completion(body.count > limit ? .failure(.tooLarge) : .success(body))
    }

    /// Keeps the fields as a client would read them: the written bytes parsed as a head's.
    func respond(status: Int, body: [UInt8], fields: (inout HTTPHeadWriter) -> Void) {
        precondition(response == nil, "answered twice")
        var writer = HTTPHeadWriter()
        fields(&writer)
        let parsed = try! HTTPFields(parsing: writer.bytes + Array("\r\n".utf8))
        var headers = HTTPHeaders()
        for (name, value) in parsed.fields { headers.add(name, value) }
        response = (status, headers, body)
    }
}
