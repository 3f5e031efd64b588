/// One command awaiting its reply; completes exactly once, by reply, timeout or connection loss.
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

/// Commands in the order they were sent, which is the order Redis answers them, so deadlines
/// are non-decreasing and one timer armed for the oldest live command covers them all.
struct CommandQueue {
    private var storage: [PendingCommand] = []
    private var head = 0

    mutating func append(_ command: PendingCommand) {
        storage.append(command)
    }

    /// Drops answered commands from the front and returns the oldest unanswered one.
    mutating func firstPending() -> PendingCommand? {
        while head < storage.count, storage[head].isCompleted { head += 1 }
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
            return nil
        }
        if head >= 64, head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return storage[head]
    }

    mutating func removeAll() {
        storage.removeAll()
        head = 0
    }
}
