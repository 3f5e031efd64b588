import Testing

@testable import AGConfig
@testable import AGGateway

/// `TenantDirectoryWatcher.Settling`: a changed `tenants/` is loaded once two polls in a row
/// saw it the same, so a file still being written is not loaded half-written (an independent
/// sweep, stop 32, had a half-written route prefix `/` served for a moment).
@Suite struct TenantDirectorySettlingTests {
    static func version(size: Int64, modified: Int64) -> ConfigFiles.FileVersion {
        var version = ConfigFiles.FileVersion()
        version.inode = 7
        version.size = size
        version.modified = modified
        return version
    }

    @Test func aChangeIsLoadedOnceTwoPollsInARowSawItTheSame() {
        let original = ["a.yaml": Self.version(size: 10, modified: 1)]
        let half = original.merging(["b.yaml": Self.version(size: 40, modified: 2)]) { $1 }
        let whole = original.merging(["b.yaml": Self.version(size: 95, modified: 3)]) { $1 }
        var settling = TenantDirectoryWatcher.Settling(loaded: original)
        // Each poll's view in turn, and whether it is loaded then.
        let polls: [(seen: [String: ConfigFiles.FileVersion], loads: Bool, why: String)] = [
            (original, false, "nothing changed"),
            (half, false, "a new file seen once: it may still be being written"),
            (whole, false, "it grew since: still waiting"),
            (whole, true, "the same twice in a row: loaded"),
            (whole, false, "loaded once, not again"),
            (original, false, "the file removed: seen once"),
            (whole, false, "back before it settled: nothing to load"),
            (original, false, "removed again: seen once"),
            (original, true, "the removal settled"),
        ]
        for poll in polls {
            let loads = settling.observe(poll.seen)
            #expect(loads == poll.loads, "\(poll.why)")
        }
        #expect(settling.loaded == original)
    }
}
