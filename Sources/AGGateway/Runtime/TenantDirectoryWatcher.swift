import AGConfig
import AGPolicy
import AGEventLoop
import AGHTTP
import Foundation

/// Polls `tenants/` once a second and calls `onChange` when a file is added, removed or
/// modified. Polling names, sizes and mtimes copes with editors' rename-into-place and with
/// symlinked config directories, where inotify watches go stale.
final class TenantDirectoryWatcher {
    private let directory: String
    private let onChange: () -> Void
    private var timer: EventTimer?
    private var signature: [String: String]

    /// `initial` is the directory's signature when the configuration in force was read.
    init(loop: EventLoop, directory: String, initial: [String: String], interval: Duration = .seconds(1),
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

    static func signature(of directory: String) -> [String: String] {
        let manager = FileManager.default
        guard let names = try? manager.contentsOfDirectory(atPath: directory) else { return [:] }
        var result: [String: String] = [:]
        for name in names where name.hasSuffix(".yaml") || name.hasSuffix(".yml") {
            let attributes = try? manager.attributesOfItem(atPath: directory + "/" + name)
            let size = (attributes?[.size] as? NSNumber)?.intValue ?? -1
            let modified = (attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
            result[name] = "\(size)-\(modified)"
        }
        return result
    }
}
