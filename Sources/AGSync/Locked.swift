#if canImport(Glibc)
import Glibc
#endif

/// A value guarded by a `pthread_mutex_t`: the package's one lock type.
///
/// Why not `Synchronization.Mutex`: on Linux, `Mutex` takes its contended path through a
/// futex inside the Swift runtime, which ThreadSanitizer does not instrument, so TSan sees no
/// happens-before between two threads that took turns in the lock and reports a data race on
/// every value it guards (`scripts/test --sanitize=thread`, docs/security.md). TSan intercepts
/// `pthread_mutex_lock`/`unlock`, so with this type it sees the lock and reports only real
/// races. The API is `Mutex`'s `withLock`, so a call site reads the same.
///
/// The mutex lives on the heap (a `pthread_mutex_t` must not move once initialised) and is
/// owned by this object; the module is the only Swift code of the package that touches
/// pthread, so it counts as a wrapper.
public final class Locked<Value>: @unchecked Sendable {
    // Invariant: `value` is read and written only between `pthread_mutex_lock(mutex)` and
    // `pthread_mutex_unlock(mutex)`, which is what makes the unchecked `Sendable` true.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    /// A lock guarding `initialValue`.
    public init(_ initialValue: sending Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
        value = initialValue
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the value while holding the lock; the lock is released when `body`
    /// returns or throws. Not reentrant: `body` must not take the same lock again.
    public func withLock<Result, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
