import AGYAML
/// Reads, parses and validates the configuration: `gateway.yaml` and every tenant file.
///
/// Pure apart from reading files: no network, no event loop, safe to call from any thread, so a
/// reload can build the next snapshot while workers keep serving the current one.
public enum ConfigLoader {
    /// Looked for when `load`/`check` are given a directory.
    public static let gatewayFileName = "gateway.yaml"

    /// Loads `path` (`gateway.yaml`, or a directory holding it) and all tenant files of its
    /// `tenants_dir`; throws every problem found, across all files.
    public static func load(path: String) throws(ConfigError) -> LoadedConfig {
        var problems: [ConfigProblem] = []
        let gateway = decodeGateway(at: gatewayPath(for: path), into: &problems)
        guard let gateway else { throw ConfigError(problems: problems) }
        // A missing tenants_dir was already reported, with its line, by the gateway decoder.
        let tenants = decodeTenants(for: gateway, reportingMissingDirectory: false, into: &problems)
        guard problems.isEmpty else { throw ConfigError(problems: problems) }
        return LoadedConfig(gateway: gateway, tenants: tenants)
    }

    /// The problems `load(path:)` would throw, one rendered line each; empty when the
    /// configuration is valid (`attestgate check-config`).
    public static func check(path: String) -> [String] {
        do {
            _ = try load(path: path)
            return []
        } catch {
            return error.lines
        }
    }

    /// Reads the tenant files of `gateway.tenantsDirectory` again, with the same validation as `load`.
    public static func loadTenants(for gateway: GatewayConfig) throws(ConfigError) -> TenantDirectory {
        var problems: [ConfigProblem] = []
        let tenants = decodeTenants(for: gateway, reportingMissingDirectory: true, into: &problems)
        guard problems.isEmpty else { throw ConfigError(problems: problems) }
        return tenants
    }

    /// `config` with its tenants re-read from disk; `config` itself stays valid if this throws.
    public static func reloadTenants(of config: LoadedConfig) throws(ConfigError) -> LoadedConfig {
        LoadedConfig(gateway: config.gateway, tenants: try loadTenants(for: config.gateway))
    }

    static func gatewayPath(for path: String) -> String {
        ConfigFiles.isDirectory(path) ? ConfigFiles.resolve(gatewayFileName, against: path) : path
    }

    /// `nil` when the file could not be read or parsed at all; otherwise a best-effort config
    /// (defaults in place of bad values) so tenant files can still be checked against it.
    private static func decodeGateway(at path: String, into problems: inout [ConfigProblem]) -> GatewayConfig? {
        guard let root = parse(path, into: &problems) else { return nil }
        let decoder = ConfigDecoder(file: path)
        let gateway = GatewayConfig.decode(root.node, sourcePath: path, decoder: decoder)
        problems += sortedByLine(decoder.problems)
        return gateway
    }

    private static func decodeTenants(for gateway: GatewayConfig, reportingMissingDirectory: Bool,
                                      into problems: inout [ConfigProblem]) -> TenantDirectory {
        let directory = gateway.tenantsDirectory
        let names: [String]
        switch ConfigFiles.yamlFileNames(in: directory) {
        case .success(let found):
            names = found
        case .failure(let failure):
            if reportingMissingDirectory {
                problems.append(ConfigProblem(file: directory, line: nil, keyPath: "",
                                              message: "tenants directory \(failure.reason)"))
            }
            return TenantDirectory([])
        }
        for name in ConfigFiles.nonUTF8YAMLNames(in: directory) {
            problems.append(ConfigProblem(file: ConfigFiles.resolve(name, against: directory), line: nil, keyPath: "",
                                          message: "the file name is not valid UTF-8; rename the file"))
        }
        var tenants: [TenantConfig] = []
        tenants.reserveCapacity(names.count)
        var firstDefinition: [String: (file: String, line: Int)] = [:]
        for name in names {
            let path = ConfigFiles.resolve(name, against: directory)
            guard let root = parse(path, into: &problems) else { continue }
            let decoder = ConfigDecoder(file: path)
            let decoded = TenantConfig.decode(root.node, sourcePath: path, gateway: gateway, decoder: decoder)
            if let (tenant, line) = decoded {
                if let first = firstDefinition[tenant.appID] {
                    decoder.report(line: line, path: ConfigKeyPath.root.key("bundle_id"),
                                   "duplicate App ID \(tenant.appID), already defined in \(first.file):\(first.line)")
                } else {
                    firstDefinition[tenant.appID] = (path, line)
                    if decoder.problems.isEmpty { tenants.append(tenant) }
                }
            }
            problems += sortedByLine(decoder.problems)
        }
        problems += PlatformSSOConfig.problemsAcrossTenants(tenants)
        return TenantDirectory(tenants)
    }

    /// The parsed document of `path`; `nil` after reporting an unreadable file or a YAML error.
    private static func parse(_ path: String, into problems: inout [ConfigProblem]) -> ParsedFile? {
        switch ConfigFiles.read(path) {
        case .failure(let failure):
            problems.append(ConfigProblem(file: path, line: nil, keyPath: "", message: "file \(failure.reason)"))
            return nil
        case .success(let bytes):
            do {
                return ParsedFile(node: try YAMLReader.parse(bytes, file: path))
            } catch {
                problems.append(ConfigProblem(file: path, line: error.location.line, keyPath: "",
                                              message: error.message))
                return nil
            }
        }
    }

    /// A parsed file; `node` is `nil` for a file with no document (empty or only comments).
    private struct ParsedFile {
        let node: YAMLNode?
    }

    private static func sortedByLine(_ problems: [ConfigProblem]) -> [ConfigProblem] {
        problems.enumerated().sorted { a, b in
            let lineA = a.element.line ?? 0, lineB = b.element.line ?? 0
            return lineA != lineB ? lineA < lineB : a.offset < b.offset
        }.map(\.element)
    }
}
