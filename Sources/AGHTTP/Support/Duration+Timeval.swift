#if canImport(Glibc)
import Glibc
#endif

extension Duration {
    /// This duration as a `timeval` for libevent's timeouts; negative durations become zero.
    /// AGEventLoop has the same conversion as a `timeval` initialiser, but on the type of its
    /// internally imported CEvent: a release build of this module stopped finding it once the
    /// module also imported AGFormats ("argument passed to call that takes no arguments"),
    /// while debug builds did.
    var timeval: timeval {
        let (seconds, attoseconds) = components
        return Glibc.timeval(tv_sec: Int(max(0, seconds)), tv_usec: Int(max(0, attoseconds / 1_000_000_000_000)))
    }
}
