import AGFormats
import AGHTTP
import AGPolicy

/// One request as it travels the pipeline: the snapshot it started with, its id, its tenant,
/// the services it may use, and the headers every answer must carry.
final class RequestContext {
    let request: any ServerExchange
    let requestID: RequestIdentifier
    let snapshot: GatewaySnapshot
    let services: RouteServices
    var tenant: Tenant?
    /// Route label for metrics and the access log (`challenge`, `refresh`, `proxy`, …).
    var route = "none"
    /// Headers added to whatever answer goes out (`client-request-id` of Platform SSO).
    var extraHeaders = HTTPHeaders()
    /// The rate-limit decision whose `X-RateLimit-*` headers go on whatever answer goes out.
    var rateLimitDecision: TokenBucket.Decision?
    /// Time spent waiting for the upstream, for the access log.
    var upstreamSeconds: Double?
    /// The upstream a proxied request went to, for the log of its failure.
    var upstreamTarget: UpstreamTarget?
    /// The stable code of the error answered, for metrics and the access log.
    var errorCode: String?
    private var answered = false

    init(request: any ServerExchange, services: RouteServices) {
        self.request = request
        self.services = services
        self.snapshot = services.snapshots.snapshot
        self.requestID = services.requestIDs.resolve(request.headers[.xRequestID])
    }

    /// Answers with a JSON body.
    func respond(status: Int, json: String, headers: HTTPHeaders = HTTPHeaders()) {
        respond(status: status, body: Array(json.utf8), contentType: "application/json", headers: headers)
    }

    /// Answers with the object `json` wrote, without a detour through `String`.
    func respond(status: Int, json: JSONObjectWriter, headers: HTTPHeaders = HTTPHeaders()) {
        respond(status: status, body: json.finishedBytes(), contentType: "application/json", headers: headers)
    }

    func respond(status: Int, body: [UInt8], contentType: String, headers: HTTPHeaders = HTTPHeaders()) {
        guard !answered else { return }
        // The connection closed while the handler worked (a Redis round trip): nothing can be
        // written, so the access log must not say it was (an independent sweep, stop 36, saw
        // 200 logged for a challenge whose client had half-closed with its body unread).
        guard !request.isFinished else { return clientLeft() }
        answered = true
        let cacheControlGiven = headers["Cache-Control"] != nil
        request.respond(status: status, body: body) { [requestID, rateLimitDecision, extraHeaders] writer in
            for field in headers.fields { writer.appendField(field.name, field.value) }
            writer.appendField("Content-Type", contentType)
            writer.append("X-Request-ID: " as StaticString)
            requestID.write(to: &writer)
            writer.appendCRLF()
            if !cacheControlGiven { writer.append("Cache-Control: no-store\r\n" as StaticString) }
            if let rateLimitDecision { RateLimitOutcome.appendHeaders(rateLimitDecision, to: &writer) }
            for field in extraHeaders.fields { writer.appendField(field.name, field.value) }
        }
        finished(status: status)
    }

    /// Answers with the error envelope.
    func fail(_ error: GatewayError) {
        errorCode = error.code
        var headers = HTTPHeaders()
        for (name, value) in error.headers { headers.add(name, value) }
        respond(status: error.status, body: error.body(requestID: requestID.description), contentType: "application/json", headers: headers)
    }

    /// Answers 503 `store_unavailable` for a store failure, and logs it.
    func storeFailed(_ failure: any Error) {
        services.metrics.increment(MetricsRegistry.redisErrors)
        services.logger.logRepeated(.warn, "state store failed", key: "state store failed/" + route,
                                    [("route", .string(route)), ("error", .string(String(describing: failure)))])
        fail(.storeUnavailable)
    }

    /// A request whose body never came whole (the client left, or sent it too slowly and was
    /// cut off): nobody can be answered, but it is counted and logged like a proxied request
    /// whose client left — status 499, as nginx logs it (an independent sweep, stop 36, found
    /// such requests on the gateway's own endpoints in neither the access log nor the metrics).
    func clientLeft() {
        finished(status: 499)
    }

    /// Records metrics and the access log line once the answer is out (also for proxied answers).
    func finished(status: Int) {
        answered = true
        let seconds = (ContinuousClock.now - request.startedAt).seconds
        let tenantLabel = tenant?.appID ?? ""
        services.metrics.recordRequest(tenant: tenantLabel, route: route, status: status, code: errorCode, seconds: seconds)
        guard snapshot.gateway.log.accessLog else { return }
        // Milliseconds with microsecond precision, spelled as the Double they round to.
        services.accessLog.appendAccess(AccessLine(
            unixMilliseconds: services.time.nowMilliseconds, requestID: requestID, method: request.method, path: request.path,
            tenant: tenantLabel, route: route, status: status, code: errorCode,
            durationMicroseconds: Int((seconds * 1_000_000).rounded()),
            upstreamMicroseconds: upstreamSeconds.map { Int(($0 * 1_000_000).rounded()) }, client: loggedClient))
    }

    /// The access log's client: the address the per-IP buckets use (`clientIP`), the socket
    /// peer as it is unless the peer is a trusted proxy (no address parsed per request when
    /// none is configured).
    private var loggedClient: String {
        guard snapshot.config.gateway.server.trusts(peer: request.remoteAddress) else { return request.remoteAddress }
        // Spelt as its per-IP buckets are keyed (`BucketCheck`): an IPv4-mapped entry as IPv4.
        return clientIP.unmappingIPv4.description
    }
}

extension Duration {
    /// The duration as fractional seconds, from its attoseconds' two 64-bit halves: without
    /// `components`' 128-bit divisions (~190 instructions, twice per proxied request), and
    /// without `Double(Int128)`, which goes through the generic conversion (~550).
    var seconds: Double {
        let attoseconds = attoseconds
        let high = Double(Int64(truncatingIfNeeded: attoseconds >> 64))
        let low = Double(UInt64(truncatingIfNeeded: attoseconds))
        return (high * 18_446_744_073_709_551_616 + low) / 1e18
    }
}
