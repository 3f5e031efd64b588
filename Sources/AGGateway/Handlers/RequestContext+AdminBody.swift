extension RequestContext {
    /// The most an admin API request body may hold: 1 MiB, whatever `server.max_body_bytes`
    /// (the public endpoints' limit) says — an operator who lowered that for the attestation
    /// routes could no longer store a 4 KiB subscription (an independent sweep of the README's
    /// claims, stop 36). The admin listener is authenticated and local by default.
    static let adminMaxBodyBytes = 1 << 20

    /// Reads an admin request's whole body and calls `next` with it; answers 400 `bad_request`
    /// itself, naming the limit, when the body is too large or malformed (chunked framing).
    func collectAdminBody(_ next: @escaping ([UInt8]) -> Void) {
        let limit = Self.adminMaxBodyBytes
        request.collectBody(limit: limit) { [self] result in
            switch result {
            case .success(let body): next(body)
            case .failure(.tooLarge): fail(.badRequest("request body exceeds \(limit) bytes"))
            case .failure(.malformed(let why)): fail(.badRequest("malformed request body: \(why)"))
            case .failure(.incomplete): clientLeft()
            }
        }
    }
}
