import AGEventLoop
import AGHTTP
import Foundation
import Glibc

/// Polls `tenants/` once a second and calls `onChange` when a file is added, removed or
/// modified. Polling names and what `stat(2)` says of each file copes with editors'
/// rename-into-place and with symlinked config directories, where inotify watches go stale.
final class TenantDirectoryWatcher {
    private let directory: String
    private let onChange: () -> Void
    private var timer: EventTimer?
    private var signature: [String: FileVersion]

    /// `initial` is the directory's signature when the configuration in force was read.
    init(loop: EventLoop, directory: String, initial: [String: FileVersion], interval: Duration = .seconds(1),
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

    /// A tenant file as `stat(2)` finds it through symlinks: which file (device and inode: a
    /// rename into place is another file), its size, and its modification and status-change
    /// times (`cp -p` and `rsync -t` keep the first, nothing keeps the second). Through
    /// symlinks, because a Kubernetes ConfigMap mounts each file as a link through `..data`,
    /// and an update repoints `..data`: the links themselves never change.
    struct FileVersion: Hashable {
        var device: UInt64 = 0
        var inode: UInt64 = 0
        var size: Int64 = -1
        var modified: Int64 = 0
        var changed: Int64 = 0

        /// A name `stat` cannot follow (a dangling link): a version of its own, so that a file
        /// going missing or coming back is a change.
        static let unreadable = FileVersion()
    }

    /// One `stat` per `*.yaml`/`*.yml` name. (`FileManager.attributesOfItem` did not follow
    /// links and cost ~10 system calls per file, owner and group names looked up in
    /// `/etc/passwd` and `/etc/group` each time: 3 % of a core, every second, for 1,000 tenants.)
    static func signature(of directory: String) -> [String: FileVersion] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [:] }
        var result: [String: FileVersion] = [:]
        result.reserveCapacity(names.count)
        for name in names where name.hasSuffix(".yaml") || name.hasSuffix(".yml") {
            var status = stat()
            guard stat(directory + "/" + name, &status) == 0 else {
                result[name] = .unreadable
                continue
            }
            result[name] = FileVersion(device: UInt64(status.st_dev), inode: UInt64(status.st_ino), size: Int64(status.st_size),
                                       modified: Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec),
                                       changed: Int64(status.st_ctim.tv_sec) * 1_000_000_000 + Int64(status.st_ctim.tv_nsec))
        }
        return result
    }
}
