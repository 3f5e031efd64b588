internal import COpenSSL

/// OpenSSL's per-thread state (the thread's random generators, error queue) is freed by a
/// thread-exit hook. A thread that signals "done" and then exits races the process's own exit:
/// when `main` returns first, OpenSSL's exit cleanup runs while the thread's state is still
/// held, and LeakSanitizer reports it (seen after a TLS reload, 9,240 bytes at exit).
public enum CryptoThread {
    /// Frees the calling thread's OpenSSL state now. Call it last on a thread that used
    /// OpenSSL, before telling anyone it has finished; OpenSSL sets the state up again if the
    /// thread uses it afterwards.
    public static func releaseState() {
        OPENSSL_thread_stop()
    }
}
