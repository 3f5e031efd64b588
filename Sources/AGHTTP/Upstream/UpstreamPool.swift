internal import CEvent
public import AGEventLoop

/// Keep-alive HTTP/1.1 connections to upstreams, and the forwarding of requests over them.
///
/// One pool per worker event loop; loop thread only. Idle connections are kept per endpoint
/// (address, port and, for TLS, the verified name and roots) and reused most-recent first, so a
/// steady load runs on few warm connections and the rarely used ones expire. Host names are
/// resolved with the loop's `DNSResolver`; an address that refused a connection is tried after
/// the others for `failedAddressBackoff`.
public final class UpstreamPool {
    let loop: EventLoop
    let configuration: UpstreamPoolConfiguration
    /// Per endpoint, most recently used last. Lists are objects, so taking and returning a
    /// connection hashes the endpoint once (this runs twice per proxied request).
    private var idle: [UpstreamEndpoint: IdleList] = [:]
    /// The list last looked up, with its endpoint: a proxied request takes a connection and
    /// gives it back, two look-ups of the same endpoint, which an equality check answers
    /// without hashing an address. Cleared with `idle`; a list is never removed otherwise.
    private var lastEndpoint: UpstreamEndpoint?
    private var lastList: IdleList?
    /// Addresses of host names that recently failed to connect, and until when they go last.
    private var failedUntil: [UpstreamEndpoint: ContinuousClock.Instant] = [:]
    private let configuredResolver: DNSResolver?
    /// Decoded response bytes pass through here on their way to the client; always left empty.
    let scratch: OpaquePointer
    /// Request heads are built here; its buffer is reused from request to request.
    private var headWriter = HTTPHeadWriter(capacity: 2048)
    /// Response heads are copied here to be parsed; reused once the last head has been let go.
    private var responseHead: [UInt8] = []
    /// The last response head's field list, its buffer reused for the next (`parseResponse`).
    var responseFieldList: [HTTPField] = []

    /// Idle connections kept per endpoint (`UpstreamPoolConfiguration.maxIdlePerTarget` at
    /// first); the gateway sets it from `proxy.upstream_keepalive` on each request, so a reload
    /// changes it. Lowered, the surplus goes as connections come back (or lapse idle).
    public var maxIdlePerTarget: Int

    /// Connections currently open (connecting, serving or idle).
    public private(set) var openConnectionCount = 0
    /// Connections the pool started to open, since it was created.
    public internal(set) var connectAttempts = 0

    /// - Parameter resolver: resolves upstream host names; the loop's shared resolver (created
    ///   on first use) when nil.
    public init(loop: EventLoop, configuration: UpstreamPoolConfiguration = UpstreamPoolConfiguration(),
                resolver: DNSResolver? = nil) {
        self.loop = loop
        self.configuration = configuration
        maxIdlePerTarget = configuration.maxIdlePerTarget
        configuredResolver = resolver
        scratch = evbuffer_new()
    }

    var resolver: DNSResolver { configuredResolver ?? loop.resolver }

    deinit {
        closeIdleConnections()
        evbuffer_free(scratch)
    }

    /// Idle connections waiting in the pool for `target` (for a host name: on any address).
    public func idleConnectionCount(for target: UpstreamTarget) -> Int {
        if let endpoint = target.literalEndpoint { return idle[endpoint]?.connections.count ?? 0 }
        return idle.filter { $0.key.port == UInt16(target.port) && $0.key.tls == target.tlsPeer }.values
            .reduce(0) { $0 + $1.connections.count }
    }

    /// Closes every idle connection (shutdown, or an upstream's address went away).
    public func closeIdleConnections() {
        let all = idle.values.flatMap(\.connections)
        idle.removeAll()
        lastEndpoint = nil
        lastList = nil
        for connection in all { connection.close() }
    }

