/// One libFuzzer target: a function that takes any bytes and reports a broken promise (an
/// oracle beyond "does not crash"), plus the seed inputs its corpus starts from.
///
/// Run by `attestgate-fuzz` (built only by `scripts/fuzz`, with `-sanitize=fuzzer,address`) and
/// replayed by the normal test suite over the seeds and the kept crashers
/// (`Tests/Fixtures/fuzz/<name>/`), so a fixed finding stays fixed.
public struct FuzzTarget: Sendable {
    public let name: String
    /// What the target exercises, for `scripts/fuzz --list`.
    public let summary: String
    /// `nil` when every promise held; otherwise what broke (the fuzzer turns it into a crash).
    public let run: @Sendable ([UInt8]) -> String?
    /// Valid (and nearly valid) inputs to start from.
    public let seeds: @Sendable () -> [[UInt8]]

    public init(name: String, summary: String, seeds: @escaping @Sendable () -> [[UInt8]],
                run: @escaping @Sendable ([UInt8]) -> String?) {
        self.name = name
        self.summary = summary
        self.seeds = seeds
        self.run = run
    }
}

/// Every fuzz target, by name.
public enum FuzzTargets {
    public static let all: [FuzzTarget] = [
        FormatTargets.base64, FormatTargets.json, FormatTargets.cbor,
        JOSETargets.jws, JOSETargets.jwe,
        ConfigTargets.gateway, ConfigTargets.tenant,
        AttestationTargets.refreshBody, AttestationTargets.validateBody, AttestationTargets.appAttest,
        PlatformSSOTargets.form, PlatformSSOTargets.jws,
        HTTPTargets.head, HTTPTargets.chunked,
    ]

    public static func named(_ name: String) -> FuzzTarget? {
        all.first { $0.name == name }
    }
}

extension String {
    /// UTF-8 bytes, for seeds written as text.
    var bytes: [UInt8] { Array(utf8) }
}
