extension RequestContext {
    /// The most an admin API request body may hold: 1 MiB, whatever `server.max_body_bytes`
    /// (the public endpoints' limit) says — an operator who lowered that for the attestation
    /// routes could no longer store a 4 KiB subscription (an independent sweep of the README's
    /// claims, stop 36). The admin listener is authenticated and local by default.
    static let adminMaxBodyBytes = 1 << 20

    /// Reads a whole request body (up to `limit` bytes) for one of the gateway's own endpoints
    /// and calls `next` with it. A body too large or malformed (chunked framing) goes to
    /// `refuse` with the reason, which the caller answers in its own envelope; a body that
    /// never came whole (the client left, or was too slow) is logged and counted as 499.
    func collectWholeBody(limit: Int, refuse: @escaping (String) -> Void, next: @escaping ([UInt8]) -> Void) {
        request.collectBody(limit: limit) { [self] result in
            switch result {
            case .success(let body): next(body)
            case .failure(.tooLarge): refuse("request body exceeds \(limit) bytes")
            case .failure(.malformed(let why)): refuse("malformed request body: \(why)")
            case .failure(.incomplete): clientLeft()
            }
        }
    }

    /// An admin request's whole body (`adminMaxBodyBytes`), refusals answered 400 `bad_request`.
    func collectAdminBody(_ next: @escaping ([UInt8]) -> Void) {
        collectWholeBody(limit: Self.adminMaxBodyBytes, refuse: { [self] in fail(.badRequest($0)) }, next: next)
    }
}
