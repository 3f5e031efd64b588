internal import CEvent
public import AGEventLoop

/// Timeouts and limits of one server.
public struct HTTPServerConfiguration: Sendable {
    /// How long a request head or body may take to arrive between reads.
    public var readTimeout: Duration = .seconds(30)
    /// How long a response write may stall.
    public var writeTimeout: Duration = .seconds(30)
    /// How long a keep-alive connection may sit idle between requests.
    public var idleTimeout: Duration = .seconds(60)
    public var maxHeadBytes = 16 * 1024
    /// Input buffered per connection before reading pauses (backpressure).
    public var readHighWatermark = 256 * 1024

    public init() {}
}

/// An HTTP/1.1 server on one event loop, accepting from a shared listening socket.
///
/// Built directly on bufferevents rather than evhttp, because a proxy must stream request
/// bodies (evhttp buffers them whole) and see header fields exactly as sent.
public final class HTTPServer {
    let loop: EventLoop
    let configuration: HTTPServerConfiguration
    let handler: (HTTPServerRequest) -> Void
    private var listener: OpaquePointer?
    private var connections: [ObjectIdentifier: HTTPServerConnection] = [:]
    private var shutdownCompletion: (() -> Void)?
    private var graceTimer: EventTimer?

    /// Connections currently open.
    public var connectionCount: Int { connections.count }

    public init(loop: EventLoop, socket: ListeningSocket, configuration: HTTPServerConfiguration,
                handler: @escaping (HTTPServerRequest) -> Void) {
        self.loop = loop
        self.configuration = configuration
        self.handler = handler
        let context = Unmanaged.passUnretained(self).toOpaque()
        listener = evconnlistener_new(loop.base, { _, fd, address, _, context in
            Unmanaged<HTTPServer>.fromOpaque(context!).takeUnretainedValue().accept(fd: fd, address: address)
        }, context, 0, -1, socket.fileDescriptor)
        precondition(listener != nil, "evconnlistener_new failed")
    }

    deinit {
        if let listener { evconnlistener_free(listener) }
    }

    private func accept(fd: Int32, address: UnsafeMutablePointer<sockaddr>?) {
        guard shutdownCompletion == nil else {
            evutil_closesocket(fd)
            return
        }
        let connection = HTTPServerConnection(server: self, fd: fd, remoteAddress: ipString(address))
        connections[ObjectIdentifier(connection)] = connection
        connection.start()
    }

    func connectionClosed(_ connection: HTTPServerConnection) {
        connections[ObjectIdentifier(connection)] = nil
        if connections.isEmpty, let completion = shutdownCompletion {
            finishShutdown(completion)
        }
    }

    /// Stops accepting, lets in-flight requests finish for up to `grace`, then closes everything
    /// and calls `completion` (on the loop thread).
    public func shutdown(grace: Duration, completion: @escaping () -> Void) {
        if let listener {
            evconnlistener_free(listener)
            self.listener = nil
        }
        shutdownCompletion = completion
        for connection in Array(connections.values) {
            connection.closeWhenIdle()
        }
        if connections.isEmpty {
            finishShutdown(completion)
            return
        }
        let timer = EventTimer(loop: loop) { [weak self] in
            guard let self else { return }
            for connection in Array(self.connections.values) { connection.close() }
        }
        timer.arm(after: grace)
        graceTimer = timer
    }

    private func finishShutdown(_ completion: () -> Void) {
        shutdownCompletion = nil
        graceTimer?.cancel()
        graceTimer = nil
        completion()
    }

    var isShuttingDown: Bool { shutdownCompletion != nil }
}
