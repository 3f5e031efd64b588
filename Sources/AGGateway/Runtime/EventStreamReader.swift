import AGEventLoop
import AGPolicy
import AGRedis

/// Follows the `ag:{cfg}:events` stream on its own Redis connection (an `XREAD BLOCK` holds
/// its connection, so it never shares one with request traffic).
///
/// It reads from the last id it handed on: a killed connection, a server frozen past the read
/// deadline, or a failover only delay events, never lose them (as long as the stream still
/// holds them: it keeps about `GatewayEvents.maximumLength` entries). The position starts at
/// the stream's end when the reader starts — or, with `history`, that long before the server's
/// now (stream ids are the server's milliseconds), for an owner that must know what happened
/// before it started; each time the connection (re)connects, `onResume` runs first, so owners
/// re-read whatever state could have changed beyond what the stream still holds. Loop thread
/// only.
final class EventStreamReader {
    /// One entry: its id and the event JSON.
    struct Entry {
        let id: String
        let json: [UInt8]
    }

    /// How long one `XREAD` waits on the server for new entries.
    let blockTime: Duration
    private let redis: RedisClient
    private let onEvents: ([Entry]) -> Void
    private let onResume: () -> Void
    private var lastID: String?
    /// How far back the first read starts (nil: at the end).
    private let history: (() -> Duration)?
    private var reading = false
    private var retryTimer: EventTimer?
    private var closed = false

    init(url: RedisURL, loop: EventLoop, timeout: Duration, blockTime: Duration = .seconds(2),
         history: (() -> Duration)? = nil, onEvents: @escaping ([Entry]) -> Void, onResume: @escaping () -> Void) {
        self.blockTime = blockTime
        self.history = history
        self.onEvents = onEvents
        self.onResume = onResume
        redis = RedisClient(url: url, loop: loop, timeout: timeout)
        retryTimer = EventTimer(loop: loop) { [unowned self] in read() }
        redis.onStateChange = { [unowned self] state in
            guard state == .connected, !closed else { return }
            self.onResume()
            read()
        }
        if redis.isConnected {
            onResume()
            read()
        }
    }

    /// Stops reading; must run on the loop before its `event_base` goes away.
    func close() {
        closed = true
        retryTimer = nil
        redis.close()
    }

    private func read() {
        guard !closed, !reading else { return }
        reading = true
        if lastID == nil, let history {
            // The server's now less the history: the id before every entry since then.
            let back = history().milliseconds
            redis.send(["TIME"]) { [weak self] result in
                guard let self, !self.closed else { return }
                self.reading = false
                guard case .success(let reply) = result, let parts = reply.array, parts.count == 2,
                      let seconds = parts[0].int else { return self.retryLater() }
                self.lastID = "\(max(0, seconds * 1000 - back))-0"
                self.read()
            }
            return
        }
        guard let lastID else {
            // Where the stream ends now: events from here on are this reader's.
            redis.send(["XREVRANGE", GatewayEvents.stream, "+", "-", "COUNT", "1"]) { [weak self] result in
                guard let self, !self.closed else { return }
                self.reading = false
                switch result {
                case .success(let reply):
                    self.lastID = reply.array?.first?.array?.first?.string ?? "0-0"
                    self.read()
                case .failure:
                    self.retryLater()
                }
            }
            return
        }
        let block = String(Int(blockTime / .milliseconds(1)))
        redis.send(["XREAD", "COUNT", "100", "BLOCK", block, "STREAMS", GatewayEvents.stream, lastID],
                   timeout: blockTime + redis.timeout) { [weak self] result in
            guard let self, !self.closed else { return }
            self.reading = false
            switch result {
            case .success(let reply):
                let entries = Self.entries(in: reply)
                if let last = entries.last { self.lastID = last.id }
                if !entries.isEmpty { self.onEvents(entries) }
                self.read()
            case .failure:
                // Not connected, frozen past the deadline, or refused: try again shortly from
                // the same id (a reconnect also restarts the reads).
                self.retryLater()
            }
        }
    }

    private func retryLater() {
        retryTimer?.arm(after: .milliseconds(100))
    }

    /// `[[stream, [[id, [field, value, …]], …]]]`, or nil when the block time passed.
    static func entries(in reply: RedisValue) -> [Entry] {
        guard let streams = reply.array, let stream = streams.first?.array, stream.count == 2,
              let items = stream[1].array else { return [] }
        return items.compactMap { item in
            guard let parts = item.array, parts.count == 2, let id = parts[0].string, let fields = parts[1].array else { return nil }
            var index = 0
            while index + 1 < fields.count {
                if fields[index].string == GatewayEvents.field, let json = fields[index + 1].bytes {
                    return Entry(id: id, json: json)
                }
                index += 2
            }
            return Entry(id: id, json: [])
        }
    }
}
