/// Carries a value that belongs to one event loop through other threads and back.
///
/// The value may be read only on its loop's thread (checked on every access), so a
/// loop-confined object can ride a `@Sendable` closure that hops to another thread for slow
/// work and back to the loop with `EventLoop.execute`.
public struct LoopBound<Value>: @unchecked Sendable {
    // Invariant: `storage` is only dereferenced on `loop`'s thread (checked by `value`).
    private let storage: Value
    public let loop: EventLoop

    /// Wraps `value`; call on `loop`'s thread.
    public init(_ value: Value, loop: EventLoop) {
        precondition(loop.isOwnedByCurrentThread, "LoopBound created off its loop's thread")
        self.storage = value
        self.loop = loop
    }

    /// The value; traps when read off the loop's thread.
    public var value: Value {
        precondition(loop.isOwnedByCurrentThread, "LoopBound read off its loop's thread")
        return storage
    }
}
