import AGConfig
import AGHTTP

/// Step 4 of the proxy on a real connection: headers rebuilt (anti-spoofing, claims,
/// `X-Forwarded-*`), request and response streamed through the worker's `UpstreamPool`,
/// upstream failures answered with the contract's errors. Loop thread only.
final class UpstreamForwarder: Forwarder {
    let upstreams: UpstreamPool

    init(upstreams: UpstreamPool) {
        self.upstreams = upstreams
    }

    func forward(_ context: RequestContext, tenant: Tenant, proxy: TenantProxy, injected: InjectedHeaders) {
        guard let request = context.request as? HTTPServerRequest else {
            preconditionFailure("the upstream forwarder serves connections only")
        }
        // Settings are read in place through the snapshot (a class): binding `server` to a
        // local copied the whole `ServerConfig` per request, retaining its strings and arrays,
        // and so did reading through the computed `snapshot.gateway`. The context is the
        // exchange's owner (below): it writes the response fields and hears the outcome, from
        // what it holds (`tenant`, set by the proxy handler's dispatch; `upstreamTarget`, set
        // here). Two closures capturing it cost a context object per request.
        let snapshot = context.snapshot
        upstreams.maxIdlePerTarget = snapshot.config.gateway.proxy.upstreamKeepalive
        var hop = ClientHop(peerAddress: request.remoteAddress,
                            peerTrusted: snapshot.config.gateway.server.trusts(peer: request.remoteAddress),
                            requestID: context.requestID)
        if request.isSecure { hop.scheme = "https" }
        hop.targetAuthority = request.head.authorityRange
        let policy = proxy.headers
        context.upstreamTarget = proxy.target
        upstreams.forward(request, to: proxy.target,
                          timeouts: UpstreamTimeouts(connect: snapshot.config.gateway.server.timeouts.upstreamConnect,
                                                     response: snapshot.config.gateway.server.timeouts.upstreamResponse),
                          maxBodyBytes: snapshot.config.gateway.server.maxProxyBodyBytes,
                          writeFields: { ForwardHeaders.request(request.headers, policy: policy, hop: hop, injected: injected, into: &$0) },
                          owner: context)
    }

    /// How the exchange ended, recorded (and answered when nothing reached the client).
    fileprivate static func finished(_ context: RequestContext, _ outcome: UpstreamOutcome) {
        switch outcome {
        case .completed(let status, let upstreamTime, _):
            context.upstreamSeconds = upstreamTime.seconds
            context.finished(status: status)
        case .interrupted(let error, let status, let upstreamTime, _):
            context.upstreamSeconds = upstreamTime.seconds
            if error != .clientAborted { report(error, context) }
            context.finished(status: status)
        case .failed(.clientAborted):
            context.finished(status: UpstreamError.clientAborted.status)
        case .failed(let error):
            report(error, context)
            context.fail(Self.answer(for: error, limit: context.snapshot.config.gateway.server.maxProxyBodyBytes))
        }
    }

    /// Counts and logs a failure of the upstream. The client's own mistakes (a body too large
    /// or malformed, a client gone mid-body) are neither: the request's status and access-log
    /// line tell them, and an alert on upstream errors must not fire for them.
    private static func report(_ error: UpstreamError, _ context: RequestContext) {
        guard let tenant = context.tenant, let target = context.upstreamTarget, let kind = kind(of: error) else { return }
        context.services.metrics.increment("attestgate_upstream_errors_total{tenant=\"\(tenant.appID)\",error=\"\(kind)\"}")
        log(error, kind: kind, tenant: tenant, target: target, context.services.logger)
    }

    /// The contract error for an upstream failure that happened before any response byte.
    static func answer(for error: UpstreamError, limit: Int) -> GatewayError {
        switch error {
        case .connectFailed, .resolveFailed, .tlsFailed, .connectionReset, .invalidResponse, .clientAborted: .upstreamUnavailable
        case .timeout: .upstreamTimeout
        case .bodyTooLarge: .payloadTooLarge(limit: limit)
        case .clientBodyMalformed(let why): .badRequest("malformed request body: \(why)")
        }
    }

    /// The client only learns "502 upstream_unavailable"; the operator needs the why (the name
    /// that did not resolve, the certificate check that failed), once per tenant, kind and
    /// throttle interval.
    private static func log(_ error: UpstreamError, kind: String, tenant: Tenant, target: UpstreamTarget, _ logger: any LogSink) {
        logger.logRepeated(.warn, "upstream request failed", key: "upstream \(kind) \(tenant.appID)",
                           [("tenant", .string(tenant.appID)), ("upstream", .string(target.description)),
                            ("error", .string(kind)), ("reason", .string(error.description))])
    }

    /// The metric and log name of an upstream failure; nil for the client's own mistakes.
    private static func kind(of error: UpstreamError) -> String? {
        switch error {
        case .connectFailed: "connect_failed"
        case .resolveFailed: "resolve_failed"
        case .tlsFailed: "tls_failed"
        case .connectionReset: "connection_reset"
        case .invalidResponse: "invalid_response"
        case .timeout: "timeout"
        case .bodyTooLarge, .clientBodyMalformed, .clientAborted: nil
        }
    }
}

/// A proxied request's context owns its upstream exchange's two callbacks.
extension RequestContext: UpstreamExchangeOwner {
    func writeResponseFields(_ head: HTTPResponseHead, into writer: inout HTTPHeadWriter) {
        ForwardHeaders.response(head, requestID: requestID, extra: extraHeaders, rateLimit: rateLimitDecision, into: &writer)
    }

    func exchangeEnded(_ outcome: UpstreamOutcome) {
        UpstreamForwarder.finished(self, outcome)
    }
}
