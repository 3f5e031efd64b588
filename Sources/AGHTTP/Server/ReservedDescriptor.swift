#if canImport(Glibc)
import Glibc
#endif
import AGSync

/// One file descriptor held in reserve for the whole process, so that a server marked
/// `usesReservedDescriptor` (the admin listener) can still accept a connection when the
/// process has hit its descriptor limit: the reserve is closed, the connection takes its
/// number, and the reserve is opened again once that connection has closed.
enum ReservedDescriptor {
    private static let held = Locked<Int32>(-1)

    /// Opens the reserve if it is not held.
    static func acquire() {
        held.withLock { fd in
            guard fd < 0 else { return }
            fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
        }
    }

    /// Closes the reserve to make room for one accept; false when it was not held.
    static func release() -> Bool {
        held.withLock { fd in
            guard fd >= 0 else { return false }
            close(fd)
            fd = -1
            return true
        }
    }
}
