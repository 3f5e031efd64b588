public import AGEventLoop

/// Commands that cannot be written yet — no connection, no slot map, a failover under way —
/// held until their owner dispatches them again or their deadline passes.
///
/// A parked command was never written, so when its deadline passes it fails with
/// `.unavailable` (it did not run), carrying the owner's current reason.
final class ParkedCommands {
    private var entries: [RedisCommand] = []
    private var timer: EventTimer?
    private var armedDeadline: ContinuousClock.Instant?
    private let reason: () -> String

    /// `reason` says why commands are waiting (e.g. the connection's last error), for the failure.
    init(loop: EventLoop, reason: @escaping () -> String) {
        self.reason = reason
        timer = EventTimer(loop: loop) { [unowned self] in expire() }
    }

    var isEmpty: Bool { entries.isEmpty }

    func park(_ command: RedisCommand) {
        guard command.deadline > .now else {
            command.completion(.failure(.unavailable(why(command) ?? reason())))
            return
        }
        entries.append(command)
        if armedDeadline.map({ command.deadline < $0 }) ?? true {
            armedDeadline = command.deadline
            timer?.arm(after: command.deadline - .now)
        }
    }

    /// Hands every parked command back (oldest first) for dispatch.
    func takeAll() -> [RedisCommand] {
        let taken = entries
        entries = []
        armedDeadline = nil
        timer?.cancel()
        return taken
    }

    /// Fails every parked command with `error`.
    func failAll(_ error: RedisError) {
        for command in takeAll() { command.completion(.failure(error)) }
    }

    /// Stops the timer for good; parked commands fail with `.unavailable("client closed")`.
    func close() {
        failAll(.unavailable("client closed"))
        timer = nil
    }

    private func expire() {
        armedDeadline = nil
        let now = ContinuousClock.now
        let (expired, live) = (entries.filter { $0.deadline <= now }, entries.filter { $0.deadline > now })
        entries = live
        if let next = live.map(\.deadline).min() {
            armedDeadline = next
            timer?.arm(after: next - now)
        }
        guard !expired.isEmpty else { return }
        let ownersReason = reason()
        for command in expired { command.completion(.failure(.unavailable(why(command) ?? ownersReason))) }
    }

    /// The command's own reason for waiting, when a server refused it (`RedisCommand.parkedBy`).
    private func why(_ command: RedisCommand) -> String? {
        command.parkedBy.map { "not served within the deadline: the cluster kept answering \($0)" }
    }
}
