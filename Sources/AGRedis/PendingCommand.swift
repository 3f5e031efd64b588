/// A command's arguments as the caller gave them: strings (sent as their UTF-8 bytes) or bytes.
/// Kept as given so a command waiting for a connection costs no copy.
enum RedisArguments {
    case strings([String])
    case bytes([[UInt8]])

    var count: Int {
        switch self {
        case .strings(let items): items.count
        case .bytes(let items): items.count
        }
    }

    /// The upper-cased command name, for routing decisions.
    var name: String {
        switch self {
        case .strings(let items): items.first?.uppercased() ?? ""
        case .bytes(let items): items.first.map { String(decoding: $0, as: UTF8.self).uppercased() } ?? ""
        }
    }

    /// Argument `index` as bytes (copied for strings), for key hashing and redirects.
    func bytes(at index: Int) -> [UInt8] {
        switch self {
        case .strings(let items): Array(items[index].utf8)
        case .bytes(let items): items[index]
        }
    }

    func string(at index: Int) -> String {
        switch self {
        case .strings(let items): items[index]
        case .bytes(let items): String(decoding: items[index], as: UTF8.self)
        }
    }
}

/// A caller's command on its way to a server: arguments, the deadline fixed when it was first
/// sent (redirects and retries do not extend it), and the completion that runs exactly once.
struct RedisCommand {
    let arguments: RedisArguments
    let deadline: ContinuousClock.Instant
    let completion: (Result<RedisValue, RedisError>) -> Void
    /// MOVED/ASK redirects followed so far; bounded so a confused cluster cannot loop us.
    var redirects = 0
    /// The refusal that parked it (`TRYAGAIN …` while its keys are split by a resharding,
    /// `CLUSTERDOWN …`): named when the deadline passes with the command still parked, so the
    /// error says the cluster refused it rather than that the cluster was unreachable.
    var parkedBy: String?
    /// `WAIT` for this many replicas (within the duration) right after the command, on the
    /// same connection, before completing; see `RedisClient.send(_:confirmedBy:within:completion:)`.
    var confirmation: (replicas: Int, within: Duration)?

    init(arguments: RedisArguments, deadline: ContinuousClock.Instant,
         confirmation: (replicas: Int, within: Duration)? = nil,
         completion: @escaping (Result<RedisValue, RedisError>) -> Void) {
        self.arguments = arguments
        self.deadline = deadline
        self.confirmation = confirmation
        self.completion = completion
    }
}

/// One command written to a connection and awaiting its reply; completes exactly once, by
/// reply, timeout or connection loss.
final class PendingCommand {
    let deadline: ContinuousClock.Instant
    private var completion: ((Result<RedisValue, RedisError>) -> Void)?

    init(deadline: ContinuousClock.Instant, completion: @escaping (Result<RedisValue, RedisError>) -> Void) {
        self.deadline = deadline
        self.completion = completion
    }

    var isCompleted: Bool { completion == nil }

    /// Runs the completion unless it already ran; later outcomes (a reply after a timeout) are dropped.
    func complete(_ result: Result<RedisValue, RedisError>) {
        guard let completion else { return }
        self.completion = nil
        completion(result)
    }
}

/// Commands in the order they were written. Deadlines are mostly non-decreasing, but a
/// redirected or parked command keeps its older deadline, so expiry scans every live entry.
struct CommandQueue {
    private var storage: [PendingCommand] = []
    private var head = 0

    var isEmpty: Bool { head == storage.count }

    mutating func append(_ command: PendingCommand) {
        storage.append(command)
    }

    /// The commands whose deadline passed (for the caller to complete with `.timeout`, outside
    /// this mutating access: completions send commands, which append here) and the earliest
    /// deadline still pending.
    mutating func expired(now: ContinuousClock.Instant) -> (expired: [PendingCommand], earliest: ContinuousClock.Instant?) {
        dropCompleted()
        var expired: [PendingCommand] = []
        var earliest: ContinuousClock.Instant?
        for command in storage[head...] where !command.isCompleted {
            if command.deadline <= now {
                expired.append(command)
            } else if earliest.map({ command.deadline < $0 }) ?? true {
                earliest = command.deadline
            }
        }
        return (expired, earliest)
    }

    /// Drops answered commands from the front.
    private mutating func dropCompleted() {
        while head < storage.count, storage[head].isCompleted { head += 1 }
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64, head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
    }

    mutating func removeAll() {
        storage.removeAll()
        head = 0
    }
}