    /// Forwards `request` to `target` and streams the response back to the client.
    ///
    /// The head sent upstream is built in one buffer and written in one piece: the request
    /// line (`target.basePath` + the client's target, as received), the fields `writeFields`
    /// appends, `Host` when it wrote none, and the pool's own framing.
    ///
    /// - Parameters:
    ///   - writeFields: Appends the header fields to send, in order. The pool owns framing:
    ///     it never forwards `Content-Length`, `Transfer-Encoding`, `Connection` or `Expect`
    ///     itself, and `writeFields` must not write them either (`HTTPFieldName.isHopControl`).
    ///   - maxBodyBytes: Largest request body accepted. A larger `Content-Length` fails at
    ///     once, before connecting; a chunked body fails when it crosses the limit.
    ///   - owner: Writes the response fields the client gets and hears how the exchange ended
    ///     (exactly once, on the loop thread; on `.failed`, nothing has been sent to the client
    ///     and the owner answers). Kept until the exchange is freed.
    public func forward(_ request: HTTPServerRequest, to target: UpstreamTarget,
                        timeouts: UpstreamTimeouts, maxBodyBytes: Int,
                        writeFields: (inout HTTPHeadWriter) -> Void,
                        owner: any UpstreamExchangeOwner) {
        if case .length(let length) = request.framing, length > maxBodyBytes {
            owner.exchangeEnded(.failed(.bodyTooLarge))
            return
        }
        headWriter.reset()
        UpstreamRequestHead.write(into: &headWriter, method: request.method, framing: request.framing,
                                  defaultHost: target.hostHeader, target: { writer in
            writer.append(target.basePath)
            if request.head.targetLacksSlash { writer.append("/") }
            writer.append(request.head.headers.storage[request.head.targetRange])
        }, fields: writeFields)
        let exchange = UpstreamExchange(pool: self, request: request, target: target, head: headWriter.bytes,
                                        timeouts: timeouts, maxBodyBytes: maxBodyBytes, owner: owner)
        exchange.start()
    }

    /// `forward` with closures for the owner's two parts.
    ///
    /// - Parameters:
    ///   - responseFields: Writes the response fields the client gets, from the upstream's
    ///     head (the gateway drops hop-by-hop fields and adds its own); it must not write
    ///     framing fields or `Connection`, which the server writes. When nil, every field but
    ///     those is relayed.
    ///   - completion: Called exactly once, on the loop thread, with how it ended. On
    ///     `.failed`, nothing has been sent to the client and the caller answers.
    public func forward(_ request: HTTPServerRequest, to target: UpstreamTarget,
                        timeouts: UpstreamTimeouts, maxBodyBytes: Int,
                        writeFields: (inout HTTPHeadWriter) -> Void,
                        responseFields: ((HTTPResponseHead, inout HTTPHeadWriter) -> Void)? = nil,
                        completion: @escaping (UpstreamOutcome) -> Void) {
        forward(request, to: target, timeouts: timeouts, maxBodyBytes: maxBodyBytes, writeFields: writeFields,
                owner: ClosureExchangeOwner(responseFields: responseFields, completion: completion))
    }

    /// Forwards with string fields and an explicit target (`path`, base path included): the
    /// convenient form for tools and tests. Framing, `Connection` and `Expect` in `headers`
    /// are dropped.
    public func forward(_ request: HTTPServerRequest, to target: UpstreamTarget, path: String, headers: HTTPHeaders,
                        timeouts: UpstreamTimeouts, maxBodyBytes: Int,
                        responseFields: ((HTTPResponseHead, inout HTTPHeadWriter) -> Void)? = nil,
                        completion: @escaping (UpstreamOutcome) -> Void) {
        if case .length(let length) = request.framing, length > maxBodyBytes {
            completion(.failed(.bodyTooLarge))
            return
        }
        let head = UpstreamRequestHead.render(method: request.method, path: path, headers: headers,
                                              framing: request.framing, defaultHost: target.hostHeader)
        let exchange = UpstreamExchange(pool: self, request: request, target: target, head: Array(head.utf8),
                                        timeouts: timeouts, maxBodyBytes: maxBodyBytes,
                                        owner: ClosureExchangeOwner(responseFields: responseFields, completion: completion))
        exchange.start()
    }

    /// The first `length` bytes of `input`, in the reused response-head buffer.
    func responseHeadBytes(from input: OpaquePointer, length: Int) -> [UInt8] {
        responseHeadBytes(UnsafeRawBufferPointer(start: evbuffer_pullup(input, length), count: length))
    }

    /// `bytes` in the reused response-head buffer.
    func responseHeadBytes(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        responseHead.removeAll(keepingCapacity: true)
        responseHead.append(contentsOf: bytes)
        return responseHead
    }

    // MARK: Connection bookkeeping

