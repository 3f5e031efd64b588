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

    func collectBody(limit: Int, _ completion: @escaping (Result<[UInt8], HTTPBodyError>) -> Void) {
        completion(body.count > limit ? .failure(.tooLarge) : .success(body))
    }

    func respond(status: Int, headers: HTTPHeaders, body: [UInt8]) {
        precondition(response == nil, "answered twice")
        response = (status, headers, body)
    }
}
