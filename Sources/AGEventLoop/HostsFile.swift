/// The static name table of `/etc/hosts` (`address name [alias…]`, `#` comments).
///
/// The resolver consults it before DNS, as the C library does with `hosts: files dns`; evdns's
/// record lookups (the ones that report TTLs) do not read it themselves.
public struct HostsFile: Sendable, Hashable {
    /// Addresses per lower-cased name, in file order.
    private var table: [String: [IPAddress]] = [:]

    /// An empty table.
    public init() {}

    /// Parses the text of a hosts file. Malformed lines (an address that is not a literal, a
    /// line without a name) are skipped, as the C library skips them.
    public init(contents: String) {
        for line in contents.split(whereSeparator: \.isNewline) {
            let content = line.prefix { $0 != "#" }
            let fields = content.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, let address = IPAddress(fields[0]) else { continue }
            for name in fields.dropFirst() {
                let key = Self.normalize(name)
                if table[key, default: []].contains(address) { continue }
                table[key, default: []].append(address)
            }
        }
    }

    /// Reads and parses `path`; an unreadable file is an empty table (containers often lack one).
    public static func load(path: String) -> HostsFile {
        guard let text = readTextFile(path) else { return HostsFile() }
        return HostsFile(contents: text)
    }

    /// The addresses listed for `name` (case-insensitive, a trailing dot ignored), or `nil`.
    public func addresses(for name: String) -> [IPAddress]? {
        table[Self.normalize(name)]
    }

    private static func normalize(_ name: some StringProtocol) -> String {
        var lowered = name.lowercased()
        if lowered.hasSuffix("."), lowered.count > 1 { lowered.removeLast() }
        return lowered
    }
}
