import AGConfig
import AGEventLoop
import AGHTTP
import Foundation

/// Polls `tenants/` once a second and calls `onChange` when a file is added, removed or
/// modified. Polling names and what `stat(2)` says of each file copes with editors'
/// rename-into-place and with symlinked config directories, where inotify watches go stale.
final class TenantDirectoryWatcher {
    private let directory: String
    private let onChange: () -> Void
    private var timer: EventTimer?
    private var signature: [String: ConfigFiles.FileVersion]

    /// `initial` is the directory's signature when the configuration in force was read.
    init(loop: EventLoop, directory: String, initial: [String: ConfigFiles.FileVersion], interval: Duration = .seconds(1),
         onChange: @escaping () -> Void) {
        self.directory = directory
        self.onChange = onChange
        self.signature = initial
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
        let current = Self.signature(of: directory)
        guard current != signature else { return }
        signature = current
        onChange()
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
