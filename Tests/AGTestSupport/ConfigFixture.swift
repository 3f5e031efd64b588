import AGConfig
import FoundationEssentials

/// A throwaway copy of the shipped `conf/` in a temporary directory, with the files `scripts/run`
/// would create (`.run/admin-token`, `.run/keys/dev-es256-1.pem`) so the loader finds them.
public final class ConfigFixture {
    public let root: String
    public var gatewayPath: String { root + "/conf/gateway.yaml" }

    public static let shippedConf: String = {
        let testFile = "\(#filePath)"
        let repo = testFile.split(separator: "/").dropLast(3).joined(separator: "/")
        return "/" + repo + "/conf"
    }()

    /// Smallest valid gateway.yaml (the key file comes from `.run/`, as in the shipped one).
    public static let minimalGateway = """
        tokens:
          issuer: test-issuer
          keys:
            - kid: k1
              file: ../.run/keys/dev-es256-1.pem

        """

    /// Smallest valid tenant file.
    public static let minimalTenant = """
        team_id: ABCDE12345
        bundle_id: com.example.app

        """

    public init() throws {
        root = "/tmp/attestgate-config-tests-\(UUID().uuidString)"
        let files = FileManager.default
        try files.createDirectory(atPath: root + "/.run/keys", withIntermediateDirectories: true)
        try files.copyItem(atPath: Self.shippedConf, toPath: root + "/conf")
        try write(".run/admin-token", "dev-admin-token\n")
        try write(".run/keys/dev-es256-1.pem", "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n")
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Writes `text` to `relative` (below the fixture root), creating directories.
    public func write(_ relative: String, _ text: String) throws {
        let path = root + "/" + relative
        try FileManager.default.createDirectory(atPath: ConfigFiles.directory(of: path), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    public func remove(_ relative: String) throws {
        try FileManager.default.removeItem(atPath: root + "/" + relative)
    }

    public func makeDirectory(_ relative: String) throws {
        try FileManager.default.createDirectory(atPath: root + "/" + relative, withIntermediateDirectories: true)
    }

    /// Problem lines of `check`, with the fixture root removed so expectations read `conf/...`.
    public func problems(path: String? = nil) -> [String] {
        ConfigLoader.check(path: path ?? gatewayPath).map { $0.replacingOccurrences(of: root + "/", with: "") }
    }
}

extension String {
    /// FoundationEssentials has no `replacingOccurrences`; a small stand-in for tests.
    public func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
