internal import CHiredis
internal import CShims
internal import AGEventLoop

/// What hiredis calls with a reply (or NULL when the context goes away) and the privdata.
typealias ReplyCallback = @convention(c) (UnsafeMutablePointer<redisAsyncContext>?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void

/// One hiredis async context and the bookkeeping that decides who releases it.
///
/// `ac->data` holds one retain of this object from creation until hiredis is done with the
/// context: released in the disconnect callback (connected contexts), in the connect callback
/// on failure, or by `free()` for a context that never connected.
final class HiredisContext {
    let ac: UnsafeMutablePointer<redisAsyncContext>
    weak var owner: RedisConnection?
    /// hiredis reported the TCP/unix connect as done.
    var isConnected = false
    /// hiredis has freed, is freeing, or will free the context right after the current callback.
    var isFreeing = false
    var handshakeRepliesLeft = 0
    var unconfirmedSubscriptions = 0
    /// Times out the `SUBSCRIBE` confirmations (first subscription or health check), which
    /// hiredis keeps outside its reply queue.
    var subscriptionProbe: PendingCommand?
    /// Encodes every command of this context into one reused buffer.
    private var writer = RESPWriter()

    private init(ac: UnsafeMutablePointer<redisAsyncContext>, owner: RedisConnection) {
        self.ac = ac
        self.owner = owner
    }

    /// Starts a non-blocking connect attached to `loop`, or returns hiredis's error.
    /// `address` must be an IP literal (hiredis would resolve a name with a blocking call) or,
    /// with `isUnix`, a socket path.
    static func connect(address: String, port: Int, isUnix: Bool, loop: EventLoop,
                        owner: RedisConnection) -> Result<HiredisContext, RedisError> {
        let connected = isUnix ? redisAsyncConnectUnix(address) : redisAsyncConnect(address, Int32(port))
        guard let ac = connected else { return .failure(.unavailable("out of memory")) }
        if ac.pointee.err != 0 {
            let message = errorMessage(ac)
            redisAsyncFree(ac)
            return .failure(.unavailable(message))
        }
        if !isUnix {
            _ = redisEnableKeepAlive(&ac.pointee.c)
        }
        guard ag_redis_attach_libevent(ac, loop.base) == REDIS_OK else {
            redisAsyncFree(ac)
            return .failure(.unavailable("cannot attach to the event loop"))
        }
        let context = HiredisContext(ac: ac, owner: owner)
        ac.pointee.data = Unmanaged.passRetained(context).toOpaque()
        redisAsyncSetConnectCallback(ac, onConnect)
        redisAsyncSetDisconnectCallback(ac, onDisconnect)
        return .success(context)
    }

    /// Queues a command; `command` completes from the reply callback (or with a NULL reply when
    /// the context goes away). Returns false, without retaining `command`, if hiredis refused it.
    func send(_ arguments: RedisArguments, command: PendingCommand) -> Bool {
        guard !isFreeing else { return false }
        let privdata = Unmanaged.passRetained(command)
        guard queue(arguments, callback: Self.onReply, privdata: privdata.toOpaque()) else {
            privdata.release()
            return false
        }
        return true
    }

    /// Sends `SUBSCRIBE` (again, for a health check); every confirmation and message for the
    /// channels arrives at the owner's `subscriptionPushed`. hiredis keeps the callback until the context is freed, which is why
    /// the privdata is this context (alive until then) rather than a per-command retain.
    func subscribe(_ channels: [String]) -> Bool {
        guard !isFreeing else { return false }
        return queue(.strings(["SUBSCRIBE"] + channels), callback: Self.onSubscriptionPush,
                     privdata: Unmanaged.passUnretained(self).toOpaque())
    }

    /// Encodes the command with this context's `RESPWriter` and hands hiredis the finished
    /// bytes; hiredis copies them into its output buffer (and, as for its own formatting, looks
    /// at the command name for the subscribe commands) before returning.
    private func queue(_ arguments: RedisArguments, callback: ReplyCallback, privdata: UnsafeMutableRawPointer) -> Bool {
        writer.encode(arguments)
        // hiredis finds the command name with strchr/strtol, as in its own NUL-terminated
        // buffers: the writer's terminator (not sent) keeps those scans inside this buffer.
        let status = writer.withTerminatedBytes { buffer in
            buffer.withMemoryRebound(to: CChar.self) { redisAsyncFormattedCommand(ac, callback, privdata, $0.baseAddress!, $0.count - 1) }
        }
        return status == REDIS_OK
    }

    /// Frees the context now (or, inside a hiredis callback, right after it). Pending commands
    /// complete with `.unavailable`; the disconnect callback runs if the context had connected.
    func free() {
        guard !isFreeing else { return }
        isFreeing = true
        let releasedByDisconnectCallback = isConnected
        redisAsyncFree(ac)
        if !releasedByDisconnectCallback {
            Unmanaged.passUnretained(self).release()
        }
    }

    var errorMessage: String { Self.errorMessage(ac) }

    private static func errorMessage(_ ac: UnsafePointer<redisAsyncContext>) -> String {
        guard ac.pointee.err != 0, let text = ac.pointee.errstr else { return "connection closed" }
        return String(cString: text)
    }

    private static func from(_ ac: UnsafePointer<redisAsyncContext>?) -> HiredisContext {
        Unmanaged<HiredisContext>.fromOpaque(ac!.pointee.data).takeUnretainedValue()
    }

    private static let onConnect: @convention(c) (UnsafePointer<redisAsyncContext>?, Int32) -> Void = { ac, status in
        let context = from(ac)
        if status == REDIS_OK {
            context.isConnected = true
            return
        }
        // hiredis frees the context as soon as this returns, without a disconnect callback.
        context.isFreeing = true
        let reason = errorMessage(ac!)
        Unmanaged.passUnretained(context).release()
        context.owner?.contextLost(context, reason: reason)
    }

    private static let onDisconnect: @convention(c) (UnsafePointer<redisAsyncContext>?, Int32) -> Void = { ac, _ in
        let context = from(ac)
        context.isFreeing = true
        let reason = errorMessage(ac!)
        Unmanaged.passUnretained(context).release()
        context.owner?.contextLost(context, reason: reason)
    }

    private static let onReply: ReplyCallback = { ac, reply, privdata in
        let command = Unmanaged<PendingCommand>.fromOpaque(privdata!).takeRetainedValue()
        guard let reply else {
            command.complete(.failure(.unavailable(ac.map { errorMessage($0) } ?? "connection closed")))
            return
        }
        let value = RedisValue(reply.assumingMemoryBound(to: redisReply.self))
        if case .error(let message) = value {
            command.complete(.failure(.server(message)))
        } else {
            command.complete(.success(value))
        }
    }

    private static let onSubscriptionPush: ReplyCallback = { _, reply, privdata in
        // A NULL reply means the context is being freed; the disconnect callback reports that.
        guard let reply else { return }
        let context = Unmanaged<HiredisContext>.fromOpaque(privdata!).takeUnretainedValue()
        let value = RedisValue(reply.assumingMemoryBound(to: redisReply.self))
        context.owner?.subscriptionPushed(value, on: context)
    }
}

extension RedisValue {
    /// Deep-copies a hiredis reply, which hiredis frees when the callback returns.
    init(_ reply: UnsafePointer<redisReply>) {
        let r = reply.pointee
        switch r.type {
        case REDIS_REPLY_STRING:
            self = .bulk(r.len == 0 ? [] : Array(UnsafeRawBufferPointer(start: r.str, count: r.len)))
        case REDIS_REPLY_STATUS, REDIS_REPLY_ERROR:
            let bytes = r.len == 0 ? UnsafeRawBufferPointer(start: nil, count: 0) : UnsafeRawBufferPointer(start: r.str, count: r.len)
            let text = String(decoding: bytes, as: UTF8.self)
            self = r.type == REDIS_REPLY_STATUS ? .status(text) : .error(text)
        case REDIS_REPLY_INTEGER:
            self = .integer(Int64(r.integer))
        case REDIS_REPLY_ARRAY:
            self = .array((0..<r.elements).map { RedisValue(r.element[$0]!) })
        default:
            self = .null
        }
    }
}
