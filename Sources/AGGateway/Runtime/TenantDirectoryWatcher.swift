import AGConfig
import AGEventLoop
import AGHTTP
import Foundation

/// Polls `tenants/` once a second and calls `onChange` when a file was added, removed or
/// modified and has then stayed as it is for a whole interval (`Settling`). Polling names and
/// what `stat(2)` says of each file copes with editors' rename-into-place and with symlinked
/// config directories, where inotify watches go stale.
final class TenantDirectoryWatcher {
    private let directory: String
    private let onChange: () -> Void
    private var timer: EventTimer?
    private var settling: Settling

    /// When a changed directory is loaded: once two polls in a row saw it the same. A file
    /// being written in place (a copy over a slow link, a tool that does not write a temporary
    /// file and rename it) was loaded half-written at the first poll that saw it change: an
    /// independent sweep had a route prefix cut to `/` open to anonymous requests for a moment.
    /// Waiting a poll lets a write finish; only writing elsewhere and renaming into place is
    /// atomic (README).
    struct Settling: Equatable {
        typealias Signature = [String: ConfigFiles.FileVersion]
        /// The directory as the configuration in force read it.
        private(set) var loaded: Signature
        /// A changed directory seen at the last poll, waiting to be seen the same again.
        private var pending: Signature?

        init(loaded: Signature) {
            self.loaded = loaded
        }

        /// One poll's view of the directory; true when it is to be loaded now.
        mutating func observe(_ current: Signature) -> Bool {
            guard current != loaded else {
                pending = nil
                return false
            }
            guard current == pending else {
                pending = current
                return false
            }
            loaded = current
            pending = nil
            return true
        }
    }

    /// `initial` is the directory's signature when the configuration in force was read.
    init(loop: EventLoop, directory: String, initial: [String: ConfigFiles.FileVersion], interval: Duration = .seconds(1),
         onChange: @escaping () -> Void) {
        self.directory = directory
        self.onChange = onChange
        settling = Settling(loaded: initial)
        let timer = EventTimer(loop: loop) { [unowned self] in
            self.check()
            self.timer?.arm(after: interval)
        }
        timer.arm(after: interval)
        self.timer = timer
    }

    deinit {
        timer?.cancel()
    }

    private func check() {
        if settling.observe(Self.signature(of: directory)) { onChange() }
    }

    /// One `ConfigFiles.version` (a `stat` through symlinks) per `*.yaml`/`*.yml` name; a name it
    /// cannot follow (a dangling link) is `.unreadable`, so going missing or coming back is a change.
    static func signature(of directory: String) -> [String: ConfigFiles.FileVersion] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [:] }
        var result: [String: ConfigFiles.FileVersion] = [:]
        result.reserveCapacity(names.count)
        for name in names where name.hasSuffix(".yaml") || name.hasSuffix(".yml") {
            result[name] = ConfigFiles.version(of: directory + "/" + name) ?? .unreadable
        }
        return result
    }
}