    func takeIdle(_ endpoint: UpstreamEndpoint) -> UpstreamConnection? {
        idleList(endpoint, creating: false)?.connections.popLast()
    }

    private func idleList(_ endpoint: UpstreamEndpoint, creating: Bool) -> IdleList? {
        if let lastList, lastEndpoint == endpoint { return lastList }
        var list = idle[endpoint]
        if list == nil, creating {
            list = IdleList()
            idle[endpoint] = list
        }
        if let list {
            lastEndpoint = endpoint
            lastList = list
        }
        return list
    }

    /// `addresses` of a host name as endpoints, those that did not fail recently first (each
    /// group in the resolver's order).
    func endpoints(_ addresses: [IPAddress], of target: UpstreamTarget) -> [UpstreamEndpoint] {
        let endpoints = addresses.map { UpstreamEndpoint(address: $0, port: UInt16(target.port), tls: target.tlsPeer) }
        guard !failedUntil.isEmpty else { return endpoints }
        let now = ContinuousClock.now
        failedUntil = failedUntil.filter { $0.value > now }
        return endpoints.filter { failedUntil[$0] == nil } + endpoints.filter { failedUntil[$0] != nil }
    }

    /// An address of a host name refused a connection (or did not answer in time).
    func connectFailed(_ endpoint: UpstreamEndpoint) {
        failedUntil[endpoint] = .now + configuration.failedAddressBackoff
    }

    /// A connection to `endpoint` was established: it is healthy again.
    func connectSucceeded(_ endpoint: UpstreamEndpoint) {
        if !failedUntil.isEmpty { failedUntil[endpoint] = nil }
    }

    /// Parks a connection after a complete, reusable exchange; beyond the limit the oldest go.
    func release(_ connection: UpstreamConnection) {
        guard connection.isOpen else { return }
        connection.becomeIdle(timeout: configuration.idleTimeout)
        let list = idleList(connection.endpoint, creating: true)!
        list.connections.append(connection)
        var evicted: [UpstreamConnection] = []
        while list.connections.count > maxIdlePerTarget {
            evicted.append(list.connections.removeFirst())
        }
        for connection in evicted { connection.close() }
    }

    /// Drops an idle connection the upstream closed, wrote to, or that expired.
    func discardIdle(_ connection: UpstreamConnection) {
        idleList(connection.endpoint, creating: false)?.connections.removeAll { $0 === connection }
        connection.close()
    }

    func connectionOpened() {
        openConnectionCount += 1
    }

    func connectionClosed() {
        openConnectionCount -= 1
    }
}

/// One endpoint's idle connections, most recently used last.
final class IdleList {
    var connections: [UpstreamConnection] = []
}

/// The request head sent upstream.
enum UpstreamRequestHead {
    /// Writes the request line, the caller's fields, `Host` if they had none, the framing and
    /// the blank line.
    static func write(into writer: inout HTTPHeadWriter, method: String, framing: BodyFraming, defaultHost: String,
                      target: (inout HTTPHeadWriter) -> Void, fields: (inout HTTPHeadWriter) -> Void) {
        writer.append(method)
        writer.append(" ")
        target(&writer)
        writer.append(" HTTP/1.1\r\n")
        fields(&writer)
        if !writer.wroteHost { writer.appendField(.host, defaultHost) }
        switch framing {
        case .length(let length):
            writer.appendFieldName(.contentLength)
            writer.append(decimal: length)
            writer.appendCRLF()
        case .chunked:
            writer.appendField(.transferEncoding, "chunked")
        case .none, .untilClose:
            // Methods whose body has meaning say so even when it is empty (RFC 9110 8.6).
            if method == "POST" || method == "PUT" || method == "PATCH" { writer.appendField(.contentLength, "0") }
        }
        writer.appendCRLF()
    }

    /// The head for string fields, without the framing and connection fields among them.
    static func render(method: String, path: String, headers: HTTPHeaders, framing: BodyFraming,
                       defaultHost: String) -> String {
        var writer = HTTPHeadWriter()
        write(into: &writer, method: method, framing: framing, defaultHost: defaultHost, target: { $0.append(path) }) { writer in
            for field in headers.fields {
                switch HTTPFieldName(field.name) {
                case .expect, .connection, .contentLength, .transferEncoding: continue
                default: writer.appendField(field.name, field.value)
                }
            }
        }
        return String(decoding: writer.bytes, as: UTF8.self)
    }
}
